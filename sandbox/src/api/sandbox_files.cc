#include "sandbox_files.h"

#include <fmt/format.h>

#include "client.h"
#include "exec_stream.h"
#include "unique_fd.h"

namespace smolbox::api {
namespace {

constexpr size_t kMaxPath = 4096;
constexpr int64_t kFileExecTimeoutMs = 120000;

// Exit codes of the scripts below, for the refusals the host tells apart.
constexpr int kIsLink = 3;
constexpr int kNotRegular = 4;
constexpr int kMissing = 5;

// $1 is the path. noclobber: the temporary file is created, never opened if it is already
// there (a planted link among them).
constexpr const char* kWriteScript = R"(set -C
f=$1
d=${f%/*}
[ -z "$d" ] || mkdir -p -- "$d" || exit 1
if [ -L "$f" ]; then echo "is a symbolic link: not followed" >&2; exit 3; fi
if [ -e "$f" ] && [ ! -f "$f" ]; then echo "is not a regular file" >&2; exit 4; fi
t="$f.smolbox-upload-$$"
if ! cat > "$t"; then rm -f -- "$t"; exit 1; fi
mv -f -- "$t" "$f")";

constexpr const char* kReadScript = R"(f=$1
if [ -L "$f" ]; then echo "is a symbolic link: not followed" >&2; exit 3; fi
if [ ! -e "$f" ]; then echo "does not exist" >&2; exit 5; fi
if [ ! -f "$f" ]; then echo "is not a regular file" >&2; exit 4; fi
exec cat -- "$f")";

std::unexpected<FileError> Refuse(int status, const std::string& field, const std::string& reason) {
  return std::unexpected(FileError{status, Error::Field(field, reason)});
}

// What a failed script's result means for the client.
std::unexpected<FileError> Failure(const RunResult& result, const std::string& path) {
  std::string said = result.stderr_data.substr(0, 300);
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (result.status == Status::kSetupError) return Refuse(409, "id", result.error);
  if (result.status == Status::kOutputLimit || result.stdout_truncated) {
    return Refuse(413, "path", path + " is larger than the sandbox's output limit (limits.output_bytes)");
  }
  if (result.status != Status::kExited) {
    return Refuse(500, "path", fmt::format("the file transfer ended as {}: {}", ToString(result.status), result.error));
  }
  if (result.exit_code == kIsLink || result.exit_code == kNotRegular) return Refuse(409, "path", path + " " + said);
  if (result.exit_code == kMissing) return Refuse(404, "path", path + " " + said);
  if (result.exit_code == 126 || result.exit_code == 127) {
    return Refuse(422, "path", "the sandbox's image has no /bin/sh and cat, which file transfers use");
  }
  if (said.find("No space left") != std::string::npos || said.find("Disk quota") != std::string::npos) {
    return Refuse(507, "body", "the sandbox's storage is full (limits.storage_mib)");
  }
  if (said.find("Permission denied") != std::string::npos || said.find("Read-only") != std::string::npos) {
    return Refuse(403, "path", path + ": " + said);
  }
  return Refuse(422, "path", path + ": " + (said.empty() ? "the transfer failed" : said));
}

persist::ExecOrder ScriptOrder(const char* script, const std::string& path) {
  persist::ExecOrder order;
  order.argv = {"/bin/sh", "-c", script, "sh", path};
  order.timeout_ms = kFileExecTimeoutMs;
  return order;
}

}  // namespace

std::expected<std::string, FileError> SandboxPath(const std::string& tail) {
  if (tail.empty()) return Refuse(400, "path", "is empty");
  if (tail.size() > kMaxPath) return Refuse(400, "path", fmt::format("is longer than {} bytes", kMaxPath));
  if (tail.find('\0') != std::string::npos) return Refuse(400, "path", "holds a NUL byte");
  size_t start = 0;
  while (start <= tail.size()) {
    size_t end = tail.find('/', start);
    if (end == std::string::npos) end = tail.size();
    std::string part = tail.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return Refuse(400, "path", fmt::format("{:?} has an empty, '.' or '..' component", tail));
    }
    start = end + 1;
  }
  return "/" + tail;
}

std::expected<size_t, FileError> WriteSandboxFile(const std::string& sandbox, const std::string& path,
                                                  const std::string& bytes, int cancel_fd) {
  auto input = MemoryFile(bytes);
  if (!input) return Refuse(500, "server", input.error().ToString());
  persist::ExecOrder order = ScriptOrder(kWriteScript, path);
  order.sends_stdin = true;
  ExecIo io;
  io.stdin_fd = input->get();
  RunResult result = persist::ExecInSandbox(sandbox, order, io, cancel_fd);
  if (result.status != Status::kExited || result.exit_code != 0) return Failure(result, path);
  return bytes.size();
}

std::expected<std::string, FileError> ReadSandboxFile(const std::string& sandbox, const std::string& path,
                                                      int cancel_fd) {
  RunResult result = persist::ExecInSandbox(sandbox, ScriptOrder(kReadScript, path), {}, cancel_fd);
  if (result.status != Status::kExited || result.exit_code != 0 || result.stdout_truncated) {
    return Failure(result, path);
  }
  return std::move(result.stdout_data);
}

}  // namespace smolbox::api
