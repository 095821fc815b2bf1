// What smolvm-check mutate found: per mutant, whether the battery killed it and by which cases,
// as mutation.json (the source of truth), mutation.md and mutation.xml (a JUnit test case per
// mutant, failed when it survived).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "battery/report.h"
#include "mutate/mutant_table.h"

namespace smolvm_check {

enum class MutantVerdict {
  kKilled,          // a case failed
  kStillborn,       // no case failed, but some could not run: the sandbox errs without it
  kSurvived,        // every case passed: a hole in the battery
  kDefenceInDepth,  // survived, and the table says why no case can tell
};

struct MutantResult {
  Mutant mutant;
  MutantVerdict verdict = MutantVerdict::kSurvived;
  std::vector<std::string> killers;  // the cases that failed
  std::vector<std::string> errored;  // the cases that could not be judged
  size_t cases = 0;
  int64_t wall_ms = 0;
};

struct MutationReport {
  std::string sandbox;
  std::string smolbox_version;
  nlohmann::json host;
  std::string started;
  // The cases that fail with no switch off: no evidence against a mutant.
  std::vector<std::string> baseline_failures;
  int64_t baseline_ms = 0;
  std::vector<MutantResult> results;
  int64_t wall_ms = 0;
};

// The verdict of one mutant's run; a case in baseline_failures kills nothing.
MutantResult Judge(const Mutant& mutant, const std::vector<CaseReport>& cases,
                   const std::set<std::string>& baseline_failures);
const char* VerdictName(MutantVerdict verdict);
// Killed or stillborn over all but the defence-in-depth ones, in percent (100 when none count).
double MutationScore(const MutationReport& report);
size_t Survivors(const MutationReport& report);

nlohmann::json ToJson(const MutationReport& report);
std::string ToMarkdown(const MutationReport& report);
std::string ToJunitXml(const MutationReport& report);
// mutation.json, mutation.md and mutation.xml into dir (created if missing).
smolbox::Expected<void> WriteMutationReports(const MutationReport& report, const std::string& dir);

}  // namespace smolvm_check
