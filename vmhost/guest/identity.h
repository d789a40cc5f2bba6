// Giving a VM restored from a saved, already-booted template its own identity: the host's
// half of the guest runner's `identity` verb (runner/identity.c, which documents the
// protocol). A restored clone is, inside, a copy of the template (kernel RNG state,
// hostname, SSH host key, machine-id, MAC, a clock stopped at the save); its own seed disk
// sits where the template's was. One exec channel runs `sudo -n ~/.warren/bin/warren-run
// identity`, which reads the request below, reseeds the kernel RNG with the host's bytes,
// re-applies the seed (apply-seed --restored), writes a new machine-id, sets the MAC, starts
// the seed's setup script if it never ran, and last asks `clock?`, which the host answers
// with its CLOCK_REALTIME at that very moment.
//
// Pure request/report functions plus one blocking driver over the GuestControl interface: no
// libssh, so the interpreter may use it (library warren_vmhost). Everything the guest sends
// back is bounded and validated; the report is checked against what was asked. The random
// bytes are a secret: never logged, never in an error. Thread-safe: the functions share no
// state; ApplyGuestIdentity may run for many VMs at once.
#pragma once

#include <time.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lobby/base/status.h"
#include "vmhost/guest_control.h"
#include "vmhost/vm_host.h"

