// Running one started workload to its end, in one poll loop (after sandbox2's monitor): it
// feeds stdin, relays stdout and stderr to the host as they come and under the output cap,
// enforces the wall deadline, watches the host, and reaps.
//
//   auto workload = StartWorkload(request, seccomp);
//   ExecReport report = PumpExec(connection, signals, request, std::move(*workload), meter);
//   connection.Send(EncodeExit(report));
#pragma once

#include <cstdint>
#include <functional>

#include "attach_point.h"
#include "connection.h"
#include "exec.h"
#include "exec_protocol.h"
#include "reaper.h"

namespace smolbox::agent {

// The CPU time the whole workload tree has used since its exec began, in ms. In a guest the
// agent's cgroup counts it; on ns the host's cgroup does, and the host enforces it (empty here).
using CpuMeter = std::function<int64_t()>;

// When the main process ends, so does the exec: whatever it left running is killed. Returns
// once the whole tree is gone (or is left to the host's backstop after a bounded wait).
// A timeout_ms <= 0 sets no deadline; output_bytes is a hard cap, so 0 allows no output. With a
// meter, a cpu_ms > 0 ends the tree once it has used that much CPU in all, which RLIMIT_CPU,
// counted per process, cannot do.
// Output is sent with blocking writes: a host that stops reading stalls the loop, deadline
// included, and then only the host's own backstop ends the workload.
// attach, when given, is served meanwhile: a container's exec attaches while its main runs.
ExecReport PumpExec(Connection& connection, const ChildSignals& signals, const ExecRequest& request,
                    Workload workload, const CpuMeter& cpu_meter, AttachPoint* attach = nullptr);

}  // namespace smolbox::agent
