#include "battery/placeholders.h"

#include <fmt/format.h>

namespace smolvm_check {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':' || c == '.' || c == '-';
}

}  // namespace

std::vector<PlaceholderRef> FindPlaceholders(std::string_view word) {
  std::vector<PlaceholderRef> found;
  size_t pos = 0;
  while ((pos = word.find('{', pos)) != std::string_view::npos) {
    size_t end = pos + 1;
    while (end < word.size() && IsNameChar(word[end])) ++end;
    if (end < word.size() && word[end] == '}' && end > pos + 1) {
      found.push_back({pos, end + 1 - pos, std::string(word.substr(pos + 1, end - pos - 1))});
      pos = end + 1;
    } else {
      ++pos;
    }
  }
  return found;
}

smolbox::Expected<std::string> Substitute(std::string_view word, const PlaceholderLookup& lookup) {
  std::string out;
  size_t copied = 0;
  for (const PlaceholderRef& ref : FindPlaceholders(word)) {
    auto value = lookup(ref.name);
    if (!value) {
      return std::unexpected(
          smolbox::Error::Field("", fmt::format("unknown placeholder {{{}}}", ref.name)));
    }
    out.append(word.substr(copied, ref.pos - copied));
    out.append(*value);
    copied = ref.pos + ref.size;
  }
  out.append(word.substr(copied));
  return out;
}

}  // namespace smolvm_check
