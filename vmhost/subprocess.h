// Runs a helper program (mkfs.ext4 for seeds, qemu-system for the KVM probe, the libvirt
// daemons) with a deadline and bounded captured output. Never used for virsh: libvirt is
// only ever driven through its C API. Thread-safe; each call owns its child.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

struct ProcessOptions {
  std::chrono::milliseconds timeout{30000};
  // Extra "KEY=VALUE" entries on top of the caller's environment.
  std::vector<std::string> env;
  // Stdout and stderr together, kept up to this many bytes (the rest is read and dropped).
  size_t max_output = 64 * 1024;
  // Called with the output so far whenever more arrives; returning true ends the run early
  // (the child's process group is killed and `stopped_early` is set).
  std::function<bool(std::string_view output)> stop_when;
  // Runs in the child between fork and exec; a non-zero return aborts the exec (the child
  // exits 127). Must be async-signal-safe: plain syscalls only, no allocation (capture
  // only what fits std::function's small buffer, e.g. one pointer).
  std::function<int()> child_setup;
  // A new session for the child, so it outlives us cleanly (daemons).
  bool new_session = false;
  // Written to the child's stdin, which is then closed (`nft -f -`); empty: /dev/null.
  std::string input;
};

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal (our timeout or stop_when included)
  bool timed_out = false;
  bool stopped_early = false;
  std::string output;
};

// Runs argv[0] (an absolute path, or looked up in PATH) until it exits, the timeout passes
// or stop_when says so. Returns the result in all those cases; an error only when the child
// could not be started at all.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 const ProcessOptions& options = {});

}  // namespace warren
