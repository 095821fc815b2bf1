// Starting the launched command. The runner has threads, so between fork and exec the child
// makes only async-signal-safe calls and allocates nothing: the parent prepares everything
// (argv, envp, the fds to keep) before it forks. The child waits on a sync pipe until the parent
// has put it in the net (hold), so that nothing of the launch runs outside it, and a step that
// fails before exec comes back over a report pipe as an error that names the step and errno.
//
//   SMOLBOX_ASSIGN_OR_RETURN(auto path, ResolveProgram(launch.argv[0], launch.env));
//   auto child = Spawn(launch, path, [&](pid_t pid) { return cgroup.Add(pid); });
//   // child->pid is running path, with the parent's ends of its stdio in child->stdin_writer...
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "launch/launcher.h"
#include "unique_fd.h"

namespace smolvm_check {

// execvpe's lookup, done before fork against the launch's own PATH (a default one without).
Expected<std::string> ResolveProgram(const std::string& name, const std::vector<std::string>& env);

struct SpawnedChild {
  pid_t pid = -1;
  smolbox::UniqueFd stdin_writer;
  smolbox::UniqueFd stdout_reader;
  smolbox::UniqueFd stderr_reader;
  std::chrono::steady_clock::time_point start;  // just before fork
};

// Forks a child for launch, lets hold place it (in the net's cgroup) while it waits, then lets
// it exec path. Returns once the child has exec'd; when hold or a step of the child fails, the
// child is killed and reaped and the error names what failed.
Expected<SpawnedChild> Spawn(const Launch& launch, const std::string& path,
                             const std::function<Expected<void>(pid_t)>& hold);

// SIGKILLs a child of this process and reaps it.
void KillAndReap(pid_t pid);

}  // namespace smolvm_check
