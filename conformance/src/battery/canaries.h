// Fresh random tokens, planted where a sandbox must not reach, for one case.
//
// Each canary is reachable by a hint that the payload gets in its args ({canary_file},
// {tcp_port}, ...): hints are not secret, the tokens are. A token appearing anywhere the payload
// can write (stdout, stderr, outputs) means that the sandbox let the payload reach it.
//
//   auto canaries = CanarySet::Plant(options);          // servers start, files are written
//   ... run the case with canaries->hints(), canaries->env(), canaries->inherited_fds() ...
//   auto leaked = canaries->Leaked(all_text_the_payload_wrote);   // names of tokens found
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "battery/catalog.h"

namespace smolvm_check {

struct CanaryOptions {
  std::string work_dir;           // a directory of the case's own, outside every mount
  bool with_test_host = false;    // needs root: a network namespace with a TCP server
  // Canary name -> a token the case put on the host itself (a mount's directory name, see
  // CaseDir); Leaked() looks for these too.
  std::map<std::string, std::string> placed_tokens = {};
};

// A fresh random token, "SMOLVM-CANARY-" and 32 hex digits.
Expected<std::string> NewCanaryToken();
// BYTES random bytes (at most 32) as lowercase hex: fresh names for what a case plants.
Expected<std::string> RandomHex(size_t bytes);

class CanarySet {
 public:
  static Expected<std::unique_ptr<CanarySet>> Plant(const CanaryOptions& options);
  virtual ~CanarySet() = default;

  // {canary_file}, {canary_dir}, {tcp_port}, {testhost_ip}, {testhost_port}, {abstract_socket},
  // {unix_socket}, {canary_fd}, {tty_fd}, {host_pid}, and the host-wide ones of
  // host_canaries.h: {host_canary_files}, {host_canary_prefix}, {write_dirs}, {write_probe},
  // {host_hostname}, {ipc_key}
  virtual const std::map<std::string, std::string>& hints() const = 0;
  // SMOLVM_CHECK_CANARY=<token>, added to the sandbox launcher's environment.
  virtual std::vector<std::string> env() const = 0;
  // Descriptors the launcher keeps open across exec (canary file, pty slave).
  virtual std::vector<int> inherited_fds() const = 0;
  // Names of the canaries whose token appears in text.
  virtual std::vector<std::string> Leaked(const std::string& text) const = 0;
  // Evidence collected by host-side detectors during the run: "SIGURG from pid N",
  // "TIOCSTI injected 'x'", "connection to the loopback server"...
  virtual std::vector<std::string> Detections() const = 0;
  // The write probes that appeared in the host's directories ({write_dirs}), removed once seen.
  virtual std::vector<std::string> HostWrites() const = 0;
};

}  // namespace smolvm_check
