// A store image in a RunSpec: its tree becomes the sandbox's root, and its config gives what
// the spec leaves unsaid, as docker gives it.
//
//   spec.sandbox.image = "app:1";
//   SMOLBOX_TRY(smolbox::image::ApplyStoreImage(spec));  // spec.sandbox.image is now a rootfs dir
#pragma once

#include "smolbox/error.h"
#include "smolbox/image_store.h"
#include "smolbox/spec.h"

namespace smolbox::image {

// What the caller said itself (a flag, a spec field), which the image's config must not
// override.
struct CallerChoices {
  bool user = false;
  bool workdir = false;  // the sandbox's working directory (-w)
};

// Resolves spec.sandbox.image, a reference into the default store, to the image's rootfs, and
// applies its config:
// - Env: each variable the spec does not set itself;
// - WorkingDir: the exec's working directory, unless the exec or the caller names one;
// - Entrypoint and Cmd: the command is Entrypoint followed by the spec's argv, or by Cmd when
//   the spec gives none; the spec's own entrypoint (--entrypoint) replaces Entrypoint, and Cmd
//   is then not used, as docker does;
// - User, unless the caller named one: a name or a number, looked up in the image's own /etc/passwd (and
//   /etc/group), read without following a link; a number not listed there keeps its own value
//   as the GID.
// An image that is not in the store is an error naming the field "image" and
// `smolbox image import`.
Expected<ImageInfo> ApplyStoreImage(RunSpec& spec, const CallerChoices& given);
Expected<ImageInfo> ApplyStoreImage(const ImageStore& store, RunSpec& spec, const CallerChoices& given);

// The one step by which every front end (the CLI, the API, MCP) resolves a spec's image: a
// store reference becomes the image's rootfs with its config applied (ApplyStoreImage), and
// "host" or a rootfs directory is left as it is, but for an entrypoint, put in front of argv. A
// user or a working directory the spec itself names, other than the defaults, counts as the
// caller's choice, as a flag does.
Expected<void> ResolveSpecImage(RunSpec& spec, CallerChoices given = {});

// An image's User ("app", "1234", "app:staff", "1234:50") as ids, by the rootfs's /etc/passwd
// and /etc/group.
Expected<WorkloadUser> ResolveImageUser(const std::string& rootfs, const std::string& user);

}  // namespace smolbox::image
