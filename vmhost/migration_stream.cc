#include "vmhost/migration_stream.h"

#include <map>
#include <optional>
#include <vector>

namespace warren {
namespace {

// QEMU 7.2's migration/savevm.c and migration/ram.c.
constexpr uint32_t kFileMagic = 0x5145564d;  // "QEVM"
constexpr uint32_t kFileVersion = 3;
constexpr uint8_t kSectionStart = 0x01;
constexpr uint8_t kSectionPart = 0x02;
constexpr uint8_t kSectionEnd = 0x03;
constexpr uint8_t kConfiguration = 0x07;
constexpr uint8_t kSectionFooter = 0x7e;
constexpr uint32_t kRamSectionVersion = 4;
// The RAM records' flags, in the low bits of the page address (TARGET_PAGE_BITS 12 on x86).
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kFlagMask = kPageBytes - 1;
constexpr uint64_t kFlagZero = 0x02;
constexpr uint64_t kFlagMemSize = 0x04;
constexpr uint64_t kFlagPage = 0x08;
constexpr uint64_t kFlagEos = 0x10;
constexpr uint64_t kFlagContinue = 0x20;
// A machine type's name, and the configuration section with it, are short.
constexpr uint32_t kMaxConfigurationName = 256;

Status Unknown(uint64_t at, const std::string& what) {
  return Internal("migration stream: " + what + " at byte " + std::to_string(at));
}

// Reads the stream front to back; every read is bounds-checked.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  uint64_t at() const { return at_; }
  bool Has(uint64_t n) const { return n <= s_.size() - at_; }
  std::optional<uint8_t> U8() {
    if (!Has(1)) return std::nullopt;
    return static_cast<uint8_t>(s_[at_++]);
  }
  std::optional<uint32_t> Be32() { return BigEndian<uint32_t>(); }
  std::optional<uint64_t> Be64() { return BigEndian<uint64_t>(); }
  // A length byte and that many bytes (QEMU's idstr).
  std::optional<std::string_view> Name() {
    std::optional<uint8_t> len = U8();
    if (!len || *len == 0 || !Has(*len)) return std::nullopt;
    std::string_view v = s_.substr(at_, *len);
    at_ += *len;
    return v;
  }
  bool Skip(uint64_t n) {
    if (!Has(n)) return false;
    at_ += n;
    return true;
  }

 private:
  template <typename T>
  std::optional<T> BigEndian() {
    if (!Has(sizeof(T))) return std::nullopt;
    T v = 0;
    for (size_t i = 0; i < sizeof(T); i++)
      v = static_cast<T>(v << 8) | static_cast<uint8_t>(s_[at_++]);
    return v;
  }

  std::string_view s_;
  uint64_t at_ = 0;
};

class Planner {
 public:
  Planner(std::string_view stream, std::string_view ram_block)
      : r_(stream), size_(stream.size()), ram_block_(ram_block) {}

  Result<ZeroPagePlan> Run() {
    if (r_.Be32() != kFileMagic) return Unknown(0, "no \"QEVM\"");
    if (r_.Be32() != kFileVersion) return Unknown(4, "a version other than 3");
    uint64_t at = r_.at();
    std::optional<uint8_t> type = r_.U8();
    if (type == kConfiguration) {
      std::optional<uint32_t> len = r_.Be32();
      if (!len || *len > kMaxConfigurationName || !r_.Skip(*len)) {
        return Unknown(at, "a configuration section not understood");
      }
      at = r_.at();
      type = r_.U8();
    }
    // The RAM's first section (its block list), then its parts, up to its end.
    if (type != kSectionStart) return Unknown(at, "no RAM section first");
    std::optional<uint32_t> id = r_.Be32();
    std::optional<std::string_view> name = r_.Name();
    std::optional<uint32_t> instance = r_.Be32();
    std::optional<uint32_t> version = r_.Be32();
    if (!id || !name || *name != "ram" || !instance || version != kRamSectionVersion) {
      return Unknown(at, "a first section other than RAM version 4");
    }
    ram_section_ = *id;
    Span(0, r_.at());  // everything up to here, as it is
    WARREN_RETURN_IF_ERROR(Records(/*first=*/true));
    // The block list came in that first section, or none will.
    if (ram_written_.empty()) return Unknown(0, "no RAM block named " + std::string(ram_block_));
    for (;;) {
      at = r_.at();
      type = r_.U8();
      if (type != kSectionPart && type != kSectionEnd) {
        return Unknown(at, "a section before the RAM's last");
      }
      if (r_.Be32() != ram_section_) return Unknown(at, "a section of another id");
      Span(at, r_.at() - at);
      WARREN_RETURN_IF_ERROR(Records(/*first=*/false));
      if (type == kSectionEnd) break;
    }
    // The devices' state, as it is.
    Span(r_.at(), size_ - r_.at());
    return std::move(plan_);
  }

