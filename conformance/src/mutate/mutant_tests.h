// A protection that no battery case can reach is measured by the mutant build's own tests: the
// image import's guards are one, since the battery runs workloads and never imports an image.
// A table row names a gtest binary of the mutant build and a filter ("tests"); the binary runs
// with the switch off, and each test is reported as a case, so that a failed one kills the
// mutant as a failed case does.
//
//   auto cases = RunMutantTests("build-mutants/bin", {"smolbox_image_tests", "ImageStoreTest.*"}, "image_limits");
#pragma once

#include <string>
#include <vector>

#include "battery/report.h"
#include "mutate/mutant_table.h"

namespace smolvm_check {

// One report per test the binary ran, "pass" or "fail"; one "error" report, with the reason,
// when the binary could not be run or ran no test. disable: the SMOLBOX_DISABLE value, or "".
std::vector<CaseReport> RunMutantTests(const std::string& bin_dir, const MutantTests& tests, const std::string& disable);

}  // namespace smolvm_check
