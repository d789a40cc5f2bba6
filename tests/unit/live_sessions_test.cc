// LiveSessions and the interpreter's use of it: removing a key, a token label or a user
// ends the commands running with it at once (cancelled in the VM, failing with the reason),
// leaves everyone else's alone, and never ends the command that made the change.
#include "lobby/commands/live_sessions.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "tests/unit/vm_test_fixture.h"

namespace warren::vmtest {
namespace {

using namespace std::chrono_literals;

constexpr const char* kShortKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINa5Ysop7RY8q3WVzc7n0nEm2kWlzpgQdt2nxKUPmLei short@host";
constexpr const char* kLabelId = "0123456789abcdef0123456789abcdef";

class LiveSessionsTest : public VmCommandTest {
 protected:
  void SetUp() override {
    VmCommandTest::SetUp();
    ASSERT_TRUE(store_->AddKey(KeyRecord(kShortKey, "alice", "short")).ok());
    ASSERT_TRUE(
        store_->RecordToken("alice", "agent", kLabelId, IssuedToken{{}, kStart}, kStart).ok());
    New(Alice(), {"--name", "web-one"});
    guests_.SetScript("slow", {"", "", std::nullopt, /*hold=*/true});
  }

  // A caller with alice's API token label "agent", as /exec or MCP has it.
  Caller AliceToken(const std::string& surface = "exec") {
    Caller c;
    c.user = "alice";
    c.credential = std::string("token:") + kLabelId;
    c.token_label_id = kLabelId;
    c.surface = surface;
    return c;
  }

  // Runs `argv` as `caller` on a thread of its own, once the guest has started it.
  std::future<Outcome> Start(const Caller& caller, std::vector<std::string> argv) {
    const size_t before = guests_.commands().size();
    auto f = std::async(std::launch::async, [this, caller, argv] { return Exec(caller, argv); });
    for (int i = 0; i < 500 && guests_.commands().size() <= before; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_GT(guests_.commands().size(), before);
    return f;
  }
};

TEST_F(LiveSessionsTest, EndRevokedEndsOnlyRefusedCallersOnceAndSkipsTheTaggedOne) {
  LiveSessions live;
  int alice_ended = 0, short_ended = 0, tagged_ended = 0;
  Status why;
  auto a = live.Register(Alice(), nullptr, [&](const Status&) { ++alice_ended; });
  auto s = live.Register(As(kShortKey), nullptr, [&](const Status& w) {
    ++short_ended;
    why = w;
  });
  int tag = 0;
  auto t = live.Register(As(kShortKey), &tag, [&](const Status&) { ++tagged_ended; });
  {
    auto gone = live.Register(As(kShortKey), nullptr, [](const Status&) { FAIL(); });
  }
  EXPECT_EQ(live.size(), 3u);
  EXPECT_EQ(live.EndRevoked(*store_, kStart, &tag), 0u);
  ASSERT_TRUE(store_->RemoveKey("alice", ParseAuthorizedKey(kShortKey)->fingerprint).ok());
  EXPECT_EQ(live.EndRevoked(*store_, kStart, &tag), 1u);
  EXPECT_EQ(live.EndRevoked(*store_, kStart, &tag), 0u);  // at most once
  EXPECT_EQ(short_ended, 1);
  EXPECT_EQ(why.code(), Code::kUnauthenticated);
  EXPECT_NE(why.message().find("removed"), std::string::npos) << why.message();
  EXPECT_EQ(alice_ended, 0);
  EXPECT_EQ(tagged_ended, 0);
  EXPECT_EQ(live.size(), 2u);
  // A caller without a credential is not a use of one.
  {
    auto none = live.Register(Caller{}, nullptr, [](const Status&) { FAIL(); });
  }
  EXPECT_EQ(live.size(), 2u);
}

TEST_F(LiveSessionsTest, RemovingAKeyEndsItsRunningCommandAtOnce) {
  std::future<Outcome> running = Start(As(kShortKey), {"ssh", "web-one", "slow"});
  const std::string other_job = guests_.next_job();
  std::future<Outcome> other = Start(Alice(), {"ssh", "web-one", "slow"});
  auto t0 = std::chrono::steady_clock::now();
  Outcome removed = Exec(Alice(), {"ssh-key", "remove", "short"});
  ASSERT_TRUE(removed.status.ok()) << removed.err;
  ASSERT_EQ(running.wait_for(2s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  Outcome o = running.get();
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated) << o.status.ToString();
  EXPECT_TRUE(Has(o.err, "this key has been removed")) << o.err;
  EXPECT_EQ(guests_.killed(), 1);  // stopped in the VM, not left running
  // Alice's other key's command goes on.
  EXPECT_EQ(other.wait_for(200ms), std::future_status::timeout);
  guests_.Release(other_job, 0);
  EXPECT_TRUE(other.get().status.ok());
}

TEST_F(LiveSessionsTest, RemovingATokenLabelEndsItsCallsButNotTheOneRemovingIt) {
  std::future<Outcome> running = Start(AliceToken(), {"ssh", "web-one", "slow"});
  // The token removes its own label: the call that does it answers normally.
  Outcome removed = Exec(AliceToken(), {"ssh-key", "remove", "agent"});
  ASSERT_TRUE(removed.status.ok()) << removed.err << removed.status.ToString();
  EXPECT_TRUE(Has(removed.out, "removed API token label agent")) << removed.out;
  ASSERT_EQ(running.wait_for(2s), std::future_status::ready);
  Outcome o = running.get();
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated) << o.status.ToString();
  EXPECT_TRUE(Has(o.err, "revoked")) << o.err;
  EXPECT_EQ(guests_.killed(), 1);
}

TEST_F(LiveSessionsTest, RemovingAUserEndsTheirCommands) {
  New(Bob(), {"--name", "bob-one"});
  std::future<Outcome> running = Start(Bob(), {"ssh", "bob-one", "slow"});
  Outcome removed = Exec(Root(), {"user", "rm", "bob"});
  ASSERT_TRUE(removed.status.ok()) << removed.err;
  ASSERT_EQ(running.wait_for(2s), std::future_status::ready);
  Outcome o = running.get();
  EXPECT_EQ(o.status.code(), Code::kUnauthenticated) << o.status.ToString();
  EXPECT_TRUE(Has(o.err, "the account bob is being removed")) << o.err;
}

}  // namespace
}  // namespace warren::vmtest
