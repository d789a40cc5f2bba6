// The store's web records on a real LmdbStore in a temp dir: share settings by VM id (rename
// keeps them, rm removes them, a user's removal takes them off every VM), the share-link
// index, magic links and host tickets used once (also under a race), host-bound sessions,
// expiry and pruning, per-user limits, and persistence across a reopen.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "keys/lmdb_store.h"
#include "keys/oauth.h"
#include "keys/web_share.h"
#include "tests/unit/store_rollback.h"

namespace warren {
namespace {

constexpr int64_t kDeleteAtMs = 1'700'000'000'000;  // when the tests remove VMs

constexpr int64_t kNow = 1'700'000'000;

class WebStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/share-webstore-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    Reopen();
    ASSERT_TRUE(store_->CreateUser({"alice", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateUser({"bob", false, 1}, {}).ok());
    ASSERT_TRUE(store_->CreateUser({"carol", false, 1}, {}).ok());
    VmRecord vm;
    vm.id = "aaaaaaaaaaaa";
    vm.name = "web-one";
    vm.owner = "alice";
    ASSERT_TRUE(store_->CreateVm(vm).ok());
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  void Reopen() {
    store_.reset();
    auto s = LmdbStore::Open(root_ + "/data");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  static ShareLink Link(const std::string& id, const std::string& token) {
    ShareLink l;
    l.id = id;
    l.token_sha256 = HashSecret(token);
    l.created_at = kNow;
    l.created_by = "alice";
    return l;
  }
  static MagicLink Magic(const std::string& token, const std::string& user = "alice",
                         int64_t expires = kNow + kMagicLinkSeconds) {
    MagicLink m;
    m.token_sha256 = HashSecret(token);
    m.credential.user = user;
    m.credential.credential = "key:SHA256:x";
    m.credential.key_fingerprint = "SHA256:x";
    m.credential.scope.tag = "ci";
    m.created_at = kNow;
    m.expires_at = expires;
    return m;
  }
  // Redeems `token` into a session with cookie `cookie` for `host`.
  Result<BrowserSession> Redeem(const std::string& token, const std::string& cookie,
                                int64_t now = kNow, const std::string& host = "warren.localhost") {
    return store_->RedeemMagicLink(HashSecret(token), now, [&](const MagicLink& m) {
      return Result<BrowserSession>(BrowserSession{HashSecret(cookie), "sign-in-" + cookie,
                                                   m.credential, host, now,
                                                   now + kBrowserSessionSeconds});
    });
  }
  Result<BrowserSession> RedeemTicket(const std::string& ticket, const std::string& host,
                                      const std::string& cookie, int64_t now = kNow) {
    return store_->RedeemHostTicket(
        HashSecret(ticket), host, now, [&](const HostTicket&, const BrowserSession& parent) {
          return Result<BrowserSession>(BrowserSession{HashSecret(cookie), parent.sign_in_id,
                                                       parent.credential, host, now,
                                                       parent.expires_at});
        });
  }
  HostTicket Ticket(const std::string& ticket, const std::string& parent_cookie,
                    const std::string& host, int64_t now = kNow) {
    return {HashSecret(ticket), HashSecret(parent_cookie), "alice", host, now + kHostTicketSeconds};
  }

  std::string root_;
  std::unique_ptr<LmdbStore> store_;
};

TEST_F(WebStoreTest, ShareDefaultsUntilChanged) {
  Result<VmShare> s = store_->GetVmShare("aaaaaaaaaaaa");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->is_public);
  EXPECT_EQ(s->port, kDefaultRoutePort);
  EXPECT_TRUE(s->users.empty());
  EXPECT_TRUE(s->links.empty());
  EXPECT_EQ(store_->GetVmShare("bbbbbbbbbbbb").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->UpdateVmShare("bbbbbbbbbbbb", [](VmShare&) { return Status::Ok(); }).code(),
            Code::kNotFound);
}

TEST_F(WebStoreTest, UpdateChecksTheRecord) {
  auto set = [&](std::function<void(VmShare&)> f) {
    return store_->UpdateVmShare("aaaaaaaaaaaa", [&](VmShare& s) {
      f(s);
      return Status::Ok();
    });
  };
  EXPECT_EQ(set([](VmShare& s) { s.port = 2999; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(set([](VmShare& s) { s.port = 10000; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(set([](VmShare& s) { s.users = {"nobody"}; }).code(), Code::kNotFound);
  EXPECT_EQ(set([](VmShare& s) { s.users = {"carol", "bob"}; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(set([](VmShare& s) { s.vm_id = "bbbbbbbbbbbb"; }).code(), Code::kInvalidArgument);
  EXPECT_EQ(set([](VmShare& s) {
              for (int i = 0; i <= static_cast<int>(kMaxShareLinks); ++i) {
                char id[9];
                snprintf(id, sizeof id, "%08x", i);
                s.links.push_back(Link(id, "t" + std::to_string(i)));
              }
            }).code(),
            Code::kLimitExceeded);
  // A refusal from the change itself abandons it.
  EXPECT_EQ(store_
                ->UpdateVmShare("aaaaaaaaaaaa",
                                [](VmShare& s) {
                                  s.is_public = true;
                                  return Conflict("no");
                                })
                .code(),
            Code::kConflict);
  EXPECT_FALSE(store_->GetVmShare("aaaaaaaaaaaa")->is_public);

  ASSERT_TRUE(set([](VmShare& s) {
                s.port = 3000;
                s.is_public = true;
                s.users = {"bob", "carol"};
              }).ok());
  Reopen();
  VmShare s = store_->GetVmShare("aaaaaaaaaaaa").value();
  EXPECT_EQ(s.port, 3000);
  EXPECT_TRUE(s.is_public);
  EXPECT_EQ(s.users, (std::vector<std::string>{"bob", "carol"}));
}

TEST_F(WebStoreTest, LinksAreFoundByTheirHashOnlyWhileTheyExist) {
  ASSERT_TRUE(store_
                  ->UpdateVmShare("aaaaaaaaaaaa",
                                  [](VmShare& s) {
                                    s.links.push_back(Link("0000000a", "secret-a"));
                                    s.links.push_back(Link("0000000b", "secret-b"));
                                    return Status::Ok();
                                  })
                  .ok());
  Result<ShareLinkMatch> m = store_->FindShareLink(HashSecret("secret-b"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->vm_id, "aaaaaaaaaaaa");
  EXPECT_EQ(m->link.id, "0000000b");
  EXPECT_EQ(store_->FindShareLink(HashSecret("secret-c")).status().code(), Code::kNotFound);

  ASSERT_TRUE(store_->RecordShareLinkUses("aaaaaaaaaaaa", "0000000b", 3, kNow + 5).ok());
  ASSERT_TRUE(store_->RecordShareLinkUses("aaaaaaaaaaaa", "0000000b", 2, kNow + 1).ok());
  EXPECT_TRUE(store_->RecordShareLinkUses("aaaaaaaaaaaa", "ffffffff", 1, kNow).ok());
  EXPECT_TRUE(store_->RecordShareLinkUses("cccccccccccc", "0000000b", 1, kNow).ok());
  m = store_->FindShareLink(HashSecret("secret-b"));
  EXPECT_EQ(m->link.use_count, 5);
  EXPECT_EQ(m->link.last_used_at, kNow + 5);

  ASSERT_TRUE(store_
                  ->UpdateVmShare("aaaaaaaaaaaa",
                                  [](VmShare& s) {
                                    s.links.erase(s.links.begin() + 1);
                                    return Status::Ok();
                                  })
                  .ok());
  EXPECT_EQ(store_->FindShareLink(HashSecret("secret-b")).status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->FindShareLink(HashSecret("secret-a")).ok());
}

TEST_F(WebStoreTest, RenameKeepsSharesAndDeleteRemovesThem) {
  ASSERT_TRUE(store_
                  ->UpdateVmShare("aaaaaaaaaaaa",
                                  [](VmShare& s) {
                                    s.is_public = true;
                                    s.links.push_back(Link("0000000a", "secret-a"));
                                    return Status::Ok();
                                  })
                  .ok());
  ASSERT_TRUE(store_->RenameVm("aaaaaaaaaaaa", "web-two").ok());
  EXPECT_TRUE(store_->GetVmShare("aaaaaaaaaaaa")->is_public);
  ASSERT_TRUE(store_->DeleteVm("aaaaaaaaaaaa", kDeleteAtMs).ok());
  EXPECT_EQ(store_->FindShareLink(HashSecret("secret-a")).status().code(), Code::kNotFound);
  // A VM made later with the same id (ids are never reused; the store does not rely on it)
  // starts private.
  VmRecord again;
  again.id = "aaaaaaaaaaaa";
  again.name = "web-one";
  again.owner = "bob";
  ASSERT_TRUE(store_->CreateVm(again).ok());
  EXPECT_FALSE(store_->GetVmShare("aaaaaaaaaaaa")->is_public);
  EXPECT_TRUE(store_->GetVmShare("aaaaaaaaaaaa")->links.empty());
}

TEST_F(WebStoreTest, DeleteUserTakesTheirSharesAndSessions) {
  ASSERT_TRUE(store_
                  ->UpdateVmShare("aaaaaaaaaaaa",
                                  [](VmShare& s) {
                                    s.users = {"bob", "carol"};
                                    return Status::Ok();
                                  })
                  .ok());
  ASSERT_TRUE(store_->CreateMagicLink(Magic("m1", "bob"), kNow).ok());
  ASSERT_TRUE(store_->CreateMagicLink(Magic("m2", "bob"), kNow).ok());
  ASSERT_TRUE(Redeem("m1", "bob-cookie").ok());
  ASSERT_TRUE(store_->DeleteUser("bob").ok());
  EXPECT_EQ(store_->GetVmShare("aaaaaaaaaaaa")->users, (std::vector<std::string>{"carol"}));
  EXPECT_EQ(store_->GetBrowserSession(HashSecret("bob-cookie"), kNow).status().code(),
            Code::kNotFound);
  EXPECT_EQ(Redeem("m2", "later").status().code(), Code::kNotFound);
  // A new bob is a new person: nothing of the old one's comes back.
  ASSERT_TRUE(store_->CreateUser({"bob", false, 2}, {}).ok());
  EXPECT_EQ(store_->GetVmShare("aaaaaaaaaaaa")->users, (std::vector<std::string>{"carol"}));
}

TEST_F(WebStoreTest, MagicLinkWorksOnceAndExpires) {
  ASSERT_TRUE(store_->CreateMagicLink(Magic("tok"), kNow).ok());
  EXPECT_EQ(store_->CreateMagicLink(Magic("tok"), kNow).code(), Code::kConflict);
  EXPECT_EQ(store_->CreateMagicLink(Magic("x", "nobody"), kNow).code(), Code::kNotFound);
  Result<BrowserSession> s = Redeem("tok", "cookie");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->credential.user, "alice");
  EXPECT_EQ(s->credential.scope.tag, "ci");  // the limits travel with it
  EXPECT_EQ(Redeem("tok", "cookie2").status().code(), Code::kNotFound);

  ASSERT_TRUE(store_->CreateMagicLink(Magic("old"), kNow).ok());
  EXPECT_EQ(Redeem("old", "c3", kNow + kMagicLinkSeconds).status().code(), Code::kNotFound);

  Result<BrowserSession> got = store_->GetBrowserSession(HashSecret("cookie"), kNow + 10);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->host, "warren.localhost");
  EXPECT_EQ(store_->GetBrowserSession(HashSecret("cookie"), kNow + kBrowserSessionSeconds)
                .status()
                .code(),
            Code::kNotFound);
  Reopen();  // sessions survive a restart
  EXPECT_TRUE(store_->GetBrowserSession(HashSecret("cookie"), kNow + 10).ok());
}

TEST_F(WebStoreTest, ConcurrentRedeemsOfOneLinkHaveOneWinner) {
  for (int round = 0; round < 5; ++round) {
    const std::string token = "race-" + std::to_string(round);
    ASSERT_TRUE(store_->CreateMagicLink(Magic(token), kNow).ok());
    std::atomic<int> wins{0}, losses{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        Result<BrowserSession> s = Redeem(token, token + "-c" + std::to_string(i));
        (s.ok() ? wins : losses)++;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(wins.load(), 1);
    EXPECT_EQ(losses.load(), 7);
  }
}

TEST_F(WebStoreTest, PerUserLimitsAndPruning) {
  for (size_t i = 0; i < kMaxMagicLinksPerUser; ++i) {
    ASSERT_TRUE(store_->CreateMagicLink(Magic("l" + std::to_string(i)), kNow).ok());
  }
  EXPECT_EQ(store_->CreateMagicLink(Magic("one-more"), kNow).code(), Code::kLimitExceeded);
  // Bob has his own allowance.
  EXPECT_TRUE(store_->CreateMagicLink(Magic("bobs", "bob"), kNow).ok());
  // Once they expire they are pruned, making room.
  EXPECT_TRUE(store_
                  ->CreateMagicLink(Magic("later", "alice", kNow + 2 * kMagicLinkSeconds),
                                    kNow + kMagicLinkSeconds)
                  .ok());
}

TEST_F(WebStoreTest, TicketsAreForOneHostOnceAndFollowTheirSignIn) {
  ASSERT_TRUE(store_->CreateMagicLink(Magic("tok"), kNow).ok());
  ASSERT_TRUE(Redeem("tok", "domain").ok());
  const std::string host = "web-one.warren.localhost";
  // Not from a session that does not exist.
  EXPECT_EQ(store_->CreateHostTicket(Ticket("t0", "nope", host), kNow).code(), Code::kNotFound);

  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t1", "domain", host), kNow).ok());
  Result<BrowserSession> s = RedeemTicket("t1", host, "vm-cookie");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->host, host);
  EXPECT_EQ(s->sign_in_id, "sign-in-domain");
  EXPECT_EQ(s->expires_at, kNow + kBrowserSessionSeconds);  // the sign-in's, not longer
  EXPECT_EQ(RedeemTicket("t1", host, "again").status().code(), Code::kNotFound);

  // On another host: refused and used up.
  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t2", "domain", host), kNow).ok());
  EXPECT_EQ(RedeemTicket("t2", "evil.warren.localhost", "x").status().code(), Code::kNotFound);
  EXPECT_EQ(RedeemTicket("t2", host, "y").status().code(), Code::kNotFound);

  // Expired.
  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t3", "domain", host), kNow).ok());
  EXPECT_EQ(RedeemTicket("t3", host, "z", kNow + kHostTicketSeconds).status().code(),
            Code::kNotFound);

  // A second visit replaces the host session of the same sign-in.
  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t4", "domain", host), kNow).ok());
  ASSERT_TRUE(RedeemTicket("t4", host, "vm-cookie-2").ok());
  EXPECT_EQ(store_->GetBrowserSession(HashSecret("vm-cookie"), kNow).status().code(),
            Code::kNotFound);

  // Signing out of any of them ends them all, and the tickets still in flight.
  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t5", "domain", host), kNow).ok());
  Result<size_t> ended = store_->EndBrowserSignIn(HashSecret("vm-cookie-2"));
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(*ended, 2u);
  EXPECT_EQ(store_->GetBrowserSession(HashSecret("domain"), kNow).status().code(), Code::kNotFound);
  EXPECT_EQ(RedeemTicket("t5", host, "w").status().code(), Code::kNotFound);
  EXPECT_EQ(*store_->EndBrowserSignIn(HashSecret("unknown")), 0u);
}

TEST_F(WebStoreTest, ConcurrentTicketRedeemsHaveOneWinner) {
  ASSERT_TRUE(store_->CreateMagicLink(Magic("tok"), kNow).ok());
  ASSERT_TRUE(Redeem("tok", "domain").ok());
  const std::string host = "web-one.warren.localhost";
  ASSERT_TRUE(store_->CreateHostTicket(Ticket("t", "domain", host), kNow).ok());
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      if (RedeemTicket("t", host, "c" + std::to_string(i)).ok()) ++wins;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wins.load(), 1);
}

TEST_F(WebStoreTest, EndUserSessionsEndsOnlyTheirs) {
  ASSERT_TRUE(store_->CreateMagicLink(Magic("a1"), kNow).ok());
  ASSERT_TRUE(store_->CreateMagicLink(Magic("a2"), kNow).ok());
  ASSERT_TRUE(store_->CreateMagicLink(Magic("a3"), kNow).ok());
  ASSERT_TRUE(store_->CreateMagicLink(Magic("b1", "bob"), kNow).ok());
  ASSERT_TRUE(Redeem("a1", "ca1").ok());
  ASSERT_TRUE(Redeem("a2", "ca2").ok());
  ASSERT_TRUE(Redeem("b1", "cb1").ok());
  Result<size_t> n = store_->EndUserBrowserSessions("alice");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(Redeem("a3", "ca3").status().code(), Code::kNotFound);  // pending links too
  EXPECT_TRUE(store_->GetBrowserSession(HashSecret("cb1"), kNow).ok());
}

TEST_F(WebStoreTest, OnlyHashesAreStored) {
  ASSERT_TRUE(store_->CreateMagicLink(Magic("plain-magic-token-1234"), kNow).ok());
  ASSERT_TRUE(store_
                  ->RedeemMagicLink(HashSecret("plain-magic-token-1234"), kNow,
                                    [](const MagicLink& m) {
                                      return Result<BrowserSession>(BrowserSession{
                                          HashSecret("plain-cookie-value-5678"), "s1", m.credential,
                                          "warren.localhost", kNow, kNow + 60});
                                    })
                  .ok());
  ASSERT_TRUE(store_
                  ->UpdateVmShare("aaaaaaaaaaaa",
                                  [](VmShare& s) {
                                    s.links.push_back(Link("0000000a", "plain-link-token-9012"));
                                    return Status::Ok();
                                  })
                  .ok());
  store_.reset();
  std::ifstream in(root_ + "/data/data.mdb", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(raw.empty());
  for (const char* secret :
       {"plain-magic-token-1234", "plain-cookie-value-5678", "plain-link-token-9012"}) {
    EXPECT_EQ(raw.find(secret), std::string::npos) << secret;
  }
  Reopen();
}

// A store as schema version 6 left it (no web tables) gains them on open, its data intact.
TEST_F(WebStoreTest, UpgradesAVersionSixStore) {
  store_.reset();
  ASSERT_NO_FATAL_FAILURE(RollBackStore(
      root_ + "/data", 6,
      {"vm_shares", "share_links", "web_magic_links", "web_sessions", "web_tickets"}));

  Reopen();
  EXPECT_TRUE(store_->GetVm("aaaaaaaaaaaa").ok());
  EXPECT_FALSE(store_->GetVmShare("aaaaaaaaaaaa")->is_public);
  EXPECT_TRUE(store_->CreateMagicLink(Magic("tok"), kNow).ok());
}

}  // namespace
}  // namespace warren
