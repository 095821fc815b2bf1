#include "oci_hooks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unique_fd.h"

namespace smolbox::oci {
namespace {

using nlohmann::json;

constexpr int kDefaultTimeoutS = 30;
// A hook past this is a hung one, whatever it asked for.
constexpr int kMaxTimeoutS = 600;

std::unexpected<Error> Fail(const std::string& field, const std::string& why) {
  return std::unexpected(Error::Field(field, why));
}

Expected<std::vector<std::string>> Strings(const json& object, const char* key,
                                           const std::string& path) {
  std::vector<std::string> out;
  if (!object.contains(key)) return out;
  const json& list = object[key];
  if (!list.is_array()) return Fail(path + key, "must be an array of strings");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string())
      return Fail(fmt::format("{}{}[{}]", path, key, i), "must be a string");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

Expected<Hook> ParseHook(const json& entry, const std::string& field) {
  std::string path = field + ".";
  if (!entry.is_object()) return Fail(field, "must be an object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "path" && key != "args" && key != "env" && key != "timeout")
      return Fail(path + key, "is not a hook's field");
  }
  Hook hook;
  if (!entry.contains("path") || !entry["path"].is_string() ||
      !entry["path"].get_ref<const std::string&>().starts_with('/')) {
    return Fail(path + "path", "must be an absolute path");
  }
  hook.path = entry["path"].get<std::string>();
  SMOLBOX_ASSIGN_OR_RETURN(hook.args, Strings(entry, "args", path));
  SMOLBOX_ASSIGN_OR_RETURN(hook.env, Strings(entry, "env", path));
  if (entry.contains("timeout")) {
    const json& timeout = entry["timeout"];
    if (!timeout.is_number_integer() || timeout.get<int64_t>() < 1 ||
        timeout.get<int64_t>() > kMaxTimeoutS) {
      return Fail(path + "timeout", fmt::format("must be 1 to {} seconds", kMaxTimeoutS));
    }
    hook.timeout_s = timeout.get<int>();
  }
  return hook;
}

// Runs one hook to its end or its timeout; state goes to its stdin through a pipe.
Expected<void> RunHook(const Hook& hook, const std::string& field, const std::string& state) {
  int in[2];
  if (pipe2(in, O_CLOEXEC) != 0) return std::unexpected(Error::Sys("pipe"));
  UniqueFd read_end(in[0]), write_end(in[1]);
  std::vector<std::string> args =
      hook.args.empty() ? std::vector<std::string>{hook.path} : hook.args;
  std::vector<char*> argv, envp;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = hook.env;
  for (auto& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return std::unexpected(Error::Sys("fork for " + field));
  if (pid == 0) {
    dup2(read_end.get(), 0);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);  // the runtime's stdout is the container's: a hook never writes there
    execve(hook.path.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  read_end.Reset();
  // A state larger than the pipe would block: it is a few hundred bytes.
  (void)!write(write_end.get(), state.data(), state.size());
  write_end.Reset();
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  pollfd done{pidfd.get(), POLLIN, 0};
  int timeout_ms = hook.timeout_s.value_or(kDefaultTimeoutS) * 1000;
  bool ended = pidfd.valid() && poll(&done, 1, timeout_ms) > 0;
  if (!ended) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ended)
    return Fail(field, fmt::format("{} did not end within {} s", hook.path, timeout_ms / 1000));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(field, fmt::format("{} failed (wait status {:#x})", hook.path, status));
  }
  return {};
}

}  // namespace

Expected<Hooks> ParseHooks(const json& hooks) {
  Hooks out;
  for (const auto& [stage, list] : hooks.items()) {
    std::string field = "hooks." + stage;
    std::vector<Hook>* into = stage == "createRuntime" ? &out.create_runtime
                              : stage == "prestart"    ? &out.prestart
                              : stage == "poststart"   ? &out.poststart
                              : stage == "poststop"    ? &out.poststop
                                                       : nullptr;
    if (!into) {
      if (list.is_array() && list.empty()) continue;
      return Fail(field,
                  "is not run: smolbox runs hooks on the host only (createRuntime, prestart, "
                  "poststart, poststop), "
                  "never inside the sandbox");
    }
    if (!list.is_array()) return Fail(field, "must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      SMOLBOX_ASSIGN_OR_RETURN(auto hook, ParseHook(list[i], fmt::format("{}[{}]", field, i)));
      into->push_back(std::move(hook));
    }
  }
  return out;
}

Expected<void> RunHooks(const std::vector<Hook>& hooks, const std::string& stage,
                        const std::string& state) {
  for (size_t i = 0; i < hooks.size(); ++i)
    SMOLBOX_TRY(RunHook(hooks[i], fmt::format("hooks.{}[{}]", stage, i), state));
  return {};
}

}  // namespace smolbox::oci
