#include "mcp_server.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api_requests.h"
#include "client.h"
#include "exec_request.h"
#include "exec_stream.h"
#include "json_bounds.h"
#include "launch.h"
#include "sandbox_files.h"
#include "smolbox/result.h"
#include "unique_fd.h"

namespace smolbox::api {
namespace {

using nlohmann::json;

// The protocol revisions this server speaks, newest first: a client asking for one of them gets
// it, any other client the newest.
constexpr std::array<const char*, 3> kProtocolVersions = {"2025-06-18", "2025-03-26", "2024-11-05"};
// A message carries a spec at most (code, stdin, a file's content): the spec's own bound.
constexpr size_t kMaxMessageBytes = kMaxSpecBytes;

// JSON-RPC 2.0's error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

json LimitsSchema() {
  json integer = {{"type", "integer"}};
  return {{"type", "object"},
          {"description", "As a RunSpec's limits; unset ones keep smolbox's defaults (30 s, 512 MiB, 64 pids, no network)"},
          {"additionalProperties", false},
          {"properties",
           {{"timeout_ms", integer}, {"cpu_ms", integer}, {"memory_mib", integer}, {"cpus", {{"type", "number"}}},
            {"pids", integer}, {"storage_mib", integer}, {"output_bytes", integer}, {"files", integer}}}};
}

json Tool(const char* name, const char* description, json properties, json required) {
  return {{"name", name},
          {"description", description},
          {"inputSchema",
           {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
            {"additionalProperties", false}}}};
}

// The RunSpec's fields, by their spec names, as run_code and create_sandbox take them: passed on
// as they are to the API's request parser (ParseRunRequest), so that a tool call and
// POST /v1/run agree on every field and every error. argv is run_code's command or code;
// stdin_file and other host paths are refused, as over the API.
json SpecProperties(bool for_run) {
  json string = {{"type", "string"}};
  json properties = {
      {"limits", LimitsSchema()},
      {"env", {{"type", "object"}, {"additionalProperties", string}, {"description", "variables for the code"}}},
      {"workdir", {{"type", "string"}, {"description", "the code's working directory, absolute"}}},
      {"user", {{"type", "string"}, {"description", "UID[:GID] the code runs as"}}},
      {"image", {{"type", "string"}, {"description", "\"host\" or an image in the host's store, by NAME[:TAG] or ID"}}},
      {"egress",
       {{"type", "object"},
        {"description", "network egress by policy, as a RunSpec's; none by default"},
        {"properties",
         {{"allow_hosts", {{"type", "array"}, {"items", string}, {"description", "NAME[:PORT], e.g. registry.npmjs.org"}}},
          {"allow_cidrs", {{"type", "array"}, {"items", string}, {"description", "CIDR[:PORT]"}}},
          {"deny_cidrs", {{"type", "array"}, {"items", string}}},
          {"net", {{"type", "boolean"}, {"description", "any public address"}}},
          {"limit_bytes", {{"type", "integer"}}}}}}},
      {"mounts",
       {{"type", "array"},
        {"description", "volumes beneath the server's --volume-root (refused without one)"},
        {"items",
         {{"type", "object"},
          {"required", {"source", "target"}},
          {"additionalProperties", false},
          {"properties", {{"source", string}, {"target", string}, {"mode", {{"enum", {"ro", "rw"}}}}}}}}}},
      {"ca_bundle", {{"type", "string"}, {"description", "PEM certificates added to the sandbox's CA trust store"}}},
      {"backend", {{"enum", {"auto", "ns", "vm"}}, {"description", "the session's unless smolbox mcp was given none"}}},
      {"accel", {{"enum", {"auto", "kvm", "tcg"}}}},
      {"network", {{"const", "none"}}},
      {"vm_snapshot", {{"type", "boolean"}}},
  };
  if (for_run) {
    properties["stdin"] = string;
    properties["entrypoint"] = {{"type", "array"},
                                {"items", string},
                                {"description", "replaces the image's Entrypoint and drops its Cmd (empty: none)"}};
  } else {
    // A run has one exec, which a zygote would not speed up.
    properties["prewarm"] = {{"enum", {"python"}},
                             {"description", "vm backend: fork each python3 SCRIPT or -c exec from a started interpreter"}};
  }
  return properties;
}

json ToolList() {
  json string = {{"type", "string"}};
  json language = {{"type", "string"}, {"enum", {"python", "javascript", "shell"}}, {"default", "python"}};
  json id = {{"type", "string"}, {"description", "what create_sandbox returned"}};
  json path = {{"type", "string"}, {"description", "absolute, as the sandbox sees it: /work/data.csv"}};
  json run = SpecProperties(true);
  run["language"] = language;
  run["code"] = string;
  run["command"] = {{"type", "array"}, {"items", string}, {"description", "argv; or give language and code"}};
  return json::array({
      Tool("run_code",
           "Runs code in a fresh sandbox (its own kernel namespaces or microVM), with no network unless egress "
           "allows hosts, and returns its output. The sandbox is gone afterwards.",
           run, json::array()),
      Tool("create_sandbox",
           "Starts a sandbox that keeps its files across exec calls, until remove_sandbox or the end of this "
           "session. No network unless egress allows hosts.",
           SpecProperties(false), json::array()),
      Tool("exec", "Runs a command, or code, in a sandbox from create_sandbox, and returns its output.",
           {{"sandbox_id", id},
            {"command", {{"type", "array"}, {"items", string}, {"description", "argv; or give language and code"}}},
            {"language", language},
            {"code", string},
            {"stdin", string},
            {"env", {{"type", "object"}, {"additionalProperties", string}, {"description", "added to the sandbox's"}}},
            {"workdir", string},
            {"timeout_ms", {{"type", "integer"}}}},
           {"sandbox_id"}),
      Tool("write_file", "Writes a text file into a sandbox, making its directories.",
           {{"sandbox_id", id}, {"path", path}, {"content", string}}, {"sandbox_id", "path", "content"}),
      Tool("read_file", "Reads a text file from a sandbox (regular files only; links are not followed).",
           {{"sandbox_id", id}, {"path", path}}, {"sandbox_id", "path"}),
      Tool("remove_sandbox", "Stops a sandbox and removes everything of it.", {{"sandbox_id", id}}, {"sandbox_id"}),
  });
}

// A tool's arguments, read strictly: every error names the argument.
class Arguments {
 public:
  Arguments(const json& args, std::set<std::string> known) : args_(args), known_(std::move(known)) {}

