// conformance/mutants.json: smolbox's protections as mutants, each with the backends it
// applies to, the battery categories whose cases can see it gone, and, where none can, why.
//
//   auto table = LoadMutantTable("conformance/mutants.json", catalog);
//   for (const Mutant& m : table->mutants) ...   // m.categories are all the catalog's
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "battery/catalog.h"
#include "battery/json_check.h"

namespace smolvm_check {

// "tests": a gtest binary of the mutant build and the filter of its tests that see the
// protection gone, for a protection no battery case reaches (mutant_tests.h).
struct MutantTests {
  std::string binary;  // beside the mutant's smolbox, in its bin/
  std::string filter;  // --gtest_filter
};

struct Mutant {
  std::string name;                     // a name of smolbox's mutant.h switches
  std::vector<std::string> backends;    // "ns", "vm"
  std::vector<std::string> categories;  // of the catalog
  // Empty, or why no payload can tell the protection is gone while the others hold.
  std::string defence_in_depth;
  std::optional<MutantTests> tests;
};

struct MutantTable {
  std::vector<Mutant> mutants;
};

// Strict: unknown fields, a backend other than ns and vm, a category the catalog lacks, a
// binary that is no plain file name and a name given twice are errors naming the field.
Expected<MutantTable> LoadMutantTable(const std::string& path, const Catalog& catalog);
Expected<MutantTable> ParseMutantTable(const std::string& text, const Catalog& catalog);

}  // namespace smolvm_check
