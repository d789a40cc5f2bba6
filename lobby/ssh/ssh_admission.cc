#include "lobby/ssh/ssh_admission.h"

#include <charconv>
#include <vector>

namespace warren::ssh {
namespace {

bool ParseInt(std::string_view text, int* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool RuleMakesSense(const StartupRule& r) {
  return r.full >= 1 && r.begin >= 1 && r.begin <= r.full && r.rate >= 0 && r.rate <= 100;
}
constexpr char kRuleBounds[] = "need 1 <= BEGIN <= FULL and RATE from 0 to 100";

}  // namespace

Result<StartupRule> ParseStartupRule(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  StartupRule rule;
  bool ok = false;
  if (parts.size() == 1) {
    ok = ParseInt(parts[0], &rule.full);
    rule.begin = rule.full;
    rule.rate = 100;
  } else if (parts.size() == 3) {
    ok = ParseInt(parts[0], &rule.begin) && ParseInt(parts[1], &rule.rate) &&
         ParseInt(parts[2], &rule.full);
  }
  if (!ok) {
    return InvalidArgument("max startups " + std::string(text) +
                           ": expected BEGIN:RATE:FULL (e.g. 256:30:1024) or FULL");
  }
  if (!RuleMakesSense(rule)) {
    return InvalidArgument("max startups " + std::string(text) + ": " + kRuleBounds);
  }
  return rule;
}

std::string StartupRuleText(const StartupRule& rule) {
  return std::to_string(rule.begin) + ":" + std::to_string(rule.rate) + ":" +
         std::to_string(rule.full);
}

Status CheckLimits(const AdmissionLimits& limits) {
  if (!RuleMakesSense(limits.startups)) {
    return InvalidArgument(std::string("max startups: ") + kRuleBounds);
  }
  const std::pair<const char*, int> at_least_one[] = {
      {"max startups per source", limits.startups_per_source},
      {"max handshakes", limits.handshakes},
      {"max handshakes per source", limits.handshakes_per_source},
      {"max connections per source", limits.connections_per_source},
      {"max logins", limits.logins},
      {"max logins per user", limits.logins_per_user},
  };
  for (const auto& [name, value] : at_least_one) {
    if (value < 1) return InvalidArgument(std::string(name) + " must be at least 1");
  }
  return Status::Ok();
}

int& SshAdmission::Field(Counts& c, Stage stage) {
  switch (stage) {
    case Stage::kSilent:
      return c.silent;
    case Stage::kWaiting:
      return c.waiting;
    case Stage::kHandshake:
      return c.handshake;
    case Stage::kLoggedIn:
      break;
  }
  return c.logged_in;
}

SshAdmission::Counts SshAdmission::source(const std::string& source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? Counts{} : it->second;
}

AcceptVerdict SshAdmission::Accept(const std::string& source, int coin) {
  const Counts here = this->source(source);
  const StartupRule& rule = limits_.startups;
  const int startups = totals_.startups();
  // Per address first: one address at its limits never costs another address anything.
  const char* source_limit = nullptr;
  if (here.total() >= limits_.connections_per_source) {
    source_limit = "too many connections from this address";
  } else if (here.startups() >= limits_.startups_per_source) {
    source_limit = "too many unauthenticated connections from this address";
  }
  AcceptVerdict verdict;
  if (source_limit != nullptr) {
    if (here.silent == 0) return {AcceptVerdict::kRefuse, source_limit};
    verdict = {AcceptVerdict::kAdmitDisplacingSource, source_limit};
  } else {
    // The early drop, as OpenSSH computes it (sshd.c should_drop_connection).
    bool drop = false;
    const char* why = "too many unauthenticated connections";
    if (startups >= rule.full) {
      drop = true;
    } else if (startups >= rule.begin) {
      int p = rule.rate + (100 - rule.rate) * (startups - rule.begin) / (rule.full - rule.begin);
      drop = coin < p;
      why = "early drop of unauthenticated connections";
    }
    if (drop) {
      if (totals_.silent == 0) return {AcceptVerdict::kRefuse, why};
      verdict = {AcceptVerdict::kAdmitDisplacingOldest, why};
    }
  }
  ++sources_[source].silent;
  ++totals_.silent;
  return verdict;
}

void SshAdmission::Move(const std::string& source, Stage from, Stage to) {
  Counts& c = sources_[source];
  --Field(c, from);
  ++Field(c, to);
  --Field(totals_, from);
  ++Field(totals_, to);
}

void SshAdmission::Spoke(const std::string& source) {
  Move(source, Stage::kSilent, Stage::kWaiting);
}

bool SshAdmission::MayStartHandshake(const std::string& source) const {
  return totals_.handshake < limits_.handshakes &&
         this->source(source).handshake < limits_.handshakes_per_source;
}

void SshAdmission::StartHandshake(const std::string& source) {
  Move(source, Stage::kWaiting, Stage::kHandshake);
}

Status SshAdmission::Login(const std::string& source, const std::string& user) {
  if (totals_.logged_in >= limits_.logins) {
    return LimitExceeded("the server has its maximum of " + std::to_string(limits_.logins) +
                         " logins");
  }
  auto it = users_.find(user);
  if (it != users_.end() && it->second >= limits_.logins_per_user) {
    return LimitExceeded("user " + user + " has its maximum of " +
                         std::to_string(limits_.logins_per_user) + " logins");
  }
  Move(source, Stage::kHandshake, Stage::kLoggedIn);
  ++users_[user];
  return Status::Ok();
}

void SshAdmission::Leave(const std::string& source, Stage stage, const std::string& user) {
  auto it = sources_.find(source);
  if (it == sources_.end()) return;
  --Field(it->second, stage);
  --Field(totals_, stage);
  if (it->second.total() == 0) sources_.erase(it);
  if (stage == Stage::kLoggedIn) {
    auto u = users_.find(user);
    if (u != users_.end() && --u->second == 0) users_.erase(u);
  }
}

}  // namespace warren::ssh
