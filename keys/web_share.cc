#include "keys/web_share.h"

#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "lobby/base/hex.h"
#include "lobby/base/user_name.h"

namespace warren {
namespace {

Result<std::string> RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    return Internal("the system random number generator failed");
  }
  return HexEncode(raw);
}

bool IsLowerHex(std::string_view s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

Status CheckWebPort(int64_t port) {
  if (port >= kMinWebPort && port <= kMaxWebPort) return Status::Ok();
  return InvalidArgument("a web port is " + std::to_string(kMinWebPort) + "-" +
                         std::to_string(kMaxWebPort) + ", not " + std::to_string(port));
}

Result<std::string> NewShareLinkId() { return RandomHex(4); }
Result<std::string> NewSignInId() { return RandomHex(16); }

Status ValidateVmShare(const VmShare& share) {
  WARREN_RETURN_IF_ERROR(CheckWebPort(share.port));
  if (share.users.size() > kMaxShareUsers) {
    return LimitExceeded("a VM may be shared with at most " + std::to_string(kMaxShareUsers) +
                         " users");
  }
  for (size_t i = 0; i < share.users.size(); ++i) {
    WARREN_RETURN_IF_ERROR(CheckUserName(share.users[i]));
    if (i > 0 && !(share.users[i - 1] < share.users[i])) {
      return InvalidArgument("share users must be sorted and unique");
    }
  }
  if (share.links.size() > kMaxShareLinks) {
    return LimitExceeded("a VM may have at most " + std::to_string(kMaxShareLinks) +
                         " share links; remove one with: share remove-link VM LINK_ID");
  }
  std::set<std::string> ids, hashes;
  for (const ShareLink& l : share.links) {
    if (!IsLowerHex(l.id, 8)) return InvalidArgument("a share link id is 8 hex digits");
    if (!IsLowerHex(l.token_sha256, 64)) return InvalidArgument("a share link needs its hash");
    if (!ids.insert(l.id).second || !hashes.insert(l.token_sha256).second) {
      return InvalidArgument("share link " + l.id + " is there twice");
    }
  }
  return Status::Ok();
}

}  // namespace warren
