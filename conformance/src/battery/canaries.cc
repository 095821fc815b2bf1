#include "battery/canaries.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <thread>

#include "battery/host_canaries.h"
#include "battery/test_host.h"
#include "unique_fd.h"

namespace smolvm_check {
namespace {

using smolbox::UniqueFd;

// Inherited descriptors sit above the numbers a program or a sandbox launcher uses itself.
constexpr int kInheritedFdFloor = 10;
// Bounds on what the detectors keep: a payload that loops must not grow the runner's memory.
constexpr size_t kMaxInjected = 256;
constexpr size_t kMaxSignalSenders = 32;

// Moves fd to the lowest free number >= floor, close-on-exec.
Expected<UniqueFd> MoveUp(UniqueFd fd, int floor, const std::string& what) {
  int moved = fcntl(fd.get(), F_DUPFD_CLOEXEC, floor);
  if (moved < 0) return std::unexpected(Error::Sys("fcntl F_DUPFD_CLOEXEC " + what));
  return UniqueFd(moved);
}

Expected<void> WriteAll(int fd, const std::string& data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(Error::Sys("write " + what));
    done += static_cast<size_t>(n);
  }
  return {};
}

Expected<void> MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0) return std::unexpected(Error::Sys("mkdir " + path));
  // chmod, because mkdir's mode passes through the umask.
  if (chmod(path.c_str(), mode) != 0) return std::unexpected(Error::Sys("chmod " + path));
  return {};
}

// A listening AF_UNIX stream socket. An address starting with NUL is abstract: it has no file
// and lives in the network namespace.
Expected<UniqueFd> ListenUnix(const std::string& address) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.size() >= sizeof addr.sun_path) {
    return std::unexpected(Error{"unix socket " + address, "path too long for sun_path", 0});
  }
  address.copy(addr.sun_path, address.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() +
                                    (address[0] == '\0' ? 0 : 1));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket AF_UNIX"));
  std::string shown = address[0] == '\0' ? "@" + address.substr(1) : address;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return std::unexpected(Error::Sys("bind " + shown));
  }
  if (listen(fd.get(), 64) != 0) return std::unexpected(Error::Sys("listen " + shown));
  return fd;
}

Expected<std::pair<UniqueFd, int>> ListenLoopbackTcp() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket AF_INET"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return std::unexpected(Error::Sys("bind 127.0.0.1:0"));
  }
  if (listen(fd.get(), 64) != 0) return std::unexpected(Error::Sys("listen 127.0.0.1"));
  socklen_t len = sizeof addr;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return std::unexpected(Error::Sys("getsockname"));
  }
  return std::pair{std::move(fd), static_cast<int>(ntohs(addr.sin_port))};
}

// Printable, so that an injected escape sequence cannot reach the runner's own terminal.
std::string Escape(const char* data, size_t size) {
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    auto c = static_cast<unsigned char>(data[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\\' || c == '\'')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c >= 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

// The body of the SIGURG detector, a forked child of a possibly multithreaded runner: only
// async-signal-safe calls, no allocation, until it is killed.
[[noreturn]] void RunSigurgDetector(int out_fd, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);  // the runner died before prctl took effect
  int null_fd = open("/dev/null", O_RDWR);
  for (int std_fd = 0; std_fd <= 2 && null_fd >= 0; ++std_fd) dup2(null_fd, std_fd);
  // It must not keep the runner's sockets or the pty alive, nor another case's canaries.
  if (out_fd > 3) close_range(3, static_cast<unsigned>(out_fd) - 1, 0);
  close_range(static_cast<unsigned>(out_fd) + 1, ~0U, 0);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGURG);
  // Blocked (since fork), a default-ignored signal stays pending for sigwaitinfo instead of
  // being dropped. Only SIGURG: the detector must not sit on anything else.
  sigprocmask(SIG_SETMASK, &set, nullptr);
  for (;;) {
    siginfo_t info{};
    if (sigwaitinfo(&set, &info) < 0) continue;
    char line[64] = "SIGURG from pid ";
    size_t len = sizeof("SIGURG from pid ") - 1;
    char digits[16];
    size_t n = 0;
    for (auto v = static_cast<unsigned>(info.si_pid); n == 0 || v != 0; v /= 10) {
      digits[n++] = static_cast<char>('0' + v % 10);
    }
    while (n > 0) line[len++] = digits[--n];
    line[len++] = '\n';
    if (write(out_fd, line, len) < 0 && errno == EPIPE) _exit(0);
  }
}

