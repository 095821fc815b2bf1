#include "trust_store.h"

#include <fmt/format.h>

namespace smolbox {
namespace {

constexpr std::string_view kBegin = "-----BEGIN ";
constexpr std::string_view kEnd = "-----END ";
constexpr std::string_view kDashes = "-----";

std::unexpected<Error> Refuse(size_t line, std::string why) {
  return std::unexpected(Error::Field("ca_bundle", fmt::format("line {}: {}", line, why)));
}

bool IsBase64Line(std::string_view line) {
  if (line.empty()) return false;
  for (char c : line) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
              c == '=';
    if (!ok) return false;
  }
  return true;
}

// "-----BEGIN X-----" gives X, or nothing when the line is no such marker.
std::string_view MarkerLabel(std::string_view line, std::string_view marker) {
  if (!line.starts_with(marker) || !line.ends_with(kDashes) || line.size() < marker.size() + kDashes.size()) return {};
  return line.substr(marker.size(), line.size() - marker.size() - kDashes.size());
}

}  // namespace

Expected<void> CheckCaBundle(std::string_view pem) {
  if (pem.empty()) return {};
  if (pem.size() > kMaxCaBundleBytes) {
    return std::unexpected(Error::Field("ca_bundle", fmt::format("is {} bytes, more than the {} a bundle may hold",
                                                                 pem.size(), kMaxCaBundleBytes)));
  }
  if (pem.find('\0') != std::string_view::npos) {
    return std::unexpected(Error::Field("ca_bundle", "holds a NUL byte: a bundle is PEM text"));
  }
  size_t certificates = 0, line_number = 0, block_start = 0, body_lines = 0;
  bool in_block = false;
  for (size_t at = 0; at < pem.size();) {
    size_t end = pem.find('\n', at);
    std::string_view line = pem.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? pem.size() : end + 1;
    ++line_number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (!in_block) {
      std::string_view label = MarkerLabel(line, kBegin);
      if (label.empty()) {
        if (line.starts_with(kEnd)) return Refuse(line_number, "an END line outside any block");
        continue;  // a comment between blocks, as distributions write them
      }
      if (label != "CERTIFICATE") {
        return Refuse(line_number, fmt::format("a {} block; a trust store takes CERTIFICATE blocks only", label));
      }
      in_block = true;
      block_start = line_number;
      body_lines = 0;
      continue;
    }
    std::string_view label = MarkerLabel(line, kEnd);
    if (!label.empty()) {
      if (label != "CERTIFICATE") return Refuse(line_number, fmt::format("END {} closes a CERTIFICATE block", label));
      if (body_lines == 0) return Refuse(line_number, "an empty CERTIFICATE block");
      in_block = false;
      ++certificates;
      continue;
    }
    if (!IsBase64Line(line)) return Refuse(line_number, "not base64, inside the CERTIFICATE block of line " +
                                                            std::to_string(block_start));
    ++body_lines;
  }
  if (in_block) return Refuse(block_start, "a CERTIFICATE block with no END line");
  if (certificates == 0) {
    return std::unexpected(Error::Field("ca_bundle", "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
  }
  return {};
}

std::string JoinCaBundles(std::string_view own, std::string_view added) {
  std::string joined(own);
  if (!joined.empty() && !joined.ends_with('\n')) joined += '\n';
  joined += added;
  if (!joined.empty() && !joined.ends_with('\n')) joined += '\n';
  return joined;
}

}  // namespace smolbox
