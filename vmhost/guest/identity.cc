#include "vmhost/guest/identity.h"

#include <sys/random.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "lobby/base/hex.h"
#include "lobby/base/log.h"
#include "vmhost/guest_text.h"
#include "vmhost/host_load.h"

namespace warren {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kClockQuestion = "clock?\n";
// stderr is only the runner's one-line reason (and sudo's): its first bytes are kept.
constexpr size_t kKeptStderr = 4096;
constexpr size_t kPeekBytes = 4096;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A signed decimal of at most `digits` digits (and an optional '-' when `sign`).
std::optional<int64_t> ParseBoundedInt(std::string_view s, size_t digits, bool sign) {
  bool negative = sign && !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  if (!AllDigits(s) || s.size() > digits) return std::nullopt;
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return negative ? -v : v;
}

bool ValidHostname(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-';
  });
}

// What `warren-run --version` names: "1-" and 12 hex digits from the build, "dev" without.
bool ValidRunnerVersion(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '.';
  });
}

bool ValidMachineId(std::string_view s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), IsLowerHex) &&
         s.find_first_not_of('0') != std::string_view::npos;
}

Status FillRandom(uint8_t* out, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::getrandom(out + got, len - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Overwrites a string that held a secret before it is freed.
void Wipe(std::string& s) {
  std::fill(s.begin(), s.end(), '\0');
  s.clear();
}

// Wakes the driver whenever the pipe may have changed. Shared with the pipe's notify, which
// may still run (on the control connection's thread) while the driver unwinds.
class PipeEvents {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    ++events_;
    cv_.notify_all();
  }
  // Waits until something happened since the last call, or the deadline.
  void WaitUntil(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, deadline, [&] { return events_ != seen_; });
    seen_ = events_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t events_ = 0;
  uint64_t seen_ = 0;
};

// Runs `true` in the guest under the runner, within the deadline: the connection's runner
// check (and upgrade) happens on the way, which a raw channel skips.
Status EnsureRunner(GuestControl& guests, std::string_view vm_id, Clock::time_point deadline) {
  StringSink out, err;
  GuestStreams streams;
  streams.out = &out;
  streams.err = &err;
  streams.cancel = std::make_shared<CancelSignal>();
  CancelSignal done;
  // Exec waits for the guest up to its own reach timeout; the deadline here is ours.
  std::thread watchdog([&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (!done.WaitFor(static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT_MAX)))) {
      streams.cancel->Cancel();
    }
  });
  GuestCommand command;
  command.command = "true";
  Result<GuestProgress> ran = guests.Exec(vm_id, command, streams);
  done.Cancel();
  watchdog.join();
  if (!ran.ok() && ran.status().code() == Code::kCancelled) {
    return Timeout("VM " + std::string(vm_id) + " did not run a command in time");
  }
  WARREN_RETURN_IF_ERROR(ran.status());
  if (!ran->finished || ran->exit_code != 0) {
    return Internal("VM " + std::string(vm_id) +
                    " failed to run `true`: " + SanitizeGuestText(err.str(), 300));
  }
  return Status::Ok();
}

// The failure for a runner that exited without a good report.
Status RunnerFailure(const GuestPipe::End& end, const std::string& err) {
  std::string reason = SanitizeGuestText(err.substr(0, err.find('\n')), 300);
  if (reason.empty()) reason = "no reason given";
  if (!end.exit_signal.empty()) {
    return Internal("warren-run identity was killed (" + SanitizeGuestText(end.exit_signal, 16) +
                    "): " + reason);
  }
  int code = end.exit_status.value_or(-1);
  // 5: the runner's "not root" (runner/runner.h); sudo's own refusal also exits 1.
  if (code == 5) return PermissionDenied("warren-run identity did not run as root: " + reason);
  return Internal("warren-run identity failed (exit " + std::to_string(code) + "): " + reason);
}

}  // namespace

