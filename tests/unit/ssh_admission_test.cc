// The SSH listener's admission rules, on counts alone: per-address limits, displacing
// silent connections, the MaxStartups-like early drop, handshake slots and login limits.
#include "lobby/ssh/ssh_admission.h"

#include <gtest/gtest.h>

#include <string>

namespace warren::ssh {
namespace {

// A connection from `source` that has spoken (no longer displaceable).
void Talking(SshAdmission& a, const std::string& source) {
  ASSERT_NE(a.Accept(source, 99).action, AcceptVerdict::kRefuse);
  a.Spoke(source);
}

TEST(StartupRuleTest, ParsesOpenSshForms) {
  Result<StartupRule> r = ParseStartupRule("10:30:100");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->begin, 10);
  EXPECT_EQ(r->rate, 30);
  EXPECT_EQ(r->full, 100);
  r = ParseStartupRule("50");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->begin, 50);
  EXPECT_EQ(r->rate, 100);
  EXPECT_EQ(r->full, 50);
  EXPECT_EQ(StartupRuleText(StartupRule{}), "256:30:1024");
  for (const char* bad : {"", "1:2", "a:b:c", "10:30:5", "10:101:100", "0:30:10", "10:30:100:1",
                          "10::100", " 10:30:100"}) {
    Result<StartupRule> rule = ParseStartupRule(bad);
    EXPECT_FALSE(rule.ok()) << bad;
    if (!rule.ok()) {
      EXPECT_EQ(rule.status().code(), Code::kInvalidArgument) << bad;
    }
  }
}

TEST(AdmissionTest, CheckLimitsNamesTheBadOne) {
  EXPECT_TRUE(CheckLimits(AdmissionLimits{}).ok());
  AdmissionLimits limits;
  limits.handshakes_per_source = 0;
  Status st = CheckLimits(limits);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("handshakes per source"), std::string::npos) << st.message();
  limits = AdmissionLimits{};
  limits.startups = {20, 30, 10};
  EXPECT_EQ(CheckLimits(limits).code(), Code::kInvalidArgument);
}

TEST(AdmissionTest, OneAddressAtItsLimitDisplacesItsOwnSilentOnesThenIsRefused) {
  AdmissionLimits limits;
  limits.startups_per_source = 2;
  SshAdmission a(limits);
  EXPECT_EQ(a.Accept("10.0.0.2", 0).action, AcceptVerdict::kAdmit);
  EXPECT_EQ(a.Accept("10.0.0.2", 0).action, AcceptVerdict::kAdmit);
  // A third: one of its own silent ones makes room (the caller closes it).
  EXPECT_EQ(a.Accept("10.0.0.2", 0).action, AcceptVerdict::kAdmitDisplacingSource);
  a.Leave("10.0.0.2", Stage::kSilent);
  EXPECT_EQ(a.source("10.0.0.2").silent, 2);
  // Once both have spoken there is nothing to displace: refused.
  a.Spoke("10.0.0.2");
  a.Spoke("10.0.0.2");
  AcceptVerdict v = a.Accept("10.0.0.2", 0);
  EXPECT_EQ(v.action, AcceptVerdict::kRefuse);
  EXPECT_STREQ(v.reason, "too many unauthenticated connections from this address");
  // Another address is not affected at all.
  EXPECT_EQ(a.Accept("10.0.0.1", 0).action, AcceptVerdict::kAdmit);
  EXPECT_EQ(a.totals().startups(), 3);
}

TEST(AdmissionTest, ConnectionsPerSourceCountLoggedInOnes) {
  AdmissionLimits limits;
  limits.connections_per_source = 2;
  SshAdmission a(limits);
  Talking(a, "10.0.0.2");
  a.StartHandshake("10.0.0.2");
  ASSERT_TRUE(a.Login("10.0.0.2", "ann").ok());
  Talking(a, "10.0.0.2");
  AcceptVerdict v = a.Accept("10.0.0.2", 0);
  EXPECT_EQ(v.action, AcceptVerdict::kRefuse);
  EXPECT_STREQ(v.reason, "too many connections from this address");
  a.Leave("10.0.0.2", Stage::kLoggedIn, "ann");
  EXPECT_EQ(a.Accept("10.0.0.2", 0).action, AcceptVerdict::kAdmit);
}

