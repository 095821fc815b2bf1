// Devices: the optional helpers of a microVM. None is required: the vm backend talks to its
// guest over virtio-serial and gives it no NIC unless asked.
#include <fmt/format.h>
#include <unistd.h>

#include "probe.h"

namespace smolbox::host {
namespace {

struct Device {
  const char* path;
  const char* use;     // what a microVM would use it for
  const char* module;  // what provides it
};

Check DeviceCheck(HostView& view, const Device& device) {
  std::string name = device.path;
  auto node = view.Stat(device.path);
  if (!node) {
    return Warn(name, fmt::format("missing; optional, for {}", device.use),
                fmt::format("modprobe {}", device.module));
  }
  if (node->type != "char")
    return Warn(name, fmt::format("is a {}, not a character device", node->type));
  if (!view.Access(device.path, R_OK | W_OK)) {
    return Warn(name, fmt::format("{}: uid {} may not open it read/write; optional, for {}",
                                  Describe(*node), view.uid(), device.use));
  }
  return Pass(name, fmt::format("accessible ({}), for {}", Describe(*node), device.use));
}

}  // namespace

Section ProbeDevices(HostView& view) {
  Section section{"Devices", {}};
  for (const Device& device :
       {Device{"/dev/vhost-vsock", "a vsock channel to the guest", "vhost_vsock"},
        Device{"/dev/vhost-net", "fast guest networking", "vhost_net"},
        Device{"/dev/net/tun", "guest networking (tap)", "tun"}}) {
    section.checks.push_back(DeviceCheck(view, device));
  }
  return section;
}

}  // namespace smolbox::host
