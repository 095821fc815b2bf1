// The vm backend's form of a store image: the guest mounts one erofs disk as the image.
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <random>

#include "digest.h"
#include "smolbox/image_store.h"

extern char** environ;

namespace smolbox::image {
namespace {

// all_root: the guest sees the tree as root's, whoever imported it; its modes still hold.
Expected<void> RunMkfsErofs(const std::string& out, const std::string& tree, bool all_root) {
  std::vector<std::string> args = {"mkfs.erofs", "--quiet", out, tree};
  if (all_root) args.insert(args.begin() + 2, "--all-root");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = posix_spawnp(&pid, "mkfs.erofs", nullptr, nullptr, argv.data(), environ); rc != 0) {
    return std::unexpected(Error{"image", "cannot run mkfs.erofs (install erofs-utils)", rc});
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return std::unexpected(Error{"image", fmt::format("mkfs.erofs {} failed (status {:#x})", tree, status), 0});
  }
  return {};
}

}  // namespace

Expected<std::optional<std::string>> ErofsOfStoreImage(const std::string& rootfs) {
  SMOLBOX_ASSIGN_OR_RETURN(auto store, ImageStore::Open());
  std::string images = store.root() + "/images/";
  if (!rootfs.starts_with(images) || !rootfs.ends_with("/rootfs")) return std::nullopt;
  std::string dir = rootfs.substr(0, rootfs.size() - 7);
  std::string hex = dir.substr(images.size());
  if (!IsSha256Digest("sha256:" + hex)) return std::nullopt;
  std::string disk = dir + "/rootfs.erofs";
  struct stat st {};
  if (lstat(disk.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return disk;
  // Made aside and renamed: two runs at once each make one, and either is whole.
  std::random_device rd;
  std::string temp = fmt::format("{}/.rootfs.erofs.{:08x}", dir, rd());
  auto made = RunMkfsErofs(temp, rootfs, true);
  // QEMU opens it as its own unprivileged uid.
  if (!made || chmod(temp.c_str(), 0644) != 0 || rename(temp.c_str(), disk.c_str()) != 0) {
    unlink(temp.c_str());
    if (!made) return std::unexpected(made.error());
    return std::unexpected(Error::Sys("install " + disk));
  }
  return disk;
}

Expected<void> MakeErofsDisk(const std::string& out, const std::string& tree) {
  SMOLBOX_TRY(RunMkfsErofs(out, tree, false));
  if (chmod(out.c_str(), 0644) != 0) return std::unexpected(Error::Sys("chmod " + out));
  return {};
}

}  // namespace smolbox::image
