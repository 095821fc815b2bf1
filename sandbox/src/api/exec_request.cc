#include "exec_request.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "json_bounds.h"
#include "smolbox/spec.h"

namespace smolbox::api {
namespace {

using nlohmann::json;

constexpr std::string_view kBody = "request body";

Expected<std::string> StringField(const json& value, const std::string& field) {
  if (!value.is_string()) return std::unexpected(Error::Field(field, "must be a string"));
  return value.get<std::string>();
}

}  // namespace

Expected<ExecRequest> ParseExecRequest(const std::string& body) {
  SMOLBOX_ASSIGN_OR_RETURN(json doc, ParseBoundedJson(body, {.max_bytes = kMaxSpecBytes}, kBody));
  if (!doc.is_object()) return std::unexpected(Error::Field(std::string(kBody), "must be a JSON object"));
  ExecRequest request;
  ExecSpec check;  // the order's fields as an exec, to validate them as one
  bool has_argv = false;
  for (const auto& [key, value] : doc.items()) {
    if (key == "argv") {
      if (!value.is_array()) return std::unexpected(Error::Field("argv", "must be an array of strings"));
      for (size_t i = 0; i < value.size(); ++i) {
        SMOLBOX_ASSIGN_OR_RETURN(auto arg, StringField(value[i], fmt::format("argv[{}]", i)));
        request.order.argv.push_back(std::move(arg));
      }
      has_argv = true;
    } else if (key == "env") {
      if (!value.is_object()) return std::unexpected(Error::Field("env", "must be an object of strings"));
      for (const auto& [name, text] : value.items()) {
        SMOLBOX_ASSIGN_OR_RETURN(auto v, StringField(text, "env." + name));
        request.order.env[name] = std::move(v);
      }
    } else if (key == "workdir") {
      SMOLBOX_ASSIGN_OR_RETURN(auto dir, StringField(value, "workdir"));
      request.order.workdir = std::move(dir);
    } else if (key == "timeout_ms") {
      if (!value.is_number_integer()) return std::unexpected(Error::Field("timeout_ms", "must be an integer"));
      request.order.timeout_ms = value.get<int64_t>();
    } else if (key == "stdin") {
      SMOLBOX_ASSIGN_OR_RETURN(auto data, StringField(value, "stdin"));
      request.stdin_data = std::move(data);
    } else {
      // An empty key is still named: as its JSON spelling.
      return std::unexpected(
          Error::Field(key.empty() ? "\"\"" : key, "unknown field (argv, env, workdir, timeout_ms, stdin)"));
    }
  }
  if (!has_argv || request.order.argv.empty()) return std::unexpected(Error::Field("argv", "is missing or empty"));
  check.argv = request.order.argv;
  check.env = request.order.env;
  check.workdir = request.order.workdir;
  if (request.order.timeout_ms) check.limits.timeout_ms = *request.order.timeout_ms;
  if (auto ok = ValidateExecSpec(check); !ok) {
    Error error = ok.error();
    // The request's own name for the one limit it carries.
    if (error.where == "limits.timeout_ms") error.where = "timeout_ms";
    return std::unexpected(std::move(error));
  }
  request.order.sends_stdin = request.stdin_data.has_value();
  request.order.streams_output = true;
  return request;
}

}  // namespace smolbox::api
