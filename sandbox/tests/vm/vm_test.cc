// The vm backend end to end, under QEMU's emulation (TCG): each test boots real microVMs with
// the guest artifacts scripts/build-guest made (scripts/setup runs it).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ns/ordinary_files.h"
#include "smolbox/host.h"
#include "smolbox_runner.h"
#include "test_support.h"
#include "vm/accel.h"

namespace smolbox::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";
constexpr const char* kNode = "/usr/bin/node";

Invocation RunVm(const std::vector<std::string>& options, const std::vector<std::string>& command,
                 const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {"run", "--json", "--backend", "vm", "--accel", "tcg"};
  args.insert(args.end(), options.begin(), options.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return RunSmolbox(args, env);
}

// The pids whose parent is `parent`.
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFileOrEmpty(entry.path().string() + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) {
      children.push_back(std::stoi(name));
    }
  }
  return children;
}

// `smolbox run --json --backend vm --accel tcg -- sleep 60` in the background, its JSON to
// stdout_fd; returns its pid.
pid_t StartSleepingVm(int stdout_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(stdout_fd >= 0 ? stdout_fd : null_fd, 1);
    dup2(null_fd, 2);
    execl(SmolboxPath().c_str(), "smolbox", "run", "--json", "--backend", "vm", "--accel", "tcg", "--timeout", "60s",
          "--", "/bin/sleep", "60", nullptr);
    _exit(99);
  }
  return pid;
}

// The QEMU a smolbox started, once it runs the workload; 0 if it never started.
pid_t AwaitRunningQemu(pid_t smolbox) {
  pid_t qemu = 0;
  WaitUntil([&] {
    auto children = ChildrenOf(smolbox);
    qemu = children.empty() ? 0 : children.front();
    return qemu != 0;
  }, std::chrono::seconds(10));
  if (qemu != 0) std::this_thread::sleep_for(std::chrono::seconds(4));  // booted, running the sleep
  return qemu;
}

std::string Runs() { return StateRootOfThisUser() + "/runs"; }

size_t RunDirs() {
  return fs::exists(Runs()) ? static_cast<size_t>(std::distance(fs::directory_iterator(Runs()), {})) : 0;
}

