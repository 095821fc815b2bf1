// Canaries across the host, beyond the case's own directory: a sandbox that hides only /tmp
// must not pass the filesystem category.
//
// For one case it plants
//   - a token file named ".smolvm-check-host-canary-<hex>" in each of the invoking user's home
//     (and /root as root), /var/tmp, /srv, /opt, /run/user/UID and /dev/shm, where it can;
//   - a System V shared memory segment holding a token, under a random key (the IPC namespace);
//   - the host's /etc/machine-id as a token, so that a sandbox showing it leaks it;
// and hands the payloads the hints to look for them, and to try writing a file of a fresh
// name into every writable-looking host directory. After the run, HostWrites() says where such
// a file appeared on the host and removes it, never following a link.
//
//   auto host = HostWideCanaries::Plant();        // removed again by the destructor
//   ... hints(): host_canary_files, host_canary_prefix, write_dirs, write_probe, host_hostname,
//       ipc_key ...
//   auto appeared = host->HostWrites();            // "/root/smolvm-check-write-... appeared"
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

using smolbox::Expected;

// The prefix of every host canary's file name: what a payload walking / looks for.
inline constexpr const char* kHostCanaryPrefix = ".smolvm-check-host-canary-";

class HostWideCanaries {
 public:
  static Expected<std::unique_ptr<HostWideCanaries>> Plant();
  HostWideCanaries(const HostWideCanaries&) = delete;
  HostWideCanaries& operator=(const HostWideCanaries&) = delete;
  ~HostWideCanaries();

  // Canary name ("host_file:/root", "host_ipc", "host_machine_id") -> token.
  const std::map<std::string, std::string>& tokens() const { return tokens_; }
  // {host_canary_files} and {write_dirs} are ':'-joined absolute paths.
  const std::map<std::string, std::string>& hints() const { return hints_; }
  // The write probes found on the host, each removed once reported.
  std::vector<std::string> HostWrites() const;

 private:
  HostWideCanaries() = default;
  Expected<void> PlantFiles();
  Expected<void> PlantSharedMemory();
  void AddMachineId();

  std::map<std::string, std::string> tokens_;
  std::map<std::string, std::string> hints_;
  std::vector<std::pair<std::string, std::string>> planted_;  // directory, file name
  std::vector<std::string> write_dirs_;
  std::string write_probe_;
  int shm_id_ = -1;
};

}  // namespace smolvm_check
