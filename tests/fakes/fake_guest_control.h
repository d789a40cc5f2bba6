// FakeGuestControl: an in-memory GuestControl for tests of everything above it (the VM
// commands, jobs, reconcile). Commands run by script: a command line maps to the output it
// prints and how it ends, or to a job that keeps running until the test releases it. Output
// offsets, hand-back at the deadline, cancellation and kill behave as the interface
// promises. Unscripted commands: `true` exits 0, `false` exits 1, `cat` echoes its stdin,
// anything else exits 0 silently. Raw channels echo. Thread-safe: a test may release a job from
// another thread while a command waits on it.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vmhost/guest_control.h"

namespace warren {

class FakeGuestControl final : public GuestControl {
 public:
  struct Script {
    std::string out;  // printed at once
    std::string err;
    std::optional<int> exit_code = 0;
    // Keeps running after printing until Release (or Kill).
    bool hold = false;
  };

  Result<GuestProgress> Exec(std::string_view vm_id, const GuestCommand& command,
                             const GuestStreams& streams) override;
  Result<GuestProgress> Wait(std::string_view vm_id, std::string_view job, uint64_t stdout_from,
                             uint64_t stderr_from, const GuestStreams& streams) override;
  Status Kill(std::string_view vm_id, std::string_view job) override;
  Result<std::vector<GuestJob>> Jobs(std::string_view vm_id) override;
  void Disconnect(std::string_view vm_id) override;
  // Records the key (PinnedHostKey shows it).
  Status RepinHostKey(std::string_view vm_id, std::string_view public_key_line) override;
  std::string PinnedHostKey(std::string_view vm_id);
  // The version the played `identity` reports for its runner, and what the host noted of it.
  static constexpr char kRunnerVersion[] = "1-fakefakefake";
  void NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                         std::string_view serve_socket) override;
  std::string NotedRunnerVersion(std::string_view vm_id);
  // A raw channel that opens at once and echoes its input back on stdout (like `cat`); EOF
  // on its input ends it with exit status 0. Unavailable while unreachable. The runner's
  // `identity` command (vmhost/guest/identity.h) is played instead: it reads the request,
  // asks `clock?`, and reports the hostname SetHostnames gives and the MAC it was asked for
  // (IdentitiesApplied counts them). `identity-wait` leaves the VM waiting (prints
  // kGuestIdentityWaits), for good, as the runner's waiter stays; the hand-over command (or
  // the waiter's socket) plays `identity` in a VM that waits, else it is refused as not root
  // (exit 5; the socket: Unavailable).
  // kIdentityPort plays `identity` (after the hello's answer) in a VM that waits; in one that
  // does not: Unavailable, as a port no waiter reads would be left for the control connection.
  Result<std::shared_ptr<GuestPipe>> OpenChannel(std::string_view vm_id,
                                                 const GuestChannelRequest& request,
                                                 std::function<void()> notify) override;
  // OK at once while reachable, `answered` called first (connects() lists the VM ids asked
  // for).
  Status Connect(std::string_view vm_id, std::chrono::steady_clock::time_point deadline,
                 std::function<void()> answered) override;
  std::vector<std::string> connects() const;

  // ---- Scripting.
  void SetScript(const std::string& command, Script script);
  // While false, every call answers Unavailable (a guest that has not booted yet).
  void SetReachable(bool reachable);
  // The next `n` Execs answer Unavailable, then the guest is reachable.
  void UnreachableFor(int n);
  // More output from a running job.
  void Append(const std::string& job, const std::string& out, const std::string& err = "");
  // Ends a running job with `exit_code` (nullopt: no status), after printing `out`.
  void Release(const std::string& job, std::optional<int> exit_code, const std::string& out = "");
  // Forgets a job, as the runner does when its output expires or its VM restarted.
  void Forget(const std::string& job);

  // The hostname a VM's guest reports (the VM's name, as its seed says).
  void SetHostnames(std::function<std::string(std::string_view vm_id)> hostname_of);

  // ---- Inspection.
  std::vector<std::string> commands() const;  // every command Exec'd, in order
  std::string last_stdin() const;
  std::optional<GuestCommand> last_command() const;  // the last Exec's, env and cwd included
  std::vector<std::string> disconnected() const;     // VM ids, in order
  // Every raw channel asked for, in order.
  std::vector<GuestChannelRequest> channel_requests() const;
  bool finished(const std::string& job) const;
  // VM ids whose guest played `identity` to its end, in order; and of those, the hand-outs
  // (requests naming the hostname instead of a seed device).
  std::vector<std::string> identities_applied() const;
  std::vector<std::string> handouts_applied() const;
  // The hand-outs whose request carried a host key pair (a pooled VM's keeps its own).
  std::vector<std::string> handouts_with_host_key() const;
  // From now on every VM has a root process waiting for its identity, as a clone of a
  // template (which the template keeper prepared) has.
  void ClonesStartWaiting();
  int killed() const;  // jobs ended by Kill or cancellation
  // The id the next job will get: jobs are numbered 00000001, 00000002...
  std::string next_job() const;

 private:
  struct Job {
    std::string vm_id;
    std::string command;
    std::string out, err;
    bool finished = false;
    std::optional<int> exit_code;
    int signal = 0;
    // The VM's Disconnect count when the job started: a later Disconnect ends whoever
    // follows it, as closing the real control connection does (the job runs on).
    int generation = 0;
  };
  bool Detached(const Job& job) const;  // lock held

  // Writes job output past the offsets to the sinks, moving the offsets (lock held).
  void Deliver(const Job& job, uint64_t& out_off, uint64_t& err_off, const GuestStreams& s);
  // Waits for the job to end, the deadline or cancellation; true when cancelled.
  bool Block(std::unique_lock<std::mutex>& lock, const Job& job, const GuestStreams& s);
  GuestProgress ProgressOf(const std::string& id, const Job& job, uint64_t out_off,
                           uint64_t err_off) const;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Script> scripts_;
  std::map<std::string, std::string, std::less<>> pinned_;
  std::map<std::string, std::string, std::less<>> runner_noted_;
  std::map<std::string, Job> jobs_;
  bool reachable_ = true;
  int unreachable_for_ = 0;
  int next_ = 1;
  int killed_ = 0;
  std::vector<std::string> commands_;
  std::string last_stdin_;
  std::optional<GuestCommand> last_command_;
  std::vector<std::string> disconnected_;
  std::vector<GuestChannelRequest> channel_requests_;
  std::vector<std::string> connects_;
  std::function<std::string(std::string_view)> hostname_of_;
  std::set<std::string, std::less<>> identity_waits_;
  std::shared_ptr<std::vector<std::string>> identities_ =
      std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::vector<std::string>> handouts_ =
      std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::vector<std::string>> keyed_handouts_ =
      std::make_shared<std::vector<std::string>>();
  bool clones_wait_ = false;
};

}  // namespace warren
