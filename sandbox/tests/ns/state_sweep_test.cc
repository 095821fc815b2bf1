// The sweep of stale run dirs against runtimes starting at the same moment: a run dir that is
// being created must never be taken for a dead runtime's.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "shared/state.h"

namespace smolbox::shared {
namespace {

TEST(StateSweep, never_removes_a_run_dir_while_its_runtime_creates_it) {
  std::atomic<bool> done{false};
  std::thread sweeper([&] {
    while (!done) SweepStaleRuns();
  });
  int lost = 0;
  std::string first_error;
  for (int i = 0; i < 1500; ++i) {
    auto dir = RunDir::Create();
    struct stat st{};
    if (!dir) {
      if (first_error.empty()) first_error = dir.error().ToString();
      ++lost;
    } else if (lstat(dir->RootMountpoint().c_str(), &st) != 0) {
      if (first_error.empty()) first_error = dir->path() + " was swept while its runtime held it";
      ++lost;
    }
  }
  done = true;
  sweeper.join();
  EXPECT_EQ(lost, 0) << first_error;
}

// The owner file is written aside and renamed, but a sweep may still meet an empty or partial
// one (a runtime killed mid-write, an older runtime): young, it is a runtime starting; old, it
// is litter.
TEST(StateSweep, keeps_a_young_run_dir_with_a_partial_owner_and_removes_an_old_one) {
  auto root = StateRoot();
  ASSERT_TRUE(root) << root.error().ToString();
  std::string path = *root + "/runs/sweep-test-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(path.c_str(), 0711), 0);
  int fd = open((path + "/owner").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "12", 2), 2);  // a pid with no start time yet
  close(fd);
  struct stat st{};

  SweepStaleRuns();
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << "a run dir being created was swept";

  struct timeval old_times[2] = {{time(nullptr) - 120, 0}, {time(nullptr) - 120, 0}};
  ASSERT_EQ(utimes(path.c_str(), old_times), 0);
  SweepStaleRuns();
  EXPECT_NE(lstat(path.c_str(), &st), 0) << "an abandoned run dir was kept";
  unlink((path + "/owner").c_str());
  rmdir(path.c_str());
}

// A run dir still being made carries its runtime in its name: a dead one's goes at once, a live
// one's stays.
TEST(StateSweep, a_half_made_run_dir_goes_at_once_when_its_runtime_is_dead_and_stays_while_it_lives) {
  auto root = StateRoot();
  ASSERT_TRUE(root) << root.error().ToString();
  auto self_start = ProcessStartTime(getpid());
  ASSERT_TRUE(self_start);
  std::string live = fmt::format("{}/runs/.new-{}-{}-sweeptest", *root, getpid(), *self_start);
  std::string dead = fmt::format("{}/runs/.new-{}-{}-sweeptest", *root, getpid(), *self_start + 1);
  ASSERT_EQ(mkdir(live.c_str(), 0711), 0);
  ASSERT_EQ(mkdir(dead.c_str(), 0711), 0);
  ASSERT_EQ(mkdir((dead + "/root").c_str(), 0755), 0);
  SweepStaleRuns();
  struct stat st{};
  EXPECT_EQ(lstat(live.c_str(), &st), 0) << "a live runtime's half-made run dir was swept";
  EXPECT_NE(lstat(dead.c_str(), &st), 0) << "a dead runtime's half-made run dir was kept";
  rmdir((dead + "/root").c_str());
  rmdir(dead.c_str());
  rmdir(live.c_str());
}

}  // namespace
}  // namespace smolbox::shared
