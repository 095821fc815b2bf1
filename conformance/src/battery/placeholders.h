// {name} placeholders in profile templates and case args.
//
//   auto word = Substitute("--mem={memory_mib}M", [](const std::string& name)
//                          -> std::optional<std::string> { ... });   // "--mem=256M"
//
// A placeholder is '{', a name of letters, digits and "_:.-", and '}'; any other brace is text,
// so "${HOME}" in a shell snippet would read as {HOME}: templates avoid that form.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smolbox/error.h"

namespace smolvm_check {

struct PlaceholderRef {
  size_t pos = 0;  // of the '{'
  size_t size = 0;
  std::string name;  // without braces
};

std::vector<PlaceholderRef> FindPlaceholders(std::string_view word);
// The word with every placeholder replaced; one that lookup does not know is an error
// "unknown placeholder {name}".
using PlaceholderLookup = std::function<std::optional<std::string>(const std::string& name)>;
smolbox::Expected<std::string> Substitute(std::string_view word, const PlaceholderLookup& lookup);

}  // namespace smolvm_check
