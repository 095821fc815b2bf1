#include "mutate/mutant_guest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "unique_fd.h"

namespace smolvm_check {
namespace {

using smolbox::Error;

// The lowercase hex SHA-256 of the files at paths, one after the other.
smolbox::Expected<std::string> Sha256OfFiles(const std::vector<std::string>& paths) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!context || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) {
    return std::unexpected(Error{"sha256", "OpenSSL could not start a digest", 0});
  }
  for (const std::string& path : paths) {
    smolbox::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return std::unexpected(Error::Sys("open " + path));
    char buffer[1 << 16];
    ssize_t n;
    while ((n = read(fd.get(), buffer, sizeof buffer)) > 0) EVP_DigestUpdate(context.get(), buffer, static_cast<size_t>(n));
    if (n < 0) return std::unexpected(Error::Sys("read " + path));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  EVP_DigestFinal_ex(context.get(), digest, &size);
  std::string hex;
  for (unsigned i = 0; i < size; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace

smolbox::Expected<void> CheckMutantGuest(const std::string& guest_dir, const std::string& agent) {
  const std::string build = fmt::format("build it with scripts/build-guest --out {} --agent {} (scripts/mutate does)",
                                        guest_dir, agent);
  // build-guest digests the agent and the egress setup beside it, the initramfs's own inputs.
  std::string egress_setup = std::filesystem::path(agent).replace_filename("smolbox-egress-setup").string();
  auto agent_digest = Sha256OfFiles({agent, egress_setup});
  if (!agent_digest) {
    return std::unexpected(Error::Field("--smolbox", fmt::format("the mutant's agent: {}", agent_digest.error().ToString())));
  }
  const std::string manifest_path = guest_dir + "/manifest.json";
  std::ifstream in(manifest_path);
  if (!in) return std::unexpected(Error::Field("--guest-dir", fmt::format("{} has no manifest.json: {}", guest_dir, build)));
  auto manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!manifest.is_object() || !manifest.contains("agent_sha256") || !manifest["agent_sha256"].is_string()) {
    return std::unexpected(Error::Field("--guest-dir", fmt::format("{} names no agent_sha256: {}", manifest_path, build)));
  }
  if (manifest["agent_sha256"].get<std::string>() != *agent_digest) {
    return std::unexpected(Error::Field("--guest-dir", fmt::format("the guest in {} holds another agent than {}, so the "
                                                                   "guest's switches would stay on: {}",
                                                                   guest_dir, agent, build)));
  }
  return {};
}

}  // namespace smolvm_check
