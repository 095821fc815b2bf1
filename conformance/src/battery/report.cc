#include "battery/report.h"

#include <ctime>

#include <fmt/format.h>
#include <pwd.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "battery/catalog.h"
#include "smolbox/result.h"

namespace smolvm_check {
namespace {

using nlohmann::json;

struct Counts {
  int64_t pass = 0;
  int64_t fail = 0;
  int64_t error = 0;
  int64_t skip = 0;
  int64_t wall_ms = 0;

  int64_t total() const { return pass + fail + error + skip; }
  void Add(const CaseReport& r) {
    switch (r.verdict) {
      case Verdict::kPass:
        ++pass;
        break;
      case Verdict::kFail:
        ++fail;
        break;
      case Verdict::kError:
        ++error;
        break;
      case Verdict::kSkip:
        ++skip;
        break;
    }
    wall_ms += r.wall_ms;
  }
};

// Categories in the catalog's order, then any others in the order they first appear.
std::vector<std::string> CategoryOrder(const BatteryReport& report) {
  std::vector<std::string> order;
  for (const std::string& category : kCategories) {
    bool present = std::any_of(report.cases.begin(), report.cases.end(),
                               [&](const CaseReport& r) { return r.category == category; });
    if (present) order.push_back(category);
  }
  for (const CaseReport& r : report.cases) {
    if (std::find(order.begin(), order.end(), r.category) == order.end()) {
      order.push_back(r.category);
    }
  }
  return order;
}

std::map<std::string, Counts> CountByCategory(const BatteryReport& report) {
  std::map<std::string, Counts> counts;
  for (const CaseReport& r : report.cases) counts[r.category].Add(r);
  return counts;
}

Counts CountAll(const BatteryReport& report) {
  Counts counts;
  for (const CaseReport& r : report.cases) counts.Add(r);
  return counts;
}

bool IsProblem(const CaseReport& r) {
  return r.verdict == Verdict::kFail || r.verdict == Verdict::kError;
}

// Reasons quote what payloads printed: one line of printable text for the table formats.
std::string OneLine(const std::string& text) {
  std::string out = smolbox::ToValidUtf8(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

// limit -> the cases that set it where the sandbox cannot enforce it.
std::map<std::string, std::vector<std::string>> UnsupportedByLimit(const BatteryReport& report) {
  std::map<std::string, std::vector<std::string>> by_limit;
  for (const CaseReport& r : report.cases) {
    for (const std::string& limit : r.unsupported_limits) by_limit[limit].push_back(r.id);
  }
  return by_limit;
}

// ---------------------------------------------------------------------------
// JSON

json CountsJson(const Counts& c) {
  return json{{"pass", c.pass}, {"fail", c.fail}, {"error", c.error}, {"skip", c.skip}};
}

json CaseJson(const CaseReport& r) {
  json limits = json::array();
  for (const std::string& limit : r.unsupported_limits) limits.push_back(limit);
  return json{{"id", r.id},
              {"category", r.category},
              {"kind", r.kind},
              {"verdict", ToString(r.verdict)},
              {"reason", smolbox::ToValidUtf8(r.reason)},
              {"status", smolbox::ToValidUtf8(r.status)},
              {"wall_ms", r.wall_ms},
              {"unsupported_limits", limits}};
}

json SummaryJson(const BatteryReport& report) {
  Counts all = CountAll(report);
  json summary = CountsJson(all);
  summary["total"] = all.total();
  json by_category = json::object();
  auto counts = CountByCategory(report);
  for (const std::string& category : CategoryOrder(report)) {
    by_category[category] = CountsJson(counts[category]);
  }
  summary["by_category"] = by_category;
  return summary;
}

// ---------------------------------------------------------------------------
// JUnit XML

// The entity for a character an XML attribute cannot hold as it is, or nullptr.
const char* XmlEntity(char c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    case '\'':
      return "&apos;";
    case '\t':
      return "&#9;";
    case '\n':
      return "&#10;";
    case '\r':
      return "&#13;";
    default:
      return nullptr;
  }
}


std::string Seconds(int64_t ms) { return fmt::format("{:.3f}", static_cast<double>(ms) / 1000); }

std::string JunitCase(const CaseReport& r) {
  std::string head = fmt::format(R"(    <testcase classname="{}" name="{}" time="{}")",
                                 XmlEscape(r.category), XmlEscape(r.id), Seconds(r.wall_ms));
  std::string message = XmlEscape(r.reason);
  switch (r.verdict) {
    case Verdict::kPass:
      return head + "/>\n";
    case Verdict::kFail:
      return fmt::format("{}>\n      <failure message=\"{}\" type=\"{}\"/>\n    </testcase>\n",
                         head, message, XmlEscape(r.status));
    case Verdict::kError:
      return fmt::format("{}>\n      <error message=\"{}\" type=\"{}\"/>\n    </testcase>\n", head,
                         message, XmlEscape(r.status));
    case Verdict::kSkip:
      return fmt::format("{}>\n      <skipped message=\"{}\"/>\n    </testcase>\n", head, message);
  }
  return head + "/>\n";
}

// JUnit's schema takes a local date-time without a zone; report.started is UTC.
std::string JunitTimestamp(const std::string& started) {
  return started.ends_with('Z') ? started.substr(0, started.size() - 1) : started;
}

std::string JunitSuite(const BatteryReport& report, const std::string& category, const Counts& c) {
  std::string out = fmt::format(
      R"(  <testsuite name="{}" tests="{}" failures="{}" errors="{}" skipped="{}" time="{}" timestamp="{}">)"
      "\n",
      XmlEscape(category), c.total(), c.fail, c.error, c.skip, Seconds(c.wall_ms),
      XmlEscape(JunitTimestamp(report.started)));
  for (const CaseReport& r : report.cases) {
    if (r.category == category) out += JunitCase(r);
  }
  return out + "  </testsuite>\n";
}

// ---------------------------------------------------------------------------
// Markdown

std::string MdCell(const std::string& text) {
  std::string out;
  for (char c : OneLine(text)) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string SandboxTitle(const BatteryReport& report) {
  std::string title = report.sandbox_version.empty()
                          ? report.sandbox
                          : fmt::format("{} ({})", report.sandbox, OneLine(report.sandbox_version));
  if (report.startup_allowance_ms > 0) {
    title += fmt::format(", wall-time bounds include a {} ms startup allowance", report.startup_allowance_ms);
  }
  return title;
}

std::string HostLine(const json& host) {
  std::vector<std::string> parts;
  if (host.contains("os") && host["os"].is_string()) parts.push_back(host["os"].get<std::string>());
  if (host.contains("kernel") && host["kernel"].is_string()) {
    parts.push_back(host["kernel"].get<std::string>());
  }
  if (host.contains("cpus")) parts.push_back(fmt::format("{} CPUs", host["cpus"].dump()));
  if (host.contains("memory_mib")) {
    parts.push_back(fmt::format("{} MiB", host["memory_mib"].dump()));
  }
  if (host.contains("user") && host["user"].is_string()) {
    parts.push_back("as " + host["user"].get<std::string>());
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string SummaryLine(const Counts& c) {
  return fmt::format("{} cases: {} pass, {} fail, {} error, {} skip", c.total(), c.pass, c.fail,
                     c.error, c.skip);
}

std::string MdCategoryTable(const BatteryReport& report) {
  std::string out = "| category | pass | fail | error | skip |\n|---|---:|---:|---:|---:|\n";
  auto counts = CountByCategory(report);
  for (const std::string& category : CategoryOrder(report)) {
    const Counts& c = counts[category];
    out += fmt::format("| {} | {} | {} | {} | {} |\n", MdCell(category), c.pass, c.fail, c.error,
                       c.skip);
  }
  Counts all = CountAll(report);
  return out + fmt::format("| **total** | {} | {} | {} | {} |\n", all.pass, all.fail, all.error,
                           all.skip);
}

std::string MdFailures(const BatteryReport& report) {
  std::string rows;
  for (const CaseReport& r : report.cases) {
    if (!IsProblem(r)) continue;
    rows +=
        fmt::format("| `{}` | {} | {} |\n", MdCell(r.id), ToString(r.verdict), MdCell(r.reason));
  }
  if (rows.empty()) return "";
  return "\n## Failures\n\n| case | verdict | reason |\n|---|---|---|\n" + rows;
}

std::string MdUnsupported(const BatteryReport& report) {
  auto by_limit = UnsupportedByLimit(report);
  if (by_limit.empty()) return "";
  std::string out =
      "\n## Unsupported limits\n\nLimits these cases set that the sandbox cannot enforce:\n\n";
  for (const auto& [limit, ids] : by_limit) {
    out += fmt::format("- `{}`: {} ({})\n", MdCell(limit), ids.size(),
                       MdCell(fmt::format("{}", fmt::join(ids, ", "))));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Terminal

std::string Paint(const std::string& text, const char* color, bool enabled) {
  return enabled ? fmt::format("\033[{}m{}\033[0m", color, text) : text;
}

constexpr const char* kGreen = "32";
constexpr const char* kRed = "31";

std::string CountCell(int64_t n, const char* color, bool enabled, int width) {
  std::string text = fmt::format("{:>{}}", n, width);
  return n > 0 ? Paint(text, color, enabled) : text;
}

void PrintCountsRow(std::ostream& out, const std::string& label, const Counts& c, size_t width,
                    bool color) {
  out << fmt::format("{:<{}}", label, width) << ' ' << CountCell(c.pass, kGreen, color, 5) << ' '
      << CountCell(c.fail, kRed, color, 5) << ' ' << CountCell(c.error, kRed, color, 6) << ' '
      << fmt::format("{:>5}", c.skip) << '\n';
}

Expected<void> WriteFile(const std::string& path, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "wbe");
  if (file == nullptr) return std::unexpected(Error::Sys("create " + path));
  bool ok = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  int err = ok ? 0 : errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) return std::unexpected(Error::Sys("write " + path, err));
  return {};
}

std::string OsName() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("PRETTY_NAME=")) continue;
    std::string value = line.substr(12);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return "";
}

}  // namespace

// XML 1.0 cannot carry most control characters even as references: they become \xNN text.
std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : smolbox::ToValidUtf8(text)) {
    auto byte = static_cast<unsigned char>(c);
    if (const char* entity = XmlEntity(c)) {
      out += entity;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string NowIso8601() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

json ToJson(const BatteryReport& report) {
  json cases = json::array();
  for (const CaseReport& r : report.cases) cases.push_back(CaseJson(r));
  return json{{"sandbox", smolbox::ToValidUtf8(report.sandbox)},
              {"sandbox_version", smolbox::ToValidUtf8(report.sandbox_version)},
              {"host", report.host.is_null() ? json::object() : report.host},
              {"started", report.started},
              {"startup_allowance_ms", report.startup_allowance_ms},
              {"cases", cases},
              {"summary", SummaryJson(report)}};
}

std::string ToJunitXml(const BatteryReport& report) {
  Counts all = CountAll(report);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      R"(<testsuites name="{}" tests="{}" failures="{}" errors="{}" skipped="{}" time="{}">)"
      "\n",
      XmlEscape("smolvm-check " + SandboxTitle(report)), all.total(), all.fail, all.error, all.skip,
      Seconds(all.wall_ms));
  auto counts = CountByCategory(report);
  for (const std::string& category : CategoryOrder(report)) {
    out += JunitSuite(report, category, counts[category]);
  }
  return out + "</testsuites>\n";
}

std::string ToMarkdown(const BatteryReport& report) {
  std::string date = report.started.substr(0, std::min<size_t>(10, report.started.size()));
  std::string out = fmt::format("# smolvm-check: {}, {}\n\n", MdCell(SandboxTitle(report)), date);
  std::string host = HostLine(report.host);
  out += fmt::format("Started {}{}.\n\n", MdCell(report.started),
                     host.empty() ? "" : " on " + MdCell(host));
  out += fmt::format("**{}.**\n\n", SummaryLine(CountAll(report)));
  out += MdCategoryTable(report);
  out += MdFailures(report);
  out += MdUnsupported(report);
  return out;
}

void PrintTable(const BatteryReport& report, std::ostream& out, bool color) {
  size_t width = 8;  // "category"
  for (const std::string& category : CategoryOrder(report))
    width = std::max(width, category.size());
  out << fmt::format("{:<{}} {:>5} {:>5} {:>6} {:>5}\n", "category", width, "pass", "fail", "error",
                     "skip");
  auto counts = CountByCategory(report);
  for (const std::string& category : CategoryOrder(report)) {
    PrintCountsRow(out, category, counts[category], width, color);
  }
  PrintCountsRow(out, "total", CountAll(report), width, color);
  bool header = false;
  for (const CaseReport& r : report.cases) {
    if (!IsProblem(r)) continue;
    if (!header) out << "\nFailures:\n";
    header = true;
    std::string label = r.verdict == Verdict::kFail ? "FAIL " : "ERROR";
    out << "  " << Paint(label, kRed, color) << ' ' << r.id << ": " << OneLine(r.reason) << '\n';
  }
  auto by_limit = UnsupportedByLimit(report);
  if (!by_limit.empty()) out << "\nLimits " << report.sandbox << " cannot enforce:\n";
  for (const auto& [limit, ids] : by_limit) {
    out << fmt::format("  {} (set by {} case{})\n", limit, ids.size(), ids.size() == 1 ? "" : "s");
  }
}

Expected<void> WriteReports(const BatteryReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected(Error::Sys("create " + dir, ec.value()));
  for (auto [name, text] :
       {std::pair{"report.json", ToJson(report).dump(2) + "\n"},
        std::pair{"junit.xml", ToJunitXml(report)}, std::pair{"report.md", ToMarkdown(report)}}) {
    SMOLBOX_TRY(WriteFile(dir + "/" + name, text));
  }
  return {};
}

json DescribeHost() {
  json host = json::object();
  struct utsname uts {};
  if (uname(&uts) == 0) {
    host["kernel"] = fmt::format("{} {}", uts.sysname, uts.release);
    host["arch"] = uts.machine;
  }
  if (std::string os = OsName(); !os.empty()) host["os"] = smolbox::ToValidUtf8(os);
  host["cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  struct sysinfo info {};
  if (sysinfo(&info) == 0) {
    host["memory_mib"] = static_cast<int64_t>(info.totalram * info.mem_unit >> 20);
  }
  host["uid"] = getuid();
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr) host["user"] = pw->pw_name;
  return host;
}

}  // namespace smolvm_check
