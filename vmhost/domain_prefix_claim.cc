#include "vmhost/domain_prefix_claim.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace warren {
namespace {

// "driver:///path": libvirt on this machine. "driver://host/path" names another one.
bool IsLocalUri(std::string_view uri) {
  const size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return true;  // an alias or a bare name: local
  return uri.substr(scheme + 3, 1) == "/";
}

}  // namespace

DomainPrefixClaim::DomainPrefixClaim(DomainPrefixClaim&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

DomainPrefixClaim& DomainPrefixClaim::operator=(DomainPrefixClaim&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

DomainPrefixClaim::~DomainPrefixClaim() {
  if (fd_ >= 0) ::close(fd_);
}

Result<DomainPrefixClaim> DomainPrefixClaim::Take(std::string_view uri, std::string_view prefix,
                                                  const std::string& lock_dir) {
  DomainPrefixClaim claim;
  if (uri.rfind("test:", 0) == 0 || !IsLocalUri(uri)) return claim;
  if (::mkdir(lock_dir.c_str(), 01777) != 0 && errno != EEXIST) {
    return Internal("cannot make " + lock_dir +
                    " for the domain prefix's lock: " + std::strerror(errno));
  }
  claim.path_ = lock_dir + "/warren-domains-" + std::string(prefix) + ".lock";
  claim.fd_ = ::open(claim.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (claim.fd_ < 0) {
    return Internal("cannot open " + claim.path_ + ": " + std::strerror(errno));
  }
  if (::flock(claim.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return Conflict("another warren on this machine names its libvirt domains \"" +
                      std::string(prefix) + "<id>\" (it holds " + claim.path_ +
                      "): each would destroy the other's VMs as orphans; give this one its "
                      "own --vm-domain-prefix (vm-domain-prefix in its config file)");
    }
    return Internal("cannot lock " + claim.path_ + ": " + std::strerror(err));
  }
  return claim;
}

}  // namespace warren