  Expected<void> CheckKnown() const {
    for (const auto& [key, value] : args_.items()) {
      if (!known_.contains(key)) return std::unexpected(Error::Field(key, "unknown argument"));
    }
    return {};
  }
  bool Has(const std::string& key) const { return args_.contains(key); }
  const json& Raw(const std::string& key) const { return args_.at(key); }

  Expected<std::string> String(const std::string& key) const {
    if (!Has(key)) return std::unexpected(Error::Field(key, "is required"));
    if (!args_[key].is_string()) return std::unexpected(Error::Field(key, "must be a string"));
    return args_[key].get<std::string>();
  }
  Expected<std::optional<std::string>> OptionalString(const std::string& key) const {
    if (!Has(key)) return std::optional<std::string>();
    SMOLBOX_ASSIGN_OR_RETURN(auto value, String(key));
    return std::optional<std::string>(std::move(value));
  }

 private:
  const json& args_;
  std::set<std::string> known_;
};

// The interpreter for a language, as argv before the code.
Expected<std::vector<std::string>> Interpreter(const std::optional<std::string>& language) {
  std::string name = language.value_or("python");
  if (name == "python") return std::vector<std::string>{"/usr/bin/python3", "-c"};
  if (name == "javascript") return std::vector<std::string>{"/usr/bin/node", "-e"};
  if (name == "shell") return std::vector<std::string>{"/bin/sh", "-c"};
  return std::unexpected(Error::Field("language", fmt::format("{:?} is not python, javascript or shell", name)));
}

// The names of a schema's properties.
std::set<std::string> KeysOf(const json& properties) {
  std::set<std::string> keys;
  for (const auto& [key, unused] : properties.items()) keys.insert(key);
  return keys;
}

// A tool's argv: its command, or its code after the language's interpreter; one of the two.
Expected<json> CommandOrCode(const Arguments& args) {
  if (!args.Has("command") && !args.Has("code")) return std::unexpected(Error::Field("code", "is required (or a command)"));
  if (args.Has("command") && args.Has("code")) {
    return std::unexpected(Error::Field("command", "give either command or language and code"));
  }
  if (args.Has("command")) return args.Raw("command");
  SMOLBOX_ASSIGN_OR_RETURN(auto code, args.String("code"));
  SMOLBOX_ASSIGN_OR_RETURN(auto language, args.OptionalString("language"));
  SMOLBOX_ASSIGN_OR_RETURN(auto argv, Interpreter(language));
  argv.push_back(code);
  return json(argv);
}

// The parser's errors in the tool's words: its argv is the tool's command.
Error InToolTerms(Error error) {
  if (error.where.starts_with("argv")) error.where.replace(0, 4, "command");
  return error;
}

json TextResult(const std::string& text, bool is_error, json structured = nullptr) {
  json result = {{"content", json::array({{{"type", "text"}, {"text", ToValidUtf8(text)}}})}, {"isError", is_error}};
  if (!structured.is_null()) result["structuredContent"] = std::move(structured);
  return result;
}

json ToolError(const Error& error) {
  std::string reason = error.what.empty() ? error.ToString() : error.what;
  return TextResult(fmt::format("{}: {}", error.where, reason), true, {{"error", {{"field", error.where}, {"reason", reason}}}});
}

// What ended a workload, in the words of the limit an agent would raise.
std::string LimitOfStatus(const std::string& status) {
  if (status == "timeout") return "the wall-time limit (limits.timeout_ms)";
  if (status == "cpu_limit") return "the CPU-time limit (limits.cpu_ms)";
  if (status == "memory_limit") return "the memory limit (limits.memory_mib)";
  if (status == "output_limit") return "the output limit (limits.output_bytes)";
  if (status == "violation") return "the sandbox's system call policy";
  return "a signal";
}

// A run's or an exec's result for the agent: how it ended, then its output. A limit hit or a
// setup failure is a tool error naming it; a non-zero exit is the code's own, told in the text.
json WorkloadResult(const json& result) {
  std::string status = result.value("status", "internal_error");
  std::string text;
  if (status == "exited") {
    text = fmt::format("exit code {}", result.value("exit_code", -1));
  } else if (status == "setup_error" || status == "internal_error") {
    text = fmt::format("{}: {}", status, result.value("error", ""));
  } else {
    text = fmt::format("{}: {} ended the code", status, LimitOfStatus(status));
  }
  for (const char* stream : {"stdout", "stderr"}) {
    std::string data = result.value(stream, "");
    if (!data.empty()) text += fmt::format("\n--- {} ---\n{}", stream, data);
  }
  return TextResult(text, status != "exited", result);
}

class Session {
 public:
  Session(const McpOptions& options, Launcher launcher) : options_(options), launcher_(std::move(launcher)) {}

