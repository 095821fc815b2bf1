// Errors are values: every fallible step returns std::expected<T, Error>.
//
//   std::expected<int, smolbox::Error> OpenDir(const std::string& p) {
//     int fd = open(p.c_str(), O_DIRECTORY | O_CLOEXEC);
//     if (fd < 0) return std::unexpected(smolbox::Error::Sys("open " + p));
//     return fd;
//   }
#pragma once

#include <cerrno>
#include <expected>
#include <string>

namespace smolbox {

struct Error {
  // The step or spec field at fault, e.g. "mount /proc" or "limits.memory_mib".
  std::string where;
  // Why it failed, in words a user can act on.
  std::string what;
  // errno of the failing syscall, 0 when none.
  int errnum = 0;

  // A spec field that fails validation.
  static Error Field(std::string field, std::string reason) {
    return Error{std::move(field), std::move(reason), 0};
  }
  // A failing syscall: captures errno at the call site.
  static Error Sys(std::string step, int err = errno) {
    return Error{std::move(step), "", err};
  }
  // One line: "where: what (strerror)".
  std::string ToString() const;
};

template <typename T>
using Expected = std::expected<T, Error>;

}  // namespace smolbox
