// Login names that always reach the lobby and never a VM, so that `ssh NAME@HOST` routes by
// an explicit rule instead of by the name's length: root and dev (what OpenSSH sends from a
// root shell, and the VMs' own user), lobby, and the name of every warren user (OpenSSH
// sends the local user name, and a user is often called the same on both sides). None of
// them may name a VM — new, cp and rename refuse them (CheckNewVmName) — and `user add`
// refuses a name a VM already has, so the two namespaces never meet. `vm+NAME@HOST`
// always means the VM. Stateless functions; thread-safe (the store is).
#pragma once

#include <string_view>

#include "keys/store.h"
#include "lobby/base/status.h"

namespace warren {

// True when `name` is reserved for logins: root, dev, lobby, or a user's name. Also true
// when the store cannot say, since reaching the lobby is the safe way to route.
bool IsReservedLoginName(Store& store, std::string_view name);

// What a new VM name must pass (for new, cp and rename): CheckVmName, and not reserved for
// logins (InvalidArgument saying why). A store failure is passed on.
Status CheckNewVmName(Store& store, std::string_view name);

}  // namespace warren