  // The reply to one message, or nothing for a notification.
  std::optional<json> Handle(const json& message) {
    if (!message.is_object() || message.value("jsonrpc", "") != "2.0") {
      return Failure(nullptr, kInvalidRequest, "not a JSON-RPC 2.0 message");
    }
    if (!message.contains("method")) return std::nullopt;  // a response to us: we ask nothing
    json id = message.contains("id") ? message["id"] : json();
    bool notification = !message.contains("id");
    if (!notification && !id.is_string() && !id.is_number_integer()) {
      return Failure(nullptr, kInvalidRequest, "id must be a string or an integer");
    }
    if (!message["method"].is_string()) return Failure(id, kInvalidRequest, "method must be a string");
    std::string method = message["method"];
    json params = message.value("params", json::object());
    if (notification) return std::nullopt;  // initialized, cancelled: nothing to answer
    if (!params.is_object()) return Failure(id, kInvalidParams, "params must be an object");
    if (method == "initialize") return Success(id, Initialize(params));
    if (method == "ping") return Success(id, json::object());
    if (method == "tools/list") return Success(id, {{"tools", ToolList()}});
    if (method == "tools/call") return CallTool(id, params);
    return Failure(id, kMethodNotFound, fmt::format("no method {:?}", method));
  }

  // The session's end: every sandbox it made is removed.
  void Close() {
    for (const std::string& id : sandboxes_) {
      if (auto removed = persist::RemoveSandbox(id, true); !removed) {
        fmt::print(stderr, "smolbox mcp: {}\n", removed.error().ToString());
      }
    }
    sandboxes_.clear();
  }

