#include "api_requests.h"

#include <fmt/format.h>

#include "smolbox/image_spec.h"
#include "smolbox/image_store.h"

namespace smolbox::api {
namespace {

constexpr std::string_view kBody = "request body";

// The fields that would make the server touch a host path of the client's choosing.
Expected<void> RefuseHostPaths(const RunSpec& spec) {
  if (!spec.sandbox.mounts.empty() && spec.sandbox.volume_root.empty()) {
    return std::unexpected(Error::Field("mounts", "host volumes are not accepted by this server (it has no "
                                                  "--volume-root); send input as stdin"));
  }
  if (spec.exec.stdin_file) {
    return std::unexpected(Error::Field("stdin_file", "host files are not accepted over the API; send the bytes as stdin"));
  }
  const std::string& image = spec.sandbox.image;
  if (image != "host" && !image::IsStoreReference(image)) {
    return std::unexpected(Error::Field(
        "image", "a rootfs directory on the host is not accepted over the API; import it (smolbox image import) and "
                 "name it"));
  }
  if (!spec.sandbox.egress.netns.empty()) {
    return std::unexpected(Error::Field("egress.netns", "is the server's to choose, not a client's"));
  }
  // The gateway asks its resolver from the host's side, past the floor: a client's choice would
  // send its queries to any address and port, the host's loopback included.
  if (spec.sandbox.egress.dns_server) {
    return std::unexpected(Error::Field("egress.dns_server", "is the server's to choose, not a client's"));
  }
  return {};
}

Expected<RunSpec> ParseSpec(const std::string& body, const std::string& volume_root) {
  SMOLBOX_ASSIGN_OR_RETURN(RunSpec spec, ParseRunSpec(body, kBody));
  // Only where there are volumes, so that a spec without any still matches a warm pool's.
  if (!spec.sandbox.mounts.empty()) spec.sandbox.volume_root = volume_root;
  SMOLBOX_TRY(RefuseHostPaths(spec));
  return spec;
}

}  // namespace

Expected<RunSpec> ParseRunRequest(const std::string& body, const std::string& volume_root) {
  SMOLBOX_ASSIGN_OR_RETURN(RunSpec spec, ParseSpec(body, volume_root));
  SMOLBOX_TRY(image::ResolveSpecImage(spec));
  SMOLBOX_TRY(ValidateRunSpec(spec));
  return spec;
}

Expected<RunSpec> ParseCreateRequest(const std::string& body, const std::string& volume_root) {
  SMOLBOX_ASSIGN_OR_RETURN(RunSpec spec, ParseSpec(body, volume_root));
  if (!spec.exec.argv.empty()) {
    return std::unexpected(Error::Field("argv", "a sandbox is created without a command; each exec brings its own"));
  }
  if (spec.exec.stdin_data) return std::unexpected(Error::Field("stdin", "is an exec's, not a sandbox's"));
  if (spec.exec.entrypoint) {
    return std::unexpected(Error::Field("entrypoint", "is a run's; a sandbox's execs each bring their own command"));
  }
  // As smolbox create does: the image's config gives each exec's defaults, and each exec brings
  // its own command.
  SMOLBOX_TRY(image::ResolveSpecImage(spec));
  spec.exec.argv.clear();
  SMOLBOX_TRY(ValidateExecDefaults(spec.exec));
  SMOLBOX_TRY(ValidateSandboxSpec(spec.sandbox));
  return spec;
}

}  // namespace smolbox::api
