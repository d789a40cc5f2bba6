#include "vmhost/reconnector.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>

#include "lobby/base/log.h"

namespace warren {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

}  // namespace

Reconnector::Reconnector(ReconnectorOptions options, ReconnectorSteps steps)
    : options_(std::move(options)), steps_(std::move(steps)), restart_(steps_.restart) {}

void Reconnector::SetRestart(std::function<Status()> restart) {
  std::lock_guard lock(mu_);
  restart_ = std::move(restart);
}

Reconnector::~Reconnector() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reconnector::Lost(std::string_view why) {
  bool restarts = false;
  {
    std::lock_guard lock(mu_);
    restarts = static_cast<bool>(restart_);
    if (stopping_) return;
    if (restoring_ != std::thread::id()) {
      lost_again_ = true;  // the thread restoring notices when its step returns
      return;
    }
    if (!up_) return;
    up_ = false;
    why_ = std::string(why);
    lost_at_ = Clock::now();
    ++stats_.losses;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  LogWarn("vmhost: lost the connection to " + options_.what + " (" + std::string(why) +
          "); VM commands fail until warren has reconnected" +
          (restarts ? " (it restarts the daemon it started)" : " (waiting for the daemon)"));
  cv_.notify_all();
}

Status Reconnector::Check() const {
  std::lock_guard lock(mu_);
  if (up_ || restoring_ == std::this_thread::get_id()) return Status::Ok();
  const double since = std::chrono::duration<double>(Clock::now() - lost_at_).count();
  return Unavailable("VM host unavailable: the connection to " + options_.what + " was lost " +
                     Seconds(since) + " s ago (" + why_ + "); warren is reconnecting" +
                     (restart_ ? " and restarting the daemon" : "") + ", try again shortly");
}

bool Reconnector::up() const {
  std::lock_guard lock(mu_);
  return up_;
}

ReconnectorStats Reconnector::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Reconnector::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [this] { return stopping_; });
  return !stopping_;
}

Status Reconnector::Attempt() {
  Status st = steps_.connect();
  if (st.ok()) return st;
  std::function<Status()> restart;
  {
    std::lock_guard lock(mu_);
    restart = restart_;
    if (restart) ++stats_.restarts;
  }
  if (!restart) return st;
  LogInfo("vmhost: restarting the daemon behind " + options_.what + " (" + st.message() + ")");
  Status restarted = restart();
  if (!restarted.ok()) return restarted.Annotate("restarting the daemon");
  return steps_.connect();
}

void Reconnector::Run() {
  pthread_setname_np(pthread_self(), "reconnect");
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !up_; });
      if (stopping_) return;
    }
    std::chrono::milliseconds delay = options_.first_delay;
    int attempts = 0;
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (stopping_) return;
        ++stats_.attempts;
      }
      ++attempts;
      Status st = Attempt();
      if (st.ok()) break;
      if (attempts == 1 || attempts % 10 == 0) {
        LogWarn("vmhost: reconnecting to " + options_.what + " (attempt " +
                std::to_string(attempts) + "): " + st.ToString());
      }
      if (!Sleep(delay)) return;
      delay = std::min(delay * 2, options_.max_delay);
    }
    {
      std::lock_guard lock(mu_);
      restoring_ = std::this_thread::get_id();
      lost_again_ = false;
    }
    if (steps_.restored) steps_.restored();
    double outage = 0;
    {
      std::lock_guard lock(mu_);
      restoring_ = std::thread::id();
      if (lost_again_) {
        LogWarn("vmhost: lost the connection to " + options_.what +
                " again while restoring; reconnecting");
        continue;  // still down, lost_at_ kept: the outage goes on
      }
      up_ = true;
      outage = std::chrono::duration<double>(Clock::now() - lost_at_).count();
      ++stats_.reconnects;
      stats_.last_outage_s = outage;
    }
    LogInfo("vmhost: reconnected to " + options_.what + " after " + Seconds(outage) + " s (" +
            std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s") +
            "); VM commands work again");
    if (steps_.reopened) steps_.reopened();
  }
}

}  // namespace warren