  static json Failure(const json& id, int code, const std::string& message) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
  }

 private:
  static json Success(const json& id, json result) {
    return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
  }

  static json Initialize(const json& params) {
    std::string asked = params.value("protocolVersion", "");
    std::string version = kProtocolVersions[0];
    for (const char* known : kProtocolVersions) {
      if (asked == known) version = known;
    }
    return {{"protocolVersion", version},
            {"capabilities", {{"tools", {{"listChanged", false}}}}},
            {"serverInfo", {{"name", "smolbox"}, {"version", "1"}}},
            {"instructions",
             "Run untrusted code in a sandbox: run_code for one-off code; create_sandbox, then exec, write_file "
             "and read_file for work across several steps. Both take a RunSpec's fields (limits, env, image, "
             "egress, ...). No network unless egress allows hosts; 30 s per run unless limits say otherwise."}};
  }

  std::optional<json> CallTool(const json& id, const json& params) {
    if (!params.contains("name") || !params["name"].is_string()) {
      return Failure(id, kInvalidParams, "tools/call needs a name");
    }
    std::string name = params["name"];
    json args = params.value("arguments", json::object());
    if (!args.is_object()) return Failure(id, kInvalidParams, "arguments must be an object");
    Expected<json> result = std::unexpected(Error{});
    if (name == "run_code") {
      result = RunCode(args);
    } else if (name == "create_sandbox") {
      result = CreateSandbox(args);
    } else if (name == "exec") {
      result = Exec(args);
    } else if (name == "write_file") {
      result = WriteFile(args);
    } else if (name == "read_file") {
      result = ReadFile(args);
    } else if (name == "remove_sandbox") {
      result = RemoveSandbox(args);
    } else {
      return Failure(id, kInvalidParams, fmt::format("unknown tool {:?}", name));
    }
    return Success(id, result ? *result : ToolError(result.error()));
  }

  Expected<json> RunCode(const json& raw) {
    json run = SpecProperties(true);
    for (const char* key : {"language", "code", "command"}) run[key] = true;
    Arguments args(raw, KeysOf(run));
    SMOLBOX_TRY(args.CheckKnown());
    SMOLBOX_ASSIGN_OR_RETURN(auto argv, CommandOrCode(args));
    json spec = raw;
    for (const char* key : {"language", "code", "command"}) spec.erase(key);
    spec["argv"] = std::move(argv);
    SMOLBOX_TRY(ApplySessionRules(spec));
    std::string text = spec.dump();
    auto parsed = ParseRunRequest(text, options_.volume_root);
    if (!parsed) return std::unexpected(InToolTerms(parsed.error()));
    SMOLBOX_ASSIGN_OR_RETURN(auto result, launcher_.Run(text, *parsed));
    return WorkloadResult(result);
  }

