#include "mutate/mutation_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace smolvm_check {
namespace {

std::string Seconds(int64_t ms) { return fmt::format("{:.1f}", static_cast<double>(ms) / 1000); }

std::string Joined(const std::vector<std::string>& items, size_t at_most) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < at_most; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > at_most) out += fmt::format(" and {} more", items.size() - at_most);
  return out;
}

// What the table's last column says of a mutant.
std::string MutantEvidence(const MutantResult& r) {
  switch (r.verdict) {
    case MutantVerdict::kKilled: return Joined(r.killers, 4);
    case MutantVerdict::kStillborn: return "the sandbox errs without it: " + Joined(r.errored, 3);
    case MutantVerdict::kSurvived: return "no case noticed";
    case MutantVerdict::kDefenceInDepth: return r.mutant.defence_in_depth;
  }
  return "";
}

Expected<void> WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) return std::unexpected(Error::Sys("write " + path));
  return {};
}

}  // namespace

MutantResult Judge(const Mutant& mutant, const std::vector<CaseReport>& cases,
                   const std::set<std::string>& baseline_failures) {
  MutantResult r;
  r.mutant = mutant;
  r.cases = cases.size();
  for (const CaseReport& c : cases) {
    r.wall_ms += c.wall_ms;
    if (baseline_failures.contains(c.id)) continue;
    if (c.verdict == Verdict::kFail) r.killers.push_back(c.id);
    if (c.verdict == Verdict::kError) r.errored.push_back(c.id);
  }
  if (!r.killers.empty()) r.verdict = MutantVerdict::kKilled;
  else if (!r.errored.empty()) r.verdict = MutantVerdict::kStillborn;
  else if (!mutant.defence_in_depth.empty()) r.verdict = MutantVerdict::kDefenceInDepth;
  else r.verdict = MutantVerdict::kSurvived;
  return r;
}

const char* VerdictName(MutantVerdict verdict) {
  switch (verdict) {
    case MutantVerdict::kKilled: return "killed";
    case MutantVerdict::kStillborn: return "stillborn";
    case MutantVerdict::kSurvived: return "survived";
    case MutantVerdict::kDefenceInDepth: return "defence in depth";
  }
  return "?";
}

size_t Survivors(const MutationReport& report) {
  return static_cast<size_t>(std::count_if(report.results.begin(), report.results.end(), [](const MutantResult& r) {
    return r.verdict == MutantVerdict::kSurvived;
  }));
}

double MutationScore(const MutationReport& report) {
  size_t counted = 0, caught = 0;
  for (const MutantResult& r : report.results) {
    if (r.verdict == MutantVerdict::kDefenceInDepth) continue;
    ++counted;
    if (r.verdict != MutantVerdict::kSurvived) ++caught;
  }
  return counted == 0 ? 100.0 : 100.0 * static_cast<double>(caught) / static_cast<double>(counted);
}

nlohmann::json ToJson(const MutationReport& report) {
  nlohmann::json mutants = nlohmann::json::array();
  for (const MutantResult& r : report.results) {
    nlohmann::json m = {{"name", r.mutant.name}, {"verdict", VerdictName(r.verdict)}, {"killers", r.killers},
                        {"errored", r.errored}, {"cases", r.cases}, {"wall_ms", r.wall_ms},
                        {"categories", r.mutant.categories}};
    if (!r.mutant.defence_in_depth.empty()) m["defence_in_depth"] = r.mutant.defence_in_depth;
    mutants.push_back(std::move(m));
  }
  return {{"sandbox", report.sandbox}, {"smolbox_version", report.smolbox_version}, {"host", report.host},
          {"started", report.started}, {"baseline_failures", report.baseline_failures},
          {"baseline_ms", report.baseline_ms}, {"wall_ms", report.wall_ms},
          {"score_percent", MutationScore(report)}, {"survivors", Survivors(report)}, {"mutants", mutants}};
}

std::string ToMarkdown(const MutationReport& report) {
  std::string out = fmt::format("# smolvm-check mutate, {}\n\n{}: mutation score {:.0f}% ({} mutants, {} survived), "
                                "{} s in all (baseline {} s).\n\n",
                                report.started, report.sandbox, MutationScore(report), report.results.size(),
                                Survivors(report), Seconds(report.wall_ms), Seconds(report.baseline_ms));
  if (!report.baseline_failures.empty()) {
    out += fmt::format("Failing with no protection off, and so counted against no mutant: {}.\n\n",
                       Joined(report.baseline_failures, 20));
  }
  out += "| protection | verdict | cases run | killed by, or why not | time |\n|---|---|---:|---|---:|\n";
  for (const MutantResult& r : report.results) {
    std::string evidence = MutantEvidence(r);
    std::replace(evidence.begin(), evidence.end(), '|', '/');
    out += fmt::format("| `{}` | {} | {} | {} | {} s |\n", r.mutant.name, VerdictName(r.verdict), r.cases, evidence,
                       Seconds(r.wall_ms));
  }
  return out;
}

std::string ToJunitXml(const MutationReport& report) {
  std::string cases;
  for (const MutantResult& r : report.results) {
    cases += fmt::format("    <testcase classname=\"mutant\" name=\"{}\" time=\"{}\">", XmlEscape(r.mutant.name), Seconds(r.wall_ms));
    if (r.verdict == MutantVerdict::kSurvived) {
      cases += fmt::format("<failure message=\"survived: no case of {} noticed it gone\"/>",
                           XmlEscape(Joined(r.mutant.categories, 20)));
    } else {
      cases += fmt::format("<system-out>{}: {}</system-out>", VerdictName(r.verdict), XmlEscape(MutantEvidence(r)));
    }
    cases += "</testcase>\n";
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"smolvm-check mutate {}\" "
                     "tests=\"{}\" failures=\"{}\" time=\"{}\">\n{}  </testsuite>\n</testsuites>\n",
                     XmlEscape(report.sandbox), report.results.size(), Survivors(report), Seconds(report.wall_ms), cases);
}

smolbox::Expected<void> WriteMutationReports(const MutationReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return std::unexpected(Error{dir, ec.message(), ec.value()});
  SMOLBOX_TRY(WriteText(dir + "/mutation.json", ToJson(report).dump(2) + "\n"));
  SMOLBOX_TRY(WriteText(dir + "/mutation.md", ToMarkdown(report)));
  return WriteText(dir + "/mutation.xml", ToJunitXml(report));
}

}  // namespace smolvm_check
