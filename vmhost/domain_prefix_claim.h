// DomainPrefixClaim: one warren per domain prefix on a machine. A warren takes every libvirt
// domain named with its prefix as its own, and reconcile destroys one it has no record of:
// two warrens sharing a prefix on one libvirt host would destroy each other's VMs. A claim
// is an exclusive lock (flock) on a file named after the prefix, held while warren runs; the
// kernel drops it when the process ends, however it ends.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

class DomainPrefixClaim {
 public:
  DomainPrefixClaim() = default;  // claims nothing
  DomainPrefixClaim(DomainPrefixClaim&& other) noexcept;
  DomainPrefixClaim& operator=(DomainPrefixClaim&& other) noexcept;
  DomainPrefixClaim(const DomainPrefixClaim&) = delete;
  DomainPrefixClaim& operator=(const DomainPrefixClaim&) = delete;
  ~DomainPrefixClaim();

  // Claims `prefix` for libvirt at `uri` on this machine, in `lock_dir` (made when missing).
  // Conflict when another process holds it. A remote URI (a host part) or libvirt's test
  // driver (domains private to the connection) needs no claim here: an empty one.
  static Result<DomainPrefixClaim> Take(std::string_view uri, std::string_view prefix,
                                        const std::string& lock_dir = "/run/lock");

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace warren
