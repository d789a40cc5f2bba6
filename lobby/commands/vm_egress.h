// A VM's egress policy, the one home of its names: what `new --egress`, `cp --egress`,
// `egress VM …` and `serve --vm-egress` accept, and what the host is asked for. Pure;
// thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "vmhost/vm_host.h"

namespace warren {

// all:          a network device with outbound NAT; the host's isolation rules still apply
//               (never the host itself, private, link-local or multicast ranges).
// integrations: no network device; the VM reaches only the integrations attached to it,
//               which warren carries over its control connection.
// none:         no network device and no integrations: nothing at all.
inline constexpr std::string_view kEgressPolicies[] = {"all", "integrations", "none"};

// The values as help shows them: "all|integrations|none".
std::string EgressPolicyChoices();

// The policy `text` names: one of kEgressPolicies, or "full", the name of "all" before
// (still accepted). InvalidArgument naming `flag` otherwise.
Result<std::string> ParseEgressPolicy(std::string_view flag, std::string_view text);

// What the host gives a VM of `policy`: a network device only for "all".
Egress HostEgressFor(std::string_view policy);

// Help text on the three policies, for `help new`, `help cp` and `help egress`.
extern const char kEgressPolicyHelp[];

}  // namespace warren
