// What the sandbox can see and do: network, host files, identity, syscalls.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kNode = "/usr/bin/node";
constexpr const char* kListInterfaces =
    "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))";

// A socket bound to an ephemeral port on the host's loopback; returns the port.
int BindLoopback(int fd) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// A TCP listener on the host's loopback that records whether anyone connected.
class HostListener {
 public:
  HostListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    port_ = BindLoopback(fd_);
    listen(fd_, 8);
    thread_ = std::thread([this] {
      int c = accept(fd_, nullptr, nullptr);
      if (c >= 0) {
        accepted_ = true;
        close(c);
      }
    });
  }
  ~HostListener() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  bool accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> accepted_ = false;
  std::thread thread_;
};

TEST(Network, python_tcp_to_a_host_loopback_listener_fails) {
  HostListener listener;
  std::string code = "import socket\ntry:\n  socket.create_connection(('127.0.0.1', " +
                     std::to_string(listener.port()) + "), timeout=2)\n  print('connected')\nexcept OSError as e:\n  print('refused', e.errno)";
  auto run = RunJson({}, {kPython, "-c", code});
  EXPECT_EQ(run.result["stdout"].get<std::string>().rfind("refused", 0), 0u) << run.out << run.err;
  EXPECT_FALSE(listener.accepted());
}

TEST(Network, node_tcp_to_a_host_loopback_listener_fails) {
  HostListener listener;
  std::string code = "const s=require('net').connect(" + std::to_string(listener.port()) +
                     ",'127.0.0.1',()=>{console.log('connected');process.exit(0)}); s.on('error',e=>{console.log('refused',e.code)})";
  auto run = RunJson({}, {kNode, "-e", code});
  EXPECT_EQ(run.result["stdout"].get<std::string>().rfind("refused", 0), 0u) << run.out << run.err;
  EXPECT_FALSE(listener.accepted());
}

TEST(Network, a_dns_query_to_a_resolver_on_the_host_does_not_arrive) {
  // A UDP "resolver" on the host's loopback: it must see nothing from the sandbox.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int port = BindLoopback(fd);
  std::string code = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                     "s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00', ('127.0.0.1', " +
                     std::to_string(port) + "))\n"
                     "try:\n  print(socket.getaddrinfo('deb.debian.org', 80))\nexcept OSError:\n  print('failed')";
  auto run = RunJson({}, {kPython, "-c", code});
  EXPECT_EQ(run.result["stdout"], "failed\n") << run.out << run.err;
  char buffer[512];
  EXPECT_LT(recv(fd, buffer, sizeof buffer, 0), 0) << "a datagram from the sandbox reached the host";
  close(fd);
}

TEST(Filesystem, no_host_mount_is_visible_inside) {
  auto run = RunJson({}, {"/bin/cat", "/proc/self/mountinfo"});
  std::string mounts = run.result["stdout"];
  ASSERT_FALSE(mounts.empty()) << run.out << run.err;
  std::istringstream lines(mounts);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    EXPECT_NE(point, "/sys") << line;
    EXPECT_FALSE(point.starts_with("/run")) << line;
    EXPECT_FALSE(point.starts_with("/mnt")) << line;
    EXPECT_FALSE(point.starts_with("/var")) << line;
  }
}

TEST(Network, only_loopback_exists) {
  // /proc/net/dev rather than if_nameindex(): netlink sockets are denied in the sandbox.
  auto run = RunJson({}, {kPython, "-c", kListInterfaces});
  EXPECT_EQ(run.result["stdout"], "['lo']\n") << run.out << run.err;
}

TEST(Filesystem, a_host_file_outside_every_mount_is_not_readable) {
  TempDir dir;
  std::string token = RandomToken();
  std::string path = dir.Write("secret", token);
  std::string code = "import glob\nfor p in ['" + path + "', '/proc/1/root" + path +
                     "', '/proc/self/root" + path + "'] + glob.glob('/proc/*/cwd" + path +
                     "'):\n  try:\n    print(open(p).read())\n  except OSError as e:\n    print('denied', e.errno)";
  auto run = RunJson({}, {kPython, "-c", code});
  EXPECT_EQ(run.result["status"], "exited") << run.err;
  EXPECT_EQ(run.out.find(token), std::string::npos);
  EXPECT_NE(run.result["stdout"].get<std::string>().find("denied"), std::string::npos);
}