bool ValidGuestMac(std::string_view mac) {
  if (mac.size() != 17) return false;
  for (size_t i = 0; i < 17; ++i) {
    if (i % 3 == 2 ? mac[i] != ':' : !IsLowerHex(mac[i])) return false;
  }
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  if ((nibble(mac[1]) & 1) != 0) return false;  // multicast
  return mac != "00:00:00:00:00:00";
}

bool ValidHandoutHostname(std::string_view name) {
  if (name.empty() || name.size() > 63 || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-';
  });
}

bool ValidSeedDevice(std::string_view device) {
  return device.size() == 8 && device.substr(0, 7) == "/dev/vd" && device[7] >= 'a' &&
         device[7] <= 'z';
}

Result<std::string> NewGuestMac() {
  uint8_t b[3];
  WARREN_RETURN_IF_ERROR(FillRandom(b, sizeof b));
  char out[18];
  std::snprintf(out, sizeof out, "52:54:00:%02x:%02x:%02x", b[0], b[1], b[2]);
  return std::string(out);
}

Result<GuestIdentity> NewGuestIdentity(bool with_nic) {
  GuestIdentity id;
  WARREN_RETURN_IF_ERROR(FillRandom(id.random.data(), id.random.size()));
  if (with_nic) {
    WARREN_ASSIGN_OR_RETURN(std::string mac, NewGuestMac());
    id.mac = std::move(mac);
  }
  return id;
}

Result<GuestIdentity> RestoredGuestIdentity(const RestoredVm& restored, std::string hostname,
                                            bool prepared, bool handout, bool pooled) {
  WARREN_ASSIGN_OR_RETURN(GuestIdentity identity, NewGuestIdentity(!restored.mac.empty()));
  if (!restored.mac.empty()) identity.mac = restored.mac;
  identity.hostname = std::move(hostname);
  identity.prepared = prepared;
  if (handout && !restored.seed_has_more && !restored.host_key.empty()) {
    identity.handout = true;
    identity.host_key = restored.host_key;
    identity.host_key_pub = restored.host_key_pub;
    identity.new_machine_id = !pooled;
  }
  return identity;
}

Result<std::string> GuestIdentityRequest(const GuestIdentity& identity) {
  std::string out;
  if (identity.handout) {
    if (!ValidHandoutHostname(identity.hostname)) {
      return InvalidArgument("a hand-out's hostname must be 1-63 of [A-Za-z0-9.-], not -first");
    }
    const bool keeps_key = identity.host_key.empty() && identity.host_key_pub.empty();
    if (!keeps_key &&
        (identity.host_key.empty() || identity.host_key.size() > kMaxHandoutHostKeyBytes ||
         identity.host_key_pub.empty() || identity.host_key_pub.size() > kMaxHandoutHostKeyBytes)) {
      return InvalidArgument("a hand-out's host key pair must be 1-" +
                             std::to_string(kMaxHandoutHostKeyBytes) +
                             " bytes each, or neither given");
    }
    out = "hostname " + identity.hostname + "\n";
    if (!keeps_key) {
      out += "host-key " + HexEncode(identity.host_key) + "\nhost-key-pub " +
             HexEncode(identity.host_key_pub) + "\n";
    }
    if (identity.new_machine_id) out += "machine-id new\n";
  } else if (!ValidSeedDevice(identity.seed_device)) {
    return InvalidArgument("the seed device must be /dev/vd[a-z]");
  } else {
    out = "seed-device " + identity.seed_device + "\n";
  }
  if (identity.mac && !ValidGuestMac(*identity.mac)) {
    return InvalidArgument("bad MAC \"" + SanitizeGuestText(*identity.mac, 32) +
                           "\": want lowercase xx:xx:xx:xx:xx:xx, unicast");
  }
  if (identity.mac) out += "mac " + *identity.mac + "\n";
  out.reserve(out.size() + 8 + 2 * kGuestRandomBytes + 5);
  out += "random " +
         HexEncode(std::string_view(reinterpret_cast<const char*>(identity.random.data()),
                                    identity.random.size())) +
         "\nend\n";
  return out;
}

