// PlanWithoutZeroPages (vmhost/migration_stream.h): streams built in QEMU 7.2's layout, each
// plan checked by what a fresh QEMU would hold after reading it (LoadStream) against what it
// holds after reading the whole stream; and every layout it must refuse.
#include "vmhost/migration_stream.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "tests/unit/migration_stream_builder.h"

namespace warren {
namespace {

using Memory = std::map<std::string, std::string>;

const std::vector<std::pair<std::string, uint64_t>> kBlocks = {
    {"pc.ram", 64 * StreamBuilder::kPage}, {"pc.bios", 4 * StreamBuilder::kPage}};

// The plan, assembled, loads to the same memory and the same devices' state as the stream.
void ExpectSameLoad(const std::string& stream, const ZeroPagePlan& plan) {
  const std::string sent = Assemble(plan, stream);
  EXPECT_EQ(sent.size(), plan.kept_bytes);
  // Every byte but the dropped records' is sent once, a rewritten header in place of the 8
  // bytes of the one it replaces.
  uint64_t spans = 0;
  for (const StreamPiece& p : plan.pieces) {
    if (p.bytes.empty()) spans += p.length;
    if (!p.bytes.empty()) spans += 8;
  }
  EXPECT_EQ(spans + plan.dropped_bytes, stream.size());
  Memory whole, planned;
  std::string whole_tail, planned_tail;
  ASSERT_TRUE(LoadStream(stream, &whole, &whole_tail));
  ASSERT_TRUE(LoadStream(sent, &planned, &planned_tail));
  EXPECT_TRUE(planned == whole) << "the memory differs";
  EXPECT_EQ(planned_tail, whole_tail);
}

TEST(MigrationStreamTest, LeavesOutTheGuestRamsZeroPagesOnly) {
  StreamBuilder b(kBlocks);
  b.Zero("pc.ram", 0).Zero("", 1).Data("", 2, 'a').Zero("", 3);
  b.Zero("pc.bios", 0).Data("", 1, 'b');  // a ROM's zero page is kept: it is not zero there
  b.EndSection(0x02);
  b.Zero("pc.ram", 4).Zero("", 5, /*fill=*/7).Data("", 6, 'c');  // a fill of 7 is kept
  b.EndSection(0x03);
  b.Zero("pc.ram", 7).EndSection();
  b.Tail("devices' state");
  Result<ZeroPagePlan> plan = PlanWithoutZeroPages(b.str());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->dropped_records, 5);
  ExpectSameLoad(b.str(), *plan);
  Memory m;
  std::string tail;
  ASSERT_TRUE(LoadStream(Assemble(*plan, b.str()), &m, &tail));
  EXPECT_EQ(m["pc.bios"].substr(0, StreamBuilder::kPage), std::string(StreamBuilder::kPage, '\0'));
  EXPECT_EQ(m["pc.ram"][5 * StreamBuilder::kPage], 7);
  EXPECT_EQ(tail, "devices' state");
  // Two records said "the same block" after their block's named record was left out: pages
  // 2 (no block read yet) and 5 (after the bios). Their headers are rewritten with the name;
  // the rest are spans of the stream, adjacent ones merged.
  int rewritten = 0;
  for (size_t i = 0; i < plan->pieces.size(); i++) {
    const StreamPiece& p = plan->pieces[i];
    if (!p.bytes.empty()) {
      rewritten++;
      EXPECT_EQ(p.bytes.substr(8), std::string("\x06pc.ram"));
    } else if (i > 0 && plan->pieces[i - 1].bytes.empty()) {
      EXPECT_NE(plan->pieces[i - 1].offset + plan->pieces[i - 1].length, p.offset);
    }
  }
  EXPECT_EQ(rewritten, 2);
}

TEST(MigrationStreamTest, NamesTheBlockOfARecordThatFollowedALeftOutOne) {
  // The bios page names its block, the RAM's zero page (left out) names pc.ram, and the next
  // RAM page says only "the same block": QEMU would write it into the bios without its name.
  StreamBuilder b(kBlocks);
  b.Data("pc.bios", 0, 'b').Zero("pc.ram", 0).Data("", 1, 'r').Zero("", 2).Data("", 3, 's');
  b.EndSection(0x03).EndSection();
  Result<ZeroPagePlan> plan = PlanWithoutZeroPages(b.str());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  int rewritten = 0;
  for (const StreamPiece& p : plan->pieces) rewritten += p.bytes.empty() ? 0 : 1;
  EXPECT_EQ(rewritten, 1);  // page 3 follows page 1 of the same block: no name needed
  ExpectSameLoad(b.str(), *plan);
}

TEST(MigrationStreamTest, RandomStreamsLoadTheSame) {
  std::mt19937 rng(15);
  for (int round = 0; round < 200; round++) {
    StreamBuilder b(kBlocks);
    std::string last;
    const int sections = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < sections; s++) {
      const int records = static_cast<int>(rng() % 40);
      for (int r = 0; r < records; r++) {
        const bool ram = rng() % 4 != 0;
        const std::string block = ram ? "pc.ram" : "pc.bios";
        const uint64_t page = rng() % (ram ? 64 : 4);
        const std::string named = (block == last && rng() % 2 == 0) ? "" : block;
        last = block;
        if (rng() % 3 == 0) {
          b.Data(named, page, static_cast<char>('a' + rng() % 26));
        } else {
          b.Zero(named, page, static_cast<uint8_t>(rng() % 8 == 0 ? 9 : 0));
        }
      }
      b.EndSection(s + 1 < sections ? 0x02 : 0x03);
    }
    b.EndSection().Tail(std::string(rng() % 50, 'd'));
    Result<ZeroPagePlan> plan = PlanWithoutZeroPages(b.str());
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ExpectSameLoad(b.str(), *plan);
  }
}

