#include "launch/http_call.h"

#include <httplib.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <memory>
#include <optional>

#include "json_bounds.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

constexpr int kExitFailed = 125;
// A plan holds a case's request bodies, stdin included; the battery's largest is a few KiB.
constexpr size_t kMaxPlanBytes = 64 << 20;
// The result reply holds the output, at most a few MiB in the battery, in JSON.
constexpr size_t kMaxReplyBytes = 256 << 20;

std::unique_ptr<httplib::Client> Connect(const std::string& endpoint) {
  auto client = EndpointClient(endpoint);
  // The case's own bound is the safety net's, which kills this process; not a read timeout.
  client->set_read_timeout(std::chrono::hours(24));
  client->set_write_timeout(std::chrono::seconds(60));
  return client;
}

// One call's reply, or why there is none.
struct Reply {
  int status = 0;
  std::string body;
  std::string error;  // set: the call failed
};

Reply Call(httplib::Client& client, const json& call) {
  httplib::Request request;
  request.method = call.value("method", "");
  request.path = call.value("path", "");
  if (call.contains("body")) {
    request.body = call["body"].dump();
    request.set_header("Content-Type", "application/json");
  }
  // The reply is the sandbox's, so it is hostile input: read up to a bound, not whatever comes.
  std::string body;
  bool too_large = false;
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    too_large = body.size() + size > kMaxReplyBytes;
    if (!too_large) body.append(data, size);
    return !too_large;
  };
  httplib::Result result = client.send(request);
  Reply reply;
  std::string what = request.method + " " + request.path;
  if (too_large) {
    reply.error = fmt::format("{}: the reply is larger than {} bytes", what, kMaxReplyBytes);
  } else if (!result) {
    reply.error = fmt::format("{}: {}", what, httplib::to_string(result.error()));
  } else {
    reply.status = result->status;
    reply.body = std::move(body);
    if (reply.status < 200 || reply.status > 299) {
      reply.error = fmt::format("{}: HTTP {}: {}", what, reply.status, reply.body.substr(0, 2000));
    }
  }
  return reply;
}

// An exit_code result: the fields the profile points at.
int PrintFields(const json& plan, const std::string& body, std::ostream& out, std::ostream& err) {
  auto doc = smolbox::ParseBoundedJson(body, {.max_bytes = kMaxReplyBytes}, "the result call's reply");
  if (!doc) {
    err << "smolvm-check http-call: " << doc.error().ToString() << "\n";
    return kExitFailed;
  }
  const json fields = plan.value("result_fields", json::object());
  auto field = [&](const char* name) -> std::optional<json> {
    if (!fields.contains(name)) return std::nullopt;
    json::json_pointer pointer(fields[name].get<std::string>());
    if (!doc->contains(pointer)) return std::nullopt;
    return (*doc)[pointer];
  };
  for (auto [name, stream] : {std::pair{"stdout", &out}, std::pair{"stderr", &err}}) {
    if (auto text = field(name); text && text->is_string()) *stream << text->get<std::string>();
  }
  auto code = field("exit_code");
  if (!code || !code->is_number_integer()) {
    err << "smolvm-check http-call: the reply has no whole number at " << fields.value("exit_code", "") << "\n";
    return kExitFailed;
  }
  return static_cast<int>(code->get<int64_t>());
}

}  // namespace

std::unique_ptr<httplib::Client> EndpointClient(const std::string& endpoint) {
  std::unique_ptr<httplib::Client> client;
  if (endpoint.starts_with("unix:")) {
    client = std::make_unique<httplib::Client>(endpoint.substr(5));
    client->set_address_family(AF_UNIX);
  } else {
    client = std::make_unique<httplib::Client>(endpoint);
  }
  client->set_connection_timeout(std::chrono::seconds(10));
  return client;
}

int RunHttpCall(const std::string& plan_text, std::ostream& out, std::ostream& err) {
  auto plan = smolbox::ParseBoundedJson(plan_text, {.max_bytes = kMaxPlanBytes}, "the plan");
  if (!plan || !plan->is_object() || !(*plan)["calls"].is_array() || !(*plan)["endpoint"].is_string()) {
    err << "smolvm-check http-call: " << (plan ? "the plan needs an endpoint and calls" : plan.error().ToString()) << "\n";
    return kExitFailed;
  }
  auto client = Connect((*plan)["endpoint"].get<std::string>());
  std::optional<Reply> result;
  std::string failure;
  for (const json& call : (*plan)["calls"]) {
    if (!failure.empty() && !call.value("always", false)) continue;
    Reply reply = Call(*client, call);
    if (!reply.error.empty() && failure.empty()) failure = reply.error;
    if (call.value("result", false) && reply.error.empty()) result = std::move(reply);
  }
  if (!failure.empty() || !result) {
    err << "smolvm-check http-call: " << (failure.empty() ? "no call gave the result" : failure) << "\n";
    return kExitFailed;
  }
  if (plan->value("result", "") == "exit_code") return PrintFields(*plan, result->body, out, err);
  out << result->body;
  return 0;
}

void AddHttpCallCommand(CLI::App& app, int& exit_code) {
  CLI::App* call = app.add_subcommand("http-call", "makes a case's calls to an http profile's sandbox (the runner's)");
  call->group("");
  call->callback([&exit_code] {
    std::string plan((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    exit_code = RunHttpCall(plan, std::cout, std::cerr);
    std::cout.flush();
  });
}

}  // namespace smolvm_check
