// HostWideCanaries: tokens planted across the host's directories and its IPC namespace, and the
// write probes found where a sandbox let a workload reach the host.
#include "battery/host_canaries.h"

#include <gtest/gtest.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"

namespace smolvm_check {
namespace {

namespace fs = std::filesystem;

using smolbox::testing::ReadFileOrEmpty;

std::vector<std::string> Split(const std::string& joined) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= joined.size()) {
    size_t end = joined.find(':', start);
    if (end == std::string::npos) end = joined.size();
    if (end > start) parts.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::unique_ptr<HostWideCanaries> PlantOrDie() {
  auto canaries = HostWideCanaries::Plant();
  EXPECT_TRUE(canaries.has_value()) << (canaries ? "" : canaries.error().ToString());
  return canaries ? std::move(*canaries) : nullptr;
}

TEST(HostWideCanaries, plants_a_readable_token_file_in_each_host_directory_and_removes_it) {
  auto canaries = PlantOrDie();
  ASSERT_TRUE(canaries);
  auto files = Split(canaries->hints().at("host_canary_files"));
  // /var/tmp and /dev/shm exist on every host this runs on; /root too when run as root.
  std::vector<std::string> must = {"/var/tmp", "/dev/shm"};
  if (geteuid() == 0) must.push_back("/root");
  for (const auto& dir : must) {
    ASSERT_TRUE(canaries->tokens().contains("host_file:" + dir)) << dir;
  }
  ASSERT_GE(files.size(), must.size());
  for (const auto& file : files) {
    std::string dir = fs::path(file).parent_path().string();
    EXPECT_TRUE(fs::path(file).filename().string().starts_with(kHostCanaryPrefix)) << file;
    struct stat st{};
    ASSERT_EQ(lstat(file.c_str(), &st), 0) << file;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << file;
    EXPECT_EQ(st.st_mode & 07777, 0644u) << file;
    EXPECT_EQ(ReadFileOrEmpty(file), canaries->tokens().at("host_file:" + dir) + "\n") << file;
  }
  canaries.reset();
  for (const auto& file : files) EXPECT_FALSE(fs::exists(fs::symlink_status(file))) << file;
}

TEST(HostWideCanaries, the_shared_memory_segment_holds_its_token_until_destruction) {
  auto canaries = PlantOrDie();
  ASSERT_TRUE(canaries);
  key_t key = static_cast<key_t>(std::stol(canaries->hints().at("ipc_key")));
  int id = shmget(key, 0, 0);
  ASSERT_GE(id, 0);
  void* at = shmat(id, nullptr, SHM_RDONLY);
  ASSERT_NE(at, reinterpret_cast<void*>(-1));
  std::string token = canaries->tokens().at("host_ipc");
  EXPECT_EQ(std::string(static_cast<const char*>(at), token.size()), token);
  shmdt(at);
  canaries.reset();
  EXPECT_EQ(shmget(key, 0, 0), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST(HostWideCanaries, tokens_and_probe_names_are_fresh_for_every_plant) {
  auto first = PlantOrDie();
  auto second = PlantOrDie();
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->hints().at("write_probe"), second->hints().at("write_probe"));
  EXPECT_NE(first->hints().at("ipc_key"), second->hints().at("ipc_key"));
  EXPECT_NE(first->tokens().at("host_file:/var/tmp"), second->tokens().at("host_file:/var/tmp"));
  EXPECT_TRUE(first->hints().at("write_probe").starts_with("smolvm-check-write-"));
}

TEST(HostWideCanaries, the_host_identity_is_a_hint_and_the_machine_id_a_token) {
  auto canaries = PlantOrDie();
  ASSERT_TRUE(canaries);
  char hostname[256] = {};
  ASSERT_EQ(gethostname(hostname, sizeof hostname - 1), 0);
  EXPECT_EQ(canaries->hints().at("host_hostname"), hostname);
  std::string machine_id = ReadFileOrEmpty("/etc/machine-id");
  if (machine_id.size() < 32) GTEST_SKIP() << "this host has no machine-id";
  EXPECT_EQ(canaries->tokens().at("host_machine_id"), machine_id.substr(0, 32));
}

TEST(HostWideCanaries, a_probe_in_any_write_dir_is_reported_once_and_removed_without_following_links) {
  auto canaries = PlantOrDie();
  ASSERT_TRUE(canaries);
  auto dirs = Split(canaries->hints().at("write_dirs"));
  for (const char* dir : {"/", "/etc", "/root", "/var/tmp", "/dev/shm", "/tmp"}) {
    EXPECT_NE(std::find(dirs.begin(), dirs.end(), dir), dirs.end()) << dir;
  }
  EXPECT_TRUE(canaries->HostWrites().empty());

  std::string probe = canaries->hints().at("write_probe");
  std::string file = "/var/tmp/" + probe;
  std::string link = "/dev/shm/" + probe;
  std::string dir = "/tmp/" + probe;
  { std::FILE* f = std::fopen(file.c_str(), "w"); ASSERT_TRUE(f); std::fclose(f); }
  // A link to a file the host needs: removing the probe must not remove what it points at.
  ASSERT_EQ(symlink("/etc/hostname", link.c_str()), 0);
  ASSERT_TRUE(fs::create_directory(dir));

  auto appeared = canaries->HostWrites();
  std::sort(appeared.begin(), appeared.end());
  EXPECT_EQ(appeared, (std::vector<std::string>{"host " + link + " appeared", "host " + dir + " appeared",
                                                "host " + file + " appeared"}));
  for (const auto& path : {file, link, dir}) EXPECT_FALSE(fs::exists(fs::symlink_status(path))) << path;
  EXPECT_TRUE(fs::exists("/etc/hostname"));
  EXPECT_TRUE(canaries->HostWrites().empty());
}

TEST(HostWideCanaries, a_probe_directory_with_content_is_reported_and_left_for_a_human) {
  auto canaries = PlantOrDie();
  ASSERT_TRUE(canaries);
  std::string dir = "/var/tmp/" + canaries->hints().at("write_probe");
  ASSERT_TRUE(fs::create_directory(dir));
  { std::FILE* f = std::fopen((dir + "/inside").c_str(), "w"); ASSERT_TRUE(f); std::fclose(f); }
  auto appeared = canaries->HostWrites();
  ASSERT_EQ(appeared.size(), 1u);
  EXPECT_TRUE(appeared[0].starts_with("host " + dir + " appeared (and could not be removed:")) << appeared[0];
  fs::remove_all(dir);
}

}  // namespace
}  // namespace smolvm_check
