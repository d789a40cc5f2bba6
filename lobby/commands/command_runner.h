// CommandRunner: the one place where command sessions of surfaces that must not block their
// own threads (POST /exec, MCP tools/call) run: a bounded pool of threads, shared fairly
// between users. At most `threads` tasks run at once in all and `threads_per_user` of one
// user (Caller::user, whatever credential or surface); what cannot run yet waits in a
// bounded queue — first come first served per user, round-robin between users, so one
// user's long commands never keep another's waiting. A user who already has
// threads_per_user running and queue_per_user waiting, or a full queue, is refused with
// LimitExceeded (429 through the one error map) at Submit, before anything runs.
//
// A task is a closure that runs one command session through the Interpreter and answers its
// client. Its cancel signal is that session's: Stop() sets it; a task cancelled while
// queued still runs, and the interpreter ends it at once ("cancelled before it started").
// An optional deadline calls `on_deadline` once, on the runner's timer thread, when the
// task has not finished by then (queued time included): /exec answers 504 there and lets
// the command go on. A command that learns it needs longer (`ssh --timeout`) moves its
// task's deadline later through ExtendDeadline, by the id Submit hands out.
//
// Threads: workers are started on demand up to `threads` and leave after a while idle, plus
// one timer thread; so the number of threads is set by configuration, never by clients.
// Thread-safe: Submit and Stop from any thread. Tasks and on_deadline must not call Stop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "lobby/base/status.h"
#include "lobby/base/streams.h"

namespace warren {

struct CommandRunnerOptions {
  int threads = 64;           // tasks running at once, all users together
  int threads_per_user = 16;  // tasks of one user running at once
  int queue = 256;            // tasks waiting for a thread, all users together
  int queue_per_user = 64;    // tasks of one user waiting
  // An idle worker leaves after this long; the next burst starts new ones.
  std::chrono::milliseconds idle_exit{std::chrono::seconds(30)};
};

struct CommandTask {
  std::string user;                      // whose share it counts against
  std::shared_ptr<CancelSignal> cancel;  // the session's; Stop() sets it. May be null.
  std::function<void()> run;             // runs on a worker thread; exceptions are caught
  // When set: `on_deadline` runs once on the timer thread if `run` has not returned by then.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<void()> on_deadline;
  // When set, Submit stores the task's id here before the task can run: what
  // ExtendDeadline takes (CommandSession::extend_deadline).
  std::shared_ptr<std::atomic<uint64_t>> id;
};

class CommandRunner {
 public:
  explicit CommandRunner(CommandRunnerOptions options = {});
  // Stop() without a limit: every accepted task has run when it returns.
  ~CommandRunner();
  CommandRunner(const CommandRunner&) = delete;
  CommandRunner& operator=(const CommandRunner&) = delete;

  // Runs `task` now or queues it. LimitExceeded when its user (or the queue) is over its
  // share, naming the limits; Unavailable once stopping (or when no thread can be started).
  // On success `run` is called exactly once (also if Stop comes first: cancelled).
  Status Submit(CommandTask task);

  // Refuses new tasks, cancels the running and queued ones and waits up to `timeout` for
  // every accepted task to return. False when some still run then (a command ignored
  // cancellation): the caller must not destroy what those tasks use. Idempotent.
  bool Stop(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Moves task `id`'s deadline to `at` when that is later; nothing when the task has no
  // deadline, has finished, or its deadline already fired. From any thread, the task's own
  // included.
  void ExtendDeadline(uint64_t id, std::chrono::steady_clock::time_point at);
  // What a surface puts in CommandSession::extend_deadline for `task` (before Submit): gives
  // the task an id slot and returns a function that moves its deadline to that many ms from
  // the moment it is called.
  std::function<void(int64_t ms)> DeadlineExtender(CommandTask& task);

  const CommandRunnerOptions& options() const { return options_; }

  // What the runner holds right now (for tests and gauges).
  struct Load {
    int running = 0;
    int queued = 0;
    int threads = 0;  // worker threads alive, busy or idle
  };
  Load load() const;

 private:
  using Deadlines = std::multimap<std::chrono::steady_clock::time_point, uint64_t>;
  struct Entry {
    uint64_t id = 0;
    std::string user;
    std::function<void()> run;
  };
  struct User {
    int running = 0;
    std::deque<Entry> queued;
  };
  // A task accepted and not finished: what Stop and the timer need of it.
  struct Pending {
    std::shared_ptr<CancelSignal> cancel;
    std::function<void()> on_deadline;
    Deadlines::iterator deadline;  // deadlines_.end() when none (or already fired)
  };

  // With mu_ held: moves queued tasks whose users may run one more into ready_ (their
  // slots taken), round-robin between users.
  void PromoteLocked();
  // With mu_ held: signals an idle worker, not signalled yet, to take from ready_.
  void WakeWorkerLocked();
  void WorkerLoop();
  void TimerLoop();
  // With mu_ held: forgets a finished task's cancel signal and deadline, handing them back.
  Pending TakePendingLocked(uint64_t id);
  // With mu_ held: frees the finished task's slot and promotes what may run next.
  void FinishedLocked(const Entry& entry);

  const CommandRunnerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a task may run, or stopping
  std::condition_variable done_cv_;   // Stop: a task finished / a worker left
  std::condition_variable timer_cv_;  // the timer: a new deadline, or stopping
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  int running_ = 0;  // slots taken: running, or in ready_
  int queued_ = 0;   // waiting in users_' queues for a slot
  int workers_ = 0;
  int idle_workers_ = 0;
  int wakeups_ = 0;          // idle workers signalled and not yet back at work
  std::deque<Entry> ready_;  // slot taken, waiting for a worker to pick it up
  std::map<std::string, User, std::less<>> users_;
  std::list<std::string> rotation_;  // users with queued tasks, the next one first
  std::map<uint64_t, Pending> pending_;
  Deadlines deadlines_;
  std::thread timer_;
};

}  // namespace warren
