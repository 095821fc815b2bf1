#include "exec_protocol.h"

#include "json_bounds.h"

namespace smolbox {

channel::Message EncodeExec(const ExecRequest& r) {
  nlohmann::json h = {
      {"type", "exec"},         {"argv", r.argv},
      {"env", r.env},           {"cwd", r.cwd},
      {"uid", r.uid},           {"gid", r.gid},
      {"timeout_ms", r.timeout_ms}, {"cpu_ms", r.cpu_ms},
      {"output_bytes", r.output_bytes}, {"files", r.files},
      {"memory_bytes", r.memory_bytes}, {"nproc", r.nproc},
      {"fsize_bytes", r.fsize_bytes}, {"stdin_stream", r.stdin_stream},
  };
  return channel::Message{std::move(h), ""};
}

Expected<ExecRequest> DecodeExec(const channel::Message& m) {
  if (m.Type() != "exec") return std::unexpected(Error{"channel", "expected an exec message", 0});
  try {
    const auto& h = m.header;
    ExecRequest r;
    r.argv = h.at("argv").get<std::vector<std::string>>();
    r.env = h.at("env").get<std::map<std::string, std::string>>();
    r.cwd = h.at("cwd").get<std::string>();
    r.uid = IntegerAt<uint32_t>(h, "uid");
    r.gid = IntegerAt<uint32_t>(h, "gid");
    r.timeout_ms = IntegerAt<int64_t>(h, "timeout_ms");
    r.cpu_ms = IntegerAt<int64_t>(h, "cpu_ms");
    r.output_bytes = IntegerAt<int64_t>(h, "output_bytes");
    r.files = IntegerAt<int64_t>(h, "files");
    r.memory_bytes = IntegerAt<int64_t>(h, "memory_bytes");
    r.nproc = IntegerAt<int64_t>(h, "nproc");
    r.fsize_bytes = IntegerAt<int64_t>(h, "fsize_bytes");
    r.stdin_stream = h.at("stdin_stream").get<bool>();
    if (r.argv.empty()) return std::unexpected(Error{"exec.argv", "is empty", 0});
    return r;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"exec message", e.what(), 0});
  }
}

channel::Message EncodeCancel() { return {{{"type", "cancel"}}, ""}; }

bool IsCancel(const channel::Message& message) { return message.Type() == "cancel"; }

channel::Message EncodeStdin(std::string bytes) { return {{{"type", "stdin"}}, std::move(bytes)}; }

channel::Message EncodeStdinEnd() { return {{{"type", "stdin_end"}}, ""}; }

channel::Message EncodeStdinTaken(size_t bytes) { return {{{"type", "stdin_taken"}, {"bytes", bytes}}, ""}; }

channel::Message EncodeStdinClosed() { return {{{"type", "stdin_closed"}}, ""}; }

bool IsStdinFrame(const channel::Message& message) {
  return message.Type() == "stdin" || message.Type() == "stdin_end";
}

channel::Message EncodeExit(const ExecReport& r) {
  nlohmann::json h = {
      {"type", "exit"},
      {"status", ToString(r.status)},
      {"exit_code", r.exit_code},
      {"signal", r.signal},
      {"wall_ms", r.wall_ms},
      {"cpu_ms", r.cpu_ms},
      {"peak_memory_bytes", r.peak_memory_bytes},
      {"stdout_truncated", r.stdout_truncated},
      {"stderr_truncated", r.stderr_truncated},
      {"error", r.error},
      {"limits_hit", r.limits_hit},
  };
  return channel::Message{std::move(h), ""};
}

Expected<ExecReport> DecodeExit(const channel::Message& m) {
  if (m.Type() != "exit") return std::unexpected(Error{"channel", "expected an exit message", 0});
  try {
    const auto& h = m.header;
    ExecReport r;
    auto status = ParseStatus(h.at("status").get<std::string>());
    SMOLBOX_TRY(status);
    r.status = *status;
    r.exit_code = IntegerAt<int>(h, "exit_code");
    r.signal = IntegerAt<int>(h, "signal");
    r.wall_ms = IntegerAt<int64_t>(h, "wall_ms");
    r.cpu_ms = IntegerAt<int64_t>(h, "cpu_ms");
    r.peak_memory_bytes = IntegerAt<int64_t>(h, "peak_memory_bytes");
    r.stdout_truncated = h.at("stdout_truncated").get<bool>();
    r.stderr_truncated = h.at("stderr_truncated").get<bool>();
    r.error = h.at("error").get<std::string>();
    // Optional: only an agent that holds the cgroup itself (the vm's) reports it.
    r.limits_hit = h.value("limits_hit", std::vector<std::string>{});
    return r;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"exit message", e.what(), 0});
  }
}

}  // namespace smolbox
