#include "exec_protocol.h"

namespace smolbox {

channel::Message EncodeExec(const ExecRequest& r) {
  nlohmann::json h = {
      {"type", "exec"},         {"argv", r.argv},
      {"env", r.env},           {"cwd", r.cwd},
      {"uid", r.uid},           {"gid", r.gid},
      {"timeout_ms", r.timeout_ms}, {"cpu_ms", r.cpu_ms},
      {"output_bytes", r.output_bytes}, {"files", r.files},
      {"memory_bytes", r.memory_bytes}, {"nproc", r.nproc},
      {"fsize_bytes", r.fsize_bytes},
  };
  return channel::Message{std::move(h), r.stdin_data};
}

Expected<ExecRequest> DecodeExec(const channel::Message& m) {
  if (m.Type() != "exec") return std::unexpected(Error{"channel", "expected an exec message", 0});
  try {
    const auto& h = m.header;
    ExecRequest r;
    r.argv = h.at("argv").get<std::vector<std::string>>();
    r.env = h.at("env").get<std::map<std::string, std::string>>();
    r.cwd = h.at("cwd").get<std::string>();
    r.uid = h.at("uid").get<uint32_t>();
    r.gid = h.at("gid").get<uint32_t>();
    r.timeout_ms = h.at("timeout_ms").get<int64_t>();
    r.cpu_ms = h.at("cpu_ms").get<int64_t>();
    r.output_bytes = h.at("output_bytes").get<int64_t>();
    r.files = h.at("files").get<int64_t>();
    r.memory_bytes = h.at("memory_bytes").get<int64_t>();
    r.nproc = h.at("nproc").get<int64_t>();
    r.fsize_bytes = h.at("fsize_bytes").get<int64_t>();
    r.stdin_data = m.tail;
    if (r.argv.empty()) return std::unexpected(Error{"exec.argv", "is empty", 0});
    return r;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"exec message", e.what(), 0});
  }
}

channel::Message EncodeCancel() { return {{{"type", "cancel"}}, ""}; }

bool IsCancel(const channel::Message& message) { return message.Type() == "cancel"; }

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
    if (!status) return std::unexpected(status.error());
    r.status = *status;
    r.exit_code = h.at("exit_code").get<int>();
    r.signal = h.at("signal").get<int>();
    r.wall_ms = h.at("wall_ms").get<int64_t>();
    r.cpu_ms = h.at("cpu_ms").get<int64_t>();
    r.peak_memory_bytes = h.at("peak_memory_bytes").get<int64_t>();
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
