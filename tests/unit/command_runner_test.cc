// CommandRunner: per-user shares and the total ceiling, the bounded queue and its refusals,
// round-robin between users, deadlines, Stop, and threads bounded by configuration.
#include "lobby/commands/command_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace warren {
namespace {

using namespace std::chrono_literals;

// A gate tasks wait at until the test opens it.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// What ran, in order, and a way to wait for it.
class Log {
 public:
  void Add(const std::string& what) {
    std::lock_guard lock(mu_);
    entries_.push_back(what);
    cv_.notify_all();
  }
  bool AwaitSize(size_t n, std::chrono::milliseconds within = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, within, [&] { return entries_.size() >= n; });
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mu_);
    return entries_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> entries_;
};

CommandTask Task(const std::string& user, std::function<void()> run,
                 std::shared_ptr<CancelSignal> cancel = nullptr) {
  CommandTask t;
  t.user = user;
  t.run = std::move(run);
  t.cancel = std::move(cancel);
  return t;
}

TEST(CommandRunnerTest, AUserBeyondTheirShareWaitsThenIsRefusedAndOthersRunAtOnce) {
  CommandRunnerOptions o;
  o.threads = 4;
  o.threads_per_user = 2;
  o.queue_per_user = 2;
  CommandRunner runner(o);
  Gate gate;
  Log started;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(runner
                    .Submit(Task("alice",
                                 [&, i] {
                                   started.Add("alice" + std::to_string(i));
                                   gate.Wait();
                                 }))
                    .ok());
  }
  ASSERT_TRUE(started.AwaitSize(2));
  EXPECT_EQ(runner.load().running, 2);
  EXPECT_EQ(runner.load().queued, 2);
  Status over = runner.Submit(Task("alice", [] {}));
  EXPECT_EQ(over.code(), Code::kLimitExceeded);
  EXPECT_NE(over.message().find("2 running and 2 waiting"), std::string::npos) << over.message();

  // Bob has a share of his own: he runs now, alongside alice's two.
  ASSERT_TRUE(runner.Submit(Task("bob", [&] { started.Add("bob"); })).ok());
  ASSERT_TRUE(started.AwaitSize(3));
  EXPECT_EQ(started.entries()[2], "bob");
  gate.Open();
  ASSERT_TRUE(started.AwaitSize(5));
  EXPECT_TRUE(runner.Stop());
}

