#include "vmhost/libvirt_uri.h"

namespace warren {

bool IsRemoteLibvirtUri(std::string_view uri) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return false;  // a bare name: a local alias
  const std::string_view scheme = uri.substr(0, scheme_end);
  const size_t plus = scheme.find('+');
  if (plus != std::string_view::npos && scheme.substr(plus + 1) != "unix") return true;
  std::string_view rest = uri.substr(scheme_end + 3);
  const size_t end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, end);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  return !authority.empty();
}

}  // namespace warren
