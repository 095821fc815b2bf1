#include "control_protocol.h"

#include <algorithm>

#include <fmt/format.h>

#include "json_bounds.h"
#include "json_message.h"

namespace smolbox::persist {
namespace {

// Well under the channel's frame limit, so any output cap fits in some number of frames.
constexpr size_t kOutputChunkBytes = 8 << 20;

Expected<void> SendOutput(int fd, int stream, const std::string& data) {
  for (size_t offset = 0; offset < data.size(); offset += kOutputChunkBytes) {
    channel::Message m{{{"type", "output"}, {"fd", stream}}, data.substr(offset, kOutputChunkBytes)};
    SMOLBOX_TRY(channel::WriteMessage(fd, m));
  }
  return {};
}

// For the shape (json_message.h): every field set, and an entry in each list and map to give
// its kind.
ExecOrder OrderSample() {
  ExecOrder sample;
  sample.argv = {""};
  sample.env = {{"", ""}};
  sample.workdir = "";
  sample.timeout_ms = 0;
  return sample;
}

}  // namespace

// By hand, not by the macros: two fields are named apart from their members, and two are left
// out when unset (nlohmann 3.11.2 has no std::optional).
void to_json(nlohmann::json& j, const ExecOrder& order) {
  j = {{"argv", order.argv},
       {"env", order.env},
       {"stdin", order.sends_stdin},
       {"stream_output", order.streams_output}};
  if (order.workdir) j["workdir"] = *order.workdir;
  if (order.timeout_ms) j["timeout_ms"] = *order.timeout_ms;
}

void from_json(const nlohmann::json& j, ExecOrder& order) {
  j.at("argv").get_to(order.argv);
  j.at("env").get_to(order.env);
  j.at("stdin").get_to(order.sends_stdin);
  j.at("stream_output").get_to(order.streams_output);
  if (j.contains("workdir")) order.workdir = j.at("workdir").get<std::string>();
  if (j.contains("timeout_ms")) order.timeout_ms = j.at("timeout_ms").get<int64_t>();
}

channel::Message EncodeExecOrder(const ExecOrder& order) {
  nlohmann::json header = order;
  header["type"] = "exec";
  return {std::move(header), ""};
}

Expected<ExecOrder> DecodeExecOrder(const channel::Message& message) {
  static const MessageShape shape(OrderSample(), {"workdir", "timeout_ms"});
  return DecodeMessage<ExecOrder>(message.header, shape, "exec order");
}

Expected<void> SendResult(int fd, const RunResult& result) {
  SMOLBOX_TRY(SendOutput(fd, 1, result.stdout_data));
  SMOLBOX_TRY(SendOutput(fd, 2, result.stderr_data));
  RunResult bare = result;
  bare.stdout_data.clear();
  bare.stderr_data.clear();
  nlohmann::json header = ToJson(bare);
  header["type"] = "result";
  return channel::WriteMessage(fd, {header, ""});
}

Expected<RunResult> ReceiveResult(int fd) {
  std::string out[2];
  for (;;) {
    auto message = channel::ReadMessage(fd, "keeper message");
    SMOLBOX_TRY(message);
    if (!*message) return std::unexpected(Error{"sandbox", "its keeper closed the connection before the result", 0});
    const auto& m = **message;
    if (m.Type() == "output") {
      int stream = IntOr(m.header, "fd", 0);
      if (stream != 1 && stream != 2) return std::unexpected(Error{"sandbox", "output for an unknown stream", 0});
      out[stream - 1] += m.tail;
      continue;
    }
    if (m.Type() != "result") {
      return std::unexpected(Error{"sandbox", fmt::format("unexpected message {:?} from its keeper", m.Type()), 0});
    }
    auto result = ResultFromJson(m.header);
    if (!result) return result;
    result->stdout_data = std::move(out[0]);
    result->stderr_data = std::move(out[1]);
    return result;
  }
}

}  // namespace smolbox::persist
