#include "exec_protocol.h"

#include "json_message.h"
#include "mutant.h"

namespace smolbox {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ExecRequest, argv, env, cwd, uid, gid, timeout_ms, cpu_ms,
                                   output_bytes, files, memory_bytes, nproc, fsize_bytes,
                                   stdin_stream)
// With defaults so that limits_hit may be left out: only an agent that holds the cgroup itself
// (the vm's) reports it. The shape makes every other field required.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ExecReport, status, exit_code, signal, wall_ms,
                                                cpu_ms, peak_memory_bytes, stdout_truncated,
                                                stderr_truncated, error, limits_hit)

namespace {

// Samples for the shapes (json_message.h): each list and map holds one entry, to give its kind.
ExecRequest ExecSample() {
  ExecRequest sample;
  sample.argv = {""};
  sample.env = {{"", ""}};
  return sample;
}

ExecReport ExitSample() {
  ExecReport sample;
  sample.limits_hit = {""};
  return sample;
}

}  // namespace

channel::Message EncodeExec(const ExecRequest& request) {
  nlohmann::json header = request;
  header["type"] = "exec";
#ifdef SMOLBOX_MUTANTS
  mutant::AddDisabledTo(header);  // the runtime's switches go to the agent with every order
#endif
  return channel::Message{std::move(header), ""};
}

Expected<ExecRequest> DecodeExec(const channel::Message& m) {
  if (m.Type() != "exec") return std::unexpected(Error{"channel", "expected an exec message", 0});
  static const MessageShape shape(ExecSample());
#ifdef SMOLBOX_MUTANTS
  nlohmann::json header = m.header;
  SMOLBOX_TRY(mutant::TakeDisabledFrom(header));
  SMOLBOX_ASSIGN_OR_RETURN(ExecRequest request, DecodeMessage<ExecRequest>(header, shape, "exec message"));
#else
  SMOLBOX_ASSIGN_OR_RETURN(ExecRequest request,
                           DecodeMessage<ExecRequest>(m.header, shape, "exec message"));
#endif
  if (request.argv.empty()) return std::unexpected(Error{"exec message", "argv is empty", 0});
  return request;
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

channel::Message EncodeExit(const ExecReport& report) {
  nlohmann::json header = report;
  header["type"] = "exit";
  return channel::Message{std::move(header), ""};
}

Expected<ExecReport> DecodeExit(const channel::Message& m) {
  if (m.Type() != "exit") return std::unexpected(Error{"channel", "expected an exit message", 0});
  static const MessageShape shape(ExitSample(), {"limits_hit"});
  return DecodeMessage<ExecReport>(m.header, shape, "exit message");
}

}  // namespace smolbox