TEST(AdmissionTest, EarlyDropGrowsFromRateAtBeginToAllAtFull) {
  AdmissionLimits limits;
  limits.startups = {2, 50, 4};
  SshAdmission a(limits);
  Talking(a, "10.0.0.1");
  Talking(a, "10.0.0.2");
  // 2 startups (= begin): dropped with probability 50%.
  EXPECT_EQ(a.Accept("10.0.0.3", 49).action, AcceptVerdict::kRefuse);
  EXPECT_EQ(a.Accept("10.0.0.3", 50).action, AcceptVerdict::kAdmit);
  a.Spoke("10.0.0.3");
  // 3: 50 + 50 * 1/2 = 75%.
  EXPECT_EQ(a.Accept("10.0.0.4", 74).action, AcceptVerdict::kRefuse);
  EXPECT_EQ(a.Accept("10.0.0.4", 75).action, AcceptVerdict::kAdmit);
  // 4 = full. 10.0.0.4's is still silent: it is displaced rather than the new one refused.
  EXPECT_EQ(a.Accept("10.0.0.5", 99).action, AcceptVerdict::kAdmitDisplacingOldest);
  a.Leave("10.0.0.4", Stage::kSilent);
  a.Spoke("10.0.0.5");
  // None silent: at full everything is refused, whatever the coin.
  AcceptVerdict v = a.Accept("10.0.0.6", 99);
  EXPECT_EQ(v.action, AcceptVerdict::kRefuse);
  EXPECT_STREQ(v.reason, "too many unauthenticated connections");
  EXPECT_EQ(a.totals().startups(), 4);
}

TEST(AdmissionTest, BelowBeginNothingIsDropped) {
  AdmissionLimits limits;
  limits.startups = {3, 100, 3};
  SshAdmission a(limits);
  for (const char* source : {"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
    EXPECT_EQ(a.Accept(source, 0).action, AcceptVerdict::kAdmit) << source;
  }
  EXPECT_EQ(a.Accept("10.0.0.4", 99).action, AcceptVerdict::kAdmitDisplacingOldest);
}

TEST(AdmissionTest, HandshakeSlotsInAllAndPerAddress) {
  AdmissionLimits limits;
  limits.handshakes = 2;
  limits.handshakes_per_source = 1;
  SshAdmission a(limits);
  Talking(a, "10.0.0.2");
  Talking(a, "10.0.0.2");
  Talking(a, "10.0.0.1");
  Talking(a, "10.0.0.3");
  ASSERT_TRUE(a.MayStartHandshake("10.0.0.2"));
  a.StartHandshake("10.0.0.2");
  EXPECT_FALSE(a.MayStartHandshake("10.0.0.2"));  // its own slot is taken
  ASSERT_TRUE(a.MayStartHandshake("10.0.0.1"));
  a.StartHandshake("10.0.0.1");
  EXPECT_FALSE(a.MayStartHandshake("10.0.0.3"));  // all slots taken
  // A login frees its handshake slot.
  ASSERT_TRUE(a.Login("10.0.0.1", "ann").ok());
  EXPECT_TRUE(a.MayStartHandshake("10.0.0.3"));
  EXPECT_EQ(a.totals().waiting, 2);
  EXPECT_EQ(a.totals().handshake, 1);
  EXPECT_EQ(a.totals().logged_in, 1);
}

TEST(AdmissionTest, LoginLimitsPerUserAndInAll) {
  AdmissionLimits limits;
  limits.logins = 3;
  limits.logins_per_user = 2;
  SshAdmission a(limits);
  auto handshake = [&](const std::string& source) {
    Talking(a, source);
    a.StartHandshake(source);
  };
  for (int i = 0; i < 2; ++i) {
    handshake("10.0.0.1");
    ASSERT_TRUE(a.Login("10.0.0.1", "ann").ok());
  }
  handshake("10.0.0.1");
  Status st = a.Login("10.0.0.1", "ann");
  EXPECT_EQ(st.code(), Code::kLimitExceeded);
  EXPECT_NE(st.message().find("user ann"), std::string::npos) << st.message();
  EXPECT_EQ(a.totals().handshake, 1);  // still counted where it was
  ASSERT_TRUE(a.Login("10.0.0.1", "bob").ok());
  handshake("10.0.0.2");
  st = a.Login("10.0.0.2", "cy");
  EXPECT_EQ(st.code(), Code::kLimitExceeded);
  EXPECT_NE(st.message().find("the server"), std::string::npos) << st.message();
  a.Leave("10.0.0.1", Stage::kLoggedIn, "ann");
  EXPECT_TRUE(a.Login("10.0.0.2", "cy").ok());
}

TEST(AdmissionTest, LeavingEverythingForgetsTheAddress) {
  SshAdmission a(AdmissionLimits{});
  Talking(a, "10.0.0.2");
  a.StartHandshake("10.0.0.2");
  ASSERT_TRUE(a.Login("10.0.0.2", "ann").ok());
  ASSERT_EQ(a.Accept("10.0.0.2", 0).action, AcceptVerdict::kAdmit);
  a.Leave("10.0.0.2", Stage::kSilent);
  a.Leave("10.0.0.2", Stage::kLoggedIn, "ann");
  EXPECT_EQ(a.source("10.0.0.2").total(), 0);
  EXPECT_EQ(a.totals().total(), 0);
  a.Leave("10.0.0.9", Stage::kSilent);  // unknown: ignored, nothing goes negative
  EXPECT_EQ(a.totals().silent, 0);
}

}  // namespace
}  // namespace warren::ssh