std::string GuestClockAnswer(const timespec& now) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "clock %lld.%09ld\n", static_cast<long long>(now.tv_sec),
                static_cast<long>(now.tv_nsec));
  return buf;
}

Result<GuestIdentityReport> ParseGuestIdentityReport(std::string_view text,
                                                     const GuestIdentity& asked) {
  auto bad = [](const std::string& why) { return Internal("the guest's identity report " + why); };
  if (text.size() > kMaxGuestIdentityReport) return bad("is too long");
  if (text.empty() || text.back() != '\n') return bad("is cut short");
  std::string_view line = text.substr(0, text.size() - 1);
  if (line.find('\n') != std::string_view::npos) return bad("has more than one line");
  constexpr std::string_view kHead = "identity ok ";
  if (line.substr(0, kHead.size()) != kHead) {
    return bad("does not start with \"identity ok\": \"" + SanitizeGuestText(line, 80) + "\"");
  }
  line.remove_prefix(kHead.size());

  // runner= and serve= last, and optional: a runner from before them (an older template's)
  // leaves them out, and serve= is there only while the user's runner server runs.
  constexpr std::string_view kKeys[] = {"hostname", "machine-id",    "mac",
                                        "setup",    "clock-step-ms", "clock-rtt-us",
                                        "work-ms",  "runner",        "serve"};
  constexpr size_t kKeyCount = std::size(kKeys);
  constexpr size_t kRunnerKey = kKeyCount - 2;
  constexpr size_t kServeKey = kKeyCount - 1;
  std::optional<std::string_view> values[kKeyCount];
  while (!line.empty()) {
    size_t sp = line.find(' ');
    std::string_view field = line.substr(0, sp);
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (sp != std::string_view::npos && line.empty()) return bad("ends with a space");
    size_t eq = field.find('=');
    if (eq == std::string_view::npos) return bad("has a field without '='");
    std::string_view key = field.substr(0, eq);
    size_t k = std::find(std::begin(kKeys), std::end(kKeys), key) - std::begin(kKeys);
    if (k == kKeyCount) return bad("has an unknown field \"" + SanitizeGuestText(key, 32) + "\"");
    if (values[k]) return bad("repeats " + std::string(key));
    values[k] = field.substr(eq + 1);
  }
  for (size_t k = 0; k < kKeyCount; ++k) {
    if (!values[k] && k < kRunnerKey) return bad("has no " + std::string(kKeys[k]));
  }

  GuestIdentityReport r;
  std::string_view hostname = *values[0], machine_id = *values[1], mac = *values[2],
                   setup = *values[3];
  if (!ValidHostname(hostname)) return bad("has a bad hostname");
  if (!asked.hostname.empty() && hostname != asked.hostname) {
    return bad("names hostname \"" + std::string(hostname) + "\", not the seed's \"" +
               SanitizeGuestText(asked.hostname, 64) + "\"");
  }
  r.hostname = std::string(hostname);
  if (machine_id != "-") {
    if (!ValidMachineId(machine_id)) return bad("has a bad machine-id");
    r.machine_id = std::string(machine_id);
  }
  if (asked.mac) {
    if (mac != *asked.mac) {
      return bad("says the MAC is \"" + SanitizeGuestText(mac, 20) + "\", not " + *asked.mac);
    }
    r.mac = std::string(mac);
  } else if (mac != "-") {
    return bad("names a MAC none was asked for");
  }
  if (setup != "started" && setup != "none") return bad("has a bad setup field");
  r.setup_started = setup == "started";
  // A step of up to ~300 years either way; a round trip and the work within the runner's
  // own alarm (120 s), with room.
  std::optional<int64_t> step = ParseBoundedInt(*values[4], 13, /*sign=*/true);
  std::optional<int64_t> rtt = ParseBoundedInt(*values[5], 10, /*sign=*/false);
  std::optional<int64_t> work = ParseBoundedInt(*values[6], 9, /*sign=*/false);
  if (!step) return bad("has a bad clock-step-ms");
  if (!rtt || *rtt > 3'600'000'000) return bad("has a bad clock-rtt-us");
  if (!work || *work > 3'600'000) return bad("has a bad work-ms");
  r.clock_step_ms = *step;
  r.clock_rtt_us = *rtt;
  r.work_ms = *work;
  if (values[kRunnerKey]) {
    if (!ValidRunnerVersion(*values[kRunnerKey])) return bad("has a bad runner version");
    r.runner_version = std::string(*values[kRunnerKey]);
  }
  if (values[kServeKey]) {
    std::string_view path = *values[kServeKey];
    const bool plain = std::all_of(path.begin(), path.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
             c == '-';
    });
    if (!ValidGuestSocketPath(path) || !plain) {
      return bad("has a bad serve path");
    }
    r.serve_socket = std::string(path);
  }
  return r;
}

