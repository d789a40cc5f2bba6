// sd_notify(3) without libsystemd: tells the service manager (systemd, Type=notify) what
// warren is doing — "READY=1" once every listener it was asked to open is up, "RELOADING=1"
// and "READY=1" around a SIGHUP reload, "STOPPING=1" at shutdown — by one datagram to the
// unix socket $NOTIFY_SOCKET names (a leading '@' names an abstract socket). With no
// $NOTIFY_SOCKET it does nothing.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

class SdNotifier {
 public:
  // Reads $NOTIFY_SOCKET and unsets it, so the processes warren starts (libvirtd) do not
  // speak for it. Call before any thread starts.
  static SdNotifier FromEnvironment();

  bool enabled() const { return !socket_.empty(); }
  // Sends `state` (NAME=VALUE lines); an error when the socket is named but cannot be reached.
  Status Notify(std::string_view state) const;

 private:
  std::string socket_;
};

// "MONOTONIC_USEC=N": the CLOCK_MONOTONIC time systemd wants with RELOADING=1.
std::string MonotonicUsecField();

}  // namespace warren
