// GuestControl: runs commands inside running VMs over each VM's control connection (an SSH
// client session to the guest's sshd over a virtio-serial port; no network needed). Every
// command runs under the guest runner, which gives it its own process group and spools its
// output inside the guest, so a command can outlive its caller as a job and be waited on,
// read back (also after a warren restart) and killed. The interface lives here without
// libssh so the interpreter can use it; the implementation links libssh. Implementations are
// thread-safe: many commands may run in one VM, on one shared connection, at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"

namespace warren {

// What to run. The command line is handed to the VM user's shell, as OpenSSH does.
struct GuestCommand {
  std::string command;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  // empty: the user's home
};

// Where a command's bytes go, and how long to stay attached.
struct GuestStreams {
  InputStream* in = nullptr;  // stdin for the command; nullptr: none (immediate EOF)
  OutputSink* out = nullptr;  // stdout; must not be null
  OutputSink* err = nullptr;  // stderr; must not be null
  // Set when the caller goes away. Before the hand-back deadline this kills the command
  // (and its whole process tree); once a command was handed back as a job, cancelling a
  // later Wait only detaches.
  std::shared_ptr<CancelSignal> cancel;
  // How long to stream before handing back while the command keeps running; < 0 streams
  // until the command ends.
  int wait_ms = -1;
};

// Where a command stands after Exec or Wait returned.
struct GuestProgress {
  std::string job;  // the runner's id for the command, [0-9a-f]{8}; always set
  bool finished = false;
  // When finished: the exit status, or nullopt when it ended without one (killed by a
  // signal, or the VM restarted under it).
  std::optional<int> exit_code;
  int signal = 0;              // the signal that ended it, when one did
  uint64_t stdout_offset = 0;  // bytes of stdout delivered so far: where a later Wait resumes
  uint64_t stderr_offset = 0;
};

struct GuestJob {
  std::string job;
  std::string command;  // as started, truncated to a sane length for listings
  int64_t started_at = 0;
  bool finished = false;
  std::optional<int> exit_code;
  int64_t finished_at = 0;
};

class GuestControl {
 public:
  virtual ~GuestControl() = default;

  // Starts `command` in VM `vm_id` and streams it per `streams`. Returns when it ends, or
  // at the deadline with finished=false (it keeps running as a job). Unavailable when the
  // VM's control connection cannot be made; Cancelled when streams.cancel fired first (the
  // command was killed).
  virtual Result<GuestProgress> Exec(std::string_view vm_id, const GuestCommand& command,
                                     const GuestStreams& streams) = 0;
  // Streams a job's output from the given offsets until it ends or streams.wait_ms passes.
  // NotFound for an unknown job (or one whose output has expired).
  virtual Result<GuestProgress> Wait(std::string_view vm_id, std::string_view job,
                                     uint64_t stdout_from, uint64_t stderr_from,
                                     const GuestStreams& streams) = 0;
  // Kills a job's whole process tree. NotFound for an unknown job; OK if it already ended.
  virtual Status Kill(std::string_view vm_id, std::string_view job) = 0;
  // The runner's jobs in a VM, newest first, including finished ones still kept.
  virtual Result<std::vector<GuestJob>> Jobs(std::string_view vm_id) = 0;
  // Drops the VM's control connection (the VM stopped, restarted or is being removed).
  virtual void Disconnect(std::string_view vm_id) = 0;
};

}  // namespace warren
