#include "exec_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "client.h"
#include "unique_fd.h"

namespace smolbox::api {
namespace {

// How often the client's connection is looked at while the workload is quiet.
constexpr int kClientCheckMs = 200;
// After the result, how long the output pipes may take to drain to EOF: only the keeper holds
// their other ends, and it closes them with the exec.
constexpr auto kDrainBound = std::chrono::seconds(5);

struct Pipe {
  UniqueFd read, write;
};

Expected<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace

Expected<UniqueFd> MemoryFile(const std::string& data) {
  UniqueFd fd(memfd_create("smolbox-api-stdin", MFD_CLOEXEC));
  if (!fd.valid()) return std::unexpected(Error::Sys("memfd_create"));
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("write a memory file"));
    done += static_cast<size_t>(n);
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return std::unexpected(Error::Sys("lseek"));
  return fd;
}

namespace {

RunResult Failed(const Error& error) {
  RunResult result;
  result.status = Status::kInternalError;
  result.error = error.ToString();
  return result;
}

// One output stream: its pipe's read end and the bytes of a UTF-8 sequence not yet whole.
struct Output {
  const char* name;
  UniqueFd fd;
  std::string pending;
};

std::string Line(const char* type, std::string_view data) {
  return nlohmann::json{{"type", type}, {"data", ToValidUtf8(data)}}.dump() + "\n";
}

}  // namespace

std::string TakeWholeUtf8(std::string& pending) {
  // Walk back over continuation bytes (10xxxxxx) to the last lead byte, at most 3.
  size_t end = pending.size();
  size_t back = 0;
  while (back < 3 && back < end && (static_cast<unsigned char>(pending[end - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back >= end) return std::exchange(pending, {});  // only continuation bytes: invalid anyway
  size_t lead_at = end - 1 - back;
  unsigned char lead = static_cast<unsigned char>(pending[lead_at]);
  size_t need = (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 1;
  size_t have = back + 1;
  if (need <= 1 || have >= need) return std::exchange(pending, {});
  std::string whole = pending.substr(0, lead_at);
  pending.erase(0, lead_at);
  return whole;
}

RunResult StreamExec(const std::string& sandbox, const ExecRequest& request, const ExecClient& client, int cancel_fd) {
  auto out = MakePipe();
  auto err = out ? MakePipe() : std::unexpected(out.error());
  auto cancel = err ? MakePipe() : std::unexpected(err.error());
  if (!cancel) return Failed(cancel.error());
  UniqueFd done(eventfd(0, EFD_CLOEXEC));
  if (!done.valid()) return Failed(Error::Sys("eventfd"));
  ExecIo io;
  UniqueFd stdin_file;
  if (request.stdin_data) {
    auto file = MemoryFile(*request.stdin_data);
    if (!file) return Failed(file.error());
    stdin_file = std::move(*file);
    io.stdin_fd = stdin_file.get();
  }
  io.stdout_fd = out->write.get();
  io.stderr_fd = err->write.get();

  RunResult result;
  std::thread exec([&] {
    result = persist::ExecInSandbox(sandbox, request.order, io, cancel->read.get());
    uint64_t one = 1;
    (void)!write(done.get(), &one, sizeof one);
  });

  Output outputs[2] = {{"stdout", std::move(out->read), {}}, {"stderr", std::move(err->read), {}}};
  bool cancelled = false;
  bool exec_done = false;
  auto drain_deadline = std::chrono::steady_clock::time_point::max();
  auto cancel_exec = [&] {
    if (cancelled) return;
    cancelled = true;
    cancel->write.Reset();  // hung up: the exec's cancel fires
  };
  char buffer[1 << 16];
  while (outputs[0].fd.valid() || outputs[1].fd.valid() || !exec_done) {
    pollfd fds[4] = {{outputs[0].fd.get(), POLLIN, 0},
                     {outputs[1].fd.get(), POLLIN, 0},
                     {exec_done ? -1 : done.get(), POLLIN, 0},
                     {cancelled ? -1 : cancel_fd, POLLIN, 0}};
    if (poll(fds, 4, kClientCheckMs) < 0 && errno != EINTR) break;
    if (fds[3].revents != 0) cancel_exec();
    if (fds[2].revents != 0) {
      exec_done = true;
      // The keeper has closed its copies: ours were the last, and EOF comes after the output.
      out->write.Reset();
      err->write.Reset();
      drain_deadline = std::chrono::steady_clock::now() + kDrainBound;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      Output& o = outputs[i];
      ssize_t n = read(o.fd.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!o.pending.empty() && !cancelled) client.write_line(Line(o.name, o.pending));
        o.fd.Reset();
        continue;
      }
      o.pending.append(buffer, static_cast<size_t>(n));
      std::string whole = TakeWholeUtf8(o.pending);
      if (!cancelled && !whole.empty() && !client.write_line(Line(o.name, whole))) cancel_exec();
    }
    if (!cancelled && !client.connected()) cancel_exec();
    if (exec_done && std::chrono::steady_clock::now() > drain_deadline) break;
  }
  exec.join();
  if (!cancelled) client.write_line(nlohmann::json{{"type", "result"}, {"result", ToJson(result)}}.dump() + "\n");
  return result;
}

}  // namespace smolbox::api
