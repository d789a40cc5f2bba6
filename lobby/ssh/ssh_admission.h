// SshAdmission: the SSH listener's rules for who may hold a connection and at which stage —
// limits per source address, per user and in all, and an early drop of unauthenticated
// connections like OpenSSH's MaxStartups. Counts only (no sockets, clock or threads); not
// thread-safe: SshServer calls it under its own mutex.
//
// A connection goes through four stages; each is counted per source address and in all:
//   silent     accepted and greeted, nothing received yet — held by the listener thread
//              without a thread of its own, closed after --ssh-version-timeout
//   waiting    the client has sent its first bytes; waits in the listener for a handshake
//              slot (still no thread)
//   handshake  key exchange and authentication, on a thread of its own
//   logged_in  authenticated
// The first three are "startups" (unauthenticated). A silent connection is the cheapest to
// lose and the likeliest to be abuse (a real client answers our identification line within
// a round trip, RFC 4253 §4.2), so when a limit is reached a new connection displaces the
// oldest silent one where it can, and is refused only when there is none: a flood of idle
// sockets can never keep out a client that speaks.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lobby/base/status.h"

namespace warren::ssh {

// OpenSSH's MaxStartups "begin:rate:full": from `begin` unauthenticated connections on, a
// new one is dropped with probability `rate`%, rising linearly to 100% at `full`.
struct StartupRule {
  int begin = 256;
  int rate = 30;  // percent
  int full = 1024;
};
// "BEGIN:RATE:FULL", or a single number N meaning N:100:N (as in OpenSSH).
Result<StartupRule> ParseStartupRule(std::string_view text);
std::string StartupRuleText(const StartupRule& rule);  // "BEGIN:RATE:FULL"

struct AdmissionLimits {
  StartupRule startups;
  // Unauthenticated connections one address may hold. Above what one host fanning out
  // 100 `ssh` commands at once needs (agents do), below the rule's `begin`: one flooding
  // address alone never makes the early drop hit anybody else.
  int startups_per_source = 128;
  // Key exchanges running at once (each is a thread), in all and per address. More wait,
  // threadless, in the listener. Per address small, so that one address's stalled
  // handshakes cannot take every slot.
  int handshakes = 64;
  int handshakes_per_source = 16;
  // Connections in any stage one address may hold.
  int connections_per_source = 512;
  // Authenticated connections (each is a thread), in all and per user.
  int logins = 1024;
  int logins_per_user = 256;
};
// InvalidArgument naming the first limit that makes no sense (below 1, begin > full...).
Status CheckLimits(const AdmissionLimits& limits);

enum class Stage { kSilent, kWaiting, kHandshake, kLoggedIn };

// What to do with a connection just accepted.
struct AcceptVerdict {
  enum Action {
    kAdmit,
    kAdmitDisplacingSource,  // admit; close the oldest silent connection of the same address
    kAdmitDisplacingOldest,  // admit; close the oldest silent connection of any address
    kRefuse,
  };
  Action action = kAdmit;
  const char* reason = "";  // why a connection is refused or displaced (a log word)
};

class SshAdmission {
 public:
  explicit SshAdmission(AdmissionLimits limits) : limits_(limits) {}

  // A new connection from `source`. `coin` is uniform in [0, 100), for the early drop.
  // Unless refused it is counted as silent from here on; a displaced connection must be
  // closed and Leave()d by the caller.
  AcceptVerdict Accept(const std::string& source, int coin);
  // silent -> waiting
  void Spoke(const std::string& source);
  // Whether a waiting connection from `source` may start its key exchange now.
  bool MayStartHandshake(const std::string& source) const;
  // waiting -> handshake
  void StartHandshake(const std::string& source);
  // handshake -> logged_in, unless the login limits are reached (LimitExceeded).
  Status Login(const std::string& source, const std::string& user);
  // The connection is gone. `user` only for kLoggedIn.
  void Leave(const std::string& source, Stage stage, const std::string& user = "");

  struct Counts {
    int silent = 0;
    int waiting = 0;
    int handshake = 0;
    int logged_in = 0;
    int startups() const { return silent + waiting + handshake; }
    int total() const { return startups() + logged_in; }
  };
  Counts totals() const { return totals_; }
  Counts source(const std::string& source) const;
  const AdmissionLimits& limits() const { return limits_; }

 private:
  static int& Field(Counts& c, Stage stage);
  void Move(const std::string& source, Stage from, Stage to);

  AdmissionLimits limits_;
  Counts totals_;
  std::map<std::string, Counts> sources_;  // only addresses holding a connection
  std::map<std::string, int> users_;       // logged-in connections per user, only non-zero
};

}  // namespace warren::ssh
