// Installing the guest runner: the host carries the runner binary (built with warren, so
// runner upgrades never wait for new images) and, once per control connection, checks the
// guest's ~/.warren/bin/warren-run --version, uploading the binary over the connection when
// it is missing or another version. The same check starts the runner's `gc` in the
// background, so finished jobs' output is dropped after a day without a timer in the guest.
// Thread-safe: RunnerBinary is immutable; EnsureRunner serializes on the caller's mutex.
#pragma once

#include <string>

#include "lobby/base/status.h"
#include "vmhost/guest/control_session.h"

namespace warren::guest {

// The version this warren was built with (what `warren-run --version` must say).
const char* RunnerVersion();

struct RunnerBinary {
  std::string path;
  std::string bytes;
};

// `warren-run` next to the running executable (/proc/self/exe), else in an install's
// PREFIX/lib/warren (/usr/bin/warren: /usr/lib/warren/warren-run).
std::string DefaultRunnerPath();
// Reads the binary and checks that it is the version this warren speaks.
Result<RunnerBinary> LoadRunnerBinary(const std::string& path);

// Makes sure the runner in the guest behind `session` is this version, once per connection:
// `*checked_generation` remembers the connection it was last checked on. The same check
// (re)starts the runner's server (`warren-run serve`, runner/serve.c) with the connection's
// environment: its socket's path in the guest goes to *serve_socket, "" when it did not
// start. Cancelled soon after `cancel` fires (when given).
Status EnsureRunner(ControlSession& session, const RunnerBinary& runner,
                    uint64_t* checked_generation, std::string* serve_socket,
                    ControlSession::Clock::time_point deadline,
                    const CancelSignal* cancel = nullptr);

}  // namespace warren::guest
