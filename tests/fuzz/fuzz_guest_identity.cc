// Fuzzes the host's half of a restored clone's identity (vmhost/guest/identity.h), which reads
// what the untrusted guest's runner prints. Input: one option byte, then the guest's stdout;
// bytes after the first NUL are its stderr.
//   bit 0 clear: the whole conversation, ApplyGuestIdentity, against a scripted guest whose
//                channel prints those bytes (in chunks of 1-8 bytes, per bits 5-7) and exits
//                with status 0 (bit 4 clear) or 1.
//   bit 0 set:   the report line alone (ParseGuestIdentityReport).
// Bit 1: the clone was asked to take a MAC; bit 2: its seed names a hostname; bit 3: a
// pooled VM's hand-over (prepared). Invariants: every failure is a Status; an accepted
// report agrees with what was asked and has well-formed fields.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lobby/base/log.h"
#include "tests/fuzz/check.h"
#include "vmhost/guest/identity.h"

namespace {

using warren::Result;
using warren::Status;
using warren::fuzz::Fail;

// A channel that has the whole of the guest's output ready, handed out `chunk` bytes at a time.
class ScriptedPipe final : public warren::GuestPipe {
 public:
  ScriptedPipe(std::string out, std::string err, size_t chunk, int exit_status)
      : out_(std::move(out)), err_(std::move(err)), chunk_(chunk), exit_status_(exit_status) {}

  bool opening() override { return false; }
  Status status() override { return Status::Ok(); }
  size_t Write(std::string_view bytes) override { return bytes.size(); }
  void CloseInput() override {}
  void Resize(const warren::GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    const std::string& s = is_stderr ? err_ : out_;
    size_t at = is_stderr ? err_at_ : out_at_;
    if (at >= s.size()) return false;
    *bytes = s.substr(at, std::min({max, chunk_, s.size() - at}));
    return true;
  }
  void ConsumeOutput(bool is_stderr, size_t n) override { (is_stderr ? err_at_ : out_at_) += n; }
  End end() override {
    End e;
    e.output_eof = out_at_ >= out_.size();
    e.closed = e.output_eof && err_at_ >= err_.size();
    if (e.closed) e.exit_status = exit_status_;
    return e;
  }
  void Close() override {}

 private:
  const std::string out_, err_;
  const size_t chunk_;
  const int exit_status_;
  size_t out_at_ = 0, err_at_ = 0;
};

// A guest whose runner check passes and whose every channel plays the script.
class ScriptedGuest final : public warren::GuestControl {
 public:
  ScriptedGuest(std::string out, std::string err, size_t chunk, int exit_status)
      : out_(std::move(out)), err_(std::move(err)), chunk_(chunk), exit_status_(exit_status) {}

  Result<warren::GuestProgress> Exec(std::string_view, const warren::GuestCommand&,
                                     const warren::GuestStreams&) override {
    warren::GuestProgress p;
    p.job = "0123abcd";
    p.finished = true;
    p.exit_code = 0;
    return p;
  }
  Result<warren::GuestProgress> Wait(std::string_view, std::string_view, uint64_t, uint64_t,
                                     const warren::GuestStreams&) override {
    return warren::Unavailable("scripted guest");
  }
  Status Kill(std::string_view, std::string_view) override { return Status::Ok(); }
  Result<std::vector<warren::GuestJob>> Jobs(std::string_view) override {
    return std::vector<warren::GuestJob>();
  }
  void Disconnect(std::string_view) override {}
  Status RepinHostKey(std::string_view, std::string_view) override { return Status::Ok(); }
  void NoteRunnerVersion(std::string_view, std::string_view, std::string_view) override {}
  Result<std::shared_ptr<warren::GuestPipe>> OpenChannel(std::string_view,
                                                         const warren::GuestChannelRequest&,
                                                         std::function<void()>) override {
    return std::shared_ptr<warren::GuestPipe>(
        std::make_shared<ScriptedPipe>(out_, err_, chunk_, exit_status_));
  }
  // (The identity port is not asked for here: a script without the waiter's answer would
  // wait out its grace, 300 ms an input; guest_identity_test plays that route.)
  Status Connect(std::string_view, std::chrono::steady_clock::time_point,
                 std::function<void()> answered) override {
    if (answered) answered();
    return Status::Ok();
  }

 private:
  const std::string out_, err_;
  const size_t chunk_;
  const int exit_status_;
};

bool Hex32(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void CheckReport(const Result<warren::GuestIdentityReport>& r, const warren::GuestIdentity& asked) {
  if (!r.ok()) return;
  if (r->hostname.empty()) Fail("a report without a hostname");
  if (!asked.hostname.empty() && r->hostname != asked.hostname) Fail("another hostname");
  if (r->mac != asked.mac.value_or("")) Fail("a MAC not asked for");
  if (!r->machine_id.empty() && !Hex32(r->machine_id)) Fail("machine-id " + r->machine_id);
  if (r->clock_rtt_us < 0 || r->work_ms < 0) Fail("a negative duration");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const bool quiet = (warren::SetLogLevel(warren::LogLevel::kError), true);
  (void)quiet;
  const uint8_t options = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t nul = rest.find('\0');
  std::string out(rest.substr(0, nul));
  std::string err(nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1));

  warren::GuestIdentity asked;
  for (size_t i = 0; i < asked.random.size(); ++i) asked.random[i] = static_cast<uint8_t>(i);
  if (options & 2) asked.mac = "52:54:00:0a:1b:2c";
  if (options & 4) asked.hostname = "clone-1";
  asked.prepared = options & 8;

  if (options & 1) {
    CheckReport(warren::ParseGuestIdentityReport(out, asked), asked);
    return 0;
  }
  ScriptedGuest guest(out, err, ((options >> 5) & 7) + 1, (options & 16) ? 1 : 0);
  Result<warren::GuestIdentityReport> r =
      warren::ApplyGuestIdentity(guest, "vm-1", asked, std::chrono::seconds(10));
  if (!r.ok() && r.status().code() == warren::Code::kTimeout) Fail("a scripted guest timed out");
  CheckReport(r, asked);
  return 0;
}