Status PrepareGuestIdentity(GuestControl& guests, std::string_view vm_id,
                            std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string vm(vm_id);
  auto events = std::make_shared<PipeEvents>();
  GuestChannelRequest open;
  open.kind = GuestChannelRequest::Kind::kExec;
  open.command = kGuestIdentityWaitCommand;
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestPipe> pipe,
                          guests.OpenChannel(vm_id, open, [events] { events->Notify(); }));
  struct CloseOnExit {
    GuestPipe& p;
    ~CloseOnExit() { p.Close(); }
  } close{*pipe};
  bool input_closed = false;
  std::string out, err;
  for (;;) {
    if (!pipe->opening()) {
      Status st = pipe->status();
      if (!st.ok()) return Unavailable("VM " + vm + ": readying its identity: " + st.message());
      if (!input_closed) {
        pipe->CloseInput();
        input_closed = true;
      }
      std::string chunk;
      for (bool is_stderr : {false, true}) {
        std::string& kept = is_stderr ? err : out;
        while (pipe->PeekOutput(is_stderr, kPeekBytes, &chunk)) {
          if (kept.size() < kKeptStderr) kept.append(chunk, 0, kKeptStderr - kept.size());
          pipe->ConsumeOutput(is_stderr, chunk.size());
        }
      }
      GuestPipe::End end = pipe->end();
      if (end.closed) {
        if (end.exit_status == 0 && out == kGuestIdentityWaits) return Status::Ok();
        std::string reason = SanitizeGuestText(err.substr(0, err.find('\n')), 300);
        if (reason.empty()) reason = "it printed \"" + SanitizeGuestText(out, 40) + "\"";
        return Internal("VM " + vm + ": warren-run identity-wait failed (exit " +
                        std::to_string(end.exit_status.value_or(-1)) + "): " + reason);
      }
    }
    if (Clock::now() >= deadline) {
      return Timeout("VM " + vm + ": readying its identity: no answer within " +
                     std::to_string(timeout.count()) + " ms");
    }
    events->WaitUntil(deadline);
  }
}

