// The agent's sealed copy: what a workload that reached /proc/1/exe would find cannot be
// changed by any route, the memfd's own fd or a fresh open of it.
#include "ns/agent_binary.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "test_support.h"

namespace smolbox::testing {
namespace {

TEST(SealedAgentCopy, holds_the_file_and_refuses_every_write_resize_and_writable_mapping) {
  TempDir dir("sealed-agent");
  const std::string content(300000, 'a');
  auto copy = ns::SealedAgentCopy(dir.Write("agent", content));
  ASSERT_TRUE(copy) << ErrorOf(copy);
  int fd = copy->get();
  EXPECT_EQ(ReadFileOrEmpty("/proc/self/fd/" + std::to_string(fd)), content);
  int seals = fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW);
  EXPECT_NE(seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE), 0) << seals;
  errno = 0;
  EXPECT_EQ(pwrite(fd, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(ftruncate(fd, 1), -1);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  // Unsealing is refused too.
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, 0), -1);
  // Another fd of the same memfd, as a reopen through /proc gives, is bound by the same seals.
  int reopened = open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(reopened, 0);
  EXPECT_EQ(write(reopened, "x", 1), -1);
  close(reopened);
}

TEST(SealedAgentCopy, names_a_file_it_cannot_open) {
  auto copy = ns::SealedAgentCopy("/no/such/agent");
  ASSERT_FALSE(copy);
  EXPECT_EQ(ErrorOf(copy), "open /no/such/agent: No such file or directory");
}

}  // namespace
}  // namespace smolbox::testing
