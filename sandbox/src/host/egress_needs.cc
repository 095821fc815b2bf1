// What egress needs (docs/egress.md): nftables with NAT in a network namespace owned by a user
// namespace, where the sandbox's redirect lives; veth, which the egress tests' namespaces are
// linked by; and tun, which the vm backend's side of the gateway is to use. The first two are
// tried live, in a child of their own, as an unprivileged uid.
#include <fcntl.h>
#include <fmt/format.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "probe.h"

namespace smolbox::host {
namespace {

constexpr uid_t kNobody = 65534;

// A table with a nat chain and a redirect, the redirect's own shape.
constexpr char kProbeRuleset[] =
    "table inet smolbox_probe {\n"
    "  chain to_gateway {\n"
    "    type nat hook output priority -100; policy accept;\n"
    "    meta l4proto tcp redirect to :1\n"
    "  }\n"
    "}\n";

// The test, run in a child of its own inside a user namespace with a network namespace: 0 when
// it worked.
using NetnsTest = int (*)();

int LoadRedirect() {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (!ctx) return 1;
  nft_ctx_buffer_error(ctx);
  return nft_run_cmd_from_buffer(ctx, kProbeRuleset) == 0 ? 0 : 1;
}

// ip link add a type veth peer name b, by rtnetlink.
int AddVethPair() {
  std::vector<char> buffer(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* request = mnl_nlmsg_put_header(buffer.data());
  request->nlmsg_type = RTM_NEWLINK;
  request->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  request->nlmsg_seq = 1;
  mnl_nlmsg_put_extra_header(request, sizeof(ifinfomsg));
  mnl_attr_put_strz(request, IFLA_IFNAME, "probe0");
  nlattr* info = mnl_attr_nest_start(request, IFLA_LINKINFO);
  mnl_attr_put_strz(request, IFLA_INFO_KIND, "veth");
  nlattr* data = mnl_attr_nest_start(request, IFLA_INFO_DATA);
  nlattr* peer = mnl_attr_nest_start(request, 1 /* VETH_INFO_PEER */);
  mnl_nlmsg_put_extra_header(request, sizeof(ifinfomsg));
  mnl_attr_put_strz(request, IFLA_IFNAME, "probe1");
  mnl_attr_nest_end(request, peer);
  mnl_attr_nest_end(request, data);
  mnl_attr_nest_end(request, info);
  mnl_socket* socket = mnl_socket_open(NETLINK_ROUTE);
  if (!socket || mnl_socket_bind(socket, 0, MNL_SOCKET_AUTOPID) < 0 ||
      mnl_socket_sendto(socket, request, request->nlmsg_len) < 0) {
    return 1;
  }
  ssize_t n = mnl_socket_recvfrom(socket, buffer.data(), buffer.size());
  return n > 0 && mnl_cb_run(buffer.data(), static_cast<size_t>(n), 1,
                             mnl_socket_get_portid(socket), nullptr, nullptr) >= 0
             ? 0
             : 1;
}

// After fork. The exit code is the failing step: 1 the namespaces, 2 uid_map, 3 the test.
[[noreturn]] void NetnsChild(uid_t as_uid, NetnsTest test) {
  if (geteuid() != as_uid) {
    if (setgid(as_uid) != 0 || setuid(as_uid) != 0) _exit(1);
    // A uid change makes /proc/self root-owned and unwritable; uid_map must stay writable.
    prctl(PR_SET_DUMPABLE, 1);
  }
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) _exit(1);
  std::string map = fmt::format("0 {} 1", as_uid);
  int fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, map.data(), map.size()) < 0) _exit(2);
  _exit(test() == 0 ? 0 : 3);
}

// Empty when test worked as as_uid in a network namespace of its own; otherwise what failed.
std::string InOwnNetns(uid_t as_uid, NetnsTest test, const char* what_failed) {
  pid_t pid = fork();
  if (pid < 0) return fmt::format("fork: {}", std::strerror(errno));
  if (pid == 0) NetnsChild(as_uid, test);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  switch (WIFEXITED(status) ? WEXITSTATUS(status) : -1) {
    case 0:
      return "";
    case 1:
      return "it could not create a user and network namespace";
    case 2:
      return "it could not write its uid_map";
    case 3:
      return what_failed;
    default:
      return "the test child died";
  }
}

Check NftablesInUserNamespace(HostView& view) {
  const char* name = "nftables in a user namespace";
  if (!view.live()) return Warn(name, kSkippedUnderRoot);
  uid_t as_uid = view.uid() == 0 ? kNobody : view.uid();
  std::string failure =
      InOwnNetns(as_uid, LoadRedirect, "the kernel refused a nat table with a redirect");
  if (failure.empty())
    return Pass(name, fmt::format("uid {} loaded a nat redirect in a network namespace of its own",
                                  as_uid));
  return Fail(
      name,
      fmt::format("uid {}: {}; egress (--net, --allow-host, --allow-cidr) cannot work", as_uid,
                  failure),
      "a kernel with CONFIG_NF_TABLES, CONFIG_NFT_NAT and CONFIG_NFT_REDIR, and user namespaces");
}

Check Veth(HostView& view) {
  const char* name = "veth";
  if (!view.live()) return Warn(name, kSkippedUnderRoot);
  uid_t as_uid = view.uid() == 0 ? kNobody : view.uid();
  std::string failure = InOwnNetns(as_uid, AddVethPair, "the kernel refused a veth pair");
  if (failure.empty())
    return Pass(name,
                fmt::format("uid {} made a veth pair in a network namespace of its own", as_uid));
  return Warn(
      name,
      fmt::format("uid {}: {}; the egress tests link their namespaces with veth", as_uid, failure),
      "modprobe veth (CONFIG_VETH)");
}

// tun: the vm backend's side of the gateway is to use it. Its misc device shows in sysfs when the
// driver is there, loaded or built in.
Check Tun(HostView& view) {
  const char* name = "tun";
  if (view.Exists("/sys/devices/virtual/misc/tun") || view.Exists("/sys/module/tun")) {
    return Pass(name, "the tun driver is there (/sys/devices/virtual/misc/tun)");
  }
  return Warn(name, "no tun driver: the vm backend's side of the gateway is to need it",
              "modprobe tun (CONFIG_TUN)");
}

}  // namespace

Section ProbeEgressNeeds(HostView& view) {
  Section section{"Egress", {}};
  section.checks.push_back(NftablesInUserNamespace(view));
  section.checks.push_back(Veth(view));
  section.checks.push_back(Tun(view));
  return section;
}

}  // namespace smolbox::host
