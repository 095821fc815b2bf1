#include "qmp.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "fd_passing.h"
#include "json_bounds.h"

namespace smolbox::vm {
namespace {

using Clock = std::chrono::steady_clock;

// QEMU's answers to what we send (qmp_capabilities, stop, migrate, query-migrate, getfd) and
// its greeting are under a KiB each. A QEMU that a guest has taken over may send anything, so a
// line is bounded like every JSON we read, and so is the wait for its newline.
constexpr size_t kMaxQmpLineBytes = 1 << 20;

int MsLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

}  // namespace

Expected<void> Qmp::Send(const std::string& line, int pass_fd) {
  // Commands are a few hundred bytes: one sendmsg takes them whole on a stream socket.
  ssize_t n = shared::SendBytesWithFd(socket_.get(), line.data(), line.size(), pass_fd);
  if (n != static_cast<ssize_t>(line.size())) return std::unexpected(Error::Sys("qmp: sendmsg"));
  return {};
}

Expected<nlohmann::json> Qmp::NextReply(const std::string& what, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (size_t newline; (newline = buffer_.find('\n')) != std::string::npos;) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (line.find_first_not_of(" \r") == std::string::npos) continue;
      auto object = ParseBoundedJson(line, {.max_bytes = kMaxQmpLineBytes}, "qmp: " + what);
      if (!object) return object;
      if (!object->is_object()) {
        return std::unexpected(Error{"qmp: " + what, "QEMU sent something that is not a JSON object", 0});
      }
      if (!object->contains("event")) return object;
    }
    if (buffer_.size() > kMaxQmpLineBytes) {
      return std::unexpected(Error{"qmp: " + what, fmt::format("QEMU sent a line over the {} limit",
                                                              FormatLimitBytes(kMaxQmpLineBytes)), 0});
    }
    pollfd fd{socket_.get(), POLLIN, 0};
    int ready = poll(&fd, 1, MsLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::unexpected(Error::Sys("qmp: poll"));
    if (ready == 0) return std::unexpected(Error{"qmp: " + what, "QEMU did not answer in time", ETIMEDOUT});
    char chunk[4096];
    ssize_t n = read(socket_.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("qmp: read"));
    if (n == 0) return std::unexpected(Error{"qmp: " + what, "QEMU closed its monitor", 0});
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

Expected<void> Qmp::Handshake(int timeout_ms) {
  auto greeting = NextReply("greeting", timeout_ms);
  SMOLBOX_TRY(greeting);
  if (!greeting->contains("QMP")) return std::unexpected(Error{"qmp: greeting", "not a QMP greeting", 0});
  SMOLBOX_TRY(Execute("qmp_capabilities", nullptr, timeout_ms));
  return {};
}

Expected<nlohmann::json> Qmp::Execute(const std::string& command, const nlohmann::json& arguments, int timeout_ms,
                                      int pass_fd) {
  nlohmann::json request = {{"execute", command}};
  if (!arguments.is_null()) request["arguments"] = arguments;
  SMOLBOX_TRY(Send(request.dump() + "\n", pass_fd));
  auto reply = NextReply(command, timeout_ms);
  if (!reply) return reply;
  if (reply->contains("error")) {
    const auto& e = (*reply)["error"];
    return std::unexpected(Error{"qmp: " + command, StringOr(e, "desc", e.dump()), 0});
  }
  if (!reply->contains("return")) return std::unexpected(Error{"qmp: " + command, "no return in " + reply->dump(), 0});
  return (*reply)["return"];
}

}  // namespace smolbox::vm