TEST(VmHello, python_runs_in_its_own_guest_kernel_under_tcg) {
  auto run = RunVm({}, {kPython, "-c", "import os, platform; print(platform.node(), os.getuid(), open('/proc/1/comm').read() if os.path.exists('/proc/1/comm') else 'no-pid1')"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["backend"], "vm");
  EXPECT_EQ(run.result["isolation"], "tcg");
  // The sandbox user, the sandbox's hostname, and PID 1 (the agent) hidden from it.
  EXPECT_EQ(run.result["stdout"], "sandbox 1000 no-pid1\n");
  int64_t boot = run.result["timings"]["boot_ms"];
  EXPECT_GT(boot, 0);
  EXPECT_LE(boot, run.result["timings"]["setup_ms"].get<int64_t>());
  EXPECT_GT(run.result["timings"]["run_ms"].get<int64_t>(), 0);
}

TEST(VmHello, node_runs_on_a_guest_kernel_of_its_own_run) {
  auto run = RunVm({}, {kNode, "-e", "console.log(require('fs').readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim())"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string guest_boot = run.result["stdout"];
  std::string host_boot = ReadFileOrEmpty("/proc/sys/kernel/random/boot_id");
  EXPECT_EQ(guest_boot.size(), host_boot.size()) << guest_boot;
  EXPECT_NE(guest_boot, host_boot);
  auto again = RunVm({}, {"/bin/cat", "/proc/sys/kernel/random/boot_id"});
  // Booted or restored from the boot snapshot, each run gets a VM of its own.
  EXPECT_NE(again.result.value("stdout", ""), guest_boot) << "two runs shared one guest kernel";
}

TEST(VmHello, user_root_is_uid_0_in_the_guest_without_capabilities_and_can_write_its_storage) {
  auto run = RunVm({"--user", "root"}, {"/bin/sh", "-c", "id -u; echo x > /tmp/r && cat /tmp/r; grep CapEff /proc/self/status"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "0\nx\nCapEff:\t0000000000000000\n");
}

// The guest kernel is the inner wall: uid 0 of the workload is uid 0 of a user namespace whose
// ids the guest kernel knows as unprivileged ones, so no global knob takes its writes.
TEST(VmIsolation, user_root_is_root_of_its_own_user_namespace_and_cannot_write_the_guest_kernels_knobs) {
  auto run = RunVm({"--user", "root"}, {"/bin/sh", "-c",
      "read inside outside count < /proc/self/uid_map; echo $inside $outside $count;"
      "for k in kernel/core_pattern vm/overcommit_memory; do v=$(cat /proc/sys/$k);"
      "  (printf '%s\\n' \"$v\" > /proc/sys/$k) 2>/dev/null && echo WROTE $k; done;"
      "(: > /proc/sysrq-trigger) 2>/dev/null && echo OPENED sysrq-trigger;"
      "(: > /proc/pressure/cpu) 2>/dev/null && echo OPENED pressure;"
      "stat -c %F /proc/keys /proc/timer_list; head -c 64 /proc/keys | wc -c; echo done"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "0 100000 65536\ncharacter special file\ncharacter special file\n0\ndone\n");
}

TEST(VmIsolation, user_root_sees_only_its_own_processes_not_the_guests_init_or_kernel_threads) {
  auto run = RunVm({"--user", "root"}, {"/bin/sh", "-c", "cat /proc/[0-9]*/comm | grep -c kthreadd; ls /proc | grep -c '^[0-9]'"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.substr(0, out.find('\n')), "0") << out;
  // The serving agent (PID 1), sh, ls and grep; a guest kernel has dozens of threads.
  EXPECT_LE(std::stoi(out.substr(out.find('\n') + 1)), 5) << out;
}

TEST(VmHello, a_pty_opens_on_a_devpts_of_the_sandboxs_own) {
  // The line discipline may hand the echo over in pieces: read to the end of the line.
  auto run = RunVm({}, {kPython, "-c", "import os\nm, s = os.openpty()\nos.write(s, b'hi\\n')\ngot = b''\n"
                                       "while not got.endswith(b'\\n'): got += os.read(m, 16)\n"
                                       "print(got, os.ttyname(s))"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "b'hi\\r\\n' /dev/pts/0\n") << run.out << run.err;
}

// One boot for all of them: under 9p's cache=none and security_model=none each failed (EINVAL,
// ENXIO, "disk I/O error").
TEST(VmStorage, mmap_fifos_sqlite_wal_and_multiprocessing_work_and_mknod_is_eperm_in_tmp_and_work) {
  auto run = RunVm({}, {kPython, "-c", kOrdinaryFilesPython, "/tmp", "/work"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], kOrdinaryFilesExpected) << run.result["stderr"];
}

// One boot for both directions: "a" must arrive while wc still waits for a stdin that is sent
// only after it; then 1 GiB crosses the guest's channel with smolbox (QEMU aside) under 64 MiB.
TEST(VmStdio, output_streams_as_written_and_a_gibibyte_of_interactive_stdin_reaches_wc_exactly) {
  LiveSmolbox box({"run", "--backend", "vm", "--accel", "tcg", "-i", "--timeout", "300s", "--", "/bin/sh", "-c",
                   "echo a; wc -c; sleep 2"});
  EXPECT_EQ(box.ReadStdoutUntil("a\n", std::chrono::seconds(120)), "a\n") << box.err();
  constexpr int64_t kGiB = 1LL << 30;
  ASSERT_TRUE(box.WriteZeros(kGiB, std::chrono::seconds(240)));
  box.CloseStdin();
  EXPECT_EQ(box.ReadStdoutUntil("\n" + std::to_string(kGiB) + "\n", std::chrono::seconds(120)),
            "a\n" + std::to_string(kGiB) + "\n");
  EXPECT_LT(box.PeakRssKib(), 64 * 1024);
  EXPECT_EQ(box.Wait(std::chrono::seconds(60)), 0) << box.err();
}

TEST(VmLimits, a_python_while_true_ends_as_timeout_within_a_few_seconds) {
  auto run = RunVm({"--timeout", "1s"}, {kPython, "-c", "while True: pass"});
  EXPECT_EQ(run.result["status"], "timeout") << run.out << run.err;
  EXPECT_EQ(run.exit_code, 124);
  EXPECT_LT(run.result["timings"]["run_ms"].get<int64_t>(), 5000);
  // The agent in the guest ended it, not the host's backstop.
  EXPECT_EQ(run.result["warnings"].dump().find("backstop"), std::string::npos) << run.result["warnings"];
}

TEST(VmLimits, touching_more_memory_than_the_limit_is_a_memory_limit_the_agent_survives) {
  auto run = RunVm({"--mem", "64M"},
                   {kPython, "-c", "b = bytearray(160 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('BREACH')"});
  EXPECT_EQ(run.result["status"], "memory_limit") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "");
}

TEST(VmLimits, a_fork_bomb_stops_at_the_pids_limit) {
  auto run = RunVm({"--pids", "16"}, {"/bin/sh", "-c", "n=0; for i in $(seq 40); do sleep 3 & n=$((n+1)); done; echo started $n; wait"});
  EXPECT_NE(run.result["limits_hit"].dump().find("pids"), std::string::npos) << run.out << run.err;
  EXPECT_NE(run.result["stderr"].get<std::string>().find("fork"), std::string::npos) << run.result["stderr"];
}

TEST(VmLimits, a_disk_bomb_stops_at_the_storage_quota) {
  auto run = RunVm({"--storage", "32M"},
                   {"/bin/sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=100 2>/dev/null; stat -c %s /tmp/fill"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  int64_t written = std::stoll(run.result["stdout"].get<std::string>());
  EXPECT_LE(written, 32LL << 20);
  EXPECT_NE(run.result["limits_hit"].dump().find("storage"), std::string::npos) << run.result["limits_hit"];
}

TEST(VmLimits, a_fraction_of_a_cpu_is_a_quota_inside_the_guest) {
  auto run = RunVm({"--cpus", "0.5", "--timeout", "20s"},
                   {kPython, "-c", "import time\nend = time.time() + 2\nwhile time.time() < end: pass"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  // Busy from start to end (Python's emulated start-up included): about half of the wall time.
  int64_t cpu = run.result["usage"]["cpu_ms"];
  int64_t wall = run.result["usage"]["wall_ms"];
  EXPECT_GT(cpu, wall * 3 / 10) << cpu << " ms of CPU in " << wall << " ms";
  EXPECT_LT(cpu, wall * 7 / 10) << cpu << " ms of CPU in " << wall << " ms under --cpus 0.5";
}

TEST(VmLimits, output_past_the_cap_is_cut_and_reported) {
  auto run = RunVm({"--output-limit", "1K"}, {kPython, "-c", "print('x' * 100000)"});
  EXPECT_EQ(run.result["status"], "output_limit") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"].get<std::string>().size(), 1024u);
  EXPECT_TRUE(run.result["stdout_truncated"].get<bool>());
}

TEST(VmIsolation, the_guest_has_no_network_device_and_reaches_nothing) {
  auto run = RunVm({}, {kPython, "-c",
                        "import socket\n"
                        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))\n"
                        "for host in ('10.0.2.2', '127.0.0.1'):\n"
                        "  try:\n"
                        "    socket.create_connection((host, 22), timeout=2); print('BREACH', host)\n"
                        "  except OSError as e: print('refused', host)\n"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "['lo']\nrefused 10.0.2.2\nrefused 127.0.0.1\n");
}

TEST(VmIsolation, a_host_canary_outside_the_shares_is_not_reachable) {
  TempDir shared, secret;
  std::string token = RandomToken();
  secret.Write("canary", token);
  chmod((secret.path() + "/canary").c_str(), 0644);
  auto run = RunVm({"-v", shared.path() + ":/data:ro"},
                   {"/bin/sh", "-c", "cat " + secret.path() + "/canary; ls /data; grep -rs " + token +
                                         " /data /tmp /work /etc /dev; cat /proc/self/mountinfo"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  std::string out = run.result["stdout"];
  EXPECT_EQ(out.find(token), std::string::npos) << out;
  EXPECT_EQ(out.find(secret.path()), std::string::npos) << out;
}

TEST(VmVolumes, a_ro_volume_cannot_be_written_and_a_rw_volume_copies_back_safely) {
  TempDir in, out;
  in.Write("input.txt", "input\n");
  out.Write("kept.txt", "old\n");
  chmod((in.path() + "/input.txt").c_str(), 0644);
  chmod((out.path() + "/kept.txt").c_str(), 0644);
  auto run = RunVm({"-v", in.path() + ":/in:ro", "-v", out.path() + ":/out"},
                   {"/bin/sh", "-c",
                    "cat /in/input.txt; echo x > /in/input.txt || echo ro-refused; cat /out/kept.txt; "
                    "echo new > /out/kept.txt; echo made > /out/made.txt; ln -s /etc/passwd /out/link; "
                    "mkfifo /out/fifo"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "input\nro-refused\nold\n");
  EXPECT_EQ(ReadFileOrEmpty(in.path() + "/input.txt"), "input\n");
  EXPECT_EQ(ReadFileOrEmpty(out.path() + "/kept.txt"), "new\n");
  EXPECT_EQ(ReadFileOrEmpty(out.path() + "/made.txt"), "made\n");
  // Planted symlinks and FIFOs do not cross back; the result says so.
  EXPECT_FALSE(fs::exists(fs::symlink_status(out.path() + "/link")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(out.path() + "/fifo")));
  EXPECT_NE(run.result["warnings"].dump().find("link"), std::string::npos) << run.result["warnings"];
}

TEST(VmVolumes, a_tree_nested_past_the_copy_back_limit_costs_no_other_output) {
  TempDir dir;
  auto run = RunVm({"-v", dir.path() + ":/out:rw"}, {"/bin/sh", "-c",
      "cd /out; d=deep; i=0; while [ $i -lt 300 ]; do d=$d/d; i=$((i+1)); done; mkdir -p $d;"
      "i=1; while [ $i -le 31 ]; do echo $i > f$i.txt; i=$((i+1)); done"});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  for (int i = 1; i <= 31; ++i) {
    EXPECT_EQ(ReadFileOrEmpty(dir.path() + "/f" + std::to_string(i) + ".txt"), std::to_string(i) + "\n") << i;
  }
  EXPECT_NE(run.result["warnings"].dump().find("nested deeper than 256 levels"), std::string::npos) << run.result["warnings"];
}

// Run by root or not (ctest runs this suite both ways), QEMU holds no privilege on the host: a
// uid that is not root's (this user's own, without root), no capability, and a user
// namespace, a mount namespace and a network namespace that are not the runtime's.
TEST(VmIsolation, qemu_runs_without_capabilities_as_a_uid_not_root_in_namespaces_of_its_own) {
  pid_t smolbox = StartSleepingVm(-1);
  pid_t qemu = AwaitRunningQemu(smolbox);
  ASSERT_NE(qemu, 0) << "QEMU never started";
  std::string status = ReadFileOrEmpty(fmt::format("/proc/{}/status", qemu));
  std::string uid_line = status.substr(status.find("\nUid:") + 1);
  uid_line = uid_line.substr(0, uid_line.find('\n'));
  unsigned real = 0, effective = 0;
  ASSERT_EQ(sscanf(uid_line.c_str(), "Uid:\t%u\t%u", &real, &effective), 2) << status;
  EXPECT_NE(effective, 0u);
  if (geteuid() != 0) {
    EXPECT_EQ(effective, geteuid()) << "without root QEMU runs as this user";
  }
  EXPECT_NE(status.find("\nCapEff:\t0000000000000000\n"), std::string::npos) << status;
  EXPECT_NE(status.find("\nNoNewPrivs:\t1\n"), std::string::npos) << status;
  for (const char* ns : {"user", "mnt", "net", "pid"}) {
    EXPECT_NE(fs::read_symlink(fmt::format("/proc/{}/ns/{}", qemu, ns)), fs::read_symlink(fmt::format("/proc/self/ns/{}", ns)))
        << ns;
  }
  kill(smolbox, SIGKILL);
  waitpid(smolbox, nullptr, 0);
  // A dying QEMU unmaps its guest's RAM and translation cache first: give it time.
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(qemu); }, std::chrono::seconds(15))) << "QEMU outlived its runtime";
}

// A persistent VM (create, exec, rm), run by root or not: an exec's files stay for the next
// exec, its processes do not, and rm leaves no QEMU.
TEST(VmWarm, a_created_vm_serves_execs_that_share_files_but_not_processes_and_rm_ends_its_qemu) {
  std::string name = "vm-" + RandomToken().substr(0, 12);
  auto created = RunSmolbox({"create", "--json", name, "--backend", "vm", "--accel", "tcg", "--mem", "128M"});
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  auto exec = [&](const std::string& script) {
    return RunSmolbox({"exec", "--json", "--timeout", "30s", name, "--", "/bin/sh", "-c", script});
  };
  auto first = exec("echo kept > /tmp/kept; sleep 300 & echo started");
  EXPECT_EQ(first.result.value("stdout", ""), "started\n") << first.out << first.err;
  auto second = exec("cat /tmp/kept; cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$' || true");
  EXPECT_EQ(second.result.value("status", ""), "exited") << second.out << second.err;
  EXPECT_EQ(second.result.value("stdout", ""), "kept\n0\n") << "the first exec's files stay, its processes do not";
  auto removed = RunSmolbox({"rm", "--force", name});
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_EQ(CountProcessesWith(name), 0) << "the sandbox's keeper or QEMU outlived rm";
}

TEST(VmCleanup, a_killed_qemu_ends_the_run_and_leaves_nothing) {
  size_t dirs_before = RunDirs();
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  pid_t smolbox = StartSleepingVm(out[1]);
  close(out[1]);
  pid_t qemu = AwaitRunningQemu(smolbox);
  ASSERT_NE(qemu, 0) << "QEMU never started";
  kill(qemu, SIGKILL);
  std::string json;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) json.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(smolbox, &status, 0);
  auto result = nlohmann::json::parse(json, nullptr, false);
  EXPECT_NE(result.value("status", ""), "exited") << json;
  EXPECT_FALSE(ProcessAlive(qemu));
  EXPECT_LE(RunDirs(), dirs_before);
}

TEST(VmCleanup, a_sigkilled_smolbox_takes_its_qemu_along_and_the_next_run_sweeps_its_state) {
  pid_t smolbox = StartSleepingVm(-1);
  pid_t qemu = AwaitRunningQemu(smolbox);
  ASSERT_NE(qemu, 0) << "QEMU never started";
  kill(smolbox, SIGKILL);
  waitpid(smolbox, nullptr, 0);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(qemu); }, std::chrono::seconds(5))) << "QEMU outlived its runtime";
  auto next = RunVm({}, {"/bin/true"});
  EXPECT_EQ(next.result["status"], "exited") << next.out << next.err;
  for (const auto& dir : fs::directory_iterator(Runs())) {
    std::string owner = ReadFileOrEmpty(dir.path().string() + "/owner");
    EXPECT_NE(owner.substr(0, owner.find(' ')), std::to_string(smolbox)) << "stale " << dir.path();
  }
}

TEST(VmBadInput, missing_guest_artifacts_name_the_build_command) {
  auto run = RunSmolbox({"run", "--backend", "vm", "--accel", "tcg", "--", "/bin/true"},
                        {"SMOLBOX_GUEST_DIR=/nonexistent/guest"});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("scripts/build-guest"), std::string::npos) << run.err;
}

TEST(VmBadInput, an_absent_or_too_old_qemu_is_named) {
  auto absent = RunSmolbox({"run", "--backend", "vm", "--accel", "tcg", "--", "/bin/true"},
                           {"SMOLBOX_QEMU=/nonexistent/qemu-system-x86_64"});
  EXPECT_EQ(absent.exit_code, 125);
  EXPECT_NE(absent.err.find("qemu: /nonexistent/qemu-system-x86_64 not found"), std::string::npos) << absent.err;
  TempDir dir;
  std::string fake = dir.Write("qemu-system-x86_64", "#!/bin/sh\necho 'QEMU emulator version 4.2.1'\n");
  chmod(fake.c_str(), 0755);
  auto old = RunSmolbox({"run", "--backend", "vm", "--accel", "tcg", "--", "/bin/true"}, {"SMOLBOX_QEMU=" + fake});
  EXPECT_EQ(old.exit_code, 125);
  EXPECT_NE(old.err.find("is version 4.2; the vm backend needs 6.0 or newer"), std::string::npos) << old.err;
}

TEST(VmBadInput, accel_kvm_without_kvm_names_the_remote_fallback) {
  if (smolbox::host::KvmUnusableReason().empty()) GTEST_SKIP() << "KVM is usable on this host";
  auto run = RunSmolbox({"run", "--backend", "vm", "--accel", "kvm", "--", "/bin/true"});
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("accel: KVM is not usable here"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("smolvm-check remote github"), std::string::npos) << run.err;
}

TEST(VmBadInput, a_guest_that_fails_to_boot_points_to_its_console_log) {
  // The real kernel and rootfs, with an initramfs whose /init is no program at all.
  TempDir guest;
  std::string real = ReadFileOrEmpty("/var/cache/smolbox/guest/manifest.json").empty() ? "" : "/var/cache/smolbox/guest";
  ASSERT_FALSE(real.empty()) << "scripts/build-guest has not run";
  for (const char* name : {"vmlinux", "rootfs.erofs"}) fs::copy_file(real + "/" + name, guest.path() + "/" + name);
  guest.Write("initramfs.cpio", std::string(4096, 'x'));
  for (const char* name : {"vmlinux", "rootfs.erofs", "initramfs.cpio"}) chmod((guest.path() + "/" + name).c_str(), 0644);
  auto run = RunSmolbox({"run", "--backend", "vm", "--accel", "tcg", "--", "/bin/true"}, {"SMOLBOX_GUEST_DIR=" + guest.path()});
  EXPECT_EQ(run.exit_code, 125);
  auto at = run.err.find("see the console log ");
  ASSERT_NE(at, std::string::npos) << run.err;
  std::string log = run.err.substr(at + 20);
  log = log.substr(0, log.find_first_of(" \n"));
  std::string console = ReadFileOrEmpty(log);
  EXPECT_NE(console.find("Kernel panic"), std::string::npos) << log << ":\n" << console;
  fs::remove(log);
}

}  // namespace
}  // namespace smolbox::testing
