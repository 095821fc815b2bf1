// What the test suites of smolbox and smolvm-check share: files, scratch directories, tokens,
// programs run to completion, processes, and the texts tests compare.
//
//   TempDir dir("catalog-test");
//   std::string path = dir.Write("python/hello.py", "print('hello')\n");
//   ProgramRun run = RunProgram({"/usr/bin/python3", path});
//   EXPECT_EQ(run.exit_code, 0) << run.err;
//   EXPECT_EQ(run.out, "hello\n");
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "smolbox/error.h"

namespace smolbox::testing {

// ---------------------------------------------------------------------------
// Files

// Where smolbox keeps its state for whoever runs the tests, by the runtime's documented rule:
// /run/smolbox for root; for another user $XDG_RUNTIME_DIR/smolbox, or /tmp/smolbox-UID.
std::string StateRootOfThisUser();

// The whole file, byte for byte; "" when it cannot be read (a test then compares "" and fails).
std::string ReadFileOrEmpty(const std::string& path);
// Writes content to path, creating its parent directories first.
void WriteFile(const std::string& path, std::string_view content);
// What fd gives from its offset to EOF.
std::string ReadAll(int fd);

// A fresh directory /tmp/PREFIX-XXXXXX (mkdtemp: unique, so `ctest -j` runs cannot collide),
// removed with its contents by the destructor. It is world-readable (0755): a sandbox's other
// uid and the rootless tests' unprivileged user must reach what is in it. Always under /tmp, not
// $TMPDIR, for the same reason. Throws std::system_error when it cannot be made.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "smolbox-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes path()/name (its parent directories too) and returns its full path.
  std::string Write(const std::string& name, std::string_view content) const;

 private:
  std::string path_;
};

// A token no other run will have: for canaries and unique names ("canary-" and hex digits).
std::string RandomToken();

// ---------------------------------------------------------------------------
// Programs run to completion

struct ProgramRun {
  int wait_status = -1;  // as waitpid gives it, for WIFSIGNALED and friends
  int exit_code = -1;    // 128+N when killed by signal N; -1 when it could not be forked
  std::string out;
  std::string err;
};

struct ProgramOptions {
  // "K=V", over the test's own environment (as `env K=V program` does); "K=" sets K empty.
  std::vector<std::string> extra_env;
  // Runs in the forked child just before execvp, after its stdio is set up: a step such as
  // loading a seccomp policy. It must not allocate, and may _exit to report a failed step.
  std::function<void()> in_child;
};

// Runs argv (argv[0] looked up on PATH) with stdin from /dev/null and stdout and stderr captured
// in memory files, and waits for it. It returns when the program exits, even if something it
// started still holds its stdout; it never blocks on a full pipe. A program that cannot be
// executed exits 127.
ProgramRun RunProgram(const std::vector<std::string>& argv, const ProgramOptions& options = {});

// The shell's convention: the exit status, or 128+N for signal N.
int ExitCodeOf(int wait_status);

// Whether an executable `name` is in a directory on PATH.
bool OnPath(const std::string& name);

// ---------------------------------------------------------------------------
// Processes

// The pid exists, zombie or not (kill(pid, 0)); never true for pid 0 or 1.
bool ProcessAlive(pid_t pid);
// Any process is in process group pgid, zombies included.
bool GroupAlive(pid_t pgid);
// The pid exists and is neither a zombie nor dead: it is still running code.
bool Running(pid_t pid);
// How many file descriptors this process has open.
size_t OpenFdCount();
// Polls condition every 100 ms until it holds (true) or limit passes (false).
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds limit);

// ---------------------------------------------------------------------------
// Host counters, for the checks that a run leaves nothing behind

// Entries of dir (0 when it cannot be read), and lines of a file.
size_t CountEntries(const std::string& dir);
size_t CountLines(const std::string& path);
// Loop devices bound to a file, host-wide.
size_t CountBoundLoopDevices();
// smolbox's cgroups ("smolbox-..."), in every hierarchy, v1 and v2.
size_t CountSmolboxCgroups();

// ---------------------------------------------------------------------------
// Texts to compare

// The error's text, or "<no error>": one EXPECT_EQ shows both what was refused and why.
template <typename T>
std::string ErrorOf(const Expected<T>& result) {
  return result ? std::string("<no error>") : result.error().ToString();
}

// One frame of the agent channel's and the control socket's wire format, as any peer may send
// it: u32 length of the rest, u32 length of the header, the header text, then any tail.
std::string RawFrame(std::string_view header, std::string_view tail = "");
// Appends value as that format's little-endian u32: for a frame broken on purpose.
void PutU32(std::string& out, uint32_t value);

}  // namespace smolbox::testing
