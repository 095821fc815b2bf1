// A test host for the network canaries: a network namespace joined to the host by a veth pair,
// so that a payload which reaches it has reached past the host's loopback. Needs root.
//
//   auto host = TestHost::Create();              // ip netns add, a veth pair, addresses
//   SMOLBOX_TRY(host);
//   auto listener = (*host)->ListenTcp();        // a socket bound inside the namespace
//   ... the host reaches (*host)->ip():port over the veth ...
//   // close the listener first, then the destructor deletes the veth pair and the namespace
//
// Each test host holds a slot (10.213.a.b/30 and the names smolvm-check-<slot>, smvc<slot>h/t)
// under a lock file, so concurrent cases and processes never share addresses. A namespace whose
// slot nobody holds was left by a crashed run, and the next Create() removes it.
#pragma once

#include <memory>
#include <string>

#include "battery/catalog.h"
#include "unique_fd.h"

namespace smolvm_check {

class TestHost {
 public:
  static Expected<std::unique_ptr<TestHost>> Create();
  ~TestHost();
  TestHost(const TestHost&) = delete;
  TestHost& operator=(const TestHost&) = delete;

  const std::string& ip() const { return ip_; }            // inside the namespace
  const std::string& host_ip() const { return host_ip_; }  // the host end of the veth
  const std::string& netns() const { return netns_; }      // a name under /run/netns
  const std::string& host_veth() const { return host_veth_; }

  // A TCP socket listening on ip():0 inside the namespace, non-blocking and close-on-exec. It
  // holds a reference to the namespace: close it before the TestHost goes.
  Expected<smolbox::UniqueFd> ListenTcp() const;

 private:
  TestHost() = default;
  static std::unique_ptr<TestHost> Take(int slot, smolbox::UniqueFd lock);
  static void SweepStale();
  Expected<void> Build();
  void Teardown();

  int slot_ = -1;
  smolbox::UniqueFd lock_;
  std::string lock_path_;
  std::string ip_, host_ip_, netns_, host_veth_, peer_veth_;
  bool netns_added_ = false;
};

}  // namespace smolvm_check
