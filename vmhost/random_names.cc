#include "vmhost/random_names.h"

#include <random>

namespace warren {
namespace {

constexpr char kHex[] = "0123456789abcdef";

}  // namespace

std::string NewUuid() {
  std::random_device rd;
  unsigned char b[16];
  for (auto& byte : b) byte = static_cast<unsigned char>(rd());
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += kHex[b[i] >> 4];
    s += kHex[b[i] & 15];
  }
  return s;
}

std::string RandomHex(int n) {
  std::random_device rd;
  std::string s;
  for (int i = 0; i < n; ++i) s += kHex[rd() & 15];
  return s;
}

}  // namespace warren
