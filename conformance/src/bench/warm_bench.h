// The warm rows of `smolvm-check bench`: a persistent sandbox created once per row, then one
// `smolbox exec` per sample, against the bare interpreter run directly as the floor.
//
// Only sandboxes with a warm path have warm rows: null (the bare interpreter, which has no
// start-up to save) and smolbox (create / exec / rm). A peer such as bwrap or runsc starts cold
// every time and gets no warm row.
//
//   auto warm = WarmSandbox::Prepare(profile, payload_dir);   // smolbox create
//   auto ms = warm->Sample(profile, hello_case);               // smolbox exec ... hello
//   // ~WarmSandbox: smolbox rm --force
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "battery/catalog.h"
#include "launch/profile.h"
#include "smolbox/error.h"

namespace smolvm_check {

bool HasWarmPath(const Profile& profile);

class WarmSandbox {
 public:
  // For smolbox, creates a persistent sandbox with the payloads mounted read-only at /payload.
  static Expected<std::unique_ptr<WarmSandbox>> Prepare(const Profile& profile, const std::string& payload_dir);
  ~WarmSandbox();
  WarmSandbox(const WarmSandbox&) = delete;
  WarmSandbox& operator=(const WarmSandbox&) = delete;

  // One timed run of c (a hello: payload and plain args): its wall time in ms, or why it does
  // not count (an exit other than 0, or output without the case's expected text).
  Expected<int64_t> Sample(const Profile& profile, const Case& c) const;

 private:
  WarmSandbox() = default;
  std::string smolbox_;  // empty for the bare interpreter
  std::string name_;
  std::string payload_dir_;
};

}  // namespace smolvm_check
