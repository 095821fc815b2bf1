#include "bounded_read.h"

#include <unistd.h>

#include <fmt/format.h>

namespace smolbox {

Expected<std::string> ReadBounded(int fd, size_t max_bytes, const std::string& what) {
  std::string text;
  char buffer[1 << 16];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof buffer)) > 0) {
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes) return std::unexpected(Error{what, fmt::format("is larger than {} bytes", max_bytes), 0});
  }
  if (n < 0) return std::unexpected(Error::Sys("read " + what));
  return text;
}

}  // namespace smolbox
