// QEMU's migration stream, as a restore into a fresh QEMU reads it: the plan that sends it
// without the zero-page records of the guest's RAM, which such a QEMU holds as zeros already.
//
// Why: a template's or a live copy's stream says "this page is zero" for every page the guest
// never wrote (a debian guest with 2 GiB: ~483,000 of them beside ~41,000 pages of data).
// QEMU 7.2 checks each such page before it would clear it (ram_handle_compressed:
// buffer_is_zero), and that read faults the page in: ~0.6 µs each with 4 KiB pages, about
// 0.3 s of every restore. Dropped, QEMU never touches those pages: they stay unmapped, as in
// the VM the stream was taken from. The result is the same memory, byte for byte.
//
// Pure: parses bytes in memory (the stream mapped from its file), allocates only the plan.
// The guest is untrusted and so are its bytes in the stream, but the layout around them is
// QEMU's, written by this machine's QEMU; still every length and offset is checked, and any
// layout not known here (another QEMU version's records, a capability that changes them) makes
// the plan fail, so the caller sends the stream as it is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

// The RAM block of the guest's memory in every warren domain (libvirt names the machine's
// memory backend "pc.ram", and QEMU its RAM block after it); the ROM blocks beside it (pc.bios,
// pc.rom, ACPI tables) are filled at start-up, so their zero records are kept.
inline constexpr std::string_view kGuestRamBlock = "pc.ram";

// One piece of the stream to send: `length` bytes of the original from `offset`, or, when
// `bytes` is not empty, those bytes (a record header rewritten here).
struct StreamPiece {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string bytes;
};

struct ZeroPagePlan {
  std::vector<StreamPiece> pieces;  // in order; adjacent spans of the original merged
  uint64_t dropped_records = 0;     // zero-page records of kGuestRamBlock left out
  uint64_t dropped_bytes = 0;
  uint64_t kept_bytes = 0;  // what the pieces add up to
};

// The pieces of `stream` (a whole migration stream: "QEVM", version 3, QEMU 7.2's layout)
// without the zero-page records of `ram_block` for pages no record before them wrote (a
// stream of a VM that ran while it was taken sends a page again once it changed; a paused
// VM's sends each page once). A record that follows a dropped one and named
// its block only by "the same block as before" (RAM_SAVE_FLAG_CONTINUE) gets its block's name
// written out, so QEMU reads every kept record as it would have. Everything after the RAM's
// last section (the devices' state) is one span. Internal, saying where, for any layout this
// does not know: then send `stream` unchanged.
Result<ZeroPagePlan> PlanWithoutZeroPages(std::string_view stream,
                                          std::string_view ram_block = kGuestRamBlock);

}  // namespace warren
