#include "process_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "fd_passing.h"

namespace smolbox::oci {
namespace {

// What `kill` may send the monitor and have end the container cleanly; SIGKILL ends it outright
// and the next runtime call sweeps what it held.
constexpr int kEndingSignals[] = {SIGTERM, SIGINT,  SIGHUP,  SIGQUIT,
                                  SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM};

}  // namespace

Expected<UniqueFd> BlockEndingSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : kEndingSignals) sigaddset(&set, signal);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) return std::unexpected(Error::Sys("sigprocmask"));
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) return std::unexpected(Error::Sys("signalfd"));
  return UniqueFd(fd);
}

int TakeSignal(int signal_fd) {
  signalfd_siginfo info{};
  return read(signal_fd, &info, sizeof info) == sizeof info ? static_cast<int>(info.ssi_signo) : 0;
}

Expected<UniqueFd> OpenConsole(const std::string& socket_path) {
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid() || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) {
    return std::unexpected(Error::Sys("open a pty"));
  }
  char name[64];
  if (ptsname_r(master.get(), name, sizeof name) != 0)
    return std::unexpected(Error::Sys("ptsname"));
  UniqueFd slave(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.valid()) return std::unexpected(Error::Sys(fmt::format("open {}", name)));
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof address.sun_path)
    return std::unexpected(Error::Field("--console-socket", "path too long"));
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  if (!sock.valid() ||
      connect(sock.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    return std::unexpected(Error::Sys("connect to the console socket " + socket_path));
  }
  if (shared::SendBytesWithFd(sock.get(), name, strlen(name), master.get()) < 0)
    return std::unexpected(Error::Sys("send the pty to the console socket"));
  return slave;
}

Expected<UniqueFd> TakeConsole(bool terminal, const std::string& socket_path) {
  if (!terminal) return UniqueFd();
  if (socket_path.empty())
    return std::unexpected(
        Error::Field("--console-socket", "is required when process.terminal is true"));
  SMOLBOX_ASSIGN_OR_RETURN(UniqueFd console, OpenConsole(socket_path));
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3 && null >= 0; ++fd) dup2(null, fd);
  if (null > 2) close(null);
  return console;
}

bool ReportReady(int ready_fd, const std::string& line) {
  std::string text = line + "\n";
  bool told = write(ready_fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(ready_fd);
  return told;
}

}  // namespace smolbox::oci