TEST(CommandRunnerTest, TheTotalCeilingHoldsAndTheQueueIsBounded) {
  CommandRunnerOptions o;
  o.threads = 3;
  o.threads_per_user = 3;
  o.queue = 2;
  CommandRunner runner(o);
  Gate gate;
  std::atomic<int> ran{0};
  auto slow = [&] {
    gate.Wait();
    ++ran;
  };
  for (const char* u : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(runner.Submit(Task(u, slow)).ok());
  EXPECT_EQ(runner.Submit(Task("f", slow)).code(), Code::kLimitExceeded);
  for (int i = 0; i < 100 && runner.load().running < 3; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(runner.load().running, 3);
  EXPECT_EQ(runner.load().queued, 2);
  EXPECT_LE(runner.load().threads, 3);
  gate.Open();
  EXPECT_TRUE(runner.Stop());
  EXPECT_EQ(ran.load(), 5);
}

TEST(CommandRunnerTest, WaitingUsersTakeTurns) {
  CommandRunnerOptions o;
  o.threads = 1;
  CommandRunner runner(o);
  Gate gate;
  Log order;
  ASSERT_TRUE(runner
                  .Submit(Task("alice",
                               [&] {
                                 order.Add("a1");
                                 gate.Wait();
                               }))
                  .ok());
  ASSERT_TRUE(order.AwaitSize(1));
  for (const char* name : {"a2", "a3", "a4"}) {
    ASSERT_TRUE(runner.Submit(Task("alice", [&, name] { order.Add(name); })).ok());
  }
  ASSERT_TRUE(runner.Submit(Task("bob", [&] { order.Add("b1"); })).ok());
  ASSERT_TRUE(runner.Submit(Task("carol", [&] { order.Add("c1"); })).ok());
  gate.Open();
  ASSERT_TRUE(order.AwaitSize(6));
  // Alice queued first, so she goes first — but only once before the others.
  EXPECT_EQ(order.entries(), (std::vector<std::string>{"a1", "a2", "b1", "c1", "a3", "a4"}));
}

TEST(CommandRunnerTest, ADeadlineFiresOnceWhileTheTaskRunsAndNeverAfter) {
  CommandRunner runner;
  Gate gate;
  std::atomic<int> fired{0};
  CommandTask slow = Task("alice", [&] { gate.Wait(); });
  slow.deadline = std::chrono::steady_clock::now() + 50ms;
  slow.on_deadline = [&] { ++fired; };
  ASSERT_TRUE(runner.Submit(std::move(slow)).ok());
  for (int i = 0; i < 200 && fired.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(fired.load(), 1);

  std::atomic<int> late{0};
  CommandTask quick = Task("bob", [] {});
  quick.deadline = std::chrono::steady_clock::now() + 100ms;
  quick.on_deadline = [&] { ++late; };
  ASSERT_TRUE(runner.Submit(std::move(quick)).ok());
  std::this_thread::sleep_for(250ms);
  EXPECT_EQ(late.load(), 0);
  gate.Open();
  EXPECT_TRUE(runner.Stop());
  EXPECT_EQ(fired.load(), 1);
}

// A task that learns it needs longer (ssh --timeout) moves its own deadline later, by the
// id Submit stored before it ran (the extender a surface hands its session); never earlier.
TEST(CommandRunnerTest, ATaskMovesItsDeadlineLaterFromItsOwnThread) {
  using Clock = std::chrono::steady_clock;
  CommandRunner runner;
  Gate gate;
  std::atomic<int> fired{0};
  std::atomic<bool> moved{false};
  // Told by time stamps, not by how long the test slept: a loaded machine oversleeps.
  std::atomic<Clock::rep> extended_at{0}, fired_at{0};
  std::function<void(int64_t)> extend;  // what a surface puts in CommandSession
  CommandTask slow = Task("alice", [&] {
    extended_at = Clock::now().time_since_epoch().count();
    extend(10);  // earlier than its deadline: no effect
    extend(600);
    moved = true;
    gate.Wait();
  });
  extend = runner.DeadlineExtender(slow);
  std::shared_ptr<std::atomic<uint64_t>> id = slow.id;
  const Clock::time_point submitted = Clock::now();
  slow.deadline = submitted + 300ms;
  slow.on_deadline = [&] {
    fired_at = Clock::now().time_since_epoch().count();
    ++fired;
  };
  ASSERT_TRUE(runner.Submit(std::move(slow)).ok());
  EXPECT_NE(id->load(), 0u);
  for (int i = 0; i < 1000 && fired.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(fired.load(), 1);
  ASSERT_TRUE(moved.load());
  ASSERT_LT(Clock::time_point(Clock::duration(extended_at.load())), submitted + 300ms)
      << "the task started after its first deadline: nothing to move";
  // Not at the old deadline: no sooner than 600 ms after the task asked for more.
  const Clock::duration waited{fired_at.load() - extended_at.load()};
  EXPECT_GE(waited, 600ms) << "fired at the old deadline";
  runner.ExtendDeadline(*id, Clock::now() + 1s);  // fired: nothing
  gate.Open();
  EXPECT_TRUE(runner.Stop());
  EXPECT_EQ(fired.load(), 1);
}

TEST(CommandRunnerTest, StopCancelsRunningAndQueuedTasksAndRunsEachOnce) {
  CommandRunnerOptions o;
  o.threads = 2;
  o.threads_per_user = 2;
  CommandRunner runner(o);
  std::atomic<int> ran{0};
  std::atomic<int> saw_cancel{0};
  std::vector<std::shared_ptr<CancelSignal>> cancels;
  for (int i = 0; i < 5; ++i) {
    auto cancel = std::make_shared<CancelSignal>();
    cancels.push_back(cancel);
    ASSERT_TRUE(runner
                    .Submit(Task(
                        "alice",
                        [&, cancel] {
                          ++ran;
                          if (cancel->WaitFor(10'000)) ++saw_cancel;
                        },
                        cancel))
                    .ok());
  }
  for (int i = 0; i < 100 && runner.load().running < 2; ++i) std::this_thread::sleep_for(10ms);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(runner.Stop(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(saw_cancel.load(), 5);
  EXPECT_EQ(runner.Submit(Task("alice", [] {})).code(), Code::kUnavailable);
}

TEST(CommandRunnerTest, StopReportsATaskThatIgnoresCancellation) {
  CommandRunner runner;
  Gate gate;
  ASSERT_TRUE(runner.Submit(Task("alice", [&] { gate.Wait(); })).ok());
  EXPECT_FALSE(runner.Stop(100ms));
  gate.Open();
}

TEST(CommandRunnerTest, ThreadsAreSetByConfigurationAndLeaveWhenIdle) {
  CommandRunnerOptions o;
  o.threads = 4;
  o.threads_per_user = 4;
  o.queue = 1000;
  o.queue_per_user = 1000;
  o.idle_exit = 100ms;
  CommandRunner runner(o);
  Log done;
  int max_threads = 0;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(runner
                    .Submit(Task("u" + std::to_string(i % 50),
                                 [&] {
                                   std::this_thread::sleep_for(1ms);
                                   done.Add("x");
                                 }))
                    .ok());
    max_threads = std::max(max_threads, runner.load().threads);
  }
  ASSERT_TRUE(done.AwaitSize(200));
  EXPECT_LE(max_threads, 4);
  for (int i = 0; i < 200 && runner.load().threads > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(runner.load().threads, 0);
  // And a new burst starts them again.
  ASSERT_TRUE(runner.Submit(Task("u", [&] { done.Add("y"); })).ok());
  ASSERT_TRUE(done.AwaitSize(201));
}

}  // namespace
}  // namespace warren
