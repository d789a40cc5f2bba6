// Reconnector: how a host gets its hypervisor connection back after losing it (the daemon
// was killed or restarted, its socket closed). Knows no libvirt: the host hands it its steps.
//
// Lost() marks the connection down (the close callback, or a call that found it dead) and
// wakes the reconnector's own thread, which tries, with backoff (first_delay doubling up to
// max_delay), `connect`; when that fails and the host has a `restart` step (warren started
// the daemon itself, libvirtd_launcher.h), it restarts the daemon and connects again. Once
// connected, `restored` runs on that thread while every other caller is still refused (the
// host re-registers its event callbacks and reconciles there: nothing else changes the host
// meanwhile), then the host is up again and `reopened` runs (a full state report). A loss
// during `restored` starts over.
//
// While down, Check() answers at once, Unavailable with what happened and since when,
// instead of a call hanging or failing on a dead connection; the thread running `restored`
// passes. Logs the loss, each failed attempt's reason (the first, then every tenth) and the
// reconnection with how long the host was unavailable.
//
// Thread-safe. `restored` and `reopened` may call Check() and Lost(); the destructor stops
// the thread, waiting for a step in progress.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "lobby/base/status.h"

namespace warren {

struct ReconnectorOptions {
  // Names the connection in messages: "libvirt at qemu:///system".
  std::string what = "the hypervisor";
  std::chrono::milliseconds first_delay{200};
  std::chrono::milliseconds max_delay{5000};
};

struct ReconnectorSteps {
  std::function<Status()> connect;  // opens a new connection and makes it the host's
  std::function<Status()> restart;  // restarts the daemon; empty: wait for it to come back
  std::function<void()> restored;   // connected, others still refused
  std::function<void()> reopened;   // up again
};

struct ReconnectorStats {
  int losses = 0;            // times the connection was lost
  int reconnects = 0;        // times it came back
  int attempts = 0;          // connection attempts, all losses together
  int restarts = 0;          // daemon restarts asked for
  double last_outage_s = 0;  // from the last loss to the last time it was up again
};

class Reconnector {
 public:
  Reconnector(ReconnectorOptions options, ReconnectorSteps steps);
  ~Reconnector();
  Reconnector(const Reconnector&) = delete;
  Reconnector& operator=(const Reconnector&) = delete;

  // The connection is gone (`why`, for the log). Nothing more while already down.
  void Lost(std::string_view why);
  // Sets (or, empty, takes away) the `restart` step: the daemon became one warren started.
  void SetRestart(std::function<Status()> restart);
  // Ok while up (and on the thread running `restored`); else Unavailable, saying so.
  Status Check() const;
  bool up() const;
  ReconnectorStats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  void Run();
  // One attempt: connect, else (with a restart step) restart and connect again.
  Status Attempt();
  // Sleeps up to `d`; false when stopping.
  bool Sleep(std::chrono::milliseconds d);

  const ReconnectorOptions options_;
  const ReconnectorSteps steps_;
  mutable std::mutex mu_;
  std::function<Status()> restart_;  // steps_.restart, or what SetRestart set
  std::condition_variable cv_;
  bool up_ = true;
  bool lost_again_ = false;  // lost while `restored` ran
  bool stopping_ = false;
  std::string why_;
  Clock::time_point lost_at_{};
  std::thread::id restoring_;  // the thread running `restored`, else none
  ReconnectorStats stats_;
  std::thread thread_;  // started at the first loss
};

}  // namespace warren