namespace warren {

inline constexpr size_t kGuestRandomBytes = 64;
// What the guest's user shell runs (it expands the ~; the runner lives where runner_install
// puts it, vmhost/guest/runner_protocol.h's kRunnerPath). stdin is the request.
inline constexpr char kGuestIdentityCommand[] = "sudo -n ~/.warren/bin/warren-run identity";
// The same without sudo, for a guest where PrepareGuestIdentity left a root process waiting
// (runner/identity_wait.c): sudo's ~0.2 s under TCG leaves the path of a pooled `new`.
inline constexpr char kGuestIdentityHandOverCommand[] = "~/.warren/bin/warren-run identity";
// The waiting root process's socket, which the host reaches directly (a kUnix channel, the
// byte 'D', then the protocol and a last line `exit N`): no sshd session, shell or runner
// start on the hand-out. Should that fail, the hand-over command above.
inline constexpr char kGuestIdentitySocket[] = "/run/warren/identity.sock";
// What PrepareGuestIdentity runs, and what it prints when the process waits.
inline constexpr char kGuestIdentityWaitCommand[] =
    "sudo -n ~/.warren/bin/warren-run identity-wait";
inline constexpr char kGuestIdentityWaits[] = "identity waits\n";
// The most the runner may print after the clock question: one report line.
inline constexpr size_t kMaxGuestIdentityReport = 512;

// What the clone is told.
struct GuestIdentity {
  // The clone's own seed disk, whose cached blocks the guest drops before apply-seed reads
  // it: /dev/vd[a-z] (the second virtio disk, /dev/vdb, in every warren VM).
  std::string seed_device = "/dev/vdb";
  // The MAC the clone's NIC has in its new domain (lowercase xx:xx:xx:xx:xx:xx, unicast);
  // nullopt when the VM has no NIC.
  std::optional<std::string> mac;
  // Host randomness mixed into the guest's kernel RNG before anything draws from it.
  std::array<uint8_t, kGuestRandomBytes> random{};
  // The hostname the clone's seed carries: when set, a report naming another is refused.
  std::string hostname;
  // A hand-out from the warm pool: the VM took a whole identity when it was pooled (its RNG
  // state, machine-id, MAC and seed), and takes now only what `new` decides: `hostname`
  // (required) and this host key pair (the seed's files: an OpenSSH private key and its
  // public line; both empty when the VM keeps its own, as a pooled VM does), written from the
  // request; no seed disk is read, so seed_device is not sent. The host rewrote the seed with
  // the same name and key for the next boot.
  bool handout = false;
  std::string host_key, host_key_pub;
  // A hand-out to a template's clone, which still holds the template's machine-id: the runner
  // makes a new one too (`machine-id new`). A pooled VM made its own when it was pooled.
  bool new_machine_id = false;
  // PrepareGuestIdentity ran on this VM's open connection (a pooled VM): the identity is
  // handed to the root process it left (no sudo) and the runner check is skipped (the
  // preparation made it). Should that process be gone, the identity runs through sudo.
  bool prepared = false;
  // Not prepared, but a root process may be waiting: a live copy, whose source's waiter (a VM
  // made from a template or the pool keeps one: runner/identity_wait.c) came with its memory.
  // Tried at the waiter's socket first, then through sudo (no hand-over by command between: a
  // source booted without one is no surprise).
  bool try_waiter = false;
  // The VM has the identity port (RestoredVm::identity_port): the identity is tried there
  // first, beside the control connection's handshake (GuestControl::Connect), and over that
  // connection as above when no waiter answers the port before the connection is up.
  bool port = false;
  // How much slower than alone guests answer now (host_load.h's GuestSlowdown, at least 1):
  // how long the waiter may take to answer the port once the connection is up is stretched by
  // it. A pooled VM's waiter answers within milliseconds of the resume on a quiet host; on a
  // loaded one (CI under ctest -j) it once took longer than the grace, and the hand-out took
  // the slower route over the connection.
  double slowdown = 1;
};

// What the guest reports, checked.
struct GuestIdentityReport {
  std::string hostname;
  std::string machine_id;      // 32 lowercase hex digits; empty when the guest has none (tiny)
  std::string mac;             // the NIC's MAC as read back; empty when none was asked
  bool setup_started = false;  // the seed's setup script was started (it had never run)
  int64_t clock_step_ms = 0;   // how far the guest's clock moved (new - old)
  int64_t clock_rtt_us = 0;    // the clock question's round trip, as the guest measured it
  int64_t work_ms = 0;         // the guest's steps before the clock question
  int64_t total_ms = 0;        // ApplyGuestIdentity end to end, on the host (0 from the parser)
  // The runner's version as it said (`warren-run --version`'s); empty from a runner built
  // before it did. ApplyGuestIdentity hands it to GuestControl::NoteRunnerVersion.
  std::string runner_version;
  // The socket of the VM user's runner server (runner/serve.c) when one runs; "" else.
  std::string serve_socket;
};

// xx:xx:xx:xx:xx:xx, lowercase hex, unicast (the first octet's low bit clear), not all zero.
bool ValidGuestMac(std::string_view mac);
// /dev/vd[a-z].
bool ValidSeedDevice(std::string_view device);
// A hand-out's hostname as the runner takes it: 1-63 of [A-Za-z0-9.-], not starting with '-'.
bool ValidHandoutHostname(std::string_view name);
// The most a hand-out's host key file (and its public line) may be (an ed25519 key file is
// about 400 bytes): each travels as one line of hex.
inline constexpr size_t kMaxHandoutHostKeyBytes = 500;

// A fresh random MAC in libvirt/QEMU's 52:54:00 range (locally administered, unicast).
Result<std::string> NewGuestMac();
// The seed device /dev/vdb, fresh host randomness and, when `with_nic`, a fresh MAC.
Result<GuestIdentity> NewGuestIdentity(bool with_nic);

// The identity a VM that RestoredVm describes takes (fresh host randomness, its MAC, the
// name). With `handout`, a VM whose seed holds nothing the guest lacks but the name and key
// (RestoredVm::seed_has_more false, host_key known) gets those in the request and reads no
// seed: a VM of the warm pool (`pooled`: it keeps the machine-id it made when it was
// pooled), a template's clone or a live copy (a new machine-id too); anything else reads its
// seed. `prepared`: a root process waits for it (template clones and pooled VMs).
Result<GuestIdentity> RestoredGuestIdentity(const RestoredVm& restored, std::string hostname,
                                            bool prepared, bool handout, bool pooled);

// The request the runner reads on stdin (records, one per line; `end` last). InvalidArgument
// for a seed device, MAC, hand-out hostname or host key the runner would refuse. Holds the
// random bytes (and a hand-out's private host key): a secret.
Result<std::string> GuestIdentityRequest(const GuestIdentity& identity);
// The answer to the guest's `clock?`: "clock SECONDS.NANOSECONDS\n".
std::string GuestClockAnswer(const timespec& now);
// Parses the runner's stdout after `clock?\n`: exactly one report line, newline-terminated,
// at most kMaxGuestIdentityReport bytes, every field present once and well-formed, and
// agreeing with what was asked (the MAC, the hostname when given). Internal otherwise.
Result<GuestIdentityReport> ParseGuestIdentityReport(std::string_view text,
                                                     const GuestIdentity& asked);

// Readies VM `vm_id` (running, its connection open and its runner checked) for a later
// ApplyGuestIdentity with `prepared` set: runs kGuestIdentityWaitCommand over a raw channel,
// which leaves a root process in the guest waiting for the identity. Timeout, Unavailable,
// or Internal with the guest's one-line reason.
Status PrepareGuestIdentity(GuestControl& guests, std::string_view vm_id,
                            std::chrono::milliseconds timeout);

// Applies `identity` to VM `vm_id`, which must be running, on one channel
// (GuestControl::OpenChannel): with `port`, at the identity port first while
// GuestControl::Connect makes the control connection (returning once it is made; the identity
// taken there and no connection is that Unavailable), then as below when no waiter answered
// there before the connection was up; when `prepared`, straight to the waiting process's socket
// (kUnix), then the hand-over command (kExec) should that channel fail before the identity
// began, then sudo should that be refused; with `try_waiter`, the socket, then sudo; else
// through sudo (and, should that fail, once more after the runner check with a cheap Exec of
// `true`, which reinstalls a missing or foreign runner: OpenChannel runs no check). The runner
// version the report names goes to GuestControl::NoteRunnerVersion, which spares the connection its
// runner check. Returns the checked report. Timeout when `timeout` passed first (the guest may have
// applied part of it); Unavailable when the guest could not be reached; Internal with the guest's
// one-line reason when a step failed or it sent anything malformed; PermissionDenied when it did
// not run as root.
Result<GuestIdentityReport> ApplyGuestIdentity(GuestControl& guests, std::string_view vm_id,
                                               const GuestIdentity& identity,
                                               std::chrono::milliseconds timeout);

}  // namespace warren
