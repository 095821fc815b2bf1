#include "guest_protocol.h"

#include <fmt/format.h>

#include "json_bounds.h"

namespace smolbox {

channel::Message EncodeGuestSetup(const GuestSetup& s) {
  nlohmann::json volumes = nlohmann::json::array();
  for (const auto& v : s.volumes) {
    volumes.push_back({{"target", v.target}, {"read_only", v.read_only}, {"tag", v.tag},
                       {"storage_dir", v.storage_dir}});
  }
  nlohmann::json h = {{"type", "setup"},       {"volumes", volumes},
                      {"workdir", s.workdir},  {"uid", s.uid},
                      {"gid", s.gid},          {"memory_bytes", s.memory_bytes},
                      {"pids", s.pids},        {"cpus", s.cpus}};
  return channel::Message{std::move(h), ""};
}

Expected<GuestSetup> DecodeGuestSetup(const channel::Message& m) {
  if (m.Type() != "setup") return std::unexpected(Error{"channel", "expected a setup message", 0});
  try {
    const auto& h = m.header;
    GuestSetup s;
    for (const auto& v : h.at("volumes")) {
      s.volumes.push_back(GuestVolume{v.at("target").get<std::string>(), v.at("read_only").get<bool>(),
                                      v.at("tag").get<std::string>(), v.at("storage_dir").get<std::string>()});
    }
    s.workdir = h.at("workdir").get<std::string>();
    s.uid = IntegerAt<uint32_t>(h, "uid");
    s.gid = IntegerAt<uint32_t>(h, "gid");
    s.memory_bytes = IntegerAt<int64_t>(h, "memory_bytes");
    s.pids = IntegerAt<int64_t>(h, "pids");
    s.cpus = h.at("cpus").get<double>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"setup message", e.what(), 0});
  }
}

channel::Message EncodeGuestRestore(const GuestRestore& r) {
  nlohmann::json h = {{"type", "restored"},
                      {"realtime_sec", r.realtime_sec},
                      {"realtime_nsec", r.realtime_nsec},
                      {"hostname", r.hostname}};
  return channel::Message{std::move(h), r.seed};
}

Expected<GuestRestore> DecodeGuestRestore(const channel::Message& m) {
  if (m.Type() != "restored") return std::unexpected(Error{"channel", "expected a restored message", 0});
  try {
    const auto& h = m.header;
    GuestRestore r;
    r.seed = m.tail;
    r.realtime_sec = IntegerAt<int64_t>(h, "realtime_sec");
    r.realtime_nsec = IntegerAt<int64_t>(h, "realtime_nsec");
    r.hostname = h.at("hostname").get<std::string>();
    if (r.seed.size() != kRestoreSeedBytes) {
      return std::unexpected(Error{"restored message", fmt::format("the seed is {} bytes, not {}", r.seed.size(), kRestoreSeedBytes), 0});
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"restored message", e.what(), 0});
  }
}

}  // namespace smolbox
