// EgressFirewall: host isolation for every VM with a network device. A guest's user-mode
// network (slirp) is QEMU's own sockets, so what a guest sends leaves the host as locally
// generated packets owned by QEMU's user; an nftables chain on the output hook, matched on
// that user (`meta skuid`), drops whatever goes to the host itself (loopback and every
// address of its interfaces, through `fib daddr type local`, so new addresses are covered
// with no refresh), link-local, private, multicast and reserved ranges — TCP, UDP and ICMP
// alike — after accepting the operator's `--vm-egress-allow` ranges and the host's DNS
// resolvers on port 53 (slirp's 10.0.2.3 forwards to them). It acts on every QEMU of the
// host running as that user, warren's or not.
//
// Layout: one table `inet warren`, one base chain per warren instance, named from a hash of
// its data directory and carrying that directory in its comment. Apply replaces the own
// chain in one `nft -f -` transaction (a restart never doubles it, nor leaves a moment
// without it); a second warren on the host adds its own chain, and since a drop in any
// base chain is final, a packet passes only what every instance allows. Chains whose data
// directory no longer exists are removed. The ruleset text is a pure function
// (EgressRulesetText), pinned by tests/golden/egress_ruleset.nft.
//
// Thread-compatible: one owner (warren serve's main thread) calls Apply and Remove.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lobby/base/status.h"

namespace warren {

inline constexpr std::string_view kEgressTable = "warren";  // family inet
// The comment of an instance's chain: this prefix, then its data directory.
inline constexpr std::string_view kEgressChainCommentPrefix = "warren data_dir=";

// An address range in canonical form: the network address (host bits cleared) and length.
struct Cidr {
  bool ipv6 = false;
  std::string text;  // "10.1.0.0/16", "2001:db8::/32"
};

// Parses "ADDR" or "ADDR/LEN", IPv4 or IPv6. InvalidArgument naming the text when it is
// neither, when LEN is out of range, or when host bits are set ("10.1.2.3/16": say
// 10.1.0.0/16; a mistake there would open more or less than meant).
Result<Cidr> ParseCidr(std::string_view text);

// The nameserver addresses of a resolv.conf text, in order, as single-address ranges
// (an IPv6 zone "%eth0" dropped); lines that do not parse are skipped.
std::vector<Cidr> ParseResolvConf(std::string_view text);

struct EgressFirewallConfig {
  int64_t qemu_uid = -1;        // the user QEMU runs as (LibvirtHost::qemu_user())
  std::string data_dir;         // absolute; names the chain and goes in its comment
  std::vector<Cidr> allow;      // --vm-egress-allow, accepted before any drop
  std::vector<Cidr> resolvers;  // the host's DNS servers, accepted on port 53 (UDP, TCP)
  // Chains of other instances to delete in the same transaction (stale ones).
  std::vector<std::string> remove_chains;
};

// "vms_" + 16 hex digits of a hash of the data directory.
std::string EgressChainName(std::string_view data_dir);

// The whole transaction for `nft -f -`: make the table if missing, make (or keep) the own
// chain, flush it and fill it, delete `remove_chains`. Pure.
std::string EgressRulesetText(const EgressFirewallConfig& config);

// One chain of the table as `nft list table inet warren` lists it.
struct EgressChainInfo {
  std::string name;
  std::string data_dir;  // from its comment; empty when it has none of ours
};

// The chains in that listing (its text form: nftables 1.0.6's JSON form leaves chain
// comments out). InvalidArgument when it lists no table.
Result<std::vector<EgressChainInfo>> ParseEgressChains(std::string_view nft_json);

struct EgressFirewallOptions {
  std::string nft = "nft";  // the program (looked up in PATH)
  std::string resolv_conf = "/etc/resolv.conf";
};

class EgressFirewall {
 public:
  EgressFirewall(EgressFirewallConfig config, EgressFirewallOptions options = {});

  // Installs (or replaces) this instance's chain, removing stale chains of instances whose
  // data directory is gone. The config's resolvers are read from resolv_conf when empty.
  // Unavailable when nft is missing or refuses, with its words.
  Status Apply();
  // Deletes this instance's chain (nothing else). Ok when it is already gone.
  Status Remove();
  // The chains of the table now (empty when the table does not exist).
  Result<std::vector<EgressChainInfo>> ListChains();

  const EgressFirewallConfig& config() const { return config_; }
  std::string chain() const { return EgressChainName(config_.data_dir); }

 private:
  Result<std::string> RunNft(const std::vector<std::string>& args, const std::string& input);

  EgressFirewallConfig config_;
  const EgressFirewallOptions options_;
};

}  // namespace warren
