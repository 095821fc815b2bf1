// Boot snapshots end to end, under TCG: the first run of a configuration saves its booted
// guest, later runs restore it, and a restored guest shares no randomness, boot id or stale
// clock with its siblings. Each test has a memory size of its own, so its snapshot is its own.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "smolbox_runner.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

namespace fs = std::filesystem;

// In the state root of whoever runs the tests: root's, or an unprivileged user's.
std::string Snapshots() { return StateRootOfThisUser() + "/snapshots"; }
// The vm backend's guest RAM on top of --mem (vm_backend.cc).
constexpr int kGuestOverheadMiB = 192;
// Random bytes, the boot id and the guest's clock, one per line. The bytes are read first, by
// the shell's first child: what a restored guest draws before them is the same in every run.
constexpr const char* kProbe = "od -An -N16 -tx1 /dev/urandom; cat /proc/sys/kernel/random/boot_id; date +%s";

Invocation RunVm(int mem_mib, const std::vector<std::string>& command, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"run", "--json", "--backend", "vm", "--accel", "tcg", "--mem", fmt::format("{}M", mem_mib)};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  // Another guest build may be tested, e.g. an agent without the reseed, to see this fail.
  std::vector<std::string> env;
  if (const char* guest = std::getenv("SMOLBOX_GUEST_DIR")) env.push_back(fmt::format("SMOLBOX_GUEST_DIR={}", guest));
  return RunSmolbox(args, env);
}

// The snapshots of the default machine with --mem mem_mib (the header names its -m).
std::vector<fs::path> SnapshotsFor(int mem_mib) {
  std::vector<fs::path> found;
  std::error_code ec;
  std::string needle = fmt::format(" -m {}M -smp 1 ", mem_mib + kGuestOverheadMiB);
  for (const auto& entry : fs::directory_iterator(Snapshots(), ec)) {
    if (entry.path().extension() != ".vmstate") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string header(4096, '\0');
    in.read(header.data(), static_cast<std::streamsize>(header.size()));
    if (header.find(needle) != std::string::npos) found.push_back(entry.path());
  }
  return found;
}

void RemoveSnapshotsFor(int mem_mib) {
  for (const auto& path : SnapshotsFor(mem_mib)) fs::remove(path);
}