class PlantedCanaries final : public CanarySet {
 public:
  ~PlantedCanaries() override;
  Expected<void> Plant(const CanaryOptions& options);

  const std::map<std::string, std::string>& hints() const override { return hints_; }
  std::vector<std::string> env() const override;
  std::vector<int> inherited_fds() const override;
  std::vector<std::string> Leaked(const std::string& text) const override;
  std::vector<std::string> Detections() const override;
  std::vector<std::string> HostWrites() const override { return host_wide_->HostWrites(); }

 private:
  // A socket that hands out a canary's token to whoever connects.
  struct Listener {
    UniqueFd fd;
    std::string canary;     // whose token it serves
    std::string detection;  // what a connection to it is evidence of
  };

  Expected<std::string> AddToken(const std::string& canary);
  Expected<void> PlantFile();
  Expected<void> PlantEnv();
  Expected<void> PlantLoopbackTcp();
  Expected<void> PlantTestHost();
  Expected<void> PlantUnixSocket();
  Expected<void> PlantAbstractSocket();
  Expected<void> PlantFd();
  Expected<void> PlantTty();
  Expected<void> PlantSigurgDetector();
  Expected<void> PlantHostWide();
  Expected<void> StartServer();

  void Serve();
  void Answer(Listener& listener);
  void ReadInjected();
  void ReadSignals();
  void Drain(int fd);

  CanaryOptions options_;
  std::map<std::string, std::string> tokens_;  // canary -> token
  std::map<std::string, std::string> hints_;
  std::vector<std::string> cleanup_paths_;  // removed in reverse order
  std::vector<Listener> listeners_;
  std::unique_ptr<TestHost> test_host_;
  std::unique_ptr<HostWideCanaries> host_wide_;
  UniqueFd fd_canary_, tty_slave_, tty_reader_, pty_master_;
  pid_t detector_pid_ = -1;
  UniqueFd detector_pipe_;
  std::string signal_partial_;  // a line of the detector's not yet complete
  UniqueFd wake_;               // an eventfd that stops the server
  std::thread server_;

  mutable std::mutex mu_;  // guards the evidence below, written by the server thread
  std::map<std::string, int> connections_;
  std::vector<std::string> signal_senders_;
  std::string injected_;
};

