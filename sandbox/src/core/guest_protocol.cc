#include "guest_protocol.h"

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
    s.uid = h.at("uid").get<uint32_t>();
    s.gid = h.at("gid").get<uint32_t>();
    s.memory_bytes = h.at("memory_bytes").get<int64_t>();
    s.pids = h.at("pids").get<int64_t>();
    s.cpus = h.at("cpus").get<double>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    return std::unexpected(Error{"setup message", e.what(), 0});
  }
}

}  // namespace smolbox
