// The reconnect logic of a host (vmhost/reconnector.h) without libvirt: its steps are
// counters and switches here, the delays a few milliseconds.
#include "vmhost/reconnector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace warren {
namespace {

using namespace std::chrono_literals;

// A daemon that answers when `alive`; restarting it makes it alive after `restart_fails`
// failed restarts.
struct World {
  std::atomic<bool> alive{true};
  std::atomic<int> connects{0};
  std::atomic<int> restarts{0};
  std::atomic<int> restart_fails{0};
  std::atomic<int> restored{0};
  std::atomic<int> reopened{0};
  std::atomic<bool> hold_restarts{false};  // a restart waits while set
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> attempt_times;
  std::vector<Status> checks_while_restoring;  // others' Check() during `restored`
  std::vector<Status> own_checks;              // the restoring thread's own

  ReconnectorSteps Steps(bool with_restart, Reconnector** self) {
    ReconnectorSteps s;
    s.connect = [this] {
      ++connects;
      std::lock_guard lock(mu);
      attempt_times.push_back(std::chrono::steady_clock::now());
      return alive ? Status::Ok() : Unavailable("connection refused");
    };
    if (with_restart) {
      s.restart = [this] {
        ++restarts;
        while (hold_restarts) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (restart_fails > 0) {
          --restart_fails;
          return Unavailable("libvirtd did not start");
        }
        alive = true;
        return Status::Ok();
      };
    }
    s.restored = [this, self] {
      ++restored;
      Status own = (*self)->Check();
      Status other;
      std::thread([&] { other = (*self)->Check(); }).join();
      std::lock_guard lock(mu);
      own_checks.push_back(own);
      checks_while_restoring.push_back(other);
    };
    s.reopened = [this] { ++reopened; };
    return s;
  }
};

ReconnectorOptions Fast() {
  ReconnectorOptions o;
  o.what = "libvirt at test:///";
  o.first_delay = 5ms;
  o.max_delay = 40ms;
  return o;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds limit = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(ReconnectorTest, UpUntilLostThenRefusesWithAClearError) {
  World w;
  w.alive = false;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(false, &self));
  self = &r;
  EXPECT_TRUE(r.up());
  EXPECT_TRUE(r.Check().ok());
  EXPECT_EQ(w.connects, 0);  // nothing happens before a loss: no thread, no attempt

  r.Lost("end of file from the daemon");
  EXPECT_FALSE(r.up());
  Status st = r.Check();
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("VM host unavailable"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("libvirt at test:///"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("end of file from the daemon"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("reconnecting"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("restarting"), std::string::npos) << "it did not start the daemon";
  ASSERT_TRUE(WaitFor([&] { return w.connects >= 3; }));
  EXPECT_FALSE(r.up());  // still down while the daemon is
  EXPECT_EQ(w.restored, 0);
}

TEST(ReconnectorTest, WaitsForADaemonItDidNotStartAndRestoresOnce) {
  World w;
  w.alive = false;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(false, &self));
  self = &r;
  r.Lost("eof");
  ASSERT_TRUE(WaitFor([&] { return w.connects >= 4; }));
  w.alive = true;  // the operator brought it back
  ASSERT_TRUE(WaitFor([&] { return r.up(); }));
  ASSERT_TRUE(WaitFor([&] { return w.reopened == 1; }));
  EXPECT_EQ(w.restored, 1);
  EXPECT_EQ(w.restarts, 0);
  EXPECT_TRUE(r.Check().ok());
  ReconnectorStats s = r.stats();
  EXPECT_EQ(s.losses, 1);
  EXPECT_EQ(s.reconnects, 1);
  EXPECT_EQ(s.restarts, 0);
  EXPECT_GE(s.attempts, 5);
  EXPECT_GT(s.last_outage_s, 0);
  // While `restored` ran, only its own thread got through.
  std::lock_guard lock(w.mu);
  ASSERT_EQ(w.own_checks.size(), 1u);
  EXPECT_TRUE(w.own_checks[0].ok());
  EXPECT_EQ(w.checks_while_restoring[0].code(), Code::kUnavailable);
}

TEST(ReconnectorTest, BacksOffDoublingUpToTheCap) {
  World w;
  w.alive = false;
  Reconnector* self = nullptr;
  ReconnectorOptions o = Fast();
  o.first_delay = 10ms;
  o.max_delay = 40ms;
  Reconnector r(o, w.Steps(false, &self));
  self = &r;
  r.Lost("eof");
  ASSERT_TRUE(WaitFor([&] { return w.connects >= 6; }));
  std::vector<std::chrono::steady_clock::time_point> t;
  {
    std::lock_guard lock(w.mu);
    t = w.attempt_times;
  }
  auto gap = [&](size_t i) { return t[i + 1] - t[i]; };
  EXPECT_GE(gap(0), 10ms);
  EXPECT_GE(gap(1), 20ms);
  EXPECT_GE(gap(2), 40ms);
  EXPECT_GE(gap(3), 40ms);
  EXPECT_LT(gap(4), 400ms) << "the delay is capped";
}

TEST(ReconnectorTest, RestartsTheDaemonItStartedWhenConnectingFails) {
  World w;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(true, &self));
  self = &r;
  w.alive = false;
  w.restart_fails = 2;     // two restarts fail, the third brings it back
  w.hold_restarts = true;  // until the outage has been seen
  r.Lost("eof");
  EXPECT_NE(r.Check().message().find("restarting the daemon"), std::string::npos);
  w.hold_restarts = false;
  ASSERT_TRUE(WaitFor([&] { return r.up(); }));
  EXPECT_EQ(w.restarts, 3);
  EXPECT_EQ(r.stats().restarts, 3);
  EXPECT_EQ(w.restored, 1);
}

TEST(ReconnectorTest, RestartsOnlyOnceToldTheDaemonIsItsOwn) {
  World w;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(false, &self));
  self = &r;
  std::atomic<int> restarts{0};
  std::atomic<bool> checked{false};  // the restart waits until the outage has been seen
  r.SetRestart([&] {
    ++restarts;
    while (!checked) std::this_thread::sleep_for(1ms);
    w.alive = true;
    return Status::Ok();
  });
  w.alive = false;
  r.Lost("eof");
  EXPECT_NE(r.Check().message().find("restarting the daemon"), std::string::npos);
  checked = true;
  ASSERT_TRUE(WaitFor([&] { return r.up(); }));
  EXPECT_EQ(restarts, 1);
  r.SetRestart(nullptr);  // no longer its own: waited for
  w.alive = false;
  r.Lost("eof");
  EXPECT_EQ(r.Check().message().find("restarting"), std::string::npos) << r.Check().message();
  ASSERT_TRUE(WaitFor([&] { return w.connects >= 4; }));
  EXPECT_EQ(restarts, 1);
  w.alive = true;
  ASSERT_TRUE(WaitFor([&] { return r.up(); }));
}

TEST(ReconnectorTest, ADaemonBackByItselfIsNotRestarted) {
  World w;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(true, &self));
  self = &r;
  r.Lost("keepalive timeout");  // the daemon still answers: a plain reconnect
  ASSERT_TRUE(WaitFor([&] { return r.up(); }));
  EXPECT_EQ(w.restarts, 0);
  EXPECT_EQ(w.connects, 1);
}

