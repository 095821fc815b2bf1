#include "egress_redirect.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace smolbox::redirect {
namespace {

// ip route add default dev lo [src SOURCE], and its acknowledgement.
Expected<void> AddDefaultRoute(int family, const char* source) {
  std::vector<char> buffer(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* request = mnl_nlmsg_put_header(buffer.data());
  request->nlmsg_type = RTM_NEWROUTE;
  request->nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
  request->nlmsg_seq = 1;
  auto* route = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(request, sizeof(rtmsg)));
  route->rtm_family = static_cast<unsigned char>(family);
  route->rtm_table = RT_TABLE_MAIN;
  route->rtm_protocol = RTPROT_STATIC;
  route->rtm_scope = RT_SCOPE_LINK;
  route->rtm_type = RTN_UNICAST;
  mnl_attr_put_u32(request, RTA_OIF, if_nametoindex("lo"));
  if (source) {
    in_addr address{};
    inet_pton(AF_INET, source, &address);
    mnl_attr_put(request, RTA_PREFSRC, sizeof address, &address);
  }
  std::unique_ptr<mnl_socket, decltype(&mnl_socket_close)> socket(mnl_socket_open(NETLINK_ROUTE),
                                                                  mnl_socket_close);
  const std::string step =
      family == AF_INET ? "rtnetlink: default route dev lo" : "rtnetlink: ::/0 dev lo";
  if (!socket || mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0 ||
      mnl_socket_sendto(socket.get(), request, request->nlmsg_len) < 0) {
    return std::unexpected(Error::Sys(step));
  }
  ssize_t n = mnl_socket_recvfrom(socket.get(), buffer.data(), buffer.size());
  if (n < 0 || mnl_cb_run(buffer.data(), static_cast<size_t>(n), 1,
                          mnl_socket_get_portid(socket.get()), nullptr, nullptr) < 0) {
    return std::unexpected(Error::Sys(step));
  }
  return {};
}

}  // namespace

Expected<void> AddDefaultRoutesThroughLoopback(bool ipv6) {
  SMOLBOX_TRY(AddDefaultRoute(AF_INET, "127.0.0.1"));
  if (ipv6) SMOLBOX_TRY(AddDefaultRoute(AF_INET6, nullptr));
  return {};
}

std::string EgressRuleset(uint16_t tcp4_port, uint16_t tcp6_port) {
  std::string v6 =
      tcp6_port ? fmt::format("    meta nfproto ipv6 meta l4proto tcp redirect to :{}\n", tcp6_port)
                : "";
  // nat output sees a connection's first packet; its reply and the rest follow conntrack. The
  // listener's replies go to the workload's address before conntrack turns them back, so the
  // filter lets every reply through.
  return fmt::format(R"(table inet smolbox_egress {{
  chain to_gateway {{
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.0/8 return
    ip6 daddr ::1 return
    meta nfproto ipv4 meta l4proto tcp redirect to :{}
{}  }}
  chain nothing_else_leaves {{
    type filter hook output priority 0; policy accept;
    ct direction reply accept
    ip daddr 127.0.0.0/8 accept
    ip6 daddr ::1 accept
    reject with icmpx type admin-prohibited
  }}
}}
)",
                     tcp4_port, v6);
}

Expected<void> InstallEgressRedirect(uint16_t tcp4_port, uint16_t tcp6_port) {
  std::unique_ptr<nft_ctx, decltype(&nft_ctx_free)> ctx(nft_ctx_new(NFT_CTX_DEFAULT), nft_ctx_free);
  if (!ctx) return std::unexpected(Error{"nftables", "nft_ctx_new failed", 0});
  // Errors into a buffer, for the setup's error, not onto the sandbox's stderr.
  nft_ctx_buffer_error(ctx.get());
  nft_ctx_buffer_output(ctx.get());
  std::string rules = EgressRuleset(tcp4_port, tcp6_port);
  if (nft_run_cmd_from_buffer(ctx.get(), rules.c_str()) != 0) {
    const char* why = nft_ctx_get_error_buffer(ctx.get());
    return std::unexpected(Error{"nftables: the egress redirect", why ? why : "refused", 0});
  }
  return {};
}

}  // namespace smolbox::redirect