namespace {

// The longest last line of a direct identity channel: "exit N\n".
constexpr size_t kMaxExitLine = 16;

// Where a direct channel's last line, `exit N`, starts in `out`, and N; nullopt when it is
// not there.
std::optional<std::pair<size_t, int>> ExitLine(std::string_view out) {
  if (out.empty() || out.back() != '\n') return std::nullopt;
  size_t start = out.size() < 2 ? std::string_view::npos : out.rfind('\n', out.size() - 2);
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view line = out.substr(start, out.size() - start - 1);
  if (line.size() > kMaxExitLine || line.substr(0, 5) != "exit ") return std::nullopt;
  std::optional<int64_t> code = ParseBoundedInt(line.substr(5), 3, false);
  if (!code || *code > 255) return std::nullopt;
  return std::make_pair(start, static_cast<int>(*code));
}

// That line taken off `out`.
std::optional<int> TakeExitLine(std::string& out) {
  std::optional<std::pair<size_t, int>> line = ExitLine(out);
  if (!line) return std::nullopt;
  out.erase(line->first);
  return line->second;
}

// How an identity channel reaches the guest's `identity`.
struct IdentityRoute {
  enum class Way { kPort, kSocket, kCommand };
  Way way;
  const char* command;  // kCommand: the exec channel's command line
  const char* via;      // for the log line
};
constexpr IdentityRoute kAtThePort{IdentityRoute::Way::kPort, nullptr, "port"};
constexpr IdentityRoute kDirectToTheWaiter{IdentityRoute::Way::kSocket, nullptr, "waiter"};
constexpr IdentityRoute kHandedToTheWaiter{IdentityRoute::Way::kCommand,
                                           kGuestIdentityHandOverCommand, "waiter-command"};
constexpr IdentityRoute kThroughSudo{IdentityRoute::Way::kCommand, kGuestIdentityCommand, "sudo"};

// The port's hello and the waiter's answer (runner/identity_wait.c), and how much the guest
// may send before that answer (what a port held from before; dropped).
constexpr std::string_view kPortHello = "warren identity\n";
constexpr std::string_view kPortAck = "identity here\n";
constexpr size_t kMaxBeforeAck = 4096;
constexpr std::chrono::milliseconds kPortPoll{10};
// How long the waiter may take to answer the port's hello once the control connection is
// up (a pooled VM's is up already; its waiter answers within milliseconds of the resume).
constexpr std::chrono::milliseconds kPortAnswerGrace{300};

// How the control connection made beside the identity port gets on (ApplyGuestIdentity).
struct BesideTheHandshake {
  std::atomic<bool> answered{false};  // the guest's sshd for it sent its banner
  std::atomic<bool> done{false};      // GuestControl::Connect returned
  const std::shared_ptr<PipeEvents> events = std::make_shared<PipeEvents>();  // of either
};

// One identity channel (the identity protocol: request, clock question and answer, report),
// within the deadline. Direct to the waiter (its socket, its port), the guest's stdout and
// stderr are one stream, ended by the exit line. At the port (with `beside`) the request goes
// only once the waiter answered the hello; with no answer yet when `give_up()` says so,
// NotFound. And a request that replaces the host key waits for the connection's sshd to
// answer (or the connection to end): the guest's launcher hands a connection the sshd it
// started ahead (a spare) only while the key is the one that sshd read, so a key replaced
// before the client's banner reached the guest cost the clone a fresh sshd's start-up (a
// loaded host, once).
Result<GuestIdentityReport> RunIdentityChannel(GuestControl& guests, const std::string& vm,
                                               const IdentityRoute& route,
                                               const std::string& request,
                                               const GuestIdentity& identity, Clock::time_point t0,
                                               Clock::time_point deadline,
                                               const std::function<bool()>& give_up = {},
                                               const BesideTheHandshake* beside = nullptr) {
  using Way = IdentityRoute::Way;
  const bool direct = route.way != Way::kCommand;
  const bool port = route.way == Way::kPort;
  const std::shared_ptr<PipeEvents> events =
      beside != nullptr ? beside->events : std::make_shared<PipeEvents>();
  const bool replaces_key = !identity.handout || !identity.host_key.empty();
  auto may_send = [&] {
    return beside == nullptr || !replaces_key || beside->answered.load() || beside->done.load();
  };
  GuestChannelRequest open;
  if (port) {
    open.kind = GuestChannelRequest::Kind::kIdentityPort;
  } else if (direct) {
    open.kind = GuestChannelRequest::Kind::kUnix;
    open.path = kGuestIdentitySocket;
  } else {
    open.kind = GuestChannelRequest::Kind::kExec;
    open.command = route.command;
  }
  // Direct, a channel that fails or ends before the guest said anything reached no process
  // that took the identity (none waits, or one of an older runner, which takes descriptors
  // only, or reads no port): NotFound, after which the caller tries the next route.
  auto untaken = [&](const std::string& why) {
    return NotFound("VM " + vm + ": no process took the identity at " +
                    (port ? std::string("its identity port") : kGuestIdentitySocket) + " (" + why +
                    ")");
  };
  Result<std::shared_ptr<GuestPipe>> opened =
      guests.OpenChannel(vm, open, [events] { events->Notify(); });
  if (!opened.ok() && direct && opened.status().code() == Code::kUnavailable) {
    return untaken(opened.status().message());
  }
  WARREN_ASSIGN_OR_RETURN(std::shared_ptr<GuestPipe> pipe, std::move(opened));
  struct CloseOnExit {
    GuestPipe& p;
    ~CloseOnExit() { p.Close(); }
  } close{*pipe};

  const std::string_view sent = request;
  const std::string_view first = port ? kPortHello : direct ? "D" : "";
  size_t first_sent = 0;
  bool acked = !port;    // the port's waiter answered the hello
  bool refused = false;  // direct: the guest said something else than the clock question
  size_t request_sent = 0;
  std::string answer;  // the clock answer, once the question came
  size_t answer_sent = 0;
  bool asked = false;
  std::string out, err;
  const char* phase =
      port ? "waiting for the identity port's answer" : "opening the identity channel";
  for (;;) {
    if (!pipe->opening()) {
      Status st = pipe->status();
      if (!st.ok() && direct && out.empty()) return untaken(st.message());
      if (!st.ok()) return Unavailable("VM " + vm + ": " + phase + ": " + st.message());
      if (first_sent < first.size()) first_sent += pipe->Write(first.substr(first_sent));
      if (!acked) {
        std::string chunk;
        while (pipe->PeekOutput(/*is_stderr=*/false, kPeekBytes, &chunk)) {
          pipe->ConsumeOutput(false, chunk.size());
          out += chunk;
        }
        if (size_t at = out.find(kPortAck); at != std::string::npos) {
          out.erase(0, at + kPortAck.size());  // and whatever the port held before it
          acked = true;
          phase = "waiting for the control connection's sshd to answer";  // unless sent below
        } else if (out.size() > kMaxBeforeAck) {
          return untaken("it sent something else than the waiter's answer");
        } else if (pipe->end().closed) {
          return untaken("it closed the port");
        } else if (give_up && give_up()) {
          return untaken("no answer yet");
        }
      }
      if (acked && first_sent == first.size() && request_sent < sent.size() && may_send()) {
        phase = "sending the identity request";
        request_sent += pipe->Write(sent.substr(request_sent));
        if (request_sent == sent.size()) phase = "waiting for the guest's clock question";
      }
      if (asked && answer_sent < answer.size()) {
        answer_sent += pipe->Write(std::string_view(answer).substr(answer_sent));
        if (answer_sent == answer.size()) pipe->CloseInput();
      }
      std::string chunk;
      while (pipe->PeekOutput(/*is_stderr=*/true, kPeekBytes, &chunk)) {
        if (err.size() < kKeptStderr) err.append(chunk, 0, kKeptStderr - err.size());
        pipe->ConsumeOutput(true, chunk.size());
      }
      // At the port, nothing before the waiter's answer is the protocol's (read above).
      while (acked && pipe->PeekOutput(/*is_stderr=*/false, kPeekBytes, &chunk)) {
        pipe->ConsumeOutput(false, chunk.size());
        out += chunk;
        const size_t head = std::min(out.size(), kClockQuestion.size());
        if (!asked && !refused && out.compare(0, head, kClockQuestion.substr(0, head)) != 0) {
          // Nothing but the question comes first. Direct, a refusal's reason and exit line
          // come instead: read on until the end.
          if (!direct) {
            return Internal("VM " + vm + " sent \"" + SanitizeGuestText(out, 40) +
                            "\" instead of the clock question");
          }
          refused = true;
        }
        if (!asked && !refused && out.size() >= kClockQuestion.size()) {
          // Answered at once, so the guest's clock is late by about the way back only (which
          // it halves with its round trip).
          timespec now{};
          ::clock_gettime(CLOCK_REALTIME, &now);
          answer = GuestClockAnswer(now);
          asked = true;
          out.erase(0, kClockQuestion.size());
          phase = "waiting for the guest's identity report";
          answer_sent = pipe->Write(answer);
          if (answer_sent == answer.size()) pipe->CloseInput();
        }
        if (out.size() > kMaxGuestIdentityReport + (direct ? kKeptStderr + kMaxExitLine : 0)) {
          return Internal("VM " + vm + " sent an identity report over " +
                          std::to_string(kMaxGuestIdentityReport) + " bytes");
        }
      }
      GuestPipe::End end = pipe->end();
      // The port never closes: the exit line ends it.
      if (port && acked && ExitLine(out)) end.closed = true;
      if (end.closed) {
        if (direct) {
          if (out.empty() && !asked) return untaken("it closed the connection");
          std::optional<int> code = TakeExitLine(out);
          if (!code) {
            return Internal("VM " + vm +
                            ": the process waiting for its identity ended "
                            "without an exit line");
          }
          end.exit_status = *code;
          if (*code != 0) err = out;
        }
        if (end.exit_status != 0) return RunnerFailure(end, err);
        if (!asked) return Internal("VM " + vm + ": warren-run identity never asked the time");
        WARREN_ASSIGN_OR_RETURN(GuestIdentityReport report,
                                ParseGuestIdentityReport(out, identity));
        report.total_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
        LogInfo("guest identity applied vm=" + LogQuote(vm) + " hostname=" + report.hostname +
                " mac=" + (report.mac.empty() ? "-" : report.mac) +
                " setup=" + (report.setup_started ? "started" : "none") +
                " clock_step_ms=" + std::to_string(report.clock_step_ms) + " clock_rtt_us=" +
                std::to_string(report.clock_rtt_us) + " work_ms=" + std::to_string(report.work_ms) +
                " dur_ms=" + std::to_string(report.total_ms) +
                " kind=" + (identity.handout ? "handout" : "whole") + " via=" + route.via);
        return report;
      }
    }
    if (Clock::now() >= deadline) {
      return Timeout(
          "VM " + vm + ": " + phase + ": no answer within " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - t0).count()) +
          " ms");
    }
    // Unanswered at the port, give_up is asked again soon (what it watches does not notify).
    events->WaitUntil(!acked && give_up ? std::min(deadline, Clock::now() + kPortPoll) : deadline);
  }
}

