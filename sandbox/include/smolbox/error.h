// Errors are values: every fallible step returns std::expected<T, Error>.
//
//   std::expected<int, smolbox::Error> OpenDir(const std::string& p) {
//     int fd = open(p.c_str(), O_DIRECTORY | O_CLOEXEC);
//     if (fd < 0) return std::unexpected(smolbox::Error::Sys("open " + p));
//     return fd;
//   }
//
// Two helpers pass an error up, so that no call site spells the unwrapping by hand:
//
//   SMOLBOX_TRY(MountProc());                            // returns its error, if any
//   SMOLBOX_ASSIGN_OR_RETURN(auto fd, OpenDir(path));    // fd is the int, or the error returns
#pragma once

#include <cerrno>
#include <expected>
#include <string>
#include <utility>

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

// Evaluates expr, an Expected (or an lvalue one, which is not copied), and returns its error
// from the enclosing function, which returns some Expected.
#define SMOLBOX_TRY(expr)                                                       \
  do {                                                                          \
    if (auto&& smolbox_try_result = (expr); !smolbox_try_result) {              \
      return std::unexpected(std::move(smolbox_try_result).error());            \
    }                                                                           \
  } while (0)

// Declares (or assigns) lhs from the value of expr, an Expected, or returns its error.
#define SMOLBOX_ASSIGN_OR_RETURN(lhs, expr) \
  SMOLBOX_ASSIGN_OR_RETURN_IMPL(SMOLBOX_ERROR_CONCAT(smolbox_assign_result_, __LINE__), lhs, expr)
#define SMOLBOX_ERROR_CONCAT_INNER(a, b) a##b
#define SMOLBOX_ERROR_CONCAT(a, b) SMOLBOX_ERROR_CONCAT_INNER(a, b)
#define SMOLBOX_ASSIGN_OR_RETURN_IMPL(result, lhs, expr)   \
  auto result = (expr);                                     \
  if (!result) return std::unexpected(std::move(result).error()); \
  lhs = std::move(*result)
