// Runs the real smolbox binary, as a user would, and parses its --json result: for the ns, vm
// and persist suites. Its stdio are pipes, as a user's shell gives them, read while it runs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace smolbox::testing {

struct Invocation {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json result;  // parsed stdout when --json was given and it parsed
  long max_rss_kib = 0;   // of the smolbox process itself
  double seconds = 0;
};

std::string SmolboxPath();
std::string HelperPath(const std::string& name);

// Runs `smolbox ARGS...`, optionally under another uid (rootless tests) and with extra env.
// Given a prefix, the child runs `PREFIX... smolbox ARGS...`, e.g. with {"/usr/sbin/ip", "netns",
// "exec", NS}: prefix[0] is a full path (there is no PATH lookup), and it must exec smolbox, not
// fork it, for exit_code and max_rss_kib to be smolbox's. Not with as_uid: the uid is dropped
// before the prefix runs.
Invocation RunSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      uid_t as_uid = 0, const std::vector<std::string>& prefix = {});
// `smolbox run --json OPTIONS -- COMMAND`, the common case.
Invocation RunJson(const std::vector<std::string>& options, const std::vector<std::string>& command);

// smolbox with pipes on all three of its stdio, written and read while it runs: for the tests
// of streaming. The destructor kills it if it still runs.
//
//   LiveSmolbox box({"run", "-i", "--", "/bin/sh", "-c", "echo a; read x"});
//   EXPECT_EQ(box.ReadStdoutUntil("a\n", std::chrono::seconds(30)), "a\n");
class LiveSmolbox {
 public:
  // env: more variables for it (K=V), and prefix: a command that execs it, as RunSmolbox takes them.
  explicit LiveSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                       const std::vector<std::string>& prefix = {});
  ~LiveSmolbox();
  LiveSmolbox(const LiveSmolbox&) = delete;
  LiveSmolbox& operator=(const LiveSmolbox&) = delete;

  pid_t pid() const { return pid_; }
  // All of data, or false once timeout passes first.
  bool WriteStdin(std::string_view data, std::chrono::seconds timeout);
  // size zero bytes, in chunks, the same way.
  bool WriteZeros(int64_t size, std::chrono::seconds timeout);
  void CloseStdin();
  // Reads stdout until what was read holds needle at or after from, or timeout passes; returns
  // all read so far.
  std::string ReadStdoutUntil(std::string_view needle, std::chrono::seconds timeout, size_t from = 0);
  // Our end of its stdout goes: a reader that went away.
  void CloseStdout();
  // Its exit code (128+N for a signal), or nothing if it still runs at timeout. Drains stderr.
  std::optional<int> Wait(std::chrono::seconds timeout);
  const std::string& err() const { return err_; }
  // Its own peak resident set so far (VmHWM), in KiB; 0 when it has gone.
  long PeakRssKib() const;

 private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int stderr_ = -1;
  std::string out_;
  std::string err_;
  bool out_eof_ = false;
  bool err_eof_ = false;
  std::optional<int> exit_code_;
};

// Processes on the host whose command line contains `marker`.
int CountProcessesWith(const std::string& marker);

// Shell scripts run in a private mount namespace of the test's own (unshare --mount), so that
// what they mount over the host's paths (a tmpfs over /run, read-only cgroups) is seen by the
// smolbox they start and by nothing else. Each gets $SMOLBOX, $DIR (a scratch dir the test reads
// back) and $NAME (a fresh token, for sandbox names and workloads). Root only.
//
//   PrivateMountScript s;
//   s.Run(R"sh(mount -t tmpfs tmpfs /run && "$SMOLBOX" run --json -- /bin/true > "$DIR/out")sh");
//   EXPECT_EQ(s.Json("out").value("status", ""), "exited");
class PrivateMountScript {
 public:
  PrivateMountScript();
  ~PrivateMountScript();
  PrivateMountScript(const PrivateMountScript&) = delete;
  PrivateMountScript& operator=(const PrivateMountScript&) = delete;

  // Runs script with /bin/sh -c; its exit code and output.
  struct Ran {
    int exit_code = -1;
    std::string out, err;
  };
  Ran Run(const std::string& script) const;
  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }
  // $DIR/file as text, and parsed as JSON (discarded when it does not parse).
  std::string Text(const std::string& file) const;
  nlohmann::json Json(const std::string& file) const;

 private:
  std::string dir_;
  std::string name_;
};

}  // namespace smolbox::testing