TEST(MigrationStreamTest, RefusesEveryLayoutItDoesNotKnow) {
  auto refused = [](const std::string& stream, const std::string& why) {
    Result<ZeroPagePlan> plan = PlanWithoutZeroPages(stream);
    EXPECT_EQ(plan.status().code(), Code::kInternal) << why;
    if (!plan.ok()) {
      EXPECT_NE(plan.status().message().find(why), std::string::npos) << why;
    }
  };
  auto good = [] {
    StreamBuilder b(kBlocks);
    b.Zero("pc.ram", 0).Data("", 1, 'a');
    return b;
  };
  {
    StreamBuilder b = good();
    b.EndSection(0x03).EndSection();
    ASSERT_TRUE(PlanWithoutZeroPages(b.str()).ok());
    std::string s = b.str();
    refused(s.substr(0, 3), "QEVM");
    std::string v = s;
    v[7] = 4;
    refused(v, "version");
    for (size_t cut : {size_t{20}, size_t{60}, s.size() - 30, s.size() - 3}) {
      EXPECT_FALSE(PlanWithoutZeroPages(s.substr(0, cut)).ok()) << cut;
    }
  }
  {
    StreamBuilder b = good();
    b.Be64(3 * StreamBuilder::kPage | 0x40);  // XBZRLE
    refused(b.str(), "flags 64");
  }
  {
    StreamBuilder b(kBlocks);
    b.Zero("", 0);  // "the same block" with none before
    refused(b.str(), "without a block");
  }
  {
    StreamBuilder b(kBlocks);
    b.Zero("pc.rom", 0);
    refused(b.str(), "not listed");
  }
  {
    StreamBuilder b(kBlocks);
    b.Data("pc.bios", 4, 'x');  // past its 4 pages
    refused(b.str(), "outside its block");
  }
  {
    StreamBuilder b = good();
    b.Be64(0x10);
    b.U8(0x7e);
    b.Be32(3);
    b.U8(0x04);  // a device's whole section before the RAM's end
    refused(b.str(), "before the RAM's last");
  }
  {
    StreamBuilder b = good();
    b.Be64(0x10);
    b.U8(0x02);  // no footer
    refused(b.str(), "footer");
  }
  {
    // A size no stream this short could hold the pages of (and no bitmap is sized from it).
    StreamBuilder b({{"pc.ram", uint64_t{1} << 40}});
    b.EndSection(0x03).EndSection();
    refused(b.str(), "larger than its stream");
  }
  {
    StreamBuilder b({{"pc.bios", 4 * StreamBuilder::kPage}});
    b.Zero("pc.bios", 0).EndSection(0x03).EndSection();
    refused(b.str(), "no RAM block named pc.ram");
  }
}

}  // namespace
}  // namespace warren
