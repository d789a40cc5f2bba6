#include "lobby/commands/login_names.h"

#include <array>
#include <string>

#include "lobby/base/vm_name.h"
#include "lobby/commands/vm_view.h"

namespace warren {
namespace {

// root: what OpenSSH sends from a root shell; the VMs' own user; lobby: the lobby by name.
constexpr std::array<std::string_view, 3> kFixed = {"root", kVmUser, "lobby"};

// Whether `name` is reserved, or why the store cannot say.
Result<bool> Reserved(Store& store, std::string_view name) {
  for (std::string_view fixed : kFixed) {
    if (name == fixed) return true;
  }
  Result<User> user = store.GetUser(name);
  if (user.ok()) return true;
  if (user.status().code() == Code::kNotFound) return false;
  return user.status();
}

}  // namespace

bool IsReservedLoginName(Store& store, std::string_view name) {
  Result<bool> reserved = Reserved(store, name);
  return !reserved.ok() || *reserved;
}

Status CheckNewVmName(Store& store, std::string_view name) {
  WARREN_RETURN_IF_ERROR(CheckVmName(name));
  WARREN_ASSIGN_OR_RETURN(bool reserved, Reserved(store, name));
  if (!reserved) return Status::Ok();
  return InvalidArgument("VM name \"" + std::string(name) + "\" is reserved for logins: ssh " +
                         std::string(name) +
                         "@HOST reaches the lobby, and so do root, dev, lobby and the name of "
                         "every user here; pick another name");
}

}  // namespace warren
