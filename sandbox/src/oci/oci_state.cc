#include "oci_state.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "host_root.h"
#include "json_bounds.h"
#include "owned_dir.h"
#include "state.h"

namespace smolbox::oci {
namespace {

using nlohmann::json;

constexpr size_t kMaxStateBytes = 1 << 20;

const char* kStatusNames[] = {"creating", "created", "running", "stopped"};

Expected<ContainerStatus> ParseStatus(const std::string& name) {
  for (int i = 0; i < 4; ++i) {
    if (name == kStatusNames[i]) return static_cast<ContainerStatus>(i);
  }
  return std::unexpected(Error{"state.json", fmt::format("unknown status {:?}", name), 0});
}

}  // namespace

std::string ToString(ContainerStatus status) { return kStatusNames[static_cast<int>(status)]; }

std::string DefaultRoot() {
  if (IsHostRoot()) return "/run/smolbox-oci";
  const char* runtime_dir = getenv("XDG_RUNTIME_DIR");
  return fmt::format("{}/smolbox-oci", runtime_dir && *runtime_dir
                                           ? runtime_dir
                                           : fmt::format("/tmp/smolbox-oci-{}", geteuid()));
}

Expected<void> ContainerDir::Create() const {
  // Engines name a root below their own state directory and leave making it to the runtime.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(root_).parent_path(), ec);
  if (ec) return std::unexpected(Error{"mkdir " + root_, ec.message(), ec.value()});
  SMOLBOX_TRY(EnsureOwnedDir(root_, 0700));
  if (mkdir(path_.c_str(), 0700) != 0) {
    if (errno == EEXIST)
      return std::unexpected(
          Error::Field("container id", "a container with this id already exists"));
    return std::unexpected(Error::Sys("mkdir " + path_));
  }
  return {};
}

bool ContainerDir::Exists() const {
  struct stat st {};
  return lstat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Expected<ContainerState> ContainerDir::Read() const {
  int fd = open((path_ + "/state.json").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::unexpected(Error::Sys("open " + path_ + "/state.json"));
  std::string text(kMaxStateBytes + 1, '\0');
  ssize_t size = read(fd, text.data(), text.size());
  close(fd);
  if (size < 0) return std::unexpected(Error::Sys("read " + path_ + "/state.json"));
  text.resize(size_t(size));
  SMOLBOX_ASSIGN_OR_RETURN(json doc,
                           ParseBoundedJson(text, {.max_bytes = kMaxStateBytes}, "state.json"));
  try {
    ContainerState state;
    state.id = doc.at("id").get<std::string>();
    state.bundle = doc.at("bundle").get<std::string>();
    SMOLBOX_ASSIGN_OR_RETURN(state.status, ParseStatus(doc.at("status").get<std::string>()));
    state.pid = IntegerAt<pid_t>(doc, "pid");
    state.pid_start = IntegerAt<uint64_t>(doc, "pid_start");
    state.created = doc.at("created").get<std::string>();
    state.annotations = doc.at("annotations").get<std::map<std::string, std::string>>();
    if (doc.contains("exit_code")) state.exit_code = IntegerAt<int>(doc, "exit_code");
    return state;
  } catch (const json::exception& e) {
    return std::unexpected(Error{"state.json", JsonExceptionReason(e), 0});
  }
}

Expected<void> ContainerDir::Write(const ContainerState& state) const {
  json doc = {{"id", state.id},
              {"bundle", state.bundle},
              {"status", ToString(state.status)},
              {"pid", state.pid},
              {"pid_start", state.pid_start},
              {"created", state.created},
              {"annotations", state.annotations}};
  if (state.exit_code) doc["exit_code"] = *state.exit_code;
  std::string text = doc.dump();
  std::string temporary = fmt::format("{}/state.json.{}", path_, getpid());
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return std::unexpected(Error::Sys("create " + temporary));
  bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written || rename(temporary.c_str(), (path_ + "/state.json").c_str()) != 0) {
    unlink(temporary.c_str());
    return std::unexpected(Error::Sys("write " + path_ + "/state.json"));
  }
  return {};
}

Expected<void> ContainerDir::Remove() const {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (ec) return std::unexpected(Error{"remove " + path_, ec.message(), ec.value()});
  return {};
}

ContainerStatus Observe(const ContainerState& state) {
  if (state.status == ContainerStatus::kStopped) return state.status;
  auto start = shared::ProcessStartTime(state.pid);
  bool alive = start && *start == state.pid_start;
  return alive ? state.status : ContainerStatus::kStopped;
}

std::string StateJson(const ContainerState& state, ContainerStatus status) {
  json doc = {{"ociVersion", "1.2.0"},
              {"id", state.id},
              // "creating" is the runtime spec's too: a create still under way.
              {"status", ToString(status)},
              {"pid", status == ContainerStatus::kStopped ? 0 : state.pid},
              {"bundle", state.bundle},
              {"rootfs", state.bundle + "/rootfs"},
              {"created", state.created},
              {"annotations", state.annotations}};
  return doc.dump(2);
}

}  // namespace smolbox::oci
