// serve's host flags (docs/multi_host.md), parsed and checked before any host starts:
//   --host NAME=URI            a VM host and its libvirt URI (repeatable; the first is the
//                              default host);
//   --host-isolated NAME       a remote host whose operator put warren's isolation rules there;
//   --host-peer-uri NAME=URI   the URI other hosts' libvirtd reaches host NAME by, for live
//                              moves onto it (a peer-to-peer migration: the source's daemon
//                              opens it). A remote host's default is its --host URI; a host on
//                              this machine (qemu:///system, which means the local daemon to
//                              whoever opens it) has none unless given.
#pragma once

#include <string>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

struct HostFlag {
  std::string name;
  std::string uri;
  bool remote = false;             // the URI names another machine's daemon
  bool declared_isolated = false;  // --host-isolated NAME
  std::string peer_uri;            // --host-peer-uri NAME=URI, else the default above
};

// Checked: names (host_name.h) distinct, URIs non-empty, every --host-isolated and
// --host-peer-uri naming a --host (isolation only a remote one), each peer URI a remote one.
// InvalidArgument otherwise.
Result<std::vector<HostFlag>> ParseHostFlags(const std::vector<std::string>& hosts,
                                             const std::vector<std::string>& isolated,
                                             const std::vector<std::string>& peer_uris = {});

}  // namespace warren