// The identity over the VM's control connection: when `prepared`, to the waiter's socket, by
// command, then through sudo; else (with `try_waiter`, the socket first) through sudo, and
// once more after the runner check should that fail.
Result<GuestIdentityReport> OverTheConnection(GuestControl& guests, std::string_view vm_id,
                                              const std::string& request,
                                              const GuestIdentity& identity, Clock::time_point t0,
                                              Clock::time_point deadline) {
  const std::string vm(vm_id);
  Result<GuestIdentityReport> report = Internal("no identity channel yet");
  if (identity.prepared) {
    report = RunIdentityChannel(guests, vm, kDirectToTheWaiter, request, identity, t0, deadline);
    if (report.status().code() == Code::kNotFound) {
      LogWarn("guest identity: vm " + LogQuote(vm) + ": " + report.status().ToString() +
              "; handing it over by command");
      report = RunIdentityChannel(guests, vm, kHandedToTheWaiter, request, identity, t0, deadline);
    }
    if (!report.ok() && report.status().code() == Code::kPermissionDenied) {
      LogWarn("guest identity: vm " + LogQuote(vm) +
              " had no root process waiting for its identity; running it through sudo");
      report = RunIdentityChannel(guests, vm, kThroughSudo, request, identity, t0, deadline);
    }
    return report;
  }
  if (identity.try_waiter) {
    report = RunIdentityChannel(guests, vm, kDirectToTheWaiter, request, identity, t0, deadline);
  }
  // Through sudo (when no waiter took it): the runner a restored guest has is almost
  // always this warren's, and its report says so. Should the guest's runner fail or be
  // missing (the VM's user replaced it), the runner check (which reinstalls it) runs and
  // the identity once more: every step of it may be repeated.
  if (!identity.try_waiter || report.status().code() == Code::kNotFound) {
    report = RunIdentityChannel(guests, vm, kThroughSudo, request, identity, t0, deadline);
  }
  const Code code = report.status().code();
  if (code == Code::kInternal || code == Code::kPermissionDenied) {
    LogWarn("guest identity: vm " + LogQuote(vm) + ": " + report.status().ToString() +
            "; checking its runner and running it again");
    WARREN_RETURN_IF_ERROR(EnsureRunner(guests, vm_id, deadline));
    report = RunIdentityChannel(guests, vm, kThroughSudo, request, identity, t0, deadline);
  }
  return report;
}

}  // namespace