TEST(Filesystem, etc_holds_no_host_secrets) {
  auto run = RunJson({}, {"/bin/sh", "-c", "ls /etc; cat /etc/shadow /etc/passwd 2>&1; ls /root /home 2>&1"});
  std::string out = run.result["stdout"];
  EXPECT_NE(out.find("/etc/shadow: No such file"), std::string::npos) << out;
  EXPECT_NE(out.find("'/root': No such file"), std::string::npos) << out;
  EXPECT_NE(out.find("'/home': No such file"), std::string::npos) << out;
  // passwd names the sandbox's accounts only, none of the host's.
  EXPECT_NE(out.find("sandbox:x:1000:1000"), std::string::npos) << out;
  EXPECT_EQ(out.find("daemon:"), std::string::npos) << out;
}

TEST(Filesystem, sys_is_absent_and_the_image_is_read_only) {
  auto run = RunJson({}, {"/bin/sh", "-c", "ls /sys 2>&1; touch /usr/x 2>&1; touch /x 2>&1; echo done"});
  std::string out = run.result["stdout"];
  EXPECT_NE(out.find("'/sys': No such file"), std::string::npos) << out;
  EXPECT_NE(out.find("'/usr/x': Read-only file system"), std::string::npos) << out;
  EXPECT_NE(out.find("'/x': Read-only file system"), std::string::npos) << out;
}

TEST(Filesystem, dev_holds_only_the_harmless_devices) {
  auto run = RunJson({}, {"/bin/sh", "-c", "ls /dev | tr '\\n' ' '; echo x > /dev/null && echo null-ok"});
  EXPECT_EQ(run.result["stdout"], "fd full null ptmx pts random shm stderr stdin stdout urandom zero null-ok\n") << run.out << run.err;
}

