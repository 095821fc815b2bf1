#include "agent_binary.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace smolbox::ns {

Expected<std::string> FindAgent() {
  if (const char* path = getenv("SMOLBOX_AGENT"); path && *path) return std::string(path);
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) return std::unexpected(Error::Sys("readlink /proc/self/exe"));
  std::string dir(self, static_cast<size_t>(n));
  dir.resize(dir.rfind('/'));
  for (const std::string& candidate : {dir + "/smolbox-agent", dir + "/../libexec/smolbox/smolbox-agent"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::unexpected(Error{"smolbox-agent", "not found next to " + std::string(self, n) +
                                                    " (set SMOLBOX_AGENT to its path)", ENOENT});
}

Expected<UniqueFd> SealedAgentCopy(const std::string& path) {
  UniqueFd file(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.valid()) return std::unexpected(Error::Sys("open " + path));
  struct stat st{};
  if (fstat(file.get(), &st) != 0) return std::unexpected(Error::Sys("fstat " + path));
  UniqueFd memfd(memfd_create("smolbox-agent", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd.valid()) return std::unexpected(Error::Sys("memfd_create"));
  for (off_t done = 0; done < st.st_size;) {
    ssize_t n = sendfile(memfd.get(), file.get(), &done, static_cast<size_t>(st.st_size - done));
    if (n <= 0) return std::unexpected(Error::Sys("copy " + path));
  }
  // F_SEAL_WRITE fails with EBUSY while any of the memfd's pages holds an extra reference,
  // which the kernel can leave for a moment after the copy. F_SEAL_FUTURE_WRITE refuses every
  // later write() and writable mapping just the same, and this memfd has no mapping at all,
  // so it is an equal seal here; it is the fallback when the full one stays busy.
  constexpr int kFixed = F_SEAL_SHRINK | F_SEAL_GROW;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (fcntl(memfd.get(), F_ADD_SEALS, kFixed | F_SEAL_WRITE | F_SEAL_SEAL) == 0) return memfd;
    if (errno != EBUSY) return std::unexpected(Error::Sys("seal agent memfd"));
    usleep(2000);
  }
  if (fcntl(memfd.get(), F_ADD_SEALS, kFixed | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
    return std::unexpected(Error::Sys("seal agent memfd"));
  return memfd;
}

}  // namespace smolbox::ns
