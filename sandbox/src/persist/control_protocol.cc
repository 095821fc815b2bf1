#include "control_protocol.h"

#include <algorithm>

#include <fmt/format.h>

#include "json_bounds.h"

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

}  // namespace

channel::Message EncodeExecOrder(const ExecOrder& order) {
  nlohmann::json header = {{"type", "exec"}, {"argv", order.argv}, {"env", order.env},
                            {"stdin", order.sends_stdin}, {"stream_output", order.streams_output}};
  if (order.workdir) header["workdir"] = *order.workdir;
  if (order.timeout_ms) header["timeout_ms"] = *order.timeout_ms;
  return {header, ""};
}

Expected<ExecOrder> DecodeExecOrder(const channel::Message& message) {
  const auto& h = message.header;
  const char* field = "argv";
  try {
    ExecOrder order;
    order.argv = h.at("argv").get<std::vector<std::string>>();
    field = "env";
    order.env = h.at("env").get<std::map<std::string, std::string>>();
    field = "workdir";
    if (h.contains("workdir")) order.workdir = h.at("workdir").get<std::string>();
    field = "timeout_ms";
    if (h.contains("timeout_ms")) order.timeout_ms = IntegerAt<int64_t>(h, "timeout_ms");
    field = "stdin";
    order.sends_stdin = h.at("stdin").get<bool>();
    field = "stream_output";
    order.streams_output = h.at("stream_output").get<bool>();
    return order;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error::Field(field, e.what()));
  }
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
