// The ns tests' fork bomb: python source that forks up to 300 children, each sleeping 5 s, and
// prints "forked N" with how many it made. It stops itself at 300, so it is harmless even with
// no limit at all.
#pragma once

namespace smolbox::testing {

inline constexpr const char* kPythonForkBomb = R"(
import os, time
made = 0
for i in range(300):
    try:
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)
        made += 1
    except OSError:
        break
print('forked', made, flush=True)
)";

}  // namespace smolbox::testing
