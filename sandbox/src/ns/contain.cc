#include "contain.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "egress_redirect.h"
#include "fd_passing.h"
#include "mutant.h"
#include "net.h"
#include "storage.h"

namespace smolbox::ns {
namespace {

constexpr int kAgentChannelFd = 3;
constexpr int kAgentAttachFd = 4;

Expected<void> DieWithParent() {
  // The agent inherits this; if the runtime is killed, the agent dies, and with it, as the
  // pid namespace's init, every process in the sandbox.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return std::unexpected(Error::Sys("prctl PR_SET_PDEATHSIG"));
  return {};
}

Expected<void> AwaitGo(int channel) {
  SMOLBOX_ASSIGN_OR_RETURN(auto message, channel::ReadMessage(channel));
  if (!message || (message)->Type() != "go") {
    return std::unexpected(Error{"await runtime", "the runtime went away during setup", 0});
  }
  return {};
}

Expected<void> JoinCgroup(ContainPlan& plan) {
  // First of all, while we are one thread; the runtime checks the result before its "go" and
  // moves us itself where this failed.
  plan.cgroup.JoinSelf();
  return channel::WriteMessage(plan.channel_fd, channel::Message{{{"type", "joined"}}, ""});
}

Expected<void> EnterCgroupNamespace() {
  if (!SMOLBOX_PROTECTED("cgroupns")) return {};
  // Only now, once the runtime has checked that we are in our cgroup, so that it becomes the
  // namespace's root.
  if (unshare(CLONE_NEWCGROUP) != 0) return std::unexpected(Error::Sys("unshare CLONE_NEWCGROUP"));
  return {};
}

Expected<void> MakeMountsPrivate() {
  // Nothing we mount may propagate back to the host's mount namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return std::unexpected(Error::Sys("mount --make-rprivate /"));
  }
  return {};
}

Expected<void> PrepareTmpfsStorage(ContainPlan& plan) {
  if (plan.tmpfs_storage_mountpoint.empty()) return {};
  const std::string& at = plan.tmpfs_storage_mountpoint;
  std::string options = shared::TmpfsStorageOptions(plan.storage_mib, plan.identity.uid, plan.identity.gid);
  if (mount("tmpfs", at.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    return std::unexpected(Error::Sys("mount tmpfs storage on " + at));
  }
  int fd = open(at.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(Error::Sys("open " + at));
  plan.root.storage_fd = fd;
  SMOLBOX_TRY(shared::SendWithFd(plan.channel_fd, channel::Message{{{"type", "storage"}}, ""}, fd));
  return AwaitGo(plan.channel_fd);
}

Expected<void> BuildRootAndReport(ContainPlan& plan) {
  std::vector<std::string> warnings;
  plan.root.warnings = &warnings;
  auto built = confine::BuildRoot(plan.root);
  plan.root.warnings = nullptr;
  if (!built || warnings.empty()) return built;
  channel::Message message{{{"type", "warnings"}, {"warnings", warnings}}, ""};
  return channel::WriteMessage(plan.channel_fd, message);
}

Expected<void> SetHostname(const std::string& hostname) {
  // Never the host's own name: only in a UTS namespace of the sandbox's.
  if (!SMOLBOX_PROTECTED("utsns")) return {};
  static constexpr char kName[] = "sandbox";
  const char* name = hostname.empty() ? kName : hostname.c_str();
  if (sethostname(name, strlen(name)) != 0) return std::unexpected(Error::Sys("sethostname"));
  if (setdomainname("", 0) != 0) return std::unexpected(Error::Sys("setdomainname"));
  return {};
}

// The gateway's listeners, made here so that they are the sandbox's own sockets, and the
// redirect to them; the runtime serves them (net/gateway.h). A congestion control that could not
// be set goes with them as a warning: it costs speed, not safety.
Expected<void> PlumbEgress(const ContainPlan& plan) {
  if (!plan.egress) return {};
  SMOLBOX_ASSIGN_OR_RETURN(auto sockets, confine::MakeEgressSockets());
  SMOLBOX_TRY(redirect::AddDefaultRoutesThroughLoopback(sockets.tcp6.valid()));
  SMOLBOX_TRY(redirect::InstallEgressRedirect(sockets.tcp4_port, sockets.tcp6_port));
  nlohmann::json warnings = nlohmann::json::array();
  if (auto unpaced = confine::UseUnpacedCongestionControl(); !unpaced) {
    warnings.push_back("egress: TCP through the gateway keeps the host's congestion control, "
                       "which may be slower: " + unpaced.error().ToString());
  }
  std::vector<int> fds = {sockets.tcp4.get(), sockets.dns.get()};
  if (sockets.tcp6.valid()) fds.push_back(sockets.tcp6.get());
  channel::Message message{{{"type", "egress"}, {"warnings", warnings}}, ""};
  return shared::SendWithFds(plan.channel_fd, message, fds);
}

Expected<void> ExecAgent(const ContainPlan& plan) {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return std::unexpected(Error::Sys("open /dev/null"));
  for (int fd = 0; fd <= 2; ++fd) {
    if (dup2(null_fd, fd) < 0) return std::unexpected(Error::Sys("dup2 /dev/null"));
  }
  // Out of the way first, so that the channel's dup2 onto 3 cannot close it.
  int attach = plan.attach_fd < 0 ? -1 : fcntl(plan.attach_fd, F_DUPFD_CLOEXEC, kAgentAttachFd + 1);
  if (plan.attach_fd >= 0 && attach < 0) return std::unexpected(Error::Sys("dup the attach socket"));
  if (dup2(plan.channel_fd, kAgentChannelFd) < 0) return std::unexpected(Error::Sys("dup2 channel"));
  if (attach >= 0 && dup2(attach, kAgentAttachFd) < 0) return std::unexpected(Error::Sys("dup2 attach socket"));
  int last_kept = attach >= 0 ? kAgentAttachFd : kAgentChannelFd;
  // Every other descriptor, the runtime's storage and volume handles included, closes at exec.
  if (syscall(SYS_close_range, last_kept + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    return std::unexpected(Error::Sys("close_range"));
  }
  const char* argv[] = {"smolbox-agent", "--channel-fd", "3", nullptr, nullptr, nullptr};
  if (attach >= 0) {
    argv[3] = "--attach-fd";
    argv[4] = "4";
  }
  const char* envp[] = {nullptr};
  syscall(SYS_execveat, plan.agent_fd, "", argv, envp, AT_EMPTY_PATH);
  return std::unexpected(Error::Sys("execveat smolbox-agent"));
}

Expected<void> Contain(ContainPlan& plan) {
  SMOLBOX_TRY(JoinCgroup(plan));
  SMOLBOX_TRY(AwaitGo(plan.channel_fd));  // id maps written, cgroup checked
  SMOLBOX_TRY(confine::OpenSources(plan.root));  // with the runtime's filesystem ids, not ours
  SMOLBOX_TRY(confine::BecomeSetupRoot(plan.identity));
  SMOLBOX_TRY(DieWithParent());  // after the uid change, which clears it
  SMOLBOX_TRY(EnterCgroupNamespace());
  SMOLBOX_TRY(MakeMountsPrivate());
  SMOLBOX_TRY(PrepareTmpfsStorage(plan));
  SMOLBOX_TRY(BuildRootAndReport(plan));
  SMOLBOX_TRY(SetHostname(plan.hostname));
  // An engine's netns (CNI) is the engine's to set up; the sandbox holds no capability in it.
  if (!plan.engine_netns) SMOLBOX_TRY(confine::BringUpLoopback());
  SMOLBOX_TRY(PlumbEgress(plan));
  SMOLBOX_TRY(confine::PivotInto(plan.root.newroot));
  SMOLBOX_TRY(confine::LimitAgentBoundingSet());
  return ExecAgent(plan);
}

}  // namespace

void ContainAndExecAgent(ContainPlan plan) {
  // Until the runtime's "go", our own parent-death guard is the channel: a dead runtime
  // closes it and AwaitGo fails.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto ok = Contain(plan);
  const Error& e = ok.error();
  channel::WriteMessage(plan.channel_fd,
                        channel::Message{{{"type", "setup_error"}, {"where", e.where}, {"what", e.what},
                                          {"errno", e.errnum}},
                                         ""});
  _exit(125);
}

}  // namespace smolbox::ns