  // What the operator decided for the whole session. The session's backend, when smolbox mcp
  // was given one: a call may name it, and no other. And no network unless the operator allowed
  // it: the caller is a model, whose code and arguments a prompt may have written, so egress is
  // the operator's to open (--allow-egress), not the call's.
  Expected<void> ApplySessionRules(json& spec) const {
    if (spec.contains("egress") && !spec["egress"].is_null() && !options_.allow_egress) {
      return std::unexpected(Error::Field("egress", "this session gives no network (smolbox mcp --allow-egress lets "
                                                    "calls allow hosts)"));
    }
    if (options_.backend.empty()) return {};
    if (spec.contains("backend") && spec["backend"] != options_.backend) {
      return std::unexpected(Error::Field(
          "backend", fmt::format("this session runs every sandbox on {} (smolbox mcp --backend)", options_.backend)));
    }
    spec["backend"] = options_.backend;
    return {};
  }

  Expected<json> CreateSandbox(const json& raw) {
    Arguments args(raw, KeysOf(SpecProperties(false)));
    SMOLBOX_TRY(args.CheckKnown());
    if (static_cast<int>(sandboxes_.size()) >= options_.max_sandboxes) {
      return std::unexpected(Error::Field(
          "max_sandboxes", fmt::format("this session holds {} sandboxes, its most; remove one first", sandboxes_.size())));
    }
    json spec = raw;
    SMOLBOX_TRY(ApplySessionRules(spec));
    std::string text = spec.dump();
    SMOLBOX_TRY(ParseCreateRequest(text, options_.volume_root));
    SMOLBOX_ASSIGN_OR_RETURN(auto id, NewSandboxId());
    SMOLBOX_ASSIGN_OR_RETURN(auto setup, launcher_.Create(id, text));
    sandboxes_.insert(id);
    return TextResult(fmt::format("created sandbox {} ({})", id, setup.value("isolation", "")), false,
                      {{"sandbox_id", id}, {"backend", setup.value("backend", "")}});
  }

  Expected<std::string> OwnSandbox(const Arguments& args) const {
    SMOLBOX_ASSIGN_OR_RETURN(auto id, args.String("sandbox_id"));
    if (!sandboxes_.contains(id)) {
      return std::unexpected(Error::Field("sandbox_id", fmt::format("no sandbox {:?} in this session", id)));
    }
    return id;
  }

  Expected<json> Exec(const json& raw) {
    Arguments args(raw, {"sandbox_id", "command", "language", "code", "stdin", "env", "workdir", "timeout_ms"});
    SMOLBOX_TRY(args.CheckKnown());
    SMOLBOX_ASSIGN_OR_RETURN(auto id, OwnSandbox(args));
    SMOLBOX_ASSIGN_OR_RETURN(auto argv, CommandOrCode(args));
    json request = {{"argv", std::move(argv)}};
    for (const char* key : {"stdin", "env", "workdir", "timeout_ms"}) {
      if (args.Has(key)) request[key] = args.Raw(key);
    }
    auto parsed = ParseExecRequest(request.dump());
    if (!parsed) return std::unexpected(InToolTerms(parsed.error()));
    parsed->order.streams_output = false;  // the output comes back in the result
    ExecIo io;
    UniqueFd stdin_file;
    if (parsed->stdin_data) {
      SMOLBOX_ASSIGN_OR_RETURN(stdin_file, MemoryFile(*parsed->stdin_data));
      io.stdin_fd = stdin_file.get();
    }
    RunResult result = persist::ExecInSandbox(id, parsed->order, io);
    return WorkloadResult(ToJson(result));
  }

  Expected<std::string> PathArgument(const Arguments& args) const {
    auto path = args.String("path");
    if (!path) return std::unexpected(path.error());
    if (!path->starts_with('/')) return std::unexpected(Error::Field("path", "must be absolute, e.g. /work/data.csv"));
    auto checked = SandboxPath(path->substr(1));
    if (!checked) return std::unexpected(checked.error().error);
    return *checked;
  }