 private:
  // One section's RAM records, up to its end-of-section record and footer.
  Status Records(bool first) {
    for (;;) {
      const uint64_t at = r_.at();
      std::optional<uint64_t> word = r_.Be64();
      if (!word) return Unknown(at, "the stream ends inside a RAM section");
      const uint64_t flags = *word & kFlagMask;
      const uint64_t addr = *word & ~kFlagMask;
      if (flags == kFlagEos && addr == 0) {
        Span(at, r_.at() - at);
        const uint64_t footer = r_.at();
        if (r_.U8() != kSectionFooter || r_.Be32() != ram_section_) {
          return Unknown(footer, "no section footer");
        }
        Span(footer, r_.at() - footer);
        return Status::Ok();
      }
      if (flags == kFlagMemSize) {
        if (!first || !blocks_.empty()) return Unknown(at, "a second block list");
        WARREN_RETURN_IF_ERROR(BlockList(addr));
        Span(at, r_.at() - at);
        continue;
      }
      const uint64_t kind = flags & ~kFlagContinue;
      if (kind != kFlagZero && kind != kFlagPage) {
        return Unknown(at, "RAM record flags " + std::to_string(flags));
      }
      const bool continues = (flags & kFlagContinue) != 0;
      std::string_view block;
      if (continues) {
        if (stream_block_.empty()) return Unknown(at, "a record without a block");
        block = stream_block_;
      } else {
        std::optional<std::string_view> named = r_.Name();
        if (!named) return Unknown(at, "a record's block name cut short");
        block = *named;
      }
      auto known = blocks_.find(block);
      if (known == blocks_.end()) return Unknown(at, "a record of a block not listed");
      if (addr >= known->second || known->second - addr < kPageBytes) {
        return Unknown(at, "a page outside its block");
      }
      stream_block_ = known->first;
      const uint64_t payload = r_.at();
      std::optional<uint8_t> fill;
      if (kind == kFlagZero) {
        fill = r_.U8();
        if (!fill) return Unknown(at, "the stream ends inside a record");
      } else if (!r_.Skip(kPageBytes)) {
        return Unknown(at, "the stream ends inside a page");
      }
      if (block == ram_block_) {
        // A zero page QEMU never wrote is zero: left out. One the stream wrote before (a page
        // sent again, as a live migration's later passes send what changed) is kept.
        const size_t page = addr / kPageBytes;
        if (kind == kFlagZero && *fill == 0 && !ram_written_[page]) {
          plan_.dropped_records++;
          plan_.dropped_bytes += r_.at() - at;
          continue;
        }
        ram_written_[page] = true;
      }
      if (continues && loader_block_ != stream_block_) {
        // QEMU would take it for a page of the last block it read a name for: name it.
        std::string head(8, '\0');
        const uint64_t w = *word & ~kFlagContinue;
        for (int i = 0; i < 8; i++) head[i] = static_cast<char>(w >> (56 - 8 * i));
        head.push_back(static_cast<char>(block.size()));
        head.append(block);
        Bytes(std::move(head));
        Span(payload, r_.at() - payload);
      } else {
        Span(at, r_.at() - at);
      }
      loader_block_ = stream_block_;
    }
  }

  // The block list of the RAM's first section: each block's name and size, as many as add up
  // to `total` (QEMU writes no more: no postcopy page sizes, no ignore-shared addresses).
  Status BlockList(uint64_t total) {
    uint64_t listed = 0;
    while (listed < total) {
      const uint64_t at = r_.at();
      std::optional<std::string_view> name = r_.Name();
      std::optional<uint64_t> length = r_.Be64();
      if (!name || !length || *length == 0 || *length % kPageBytes != 0 ||
          *length > total - listed || !blocks_.emplace(std::string(*name), *length).second) {
        return Unknown(at, "a block list not understood");
      }
      listed += *length;
      if (*name == ram_block_) {
        // QEMU sends every page of a block at least once, each in 9 bytes or more: a block
        // of more pages than the stream has bytes is no stream of QEMU's (and would size
        // this bitmap from a number in the stream alone).
        if (*length / kPageBytes > size_) return Unknown(at, "a RAM block larger than its stream");
        ram_written_.assign(*length / kPageBytes, false);
      }
    }
    return Status::Ok();
  }

  void Span(uint64_t offset, uint64_t length) {
    if (length == 0) return;
    plan_.kept_bytes += length;
    if (!plan_.pieces.empty()) {
      StreamPiece& last = plan_.pieces.back();
      if (last.bytes.empty() && last.offset + last.length == offset) {
        last.length += length;
        return;
      }
    }
    plan_.pieces.push_back({offset, length, {}});
  }

  void Bytes(std::string bytes) {
    plan_.kept_bytes += bytes.size();
    plan_.pieces.push_back({0, 0, std::move(bytes)});
  }

  Reader r_;
  const uint64_t size_;
  const std::string_view ram_block_;
  uint32_t ram_section_ = 0;
  std::map<std::string, uint64_t, std::less<>> blocks_;
  // The pages of the guest's RAM a kept record wrote; sized when its block is listed.
  std::vector<bool> ram_written_;
  // The block of the stream's last record, and of the last record sent: QEMU reads a record
  // flagged "continue" as a page of the latter.
  std::string_view stream_block_, loader_block_;
  ZeroPagePlan plan_;
};

}  // namespace

Result<ZeroPagePlan> PlanWithoutZeroPages(std::string_view stream, std::string_view ram_block) {
  return Planner(stream, ram_block).Run();
}

}  // namespace warren
