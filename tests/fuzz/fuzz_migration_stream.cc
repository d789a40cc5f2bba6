// Fuzzes the plan that sends QEMU's migration stream without its zero pages
// (vmhost/migration_stream.h). Input: the stream. Invariants: a refusal is Internal; a plan's
// spans lie inside the stream, its byte count is what its pieces add up to, every byte of the
// stream is sent once or counted dropped (a rewritten header in place of 8), and, for a stream
// whose blocks are small enough to hold, a fresh QEMU (the tests' loader model) ends with the
// same memory and device state from the plan as from the stream.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "tests/fuzz/check.h"
#include "tests/unit/migration_stream_builder.h"
#include "vmhost/migration_stream.h"

namespace {

using warren::Code;
using warren::fuzz::Fail;

constexpr uint64_t kMaxModelBytes = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view stream(reinterpret_cast<const char*>(data), size);
  warren::Result<warren::ZeroPagePlan> plan = warren::PlanWithoutZeroPages(stream);
  if (!plan.ok()) {
    if (plan.status().code() != Code::kInternal) Fail(plan.status().ToString());
    return 0;
  }
  uint64_t sent = 0, covered = 0;
  for (const warren::StreamPiece& p : plan->pieces) {
    if (!p.bytes.empty()) {
      sent += p.bytes.size();
      covered += 8;
      continue;
    }
    if (p.length == 0 || p.offset > size || p.length > size - p.offset) Fail("a span outside");
    sent += p.length;
    covered += p.length;
  }
  if (sent != plan->kept_bytes) Fail("kept_bytes is not what the pieces add up to");
  if (covered + plan->dropped_bytes != size) Fail("a byte sent twice or lost");
  std::map<std::string, std::string> whole, planned;
  std::string whole_tail, planned_tail;
  warren::fuzz::Note("plan: " + std::to_string(plan->pieces.size()) + " pieces, " +
                     std::to_string(plan->dropped_records) + " dropped");
  // The model holds every block in memory: only streams that list little of it.
  if (!warren::LoadStream(stream, &whole, &whole_tail, kMaxModelBytes)) return 0;
  const std::string assembled = warren::Assemble(*plan, stream);
  if (!warren::LoadStream(assembled, &planned, &planned_tail, kMaxModelBytes)) {
    Fail("the plan does not load");
  }
  if (planned != whole || planned_tail != whole_tail) Fail("the plan loads to other memory");
  return 0;
}