  Expected<json> WriteFile(const json& raw) {
    Arguments args(raw, {"sandbox_id", "path", "content"});
    SMOLBOX_TRY(args.CheckKnown());
    SMOLBOX_ASSIGN_OR_RETURN(auto id, OwnSandbox(args));
    SMOLBOX_ASSIGN_OR_RETURN(auto path, PathArgument(args));
    SMOLBOX_ASSIGN_OR_RETURN(auto content, args.String("content"));
    auto written = WriteSandboxFile(id, path, content, -1);
    if (!written) return std::unexpected(written.error().error);
    return TextResult(fmt::format("wrote {} bytes to {}", *written, path), false);
  }

  Expected<json> ReadFile(const json& raw) {
    Arguments args(raw, {"sandbox_id", "path"});
    SMOLBOX_TRY(args.CheckKnown());
    SMOLBOX_ASSIGN_OR_RETURN(auto id, OwnSandbox(args));
    SMOLBOX_ASSIGN_OR_RETURN(auto path, PathArgument(args));
    auto bytes = ReadSandboxFile(id, path, -1);
    if (!bytes) return std::unexpected(bytes.error().error);
    return TextResult(*bytes, false);
  }

  Expected<json> RemoveSandbox(const json& raw) {
    Arguments args(raw, {"sandbox_id"});
    SMOLBOX_TRY(args.CheckKnown());
    SMOLBOX_ASSIGN_OR_RETURN(auto id, OwnSandbox(args));
    sandboxes_.erase(id);
    SMOLBOX_TRY(persist::RemoveSandbox(id, true));
    return TextResult(fmt::format("removed sandbox {}", id), false);
  }

  const McpOptions& options_;
  Launcher launcher_;
  std::set<std::string> sandboxes_;
};

void WriteLine(const json& message) {
  std::string line = message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  for (size_t done = 0; done < line.size();) {
    ssize_t n = write(1, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Reads stdin line by line. A line over the bound is answered as a parse error and skipped.
class LineReader {
 public:
  // The next line without its newline; nothing at EOF. too_long is set for a skipped one.
  std::optional<std::string> Next(bool& too_long) {
    too_long = false;
    for (;;) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (skipping_) {
          skipping_ = false;
          too_long = true;
          return std::string();
        }
        return line;
      }
      if (buffer_.size() > kMaxMessageBytes) {
        buffer_.clear();
        skipping_ = true;
      }
      char chunk[1 << 16];
      ssize_t n = read(0, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

 private:
  std::string buffer_;
  bool skipping_ = false;
};

}  // namespace

int ServeMcp(const McpOptions& options) {
  signal(SIGPIPE, SIG_IGN);
  SweepDeadApiSandboxes("smolbox mcp");
  int lifeline[2];
  if (pipe2(lifeline, O_CLOEXEC) != 0) {
    fmt::print(stderr, "smolbox mcp: pipe: {}\n", strerror(errno));
    return 125;
  }
  UniqueFd lifeline_read(lifeline[0]), lifeline_write(lifeline[1]);
  Session session(options, Launcher{options.smolbox_exe, lifeline_read.get(), -1, options.volume_root});
  LineReader reader;
  bool too_long = false;
  while (auto line = reader.Next(too_long)) {
    if (too_long) {
      WriteLine(Session::Failure(nullptr, kParseError, fmt::format("a message over {} bytes", kMaxMessageBytes)));
      continue;
    }
    if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
    auto message = ParseBoundedJson(*line, {.max_bytes = kMaxMessageBytes}, "message");
    if (!message) {
      WriteLine(Session::Failure(nullptr, kParseError, message.error().ToString()));
      continue;
    }
    // Never a crash of the server: whatever a handler throws is an internal error of that call.
    try {
      if (auto reply = session.Handle(*message)) WriteLine(*reply);
    } catch (const std::exception& e) {
      fmt::print(stderr, "smolbox mcp: internal error: {}\n", e.what());
      json id = message->is_object() && message->contains("id") ? (*message)["id"] : json();
      WriteLine(Session::Failure(id, kInternalError, "internal error"));
    }
  }
  session.Close();
  return 0;
}

}  // namespace smolbox::api
