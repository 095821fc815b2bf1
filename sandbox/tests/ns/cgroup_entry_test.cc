// A new sandbox child enters its run's cgroup, by itself where it can and through the
// runtime's fallback where it did not: each breaks if the child is left outside a hierarchy.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <sstream>

#include "shared/cgroup.h"
#include "test_support.h"

namespace smolbox::testing {
namespace {

using shared::Cgroup;
using shared::CgroupEntry;

// Which of memory, cpu and pids the cgroup holds, on which version: "memory=v1 cpu=v2 ...".
std::vector<std::pair<std::string, std::string>> Held(const Cgroup& cg) {
  std::vector<std::pair<std::string, std::string>> held;
  std::istringstream in(cg.Describe());
  for (std::string item; in >> item;) {
    auto eq = item.find('=');
    if (item.substr(eq + 1) != "none") held.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  return held;
}

// The controllers whose line in /proc/<pid>/cgroup does not end in the run's directory.
std::string Outside(pid_t pid, const Cgroup& cg, const std::string& run_id) {
  std::string listing = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/cgroup");
  std::string suffix = "/smolbox-" + run_id + "\n";
  std::string outside;
  for (const auto& [controller, version] : Held(cg)) {
    std::string tag = version == "v2" ? "\n0::" : ":" + controller;
    std::string line;
    for (std::istringstream lines("\n" + listing); std::getline(lines, line);) {
      bool v1_match = version == "v1" && (line.find(tag + ":") != std::string::npos ||
                                          line.find(tag + ",") != std::string::npos);
      bool v2_match = version == "v2" && line.rfind("0::", 0) == 0;
      if (v1_match || v2_match) break;
      line.clear();
    }
    if (line.empty() || (line + "\n").find(suffix) == std::string::npos) outside += controller + " ";
  }
  return outside;
}

struct Child {
  pid_t pid = -1;
  int ack = -1;  // one byte when the child is done joining
  int go = -1;   // closing it ends the child
};

// A child in a new user and pid namespace, as the sandbox's first process is.
Child Start(CgroupEntry& entry, bool join) {
  int ack[2], go[2];
  if (pipe2(ack, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) return {};
  long pid = entry.Clone(CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, nullptr);
  if (pid == 0) {
    if (join) entry.JoinSelf();
    char byte = 'j';
    if (write(ack[1], &byte, 1) != 1) _exit(1);
    close(go[1]);
    [[maybe_unused]] ssize_t n = read(go[0], &byte, 1);
    _exit(0);
  }
  close(ack[1]);
  close(go[0]);
  return {static_cast<pid_t>(pid), ack[0], go[1]};
}

void Finish(Child& child) {
  close(child.go);
  close(child.ack);
  waitpid(child.pid, nullptr, 0);
}

class CgroupEntryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "creates cgroups as root";
    cg_.emplace(Cgroup::Create(run_id_, {64 << 20, 1, 16}));
    if (Held(*cg_).empty()) GTEST_SKIP() << "no cgroup controller here: " << cg_->Describe();
  }
  std::string run_id_ = "entrytest-" + RandomToken();
  std::optional<Cgroup> cg_;
};

TEST_F(CgroupEntryTest, a_child_in_a_new_user_namespace_enters_every_hierarchy_by_itself) {
  CgroupEntry entry = cg_->OpenEntry();
  Child child = Start(entry, /*join=*/true);
  ASSERT_GT(child.pid, 0);
  char byte = 0;
  ASSERT_EQ(read(child.ack, &byte, 1), 1);
  EXPECT_EQ(Outside(child.pid, *cg_, run_id_), "") << cg_->Describe();
  Finish(child);
}

TEST_F(CgroupEntryTest, a_child_that_did_not_join_is_moved_into_every_hierarchy_by_ensure_holds) {
  CgroupEntry entry = cg_->OpenEntry();
  Child child = Start(entry, /*join=*/false);
  ASSERT_GT(child.pid, 0);
  char byte = 0;
  ASSERT_EQ(read(child.ack, &byte, 1), 1);
  // A v2 child is born inside; a v1 one is still where its parent is.
  bool any_v1 = cg_->Describe().find("v1") != std::string::npos;
  if (any_v1) {
    EXPECT_NE(Outside(child.pid, *cg_, run_id_), "");
  }
  ASSERT_TRUE(cg_->EnsureHolds(child.pid));
  EXPECT_EQ(Outside(child.pid, *cg_, run_id_), "") << cg_->Describe();
  Finish(child);
}

}  // namespace
}  // namespace smolbox::testing
