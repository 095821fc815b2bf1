#include "mutate/mutant_table.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace smolvm_check {
namespace {

constexpr size_t kMaxTableBytes = 1 << 20;

// value[key], or null when it is missing: a const json's operator[] must not be asked for that.
nlohmann::json At(const nlohmann::json& value, const char* key) {
  return value.is_object() && value.contains(key) ? value[key] : nlohmann::json();
}

Expected<Mutant> ParseMutant(const nlohmann::json& value, const std::string& path,
                             const std::set<std::string>& categories) {
  SMOLBOX_TRY(CheckKeys(value, path, {"name", "backends", "categories", "tests", "defence_in_depth"}));
  Mutant m;
  SMOLBOX_ASSIGN_OR_RETURN(m.name, GetString(At(value, "name"), FieldPath(path, "name")));
  SMOLBOX_ASSIGN_OR_RETURN(m.backends, GetStringArray(At(value, "backends"), FieldPath(path, "backends")));
  SMOLBOX_ASSIGN_OR_RETURN(m.categories, GetStringArray(At(value, "categories"), FieldPath(path, "categories")));
  if (value.contains("defence_in_depth")) {
    SMOLBOX_ASSIGN_OR_RETURN(m.defence_in_depth, GetString(At(value, "defence_in_depth"), FieldPath(path, "defence_in_depth")));
  }
  if (value.contains("tests")) {
    std::string tests_path = FieldPath(path, "tests");
    const nlohmann::json tests = At(value, "tests");
    SMOLBOX_TRY(CheckKeys(tests, tests_path, {"binary", "filter"}));
    MutantTests t;
    SMOLBOX_ASSIGN_OR_RETURN(t.binary, GetString(At(tests, "binary"), FieldPath(tests_path, "binary")));
    SMOLBOX_ASSIGN_OR_RETURN(t.filter, GetString(At(tests, "filter"), FieldPath(tests_path, "filter")));
    // Run from the mutant's bin/: a name, never a path to anywhere else.
    if (t.binary.empty() || t.binary.find('/') != std::string::npos || t.binary.starts_with(".")) {
      return std::unexpected(Error::Field(FieldPath(tests_path, "binary"), fmt::format("{:?} is no file name", t.binary)));
    }
    if (t.filter.empty()) return std::unexpected(Error::Field(FieldPath(tests_path, "filter"), "is empty"));
    m.tests = std::move(t);
  }
  if (m.backends.empty()) return std::unexpected(Error::Field(FieldPath(path, "backends"), "is empty"));
  for (size_t i = 0; i < m.backends.size(); ++i) {
    if (m.backends[i] != "ns" && m.backends[i] != "vm") {
      return std::unexpected(Error::Field(IndexPath(FieldPath(path, "backends"), i), fmt::format("{:?} is neither ns nor vm", m.backends[i])));
    }
  }
  if (m.categories.empty() && !m.tests && m.defence_in_depth.empty()) {
    return std::unexpected(Error::Field(FieldPath(path, "categories"), "is empty, and neither tests nor defence_in_depth says why"));
  }
  for (size_t i = 0; i < m.categories.size(); ++i) {
    if (!categories.contains(m.categories[i])) {
      return std::unexpected(Error::Field(IndexPath(FieldPath(path, "categories"), i), fmt::format("{:?} is no category of the catalog", m.categories[i])));
    }
  }
  return m;
}

}  // namespace

Expected<MutantTable> ParseMutantTable(const std::string& text, const Catalog& catalog) {
  SMOLBOX_ASSIGN_OR_RETURN(auto doc, ParseJsonText(text, {.max_bytes = kMaxTableBytes}));
  SMOLBOX_TRY(CheckKeys(doc, "", {"version", "description", "mutants"}));
  SMOLBOX_ASSIGN_OR_RETURN(int64_t version, GetInteger(At(doc, "version"), "version"));
  if (version != 1) return std::unexpected(Error::Field("version", fmt::format("{} is not 1", version)));
  if (!doc.contains("mutants") || !doc["mutants"].is_array()) return std::unexpected(Error::Field("mutants", "is not a list"));
  std::set<std::string> categories;
  for (const Case& c : catalog.cases) categories.insert(c.category);
  MutantTable table;
  std::set<std::string> names;
  for (size_t i = 0; i < doc["mutants"].size(); ++i) {
    std::string path = IndexPath("mutants", i);
    SMOLBOX_ASSIGN_OR_RETURN(auto mutant, ParseMutant(doc["mutants"][i], path, categories));
    if (!names.insert(mutant.name).second) return std::unexpected(Error::Field(FieldPath(path, "name"), fmt::format("{:?} is given twice", mutant.name)));
    table.mutants.push_back(std::move(mutant));
  }
  return table;
}

Expected<MutantTable> LoadMutantTable(const std::string& path, const Catalog& catalog) {
  auto text = ReadTextFile(path, kMaxTableBytes);
  if (!text) return std::unexpected(Within(path, text.error()));
  auto table = ParseMutantTable(*text, catalog);
  if (!table) return std::unexpected(Within(path, table.error()));
  return table;
}

}  // namespace smolvm_check