PlantedCanaries::~PlantedCanaries() {
  if (server_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_.get(), &one, sizeof one);
    server_.join();
  }
  if (detector_pid_ > 0) {
    kill(detector_pid_, SIGKILL);
    while (waitpid(detector_pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // The test host's listener holds its namespace: sockets go before the host does.
  listeners_.clear();
  test_host_.reset();
  for (auto it = cleanup_paths_.rbegin(); it != cleanup_paths_.rend(); ++it) {
    if (unlink(it->c_str()) != 0 && errno == EISDIR) rmdir(it->c_str());
  }
}

Expected<void> PlantedCanaries::Plant(const CanaryOptions& options) {
  options_ = options;
  if (options_.work_dir.empty()) return std::unexpected(Error::Field("work_dir", "is empty"));
  if (mkdir(options_.work_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return std::unexpected(Error::Sys("mkdir " + options_.work_dir));
  }
  tokens_.insert(options_.placed_tokens.begin(), options_.placed_tokens.end());
  // One line per canary; a failure leaves the rest to the destructor, which undoes what exists.
  for (auto step : {&PlantedCanaries::PlantFile, &PlantedCanaries::PlantEnv,
                    &PlantedCanaries::PlantLoopbackTcp, &PlantedCanaries::PlantTestHost,
                    &PlantedCanaries::PlantUnixSocket, &PlantedCanaries::PlantAbstractSocket,
                    &PlantedCanaries::PlantFd, &PlantedCanaries::PlantTty,
                    &PlantedCanaries::PlantSigurgDetector, &PlantedCanaries::PlantHostWide,
                    &PlantedCanaries::StartServer}) {
    SMOLBOX_TRY((this->*step)());
  }
  return {};
}

Expected<std::string> PlantedCanaries::AddToken(const std::string& canary) {
  auto token = NewCanaryToken();
  if (token) tokens_[canary] = *token;
  return token;
}

Expected<void> PlantedCanaries::PlantFile() {
  SMOLBOX_ASSIGN_OR_RETURN(auto token, AddToken("file"));
  std::string dir = options_.work_dir + "/canary", file = dir + "/canary";
  SMOLBOX_TRY(MakeDir(dir, 0755));
  cleanup_paths_.push_back(dir);
  UniqueFd fd(open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return std::unexpected(Error::Sys("create " + file));
  cleanup_paths_.push_back(file);
  if (fchmod(fd.get(), 0644) != 0) return std::unexpected(Error::Sys("fchmod " + file));
  SMOLBOX_TRY(WriteAll(fd.get(), token + "\n", file));
  hints_["canary_dir"] = dir;
  hints_["canary_file"] = file;
  return {};
}

Expected<void> PlantedCanaries::PlantEnv() {
  SMOLBOX_TRY(AddToken("env"));
  return {};
}

Expected<void> PlantedCanaries::PlantLoopbackTcp() {
  SMOLBOX_TRY(AddToken("tcp"));
  SMOLBOX_ASSIGN_OR_RETURN(auto listener, ListenLoopbackTcp());
  hints_["tcp_port"] = std::to_string(listener.second);
  listeners_.push_back(
      {std::move(listener.first), "tcp", "connection to the loopback TCP server"});
  return {};
}

Expected<void> PlantedCanaries::PlantTestHost() {
  if (!options_.with_test_host) return {};
  SMOLBOX_TRY(AddToken("testhost"));
  auto host = TestHost::Create();
  SMOLBOX_TRY(host);
  test_host_ = std::move(*host);
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, test_host_->ListenTcp());
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return std::unexpected(Error::Sys("getsockname test host listener"));
  }
  hints_["testhost_ip"] = test_host_->ip();
  hints_["testhost_port"] = std::to_string(ntohs(addr.sin_port));
  listeners_.push_back({std::move(fd), "testhost", "connection to the test host"});
  return {};
}

Expected<void> PlantedCanaries::PlantUnixSocket() {
  SMOLBOX_TRY(AddToken("unix_socket"));
  // Apart from canary_dir, which the writes oracle expects to find unchanged.
  std::string dir = options_.work_dir + "/sock", path = dir + "/canary.sock";
  SMOLBOX_TRY(MakeDir(dir, 0755));
  cleanup_paths_.push_back(dir);
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, ListenUnix(path));
  cleanup_paths_.push_back(path);
  // Open to every uid: only the sandbox, not the permissions, may keep a payload out.
  if (chmod(path.c_str(), 0777) != 0) return std::unexpected(Error::Sys("chmod " + path));
  hints_["unix_socket"] = path;
  listeners_.push_back({std::move(fd), "unix_socket", "connection to the unix socket"});
  return {};
}

Expected<void> PlantedCanaries::PlantAbstractSocket() {
  SMOLBOX_TRY(AddToken("abstract_socket"));
  SMOLBOX_ASSIGN_OR_RETURN(auto suffix, RandomHex(8));
  std::string name = "smolvm-check-" + suffix;
  SMOLBOX_ASSIGN_OR_RETURN(auto fd, ListenUnix(std::string(1, '\0') + name));
  hints_["abstract_socket"] = name;
  listeners_.push_back(
      {std::move(fd), "abstract_socket", "connection to the abstract unix socket"});
  return {};
}

Expected<void> PlantedCanaries::PlantFd() {
  SMOLBOX_ASSIGN_OR_RETURN(auto token, AddToken("inherited_fd"));
  // O_TMPFILE never has a name; the fallback has one only until the unlink below.
  UniqueFd fd(open(options_.work_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  std::string named = options_.work_dir + "/.fd-canary";
  if (!fd.valid()) {
    fd.Reset(open(named.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid()) return std::unexpected(Error::Sys("create " + named));
    unlink(named.c_str());
  }
  SMOLBOX_TRY(WriteAll(fd.get(), token + "\n", "the fd canary"));
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return std::unexpected(Error::Sys("lseek fd canary"));
  SMOLBOX_ASSIGN_OR_RETURN(auto moved, MoveUp(std::move(fd), kInheritedFdFloor, "fd canary"));
  fd_canary_ = std::move(moved);
  hints_["canary_fd"] = std::to_string(fd_canary_.get());
  return {};
}

Expected<void> PlantedCanaries::PlantTty() {
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master.valid()) return std::unexpected(Error::Sys("posix_openpt"));
  if (grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) {
    return std::unexpected(Error::Sys("grantpt/unlockpt"));
  }
  char name[128];
  if (ptsname_r(master.get(), name, sizeof name) != 0)
    return std::unexpected(Error::Sys("ptsname_r"));
  UniqueFd slave(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave.valid()) return std::unexpected(Error::Sys(fmt::format("open {}", name)));
  termios tio{};
  if (tcgetattr(slave.get(), &tio) != 0) return std::unexpected(Error::Sys("tcgetattr"));
  // Raw: an injected byte is readable at once, nothing is echoed or turned into a signal.
  cfmakeraw(&tio);
  if (tcsetattr(slave.get(), TCSANOW, &tio) != 0) return std::unexpected(Error::Sys("tcsetattr"));
  // The host reads the slave's input queue, which is where TIOCSTI pushes bytes; a second
  // open, so that O_NONBLOCK stays off the payload's descriptor.
  tty_reader_.Reset(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (!tty_reader_.valid()) return std::unexpected(Error::Sys(fmt::format("open {}", name)));
  if (fcntl(master.get(), F_SETFL, O_NONBLOCK) != 0)
    return std::unexpected(Error::Sys("fcntl pty"));
  pty_master_ = std::move(master);
  SMOLBOX_ASSIGN_OR_RETURN(auto moved, MoveUp(std::move(slave), kInheritedFdFloor, "pty slave"));
  tty_slave_ = std::move(moved);
  hints_["tty_fd"] = std::to_string(tty_slave_.get());
  return {};
}

Expected<void> PlantedCanaries::PlantSigurgDetector() {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe2"));
  UniqueFd read_end(p[0]), write_end(p[1]);
  pid_t parent = getpid();
  // Blocked from birth: a SIGURG that came before the detector reached sigprocmask would be
  // dropped, its default action being to ignore it.
  sigset_t urg, old;
  sigemptyset(&urg);
  sigaddset(&urg, SIGURG);
  pthread_sigmask(SIG_BLOCK, &urg, &old);
  pid_t pid = fork();
  if (pid == 0) RunSigurgDetector(write_end.get(), parent);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return std::unexpected(Error::Sys("fork SIGURG detector"));
  detector_pid_ = pid;
  if (fcntl(read_end.get(), F_SETFL, O_NONBLOCK) != 0) {
    return std::unexpected(Error::Sys("fcntl detector pipe"));
  }
  detector_pipe_ = std::move(read_end);
  hints_["host_pid"] = std::to_string(pid);
  return {};
}

Expected<void> PlantedCanaries::PlantHostWide() {
  SMOLBOX_ASSIGN_OR_RETURN(host_wide_, HostWideCanaries::Plant());
  tokens_.insert(host_wide_->tokens().begin(), host_wide_->tokens().end());
  hints_.insert(host_wide_->hints().begin(), host_wide_->hints().end());
  return {};
}

Expected<void> PlantedCanaries::StartServer() {
  wake_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid()) return std::unexpected(Error::Sys("eventfd"));
  server_ = std::thread([this] { Serve(); });
  return {};
}

// One poll loop serves every listener and reads every detector, until the destructor wakes it.
void PlantedCanaries::Serve() {
  for (;;) {
    std::vector<pollfd> fds;
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({tty_reader_.get(), POLLIN, 0});
    fds.push_back({pty_master_.get(), POLLIN, 0});
    fds.push_back({detector_pipe_.get(), POLLIN, 0});
    for (const auto& l : listeners_) fds.push_back({l.fd.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents != 0) ReadInjected();
    if (fds[2].revents != 0) Drain(pty_master_.get());
    if (fds[3].revents != 0) ReadSignals();
    for (size_t i = 0; i < listeners_.size(); ++i) {
      if (fds[4 + i].revents != 0) Answer(listeners_[i]);
    }
  }
}

void PlantedCanaries::Answer(Listener& listener) {
  const std::string line = tokens_.at(listener.canary) + "\n";
  for (;;) {
    UniqueFd conn(accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) return;  // EAGAIN: all answered
    // A fresh socket's buffer takes the line whole; a client that left early gets nothing.
    (void)send(conn.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    std::lock_guard lock(mu_);
    ++connections_[listener.detection];
  }
}

void PlantedCanaries::ReadInjected() {
  char buf[256];
  ssize_t n = read(tty_reader_.get(), buf, sizeof buf);
  if (n <= 0) return;
  std::lock_guard lock(mu_);
  if (injected_.size() < kMaxInjected) injected_ += Escape(buf, static_cast<size_t>(n));
}

void PlantedCanaries::ReadSignals() {
  char buf[512];
  ssize_t n = read(detector_pipe_.get(), buf, sizeof buf);
  if (n == 0) {  // the detector is gone; stop polling its pipe
    detector_pipe_.Reset();
    return;
  }
  if (n < 0) return;
  signal_partial_.append(buf, static_cast<size_t>(n));
  std::lock_guard lock(mu_);
  for (size_t eol; (eol = signal_partial_.find('\n')) != std::string::npos;) {
    std::string line = signal_partial_.substr(0, eol);
    signal_partial_.erase(0, eol + 1);
    bool known =
        std::find(signal_senders_.begin(), signal_senders_.end(), line) != signal_senders_.end();
    if (!known && signal_senders_.size() < kMaxSignalSenders) signal_senders_.push_back(line);
  }
}

// Whatever the payload writes to its terminal, so that it never blocks on a full pty.
void PlantedCanaries::Drain(int fd) {
  char buf[4096];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

std::vector<std::string> PlantedCanaries::env() const {
  return {"SMOLVM_CHECK_CANARY=" + tokens_.at("env")};
}

std::vector<int> PlantedCanaries::inherited_fds() const {
  return {fd_canary_.get(), tty_slave_.get()};
}

std::vector<std::string> PlantedCanaries::Leaked(const std::string& text) const {
  std::vector<std::string> leaked;
  for (const auto& [canary, token] : tokens_) {
    if (text.find(token) != std::string::npos) leaked.push_back(canary);
  }
  return leaked;
}

std::vector<std::string> PlantedCanaries::Detections() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [what, count] : connections_) {
    out.push_back(count == 1 ? what : fmt::format("{} ({} times)", what, count));
  }
  out.insert(out.end(), signal_senders_.begin(), signal_senders_.end());
  if (!injected_.empty()) {
    out.push_back(fmt::format("TIOCSTI injected into the host terminal: '{}'", injected_));
  }
  return out;
}

}  // namespace

Expected<std::string> RandomHex(size_t bytes) {
  unsigned char buf[32];
  if (bytes > sizeof buf) bytes = sizeof buf;
  if (getrandom(buf, bytes, 0) != static_cast<ssize_t>(bytes)) {
    return std::unexpected(Error::Sys("getrandom"));
  }
  std::string hex;
  for (size_t i = 0; i < bytes; ++i) hex += fmt::format("{:02x}", buf[i]);
  return hex;
}

Expected<std::string> NewCanaryToken() {
  SMOLBOX_ASSIGN_OR_RETURN(auto hex, RandomHex(16));
  return "SMOLVM-CANARY-" + hex;
}

Expected<std::unique_ptr<CanarySet>> CanarySet::Plant(const CanaryOptions& options) {
  auto set = std::make_unique<PlantedCanaries>();
  SMOLBOX_TRY(set->Plant(options));
  return set;
}

}  // namespace smolvm_check
