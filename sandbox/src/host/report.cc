// The report's two faces: JSON for machines (the GitHub workflow reads it) and lines for people,
// in virt-host-validate's `CHECK: LEVEL (hint)` shape.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "probe.h"

namespace smolbox::host {
namespace {

const char* Colour(Level level) {
  switch (level) {
    case Level::kPass:
      return "\033[32m";
    case Level::kWarn:
      return "\033[33m";
    case Level::kFail:
      return "\033[31m";
  }
  return "";
}

std::string CheckLine(const std::string& section, const Check& check, bool color) {
  std::string level = ToString(check.level);
  if (color) level = fmt::format("{}{}\033[0m", Colour(check.level), level);
  std::string why = check.detail;
  if (!check.hint.empty()) why += (why.empty() ? "" : "; ") + check.hint;
  if (why.empty()) return fmt::format("{}: {}: {}\n", section, check.name, level);
  return fmt::format("{}: {}: {} ({})\n", section, check.name, level, why);
}

}  // namespace

nlohmann::json ToJson(const HostReport& report) {
  nlohmann::json sections = nlohmann::json::array();
  for (const auto& section : report.sections) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : section.checks) {
      checks.push_back(
          {{"name", c.name}, {"level", ToString(c.level)}, {"detail", c.detail}, {"hint", c.hint}});
    }
    sections.push_back({{"name", section.name}, {"checks", checks}});
  }
  nlohmann::json backends = nlohmann::json::array();
  for (const auto& b : report.backends) {
    backends.push_back({{"name", b.name},
                        {"isolation", b.isolation},
                        {"usable", b.usable()},
                        {"host_ready", b.host_ready},
                        {"in_this_build", b.in_this_build},
                        {"reason", b.reason},
                        {"sandbox", b.sandbox}});
  }
  return {{"root", report.root.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.root)},
          {"sections", sections},
          {"backends", backends},
          {"hardware_isolation_usable", report.hardware_isolation_usable},
          {"verdict", report.verdict},
          {"next_steps", report.next_steps},
          {"exit_code", ExitCode(report)}};
}

std::string Render(const HostReport& report, bool color) {
  std::string out;
  if (!report.root.empty()) {
    out += fmt::format("Replaying the host fixture {}: live checks are skipped.\n", report.root);
  }
  for (const auto& section : report.sections) {
    for (const auto& check : section.checks) out += CheckLine(section.name, check, color);
  }
  out += "\nBackends:\n";
  for (const auto& b : report.backends) {
    out += fmt::format("  {:<12} {:<4} {} ({})\n", b.name, b.usable() ? "yes" : "no", b.isolation,
                       b.reason);
  }
  out += fmt::format("\nVerdict: {}\n", report.verdict);
  out += "\nNext steps:\n";
  for (const auto& step : report.next_steps) out += fmt::format("  - {}\n", step);
  return out;
}

int ExitCode(const HostReport& report) { return report.hardware_isolation_usable ? 0 : 1; }

}  // namespace smolbox::host
