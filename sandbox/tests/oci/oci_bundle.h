// An OCI bundle for the runtime's tests: a busybox rootfs and a config.json as `runc spec`
// writes it, which each test changes where it needs to.
//
//   OciBundle bundle;
//   bundle.config["process"]["args"] = {"/bin/sh", "-c", "echo hi"};
//   bundle.Save();
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace smolbox::testing {

// The config.json `runc spec` writes (ociVersion 1.0.2), without a terminal.
nlohmann::json RuncSpecConfig();

// What an engine of a test's own left mounted under dir (its overlay store, a container's
// namespace files), unmounted innermost first, so that dir can be removed.
void UnmountEverythingUnder(const std::string& dir);

class OciBundle {
 public:
  OciBundle();
  const std::string& path() const { return dir_.path(); }
  std::string rootfs() const { return dir_.path() + "/rootfs"; }
  // Writes config into the bundle's config.json.
  void Save() const;

  nlohmann::json config = RuncSpecConfig();

 private:
  TempDir dir_{"oci-bundle"};
};

}  // namespace smolbox::testing
