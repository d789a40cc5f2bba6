#include "vmhost/guest_text.h"

namespace warren {

std::string SanitizeGuestText(std::string_view bytes, size_t max_bytes) {
  std::string out;
  for (char c : bytes) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : (c == '\n' || c == '\t' ? ' ' : '?'));
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace warren
