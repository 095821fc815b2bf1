// Battery results as data, and the four ways they are shown: report.json (the source of
// truth), junit.xml, report.md (a job summary) and the terminal table.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "battery/oracles.h"

namespace smolvm_check {

struct CaseReport {
  std::string id;
  std::string category;
  std::string kind;
  Verdict verdict = Verdict::kError;
  std::string reason;
  std::string status;
  int64_t wall_ms = 0;
  std::vector<std::string> unsupported_limits;
  std::string stdout_data;  // what the workload printed, kept only when RunOptions asks
};

struct BatteryReport {
  std::string sandbox;
  std::string sandbox_version;
  nlohmann::json host;  // kernel, cpus, memory, user
  std::string started;  // ISO 8601, UTC
  std::vector<CaseReport> cases;
  int64_t startup_allowance_ms = 0;  // the profile's, added to every wall-time bound
};

nlohmann::json ToJson(const BatteryReport& report);
std::string ToJunitXml(const BatteryReport& report);
std::string ToMarkdown(const BatteryReport& report);
// Categories with passes and fails, then every failure with its reason.
void PrintTable(const BatteryReport& report, std::ostream& out, bool color);
// report.json, junit.xml and report.md into dir (created if missing).
smolbox::Expected<void> WriteReports(const BatteryReport& report, const std::string& dir);
nlohmann::json DescribeHost();
// Now, as ISO 8601 in UTC: "2026-11-30T15:04:05Z".
std::string NowIso8601();
// Text as XML 1.0 character data; control characters become \xNN.
std::string XmlEscape(const std::string& text);

}  // namespace smolvm_check
