// The server an http profile names ("server", launch/http_profile.h), running for the length of
// one battery run: started before the first case, stopped after the last.
//
//   auto server = ProfileServer::Start(words, "unix:/tmp/w/api.sock", launch);
//   if (!server) ...   // each case then errs, naming why
//   // ~ProfileServer: SIGTERM, which drains and removes its sandboxes; SIGKILL after a grace
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launch/launcher.h"

namespace smolvm_check {

class ProfileServer {
 public:
  // Runs words as launch would (its env, and its network namespace and resolv.conf when set),
  // and returns once endpoint (unix:PATH or http://HOST:PORT) answers a request; the error
  // holds the server's own output when it exits first or never answers.
  static Expected<std::unique_ptr<ProfileServer>> Start(const std::vector<std::string>& words,
                                                        const std::string& endpoint, Launch launch);
  ~ProfileServer();
  ProfileServer(const ProfileServer&) = delete;
  ProfileServer& operator=(const ProfileServer&) = delete;

 private:
  ProfileServer() = default;
  std::string Output();

  pid_t pid_ = -1;
  std::thread drain_;  // reads the server's stdout and stderr, keeping the tail
  std::mutex mutex_;
  std::string output_;
};

}  // namespace smolvm_check
