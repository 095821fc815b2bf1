#include "guest_run.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "guest_boot.h"
#include "guest_egress.h"
#include "guest_namespaces.h"
#include "mount.h"
#include "net.h"
#include "user.h"

namespace smolbox::agent {
namespace {

constexpr const char* kNewRoot = "/newroot";
// The whole disk, bound there by the boot (guest_boot.cc), for a store image's root.
constexpr const char* kImageRoot = "/image";
constexpr const char* kStorageMount = "/storage";

// cache=mmap: write() still reaches the host's storage at once, so the host copies back
// exactly what the guest wrote, even when the VM is killed, and ENOSPC from the quota comes
// back to the write that hit it. Unlike cache=none it lets a file be mapped shared and
// writable (numpy.memmap, SQLite's WAL index, the semaphores of multiprocessing in /dev/shm);
// the guest writes a mapping's dirty pages back at msync and at munmap, so by the time the
// workload has exited they are on the host.
std::string NinePOptions() { return "trans=virtio,version=9p2000.L,msize=262144,cache=mmap"; }

Expected<void> MountShare(const std::string& tag, const std::string& target, bool read_only) {
  unsigned long flags = MS_NOSUID | MS_NODEV | (read_only ? MS_RDONLY : 0);
  if (mount(tag.c_str(), target.c_str(), "9p", flags, NinePOptions().c_str()) != 0) {
    return std::unexpected(Error::Sys(fmt::format("mount 9p share {} on {}", tag, target)));
  }
  return {};
}

bool ValidTag(const std::string& tag) {
  return !tag.empty() && tag.size() <= 31 && tag.find_first_of("/.") == std::string::npos;
}

}  // namespace

Expected<WorkloadCgroup> SetUpGuestRun(const GuestSetup& setup) {
  auto cgroup = WorkloadCgroup::Create(kGuestCgroupRoot, "workload", CgroupLimits{setup.memory_bytes, setup.pids, setup.cpus});
  if (!cgroup) return cgroup;
  SMOLBOX_TRY(MountShare(kStorageTag, kStorageMount, false));
  confine::RootPlan plan;
  plan.newroot = kNewRoot;
  plan.storage = kStorageMount;
  plan.workdir = setup.workdir;
  plan.uid = setup.uid;
  plan.gid = setup.gid;
  if (setup.image_root) plan.image = kImageRoot;
  plan.ca_bundle = setup.ca_bundle;
  plan.writable_root_mib = setup.writable_root_mib;
  plan.files = setup.root_files;
  for (const auto& v : setup.volumes) {
    confine::VolumeBind bind{v.target, v.read_only, "", -1, v.storage_dir};
    if (v.read_only) {
      if (!ValidTag(v.tag)) return std::unexpected(Error{"setup", fmt::format("bad share tag \"{}\"", v.tag), 0});
      bind.source = fmt::format("/volumes/{}", v.tag);
      if (mkdir(bind.source.c_str(), 0755) != 0) return std::unexpected(Error::Sys("mkdir " + bind.source));
      SMOLBOX_TRY(MountShare(v.tag, bind.source, true));
    }
    plan.volumes.push_back(std::move(bind));
  }
  if (setup.egress) {
    plan.resolver = confine::kEgressResolver;
    SMOLBOX_TRY(StartGuestEgress());
  }
  // A container's own name, before the workload's UTS namespace copies it.
  if (sethostname(setup.hostname.data(), setup.hostname.size()) != 0) {
    return std::unexpected(Error::Sys("sethostname"));
  }
  // The cgroup, the 9p shares and egress need the guest kernel's root; nothing after this does.
  SMOLBOX_TRY(EnterWorkloadNamespaces());
  SMOLBOX_TRY(confine::OpenSources(plan));
  SMOLBOX_TRY(confine::BuildRoot(plan));
  SMOLBOX_TRY(confine::PivotInto(kNewRoot));
  SMOLBOX_TRY(confine::LimitAgentBoundingSet());
  return cgroup;
}

}  // namespace smolbox::agent
