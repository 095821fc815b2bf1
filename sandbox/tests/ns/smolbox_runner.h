// Runs the real smolbox binary, as a user would, and parses its --json result.
#pragma once

#include <sys/types.h>

#include <string>
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
Invocation RunSmolbox(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                      uid_t as_uid = 0);
// `smolbox run --json OPTIONS -- COMMAND`, the common case.
Invocation RunJson(const std::vector<std::string>& options, const std::vector<std::string>& command);

// Processes on the host whose command line contains `marker`.
int CountProcessesWith(const std::string& marker);
// A fresh directory under /tmp, removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

std::string RandomToken();
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace smolbox::testing
