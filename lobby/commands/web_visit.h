// The web's vocabulary, shared by the rules that decide (web_access.h) and the proxy that
// asks (lobby/web/web_gate.h): which site a host name means, what a visitor presented, and
// who was let in. Value types.
#pragma once

#include <string>

namespace warren {

// A web host under the domain: `NAME` serves the VM's route port to whoever may see it,
// `NAME-pPORT` (3000–9999) one port to the owner only.
struct WebSite {
  std::string vm_id;
  std::string vm_name;  // as the VM is named now (hosts follow a rename)
  int port = 0;         // the guest's port this host serves
  bool owner_only = false;
};

// What a visitor presented, as the proxy found it in the request. Secrets: never logged,
// never forwarded to the VM.
struct WebCredentials {
  std::string session;     // the value of this host's session cookie; empty if none
  std::string bearer;      // an `Authorization: Bearer` API token; empty if none
  std::string share_link;  // a share-link token (`?share=` or this host's link cookie)
  std::string source;      // the peer's address, for the log
};

// Who was let in, safe to log: "user:alice", "link:<link id>", "public".
struct WebVisitor {
  std::string who;
};

}  // namespace warren
