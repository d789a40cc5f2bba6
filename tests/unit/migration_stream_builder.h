// Tests' QEMU 7.2 migration streams (vmhost/migration_stream.h): a builder for the layout a
// restore reads, and a loader that applies one to fresh memory as QEMU's ram_load_precopy
// does, so a stream and the plan made from it can be compared by what QEMU ends up with.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vmhost/migration_stream.h"

namespace warren {

class StreamBuilder {
 public:
  static constexpr uint64_t kPage = 4096;
  static constexpr uint64_t kZero = 0x02, kMemSize = 0x04, kPageFlag = 0x08, kEos = 0x10,
                            kContinue = 0x20;

  // "QEVM", version 3, the configuration section, the RAM's first section with its block list.
  explicit StreamBuilder(std::vector<std::pair<std::string, uint64_t>> blocks, uint32_t id = 3)
      : id_(id) {
    Be32(0x5145564d);
    Be32(3);
    U8(0x07);
    Be32(10);
    s_ += "pc-q35-7.2";
    U8(0x01);
    Be32(id_);
    Name("ram");
    Be32(0);
    Be32(4);
    uint64_t total = 0;
    for (const auto& b : blocks) total += b.second;
    Be64(total | kMemSize);
    for (const auto& [name, bytes] : blocks) {
      Name(name);
      Be64(bytes);
    }
  }
  // A zero-page record (`fill` the byte QEMU fills with), named or "the same block".
  StreamBuilder& Zero(std::string_view block, uint64_t page, uint8_t fill = 0) {
    Head(block, page, kZero);
    U8(fill);
    return *this;
  }
  StreamBuilder& Data(std::string_view block, uint64_t page, char byte) {
    Head(block, page, kPageFlag);
    s_.append(kPage, byte);
    return *this;
  }
  // Ends the current section; opens the next (0x02 a part, 0x03 the end) when `next` is set.
  StreamBuilder& EndSection(uint8_t next = 0) {
    Be64(kEos);
    U8(0x7e);
    Be32(id_);
    if (next != 0) {
      U8(next);
      Be32(id_);
    }
    return *this;
  }
  // The devices' state after the RAM's end (opaque here).
  StreamBuilder& Tail(std::string_view bytes) {
    s_ += bytes;
    return *this;
  }
  void Be32(uint32_t v) {
    for (int i = 3; i >= 0; i--) s_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void Be64(uint64_t v) {
    for (int i = 7; i >= 0; i--) s_.push_back(static_cast<char>(v >> (8 * i)));
  }
  void U8(uint8_t v) { s_.push_back(static_cast<char>(v)); }
  const std::string& str() const { return s_; }

 private:
  void Name(std::string_view n) {
    U8(static_cast<uint8_t>(n.size()));
    s_ += n;
  }
  // `block` empty: "continue" (the previous record's block).
  void Head(std::string_view block, uint64_t page, uint64_t flag) {
    Be64(page * kPage | flag | (block.empty() ? kContinue : 0));
    if (!block.empty()) Name(block);
  }
  uint32_t id_;
  std::string s_;
};

// The bytes a plan sends for `stream`.
inline std::string Assemble(const ZeroPagePlan& plan, std::string_view stream) {
  std::string out;
  for (const StreamPiece& p : plan.pieces) {
    if (!p.bytes.empty()) {
      out += p.bytes;
    } else {
      out.append(stream.substr(p.offset, p.length));
    }
  }
  return out;
}

// What a fresh QEMU holds after reading `stream`'s RAM records: its guest RAM (`ram`) zero,
// every other block filled with 0xAA (a ROM QEMU loaded at start-up), each record applied as
// ram_load_precopy applies it (a zero record fills the page only when it is not that byte
// already; "continue" is the block last named, across sections). `tail` gets the bytes after
// the RAM's end section. False for a stream it cannot read, or whose blocks add up to more
// than `max_bytes`.
inline bool LoadStream(std::string_view stream, std::map<std::string, std::string>* memory,
                       std::string* tail, uint64_t max_bytes = uint64_t{1} << 32,
                       std::string_view ram = kGuestRamBlock) {
  size_t at = 0;
  bool ok = true;
  auto take = [&](size_t n) {
    if (!ok || n > stream.size() - at) {
      ok = false;
      return std::string_view();
    }
    std::string_view v = stream.substr(at, n);
    at += n;
    return v;
  };
  auto be = [&](size_t bytes) {
    uint64_t v = 0;
    for (char c : take(bytes)) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
  };
  auto name = [&]() { return std::string(take(be(1))); };
  if (be(4) != 0x5145564d || be(4) != 3 || be(1) != 0x07) return false;
  take(be(4));
  if (be(1) != 0x01) return false;
  const uint64_t id = be(4);
  if (name() != "ram") return false;
  take(8);
  std::string last;
  uint64_t section = 0x01;
  while (ok) {
    const uint64_t w = be(8);
    const uint64_t flags = w & 0xfff, addr = w & ~uint64_t{0xfff};
    if (!ok) return false;
    if (flags == StreamBuilder::kEos) {
      if (be(1) != 0x7e || be(4) != id) return false;
      if (section == 0x03) {
        *tail = std::string(stream.substr(at));
        return ok;
      }
      section = be(1);
      if (be(4) != id || (section != 0x02 && section != 0x03)) return false;
      continue;
    }
    if (flags == StreamBuilder::kMemSize) {
      if (addr > max_bytes) return false;
      uint64_t total = addr;
      while (ok && total > 0) {
        std::string n = name();
        const uint64_t len = be(8);
        if (len == 0 || len > total) return false;
        (*memory)[n] = std::string(len, n == ram ? '\0' : '\xaa');
        total -= len;
      }
      continue;
    }
    if (!(flags & StreamBuilder::kContinue)) last = name();
    auto found = memory->find(last);
    if (!ok || found == memory->end()) return false;
    std::string& block = found->second;
    if (addr > block.size() || block.size() - addr < StreamBuilder::kPage) return false;
    if (flags & StreamBuilder::kZero) {
      const std::string filled(StreamBuilder::kPage, static_cast<char>(be(1)));
      if (block.compare(addr, StreamBuilder::kPage, filled) != 0) {
        block.replace(addr, StreamBuilder::kPage, filled);
      }
    } else {
      std::string_view page = take(StreamBuilder::kPage);
      if (!ok) return false;
      block.replace(addr, StreamBuilder::kPage, page);
    }
  }
  return false;
}

}  // namespace warren