TEST(ReconnectorTest, LossesWhileDownAreOneAndAlaterLossReconnectsAgain) {
  World w;
  w.alive = false;
  Reconnector* self = nullptr;
  Reconnector r(Fast(), w.Steps(false, &self));
  self = &r;
  r.Lost("eof");
  r.Lost("eof again");  // from another caller: the same outage
  EXPECT_NE(r.Check().message().find("(eof)"), std::string::npos) << r.Check().message();
  w.alive = true;
  ASSERT_TRUE(WaitFor([&] { return w.reopened == 1; }));
  EXPECT_EQ(r.stats().losses, 1);
  r.Lost("second outage");
  ASSERT_TRUE(WaitFor([&] { return w.reopened == 2; }));
  EXPECT_EQ(r.stats().losses, 2);
  EXPECT_EQ(r.stats().reconnects, 2);
  EXPECT_EQ(w.restored, 2);
}

TEST(ReconnectorTest, ALossWhileRestoringStartsOver) {
  World w;
  std::atomic<int> restored{0};
  Reconnector* self = nullptr;
  ReconnectorSteps steps = w.Steps(false, &self);
  steps.restored = [&] {
    if (++restored == 1) self->Lost("died again during reconcile");
  };
  Reconnector r(Fast(), steps);
  self = &r;
  r.Lost("eof");
  ASSERT_TRUE(WaitFor([&] { return w.reopened == 1; }));
  EXPECT_EQ(restored, 2);
  EXPECT_EQ(w.connects, 2);
  EXPECT_EQ(r.stats().reconnects, 1);
  EXPECT_TRUE(r.up());
}

TEST(ReconnectorTest, StopsPromptlyWhileRetrying) {
  World w;
  w.alive = false;
  Reconnector* self = nullptr;
  ReconnectorOptions o = Fast();
  o.first_delay = 10s;  // the destructor must not wait this out
  auto started = std::chrono::steady_clock::now();
  {
    Reconnector r(o, w.Steps(false, &self));
    self = &r;
    r.Lost("eof");
    ASSERT_TRUE(WaitFor([&] { return w.connects >= 1; }));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
}

}  // namespace
}  // namespace warren
