// The probe as one ordered checklist, after nsjail's contain.cc: one line per concern.
#include "probe.h"

#include <sstream>

namespace smolbox::host {

Expected<HostReport> ProbeHost(const ProbeOptions& options, std::vector<ProbedPath>& probed) {
  Expected<HostView> view =
      options.root.empty() ? HostView::Live() : HostView::Fixture(options.root);
  SMOLBOX_TRY(view);
  HostReport report;
  report.root = view->root();
  Findings found;
  report.sections.push_back(ProbeCpu(*view, found));
  report.sections.push_back(ProbeKvm(*view, found));
  report.sections.push_back(ProbeVirtualization(*view, found));
  report.sections.push_back(ProbeDevices(*view));
  report.sections.push_back(ProbeNamespaces(*view, found));
  report.sections.push_back(ProbeCgroups(*view));
  report.sections.push_back(ProbeKernel(*view, found));
  report.sections.push_back(ProbeVmNeeds(options, found));
  report.sections.push_back(ProbeEgressNeeds(*view));
  Conclude(*view, found, report);
  probed = view->probed();
  return report;
}

std::string KvmUnusableReason() {
  HostView view = HostView::Live();
  Findings found;
  ProbeCpu(view, found);
  ProbeKvm(view, found);
  return WhyNoKvm(view, found);
}

Expected<HostReport> ProbeHost(const ProbeOptions& options) {
  std::vector<ProbedPath> ignored;
  return ProbeHost(options, ignored);
}

const char* ToString(Level level) {
  switch (level) {
    case Level::kPass:
      return "PASS";
    case Level::kWarn:
      return "WARN";
    case Level::kFail:
      return "FAIL";
  }
  return "FAIL";
}

const char* ToString(ProbedPath::Kind kind) {
  switch (kind) {
    case ProbedPath::Kind::kFile:
      return "file";
    case ProbedPath::Kind::kExists:
      return "exists";
    case ProbedPath::Kind::kStat:
      return "stat";
  }
  return "file";
}

Check Pass(std::string name, std::string detail) {
  return Check{std::move(name), Level::kPass, std::move(detail), ""};
}

Check Warn(std::string name, std::string detail, std::string hint) {
  return Check{std::move(name), Level::kWarn, std::move(detail), std::move(hint)};
}

Check Fail(std::string name, std::string detail, std::string hint) {
  return Check{std::move(name), Level::kFail, std::move(detail), std::move(hint)};
}

std::string Trim(std::string text) {
  const char* space = " \t\n\r";
  text.erase(0, text.find_first_not_of(space));
  text.erase(text.find_last_not_of(space) + 1);
  return text;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool HasWord(const std::string& text, const std::string& word) {
  for (const auto& w : Words(text)) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace smolbox::host
