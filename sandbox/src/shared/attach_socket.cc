#include "attach_socket.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>

namespace smolbox::shared {
namespace {

// Pending connections beyond this wait in connect(): a container's execs are few.
constexpr int kBacklog = 16;

// A socket's address holds 107 bytes of path, and an engine's state directory with a 64-digit
// container id comes close to that: the socket is named through its directory's descriptor,
// which stays open (in `directory`) until bind or connect has used the name.
Expected<sockaddr_un> AddressOf(const std::string& path, UniqueFd& directory) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) {
    return std::unexpected(Error::Field("attach_socket", "must be an absolute path to a file"));
  }
  std::string parent = slash == 0 ? "/" : path.substr(0, slash);
  directory.Reset(open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!directory.valid()) return std::unexpected(Error::Sys("open " + parent));
  std::string name = fmt::format("/proc/self/fd/{}/{}", directory.get(), path.substr(slash + 1));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (name.size() >= sizeof address.sun_path) {
    return std::unexpected(Error::Field("attach_socket", "its file name is too long"));
  }
  std::memcpy(address.sun_path, name.data(), name.size());
  return address;
}

}  // namespace

Expected<UniqueFd> ListenAttachSocket(const std::string& path) {
  UniqueFd directory;
  SMOLBOX_ASSIGN_OR_RETURN(sockaddr_un address, AddressOf(path, directory));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket"));
  // Made 0600 from the start: no moment in which another user could connect.
  mode_t old_mask = umask(0177);
  int bound = bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
  int bind_errno = errno;
  umask(old_mask);
  if (bound != 0) return std::unexpected(Error::Sys("bind the attach socket " + path, bind_errno));
  if (listen(fd.get(), kBacklog) != 0) return std::unexpected(Error::Sys("listen on " + path));
  return fd;
}

Expected<UniqueFd> ConnectAttachSocket(const std::string& path) {
  UniqueFd directory;
  SMOLBOX_ASSIGN_OR_RETURN(sockaddr_un address, AddressOf(path, directory));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return std::unexpected(Error::Sys("socket"));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return std::unexpected(Error::Sys("connect to the attach socket " + path));
  }
  return fd;
}

}  // namespace smolbox::shared
