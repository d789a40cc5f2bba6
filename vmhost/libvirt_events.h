// libvirt's events in this process: the one event loop, and the lifecycle registrations
// LibvirtHost::WatchStates makes on its connection.
//
// The event loop is process-wide and runs for the process's lifetime. It must be registered
// before the first connection opens (the remote driver decides at open whether a connection
// gets asynchronous I/O: events, keepalive), so OpenLibvirt starts it; and once it is
// registered it must also be run: every connection then tells libvirtd it speaks keepalive,
// the daemon pings it every few seconds and closes it when nobody answers (about 30 s with
// the daemon's defaults). So one thread runs virEventRunDefaultImpl until the process ends;
// nothing runs on it but libvirt's own I/O and callbacks that only queue (LifecycleSink).
//
// Thread-safe.
#pragma once

#include <libvirt/libvirt.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "lobby/base/status.h"
#include "vmhost/vm_host.h"
#include "vmhost/vm_state_delivery.h"

namespace warren {

// Registers libvirt's default event loop and starts the thread that runs it, once per
// process; later calls do nothing. Called before every open (OpenLibvirt). A failure is
// logged; connections then work without events, and WatchStates fails saying so.
void StartLibvirtEventLoop();

// The VM's state after a lifecycle event (VIR_DOMAIN_EVENT_*, its detail), or nothing when
// the event changes no state warren tells apart: DEFINED; SHUTDOWN (the guest is powering
// off, still running until STOPPED); a crash kernel taking over (CRASHED/CRASHLOADED, the
// guest runs on). STOPPED after a crash and a panic are kCrashed; UNDEFINED is kStopped.
std::optional<VmState> StateAfterLifecycleEvent(int event, int detail);

// Where a connection's lifecycle events go: those of domains named `prefix` + id, as
// VmStateEvents into `delivery`; a close of the connection (but ours) is told to `on_lost`
// (the host's reconnector, which reports every state once reconnected), or without one asks
// the delivery for a full report. Runs on libvirt's event loop thread and only queues.
// Detach() cuts it off from `delivery` and `on_lost` (before they go away); after it
// returns nothing is passed on.
class LifecycleSink {
 public:
  using LostFn = std::function<void(const std::string& why)>;
  LifecycleSink(std::string prefix, VmStateDelivery* delivery, LostFn on_lost = nullptr)
      : prefix_(std::move(prefix)), delivery_(delivery), on_lost_(std::move(on_lost)) {}
  void OnLifecycle(virDomainPtr dom, int event, int detail);
  void OnClose(int reason);
  void Detach();

 private:
  const std::string prefix_;
  std::mutex mu_;  // held while passing on, so Detach waits for a call in progress
  VmStateDelivery* delivery_;
  LostFn on_lost_;
};

// One connection's registrations for `sink`: lifecycle events of every domain and the close
// callback. The destructor deregisters both (ignoring failures of a connection already
// dead) and keeps the connection open until then.
class LifecycleRegistration {
 public:
  static Result<std::unique_ptr<LifecycleRegistration>> Register(
      std::shared_ptr<virConnect> conn, std::shared_ptr<LifecycleSink> sink);
  ~LifecycleRegistration();
  LifecycleRegistration(const LifecycleRegistration&) = delete;
  LifecycleRegistration& operator=(const LifecycleRegistration&) = delete;

  virConnectPtr conn() const { return conn_.get(); }

 private:
  LifecycleRegistration(std::shared_ptr<virConnect> conn, std::shared_ptr<LifecycleSink> sink)
      : conn_(std::move(conn)), sink_(std::move(sink)) {}
  std::shared_ptr<virConnect> conn_;
  std::shared_ptr<LifecycleSink> sink_;  // the close callback's opaque pointer lives here
  int lifecycle_id_ = -1;
  bool close_registered_ = false;
};

}  // namespace warren