Result<GuestIdentityReport> ApplyGuestIdentity(GuestControl& guests, std::string_view vm_id,
                                               const GuestIdentity& identity,
                                               std::chrono::milliseconds timeout) {
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout;
  const std::string vm(vm_id);
  WARREN_ASSIGN_OR_RETURN(std::string request, GuestIdentityRequest(identity));
  struct WipeOnExit {
    std::string& s;
    ~WipeOnExit() { Wipe(s); }
  } wipe{request};
  Result<GuestIdentityReport> report = Internal("no identity channel yet");
  if (identity.port) {
    // At the port first, while the control connection is made beside it (a restored VM's
    // first handshake: 0.4-0.6 s under TCG). A guest with no waiter there (a live copy of a
    // booted VM) has not answered the hello by the time the connection is up: the SSH routes
    // below then, as without a port.
    auto beside = std::make_shared<BesideTheHandshake>();
    std::future<Status> connected = std::async(std::launch::async, [&guests, vm, deadline, beside] {
      Status st = guests.Connect(vm, deadline, [beside] {
        beside->answered = true;
        beside->events->Notify();
      });
      beside->done = true;
      beside->events->Notify();
      return st;
    });
    const auto said_hello = Clock::now();
    const std::chrono::milliseconds grace = StretchedBy(kPortAnswerGrace, identity.slowdown);
    auto give_up = [&] { return Clock::now() - said_hello >= grace && beside->done.load(); };
    report = RunIdentityChannel(guests, vm, kAtThePort, request, identity, t0, deadline, give_up,
                                beside.get());
    // The caller re-pins the host key next: after the connection's first (the handshake may
    // have begun with the key the guest had).
    Status st = connected.get();
    if (report.ok() && !st.ok()) {
      return st.Annotate("VM " + vm + " took its identity, but its control connection");
    }
    if (report.status().code() == Code::kNotFound) {
      LogInfo("guest identity: vm " + LogQuote(vm) + ": " + report.status().message() +
              "; over its control connection then");
    }
  }
  // Not taken at the port (none, or no waiter answered there): over the connection.
  if (!identity.port || report.status().code() == Code::kNotFound) {
    report = OverTheConnection(guests, vm_id, request, identity, t0, deadline);
  }
  if (report.ok() && !report->runner_version.empty()) {
    // The runner's server in a restored VM came with the memory it was restored from (a
    // template's, or a live copy's source's), with the environment of that VM's connection:
    // the same as this one's for a VM without env of its own (a template has none; a copy
    // has its source's), and a VM with env gets a new connection, whose check restarts it.
    guests.NoteRunnerVersion(vm_id, report->runner_version, report->serve_socket);
  }
  return report;
}

}  // namespace warren
