#include "lobby/commands/command_runner.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <utility>

#include "lobby/base/log.h"

namespace warren {

CommandRunner::CommandRunner(CommandRunnerOptions options) : options_(options) {
  timer_ = std::thread([this] { TimerLoop(); });
}

CommandRunner::~CommandRunner() {
  Stop(std::chrono::milliseconds::max());
  std::unique_lock lock(mu_);
  // Workers touch `this` until they have left; the timer is joined below.
  done_cv_.wait(lock, [this] { return running_ == 0 && queued_ == 0 && workers_ == 0; });
  lock.unlock();
  if (timer_.joinable()) timer_.join();
}

Status CommandRunner::Submit(CommandTask task) {
  std::lock_guard lock(mu_);
  if (stopping_) return Unavailable("the server is stopping");
  auto known = users_.find(task.user);
  const int user_running = known == users_.end() ? 0 : known->second.running;
  const size_t user_queued = known == users_.end() ? 0 : known->second.queued.size();
  // A user with something queued waits behind it, so their own commands keep their order.
  const bool runs_now =
      user_queued == 0 && user_running < options_.threads_per_user && running_ < options_.threads;
  if (!runs_now) {
    if (static_cast<int>(user_queued) >= options_.queue_per_user) {
      return LimitExceeded(
          "too many commands at once: you have " + std::to_string(user_running) + " running and " +
          std::to_string(user_queued) + " waiting over /exec and MCP (at most " +
          std::to_string(options_.threads_per_user) + " and " +
          std::to_string(options_.queue_per_user) + " per user); retry when one has ended");
    }
    if (queued_ >= options_.queue) {
      return LimitExceeded("the server is busy: " + std::to_string(queued_) +
                           " commands are waiting for a thread; retry in a moment");
    }
  }
  if (runs_now && idle_workers_ <= wakeups_ && workers_ < options_.threads) {
    // It needs a new worker; without one nothing would ever run it.
    try {
      std::thread([this] { WorkerLoop(); }).detach();
      ++workers_;
      ++wakeups_;  // it comes for this one
    } catch (const std::system_error& e) {
      LogError(std::string("command runner cannot start a thread: ") + e.what());
      // With other workers it waits for one of them; with none it would wait for ever.
      if (workers_ == 0) return Unavailable("cannot start a command thread; retry");
    }
  } else if (runs_now) {
    WakeWorkerLocked();
  }
  const uint64_t id = next_id_++;
  Pending pending;
  pending.cancel = std::move(task.cancel);
  pending.deadline = deadlines_.end();
  if (task.on_deadline && task.deadline != std::chrono::steady_clock::time_point::max()) {
    pending.on_deadline = std::move(task.on_deadline);
    pending.deadline = deadlines_.emplace(task.deadline, id);
    timer_cv_.notify_all();
  }
  pending_.emplace(id, std::move(pending));
  if (task.id != nullptr) task.id->store(id);
  User& user = users_[task.user];
  Entry entry{id, task.user, std::move(task.run)};
  if (runs_now) {
    ++user.running;
    ++running_;
    ready_.push_back(std::move(entry));
  } else {
    if (user.queued.empty()) rotation_.push_back(task.user);
    user.queued.push_back(std::move(entry));
    ++queued_;
  }
  return Status::Ok();
}

void CommandRunner::WakeWorkerLocked() {
  if (idle_workers_ > wakeups_) {
    ++wakeups_;
    work_cv_.notify_one();
  }
  // Otherwise every worker is busy and the next one to finish takes it.
}

void CommandRunner::PromoteLocked() {
  while (running_ < options_.threads) {
    bool promoted = false;
    for (auto r = rotation_.begin(); r != rotation_.end(); ++r) {
      User& user = users_[*r];
      if (user.running >= options_.threads_per_user || user.queued.empty()) continue;
      ready_.push_back(std::move(user.queued.front()));
      user.queued.pop_front();
      --queued_;
      ++user.running;
      ++running_;
      // The next turn goes to the next user; this one goes to the back if it still waits.
      std::string name = std::move(*r);
      rotation_.erase(r);
      if (!user.queued.empty()) rotation_.push_back(std::move(name));
      promoted = true;
      break;
    }
    if (!promoted) return;
  }
}

CommandRunner::Pending CommandRunner::TakePendingLocked(uint64_t id) {
  Pending p;
  auto it = pending_.find(id);
  if (it == pending_.end()) return p;
  if (it->second.deadline != deadlines_.end()) deadlines_.erase(it->second.deadline);
  p = std::move(it->second);
  pending_.erase(it);
  return p;
}

void CommandRunner::FinishedLocked(const Entry& entry) {
  auto u = users_.find(entry.user);
  if (u != users_.end()) {
    --u->second.running;
    if (u->second.running == 0 && u->second.queued.empty()) users_.erase(u);
  }
  --running_;
  PromoteLocked();  // this worker takes the first one; wake others for any more
  for (size_t i = 1; i < ready_.size(); ++i) WakeWorkerLocked();
  if (stopping_ && queued_ == 0 && ready_.empty()) work_cv_.notify_all();  // idle ones leave
  done_cv_.notify_all();
}

void CommandRunner::WorkerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (!ready_.empty()) {
      Entry entry = std::move(ready_.front());
      ready_.pop_front();
      if (wakeups_ > 0) --wakeups_;  // whoever takes it, the signalled worker need not
      lock.unlock();
      try {
        entry.run();
      } catch (const std::exception& e) {
        LogError(std::string("command task threw: ") + LogQuote(e.what()));
      } catch (...) {
        LogError("command task threw a non-exception");
      }
      entry.run = nullptr;  // what it captured goes before the next task
      lock.lock();
      {
        // Its deadline can no longer fire; what the callback captured (a responder, say)
        // goes without our lock held.
        Pending done = TakePendingLocked(entry.id);
        lock.unlock();
      }
      lock.lock();
      FinishedLocked(entry);
      continue;
    }
    if (stopping_ && queued_ == 0) break;
    ++idle_workers_;
    const bool woke = work_cv_.wait_for(lock, options_.idle_exit, [this] {
      return !ready_.empty() || (stopping_ && queued_ == 0);
    });
    --idle_workers_;
    if (!woke) break;  // idle long enough: the next burst starts a new one
  }
  --workers_;
  // Still holding mu_: the destructor cannot see workers_ == 0 before this thread has let
  // go of it, and touches nothing of ours after.
  done_cv_.notify_all();
}