ino_t InodeOf(const fs::path& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int64_t HostNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The warnings about the boot snapshot: without root a run also warns of its weaker limits.
std::string SnapshotWarnings(const Invocation& run) {
  nlohmann::json about = nlohmann::json::array();
  for (const auto& w : run.result.value("warnings", nlohmann::json::array())) {
    if (w.is_string() && w.get<std::string>().find("snapshot") != std::string::npos) about.push_back(w);
  }
  return about.dump();
}

TEST(VmSnapshot, the_first_run_saves_one_and_restored_runs_differ_in_randomness_boot_id_and_have_the_hosts_time) {
  constexpr int kMem = 301;
  RemoveSnapshotsFor(kMem);
  auto first = RunVm(kMem, {"/bin/sh", "-c", kProbe});
  ASSERT_EQ(first.result["status"], "exited") << first.out << first.err;
  auto saved = SnapshotsFor(kMem);
  ASSERT_EQ(saved.size(), 1u) << "the first run did not save a snapshot";
  // Its user's alone: a snapshot is a booted kernel's memory.
  struct stat st{};
  ASSERT_EQ(lstat(Snapshots().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(lstat(saved[0].c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  ino_t inode = InodeOf(saved[0]);

  std::vector<std::vector<std::string>> probes = {Lines(first.result["stdout"])};
  for (int i = 0; i < 2; ++i) {
    auto run = RunVm(kMem, {"/bin/sh", "-c", kProbe});
    ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
    EXPECT_EQ(SnapshotWarnings(run), "[]");
    // A restore leaves the file in place; a boot would have renamed a new one over it.
    EXPECT_EQ(InodeOf(saved[0]), inode) << "run " << i << " booted instead of restoring";
    probes.push_back(Lines(run.result["stdout"]));
  }
  for (const auto& probe : probes) {
    ASSERT_EQ(probe.size(), 3u);
    EXPECT_EQ(probe[0].size(), 48u) << probe[0];
    // The snapshot's clock is minutes old by now unless the agent set it.
    EXPECT_NEAR(std::stoll(probe[2]), HostNow(), 5) << "the guest's clock is not the host's";
  }
  // All three woke from one memory image (the first ran on from it): only the reseed after
  // the restore tells their random streams apart within the guest's first second.
  for (size_t a = 0; a < probes.size(); ++a) {
    for (size_t b = a + 1; b < probes.size(); ++b) {
      EXPECT_NE(probes[a][0], probes[b][0]) << "runs " << a << " and " << b << " read the same /dev/urandom bytes";
      EXPECT_NE(probes[a][1], probes[b][1]) << "runs " << a << " and " << b << " share a boot_id";
    }
  }
}

TEST(VmSnapshot, a_corrupt_snapshot_still_gives_a_correct_run_with_a_warning_and_is_replaced) {
  constexpr int kMem = 302;
  RemoveSnapshotsFor(kMem);
  auto first = RunVm(kMem, {"/bin/echo", "one"});
  ASSERT_EQ(first.result["status"], "exited") << first.out << first.err;
  auto saved = SnapshotsFor(kMem);
  ASSERT_EQ(saved.size(), 1u);
  fs::path path = saved[0];
  auto size = fs::file_size(path);

  // Its header intact, QEMU's stream garbage: QEMU itself fails to load it.
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4096);
    std::string garbage(1 << 20, 'x');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto broken_stream = RunVm(kMem, {"/bin/echo", "two"});
  ASSERT_EQ(broken_stream.result["status"], "exited") << broken_stream.out << broken_stream.err;
  EXPECT_EQ(broken_stream.result["stdout"], "two\n");
  EXPECT_NE(SnapshotWarnings(broken_stream).find("stale or corrupt"), std::string::npos) << SnapshotWarnings(broken_stream);

  // All garbage, header too.
  ASSERT_EQ(SnapshotsFor(kMem).size(), 1u) << "the failed snapshot was not replaced";
  {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    std::string garbage(size, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  auto garbage = RunVm(kMem, {"/bin/echo", "three"});
  ASSERT_EQ(garbage.result["status"], "exited") << garbage.out << garbage.err;
  EXPECT_EQ(garbage.result["stdout"], "three\n");
  EXPECT_NE(SnapshotWarnings(garbage).find("stale or corrupt"), std::string::npos) << SnapshotWarnings(garbage);

  // The replacement restores.
  ASSERT_EQ(SnapshotsFor(kMem).size(), 1u);
  ino_t inode = InodeOf(path);
  auto restored = RunVm(kMem, {"/bin/echo", "four"});
  ASSERT_EQ(restored.result["status"], "exited") << restored.out << restored.err;
  EXPECT_EQ(restored.result["stdout"], "four\n");
  EXPECT_EQ(SnapshotWarnings(restored), "[]");
  EXPECT_EQ(InodeOf(path), inode) << "the replaced snapshot did not restore";
}

TEST(VmSnapshot, vm_snapshot_false_boots_without_saving_one) {
  constexpr int kMem = 303;
  RemoveSnapshotsFor(kMem);
  TempDir dir;
  std::string spec = dir.Write("spec.json", R"({"vm_snapshot": false})");
  auto run = RunVm(kMem, {"/bin/echo", "hi"}, {"--spec", spec});
  ASSERT_EQ(run.result["status"], "exited") << run.out << run.err;
  EXPECT_EQ(run.result["stdout"], "hi\n");
  EXPECT_TRUE(SnapshotsFor(kMem).empty());
}

}  // namespace
}  // namespace smolbox::testing
