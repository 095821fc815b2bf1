// The sandbox's setup, run by the runtime's cloned child inside its new namespaces: one ordered
// checklist that ends in execve of the agent, or in a setup_error sent to the runtime.
//
// Protocol with the runtime over the channel, before the agent speaks:
//   child -> runtime  {"type":"joined"}    moved itself into the v1 cgroups (see CgroupEntry)
//   runtime -> child  {"type":"go"}        id maps written, every cgroup checked
//   child -> runtime  {"type":"storage"}   rootless only, with the tmpfs root as SCM_RIGHTS
//   runtime -> child  {"type":"go"}        rootless only: storage laid out and filled
//   child -> runtime  {"type":"warnings", "warnings":[...]}   what the root could not hide,
//                                          if anything
//   child -> runtime  {"type":"egress"}    with egress only: the gateway's listeners, made in
//                                          the sandbox's netns, as SCM_RIGHTS (tcp4, dns[, tcp6])
//                                          the agent's "ready" follows
//   child -> runtime  {"type":"setup_error", "where":..., "what":..., "errno":...}
#pragma once

#include <cstdint>
#include <string>

#include "cgroup.h"
#include "channel.h"
#include "mount.h"
#include "unique_fd.h"
#include "user.h"

namespace smolbox::ns {

struct ContainPlan {
  confine::RootPlan root;
  confine::Identity identity;
  int channel_fd = -1;
  int agent_fd = -1;  // a sealed memfd holding smolbox-agent
  shared::CgroupEntry cgroup;
  // Rootless: the sandbox mounts its own tmpfs storage here and sends it to the runtime.
  std::string tmpfs_storage_mountpoint;
  int64_t storage_mib = 0;
  // The sandbox may reach the network through the gateway: routes, listeners and the redirect.
  bool egress = false;
  std::string hostname;  // empty: "sandbox"
  bool engine_netns = false;  // born in a network namespace an OCI engine made
  int attach_fd = -1;  // a listening socket the agent serves beside its channel (attach_point.h)
};

[[noreturn]] void ContainAndExecAgent(ContainPlan plan);

}  // namespace smolbox::ns