void CommandRunner::TimerLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (deadlines_.empty()) {
      timer_cv_.wait(lock, [this] { return stopping_ || !deadlines_.empty(); });
      continue;
    }
    auto first = deadlines_.begin()->first;
    if (std::chrono::steady_clock::now() < first) {
      timer_cv_.wait_until(lock, first);
      continue;
    }
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    std::function<void()> fire;
    if (auto it = pending_.find(id); it != pending_.end()) {
      it->second.deadline = deadlines_.end();
      fire = std::move(it->second.on_deadline);
    }
    if (!fire) continue;
    lock.unlock();
    try {
      fire();
    } catch (const std::exception& e) {
      LogError(std::string("command deadline callback threw: ") + LogQuote(e.what()));
    }
    lock.lock();
  }
}

bool CommandRunner::Stop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  stopping_ = true;
  for (auto& [id, p] : pending_) {
    if (p.cancel != nullptr) p.cancel->Cancel();
  }
  work_cv_.notify_all();
  timer_cv_.notify_all();
  auto done = [this] { return running_ == 0 && queued_ == 0; };
  if (timeout == std::chrono::milliseconds::max()) {
    done_cv_.wait(lock, done);
    return true;
  }
  return done_cv_.wait_for(lock, timeout, done);
}

std::function<void(int64_t ms)> CommandRunner::DeadlineExtender(CommandTask& task) {
  task.id = std::make_shared<std::atomic<uint64_t>>(0);
  return [this, id = task.id](int64_t ms) {
    ExtendDeadline(*id, std::chrono::steady_clock::now() + std::chrono::milliseconds(ms));
  };
}

void CommandRunner::ExtendDeadline(uint64_t id, std::chrono::steady_clock::time_point at) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.deadline == deadlines_.end()) return;
  if (at <= it->second.deadline->first) return;
  deadlines_.erase(it->second.deadline);
  it->second.deadline = deadlines_.emplace(at, id);
  timer_cv_.notify_all();
}

CommandRunner::Load CommandRunner::load() const {
  std::lock_guard lock(mu_);
  return Load{running_, queued_, workers_};
}

}  // namespace warren