TEST(Filesystem, a_pty_opens_on_a_devpts_of_the_sandboxs_own) {
  auto run = RunJson({}, {kPython, "-c",
      "import os\nm, s = os.openpty()\nos.write(s, b'hi\\n')\nprint(os.read(m, 16), os.ttyname(s))\n"
      "print(sorted(os.listdir('/dev/pts')))"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  // A fresh instance: the first pty is 0, and no pty of the host is listed beside it.
  EXPECT_EQ(run.result["stdout"], "b'hi\\r\\n' /dev/pts/0\n['0', 'ptmx']\n") << run.out << run.err;
}

TEST(Filesystem, a_rootfs_directory_image_is_used_instead_of_the_host) {
  TempDir rootfs;
  std::filesystem::create_directory(rootfs.path() + "/bin");
  std::filesystem::copy_file(HelperPath("syscall_probe"), rootfs.path() + "/bin/probe");
  auto run = RunJson({"--image", rootfs.path()}, {"/bin/probe", "keyctl"});
  EXPECT_EQ(run.result["stdout"], "keyctl: errno=EPERM\n") << run.out << run.err;
  auto python = RunJson({"--image", rootfs.path()}, {"/usr/bin/python3", "-c", "print(1)"});
  EXPECT_EQ(python.exit_code, 127) << "the host's /usr leaked into a rootfs image";
}

TEST(Filesystem, mountinfo_shows_no_part_of_a_rootfs_directory_images_host_path) {
  TempDir parent;
  std::string token = RandomToken();
  std::string rootfs = parent.path() + "/image-" + token;
  std::filesystem::create_directories(rootfs + "/bin");
  std::filesystem::copy_file(HelperPath("file_cat"), rootfs + "/bin/cat");
  auto run = RunJson({"--image", rootfs}, {"/bin/cat", "/proc/self/mountinfo"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.find(token), std::string::npos) << out;
  EXPECT_EQ(out.find(parent.path()), std::string::npos) << out;
  // One read-only overlay at /, its layers named by descriptor; /bin is no mount of its own.
  EXPECT_NE(out.find(" / / ro,"), std::string::npos) << out;
  EXPECT_NE(out.find("- overlay overlay ro,lowerdir=/proc/self/fd/"), std::string::npos) << out;
  EXPECT_EQ(out.find(" /bin "), std::string::npos) << out;
}

TEST(Identity, the_workload_is_not_root_and_holds_no_capabilities) {
  auto run = RunJson({}, {"/bin/sh", "-c", "id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status"});
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.substr(0, out.find('\n')), "1000") << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("CapPrm:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos) << out;
}

TEST(Identity, user_root_is_root_inside_only_and_still_holds_no_capabilities) {
  auto run = RunJson({"--user", "root"}, {"/bin/sh", "-c", "id -u; grep CapEff /proc/self/status; cat /proc/self/uid_map"});
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.substr(0, out.find('\n')), "0") << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  // uid 0 inside is not uid 0 outside.
  EXPECT_EQ(out.find("         0          0"), std::string::npos) << out;
}

// The network namespace is the sandbox's own, so without the read-only /proc/sys its root
// could write these; the masks hide what runc and docker hide.
TEST(Identity, user_root_finds_the_kernel_knobs_read_only_and_the_masked_proc_files_empty) {
  auto run = RunJson({"--user", "root"}, {"/bin/sh", "-c",
      "read v < /proc/sys/net/ipv4/ip_default_ttl; (echo $v > /proc/sys/net/ipv4/ip_default_ttl) 2>/dev/null && echo WROTE;"
      "(: > /proc/pressure/cpu) 2>/dev/null && echo OPENED pressure; stat -c %F /proc/keys /proc/timer_list; head -c 64 /proc/keys | wc -c; echo done"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  // Masked by binds of /dev/null; unmasked they are regular files.
  EXPECT_EQ(run.result["stdout"], "character special file\ncharacter special file\n0\ndone\n");
}

TEST(Identity, the_hostname_is_sandbox_and_the_host_environment_does_not_leak) {
  std::string token = RandomToken();
  auto run = RunSmolbox({"run", "--json", "-e", "GIVEN=yes", "--", "/bin/sh", "-c", "hostname; env"},
                        {"LEAKED=" + token});
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.substr(0, out.find('\n')), "sandbox");
  EXPECT_EQ(out.find(token), std::string::npos);
  EXPECT_NE(out.find("GIVEN=yes"), std::string::npos);
  EXPECT_NE(out.find("PATH="), std::string::npos);
  EXPECT_NE(out.find("HOME="), std::string::npos);
  EXPECT_NE(out.find("LANG="), std::string::npos);
}

TEST(Identity, only_the_sandbox_processes_are_visible) {
  const std::string list = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))";
  // The workload itself (2) only: /proc is mounted hidepid=invisible, which lists only the
  // processes a workload may ptrace, and the agent (1) is none of them, even to root inside,
  // which has no capability left.
  auto run = RunJson({}, {kPython, "-c", list});
  EXPECT_EQ(run.result["stdout"], "[2]\n") << run.out << run.err;
  auto as_root = RunJson({"--user", "root"}, {kPython, "-c", list});
  EXPECT_EQ(as_root.result["stdout"], "[2]\n") << as_root.out << as_root.err;
}

TEST(Fds, every_descriptor_above_2_is_closed) {
  auto run = RunJson({}, {kPython, "-c", "import os\nprint(sorted(int(f) for f in os.listdir('/proc/self/fd')))"});
  // The listing itself holds one descriptor open.
  EXPECT_EQ(run.result["stdout"], "[0, 1, 2, 3]\n") << run.out << run.err;
}

class DeniedSyscall : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(DeniedSyscall, fails_inside_the_sandbox) {
  auto [name, expected] = GetParam();
  std::string probe = HelperPath("syscall_probe");
  auto run = RunJson({"-v", probe + ":/probe:ro"}, {"/probe", name});
  EXPECT_EQ(run.result["stdout"], std::string(name) + ": " + expected + "\n") << run.out << run.err;
}

INSTANTIATE_TEST_SUITE_P(
    ByName, DeniedSyscall,
    ::testing::Values(std::pair{"keyctl", "errno=EPERM"}, std::pair{"bpf", "errno=EPERM"},
                      std::pair{"ptrace", "errno=EPERM"}, std::pair{"clone_newuser", "errno=EPERM"},
                      std::pair{"mount", "errno=EPERM"}, std::pair{"chroot", "errno=EPERM"},
                      std::pair{"socket_vsock", "errno=EPERM"}, std::pair{"socket_netlink", "errno=EPERM"},
                      std::pair{"io_uring_setup", "errno=ENOSYS"}, std::pair{"userfaultfd", "errno=EPERM"},
                      std::pair{"perf_event_open", "errno=EPERM"}, std::pair{"open_by_handle_at", "errno=EPERM"}),
    [](const auto& param_info) { return std::string(param_info.param.first); });

// A foreign ABI is not filtered syscall by syscall: the whole process dies.
void ExpectForeignAbiKilled(const char* probe_case) {
  std::string probe = HelperPath("syscall_probe");
  // A kernel without IA-32 emulation answers int 0x80 with SIGSEGV before any filter runs.
  ProgramRun outside = RunProgram({probe, probe_case});
  if (!WIFEXITED(outside.wait_status)) GTEST_SKIP() << probe_case << " does not reach the kernel here at all";
  auto run = RunJson({"-v", probe + ":/probe:ro"}, {"/probe", probe_case});
  EXPECT_EQ(run.result["status"], "violation") << run.out << run.err;
  EXPECT_EQ(run.exit_code, 128 + 31);
}

TEST(Seccomp, a_32_bit_syscall_is_killed_as_a_violation) { ExpectForeignAbiKilled("int80_getpid"); }

TEST(Seccomp, an_x32_syscall_is_killed_as_a_violation) { ExpectForeignAbiKilled("x32_getpid"); }

}  // namespace
}  // namespace smolbox::testing
