// A restored clone's identity, the host's half (vmhost/guest/identity.h): the request the
// runner reads, the report parser (good, cut short, oversized, lying), the MAC helper, and
// ApplyGuestIdentity against an in-test GuestControl whose raw channel plays the guest's side
// of the conversation on a thread of its own (the runner itself is run for real in
// guest_identity_runner_test, and in a real guest in guest_identity_vm).
#include "vmhost/guest/identity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace warren {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

GuestIdentity SomeIdentity(bool with_mac = true) {
  GuestIdentity id;
  id.seed_device = "/dev/vdb";
  if (with_mac) id.mac = "52:54:00:0a:1b:2c";
  for (size_t i = 0; i < id.random.size(); ++i) id.random[i] = static_cast<uint8_t>(i * 7 + 1);
  id.hostname = "clone-1";
  return id;
}

std::string RandomHex(const GuestIdentity& id) {
  std::string hex;
  char b[3];
  for (uint8_t v : id.random) {
    std::snprintf(b, sizeof b, "%02x", v);
    hex += b;
  }
  return hex;
}

const char kGoodReport[] =
    "identity ok hostname=clone-1 machine-id=0123456789abcdef0123456789abcdef "
    "mac=52:54:00:0a:1b:2c setup=none clock-step-ms=-86400000 clock-rtt-us=1200 work-ms=340\n";

// ---- the request ----

TEST(GuestIdentityRequestTest, RecordsOnePerLineEndLast) {
  Result<std::string> r = GuestIdentityRequest(SomeIdentity());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "seed-device /dev/vdb\nmac 52:54:00:0a:1b:2c\nrandom " + RandomHex(SomeIdentity()) +
                    "\nend\n");
  Result<std::string> no_nic = GuestIdentityRequest(SomeIdentity(/*with_mac=*/false));
  ASSERT_TRUE(no_nic.ok());
  EXPECT_EQ(*no_nic, "seed-device /dev/vdb\nrandom " + RandomHex(SomeIdentity()) + "\nend\n");
  EXPECT_EQ(RandomHex(SomeIdentity()).size(), 128u);
}

TEST(GuestIdentityRequestTest, RefusesWhatTheRunnerWouldRefuse) {
  for (const char* dev :
       {"", "/dev/vd", "/dev/sda", "/dev/vdB", "/dev/vdaa", "/dev/vd1", "/dev/vdb\n", "vdb"}) {
    GuestIdentity id = SomeIdentity();
    id.seed_device = dev;
    Result<std::string> r = GuestIdentityRequest(id);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << dev;
  }
  for (const char* mac :
       {"", "52:54:00:0A:1B:2C", "53:54:00:0a:1b:2c" /* multicast */, "00:00:00:00:00:00",
        "52-54-00-0a-1b-2c", "52:54:00:0a:1b:2c\nend", "52:54:00:0a:1b", "52:54:00:0a:1b:2c:3d"}) {
    GuestIdentity id = SomeIdentity();
    id.mac = mac;
    Result<std::string> r = GuestIdentityRequest(id);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << mac;
    // Whatever the refusal says, it never carries the secret.
    EXPECT_EQ(r.status().message().find(RandomHex(id)), std::string::npos);
  }
}

TEST(GuestIdentityRequestTest, AHandOutSendsTheNameAndAnyKeyPairInsteadOfTheSeedDevice) {
  GuestIdentity id = SomeIdentity(/*with_mac=*/false);
  id.handout = true;
  id.hostname = "web-1";
  id.host_key = "KEY\n";
  id.host_key_pub = "PUB\n";
  Result<std::string> r = GuestIdentityRequest(id);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "hostname web-1\nhost-key 4b45590a\nhost-key-pub 5055420a\nrandom " +
                    RandomHex(id) + "\nend\n");
  for (const std::string& name :
       std::vector<std::string>{"", "-web", "web_1", "web 1", "web\n", std::string(64, 'a')}) {
    GuestIdentity bad = id;
    bad.hostname = name;
    EXPECT_EQ(GuestIdentityRequest(bad).status().code(), Code::kInvalidArgument) << name;
  }
  GuestIdentity no_key = id;
  no_key.host_key.clear();
  EXPECT_EQ(GuestIdentityRequest(no_key).status().code(), Code::kInvalidArgument);
  // Neither: a pooled VM keeps its own key, and the request names none.
  GuestIdentity keeps = no_key;
  keeps.host_key_pub.clear();
  keeps.new_machine_id = true;
  Result<std::string> kept = GuestIdentityRequest(keeps);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, "hostname web-1\nmachine-id new\nrandom " + RandomHex(id) + "\nend\n");
  GuestIdentity no_pub = id;
  no_pub.host_key_pub.clear();
  EXPECT_EQ(GuestIdentityRequest(no_pub).status().code(), Code::kInvalidArgument);
  GuestIdentity big = id;
  big.host_key = std::string(kMaxHandoutHostKeyBytes + 1, 'k');
  Result<std::string> refused = GuestIdentityRequest(big);
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(refused.status().message().find("kkkk"), std::string::npos);
}

TEST(GuestIdentityRequestTest, ClockAnswerHasNineNanosecondDigits) {
  EXPECT_EQ(GuestClockAnswer(timespec{1733100000, 5}), "clock 1733100000.000000005\n");
  EXPECT_EQ(GuestClockAnswer(timespec{1733100000, 999999999}), "clock 1733100000.999999999\n");
}

TEST(GuestIdentityRequestTest, FreshMacsAreLocalUnicastInQemusRange) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    Result<std::string> mac = NewGuestMac();
    ASSERT_TRUE(mac.ok());
    EXPECT_TRUE(ValidGuestMac(*mac)) << *mac;
    EXPECT_EQ(mac->rfind("52:54:00:", 0), 0u) << *mac;
    seen.insert(*mac);
  }
  EXPECT_GT(seen.size(), 45u);  // 24 random bits: collisions in 50 are ~0.01%
  Result<GuestIdentity> a = NewGuestIdentity(true), b = NewGuestIdentity(false);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->mac.has_value());
  EXPECT_FALSE(b->mac.has_value());
  EXPECT_EQ(a->seed_device, "/dev/vdb");
  EXPECT_NE(a->random, b->random);
}

// ---- the report ----

TEST(GuestIdentityReportTest, ParsesAGoodReport) {
  Result<GuestIdentityReport> r = ParseGuestIdentityReport(kGoodReport, SomeIdentity());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->hostname, "clone-1");
  EXPECT_EQ(r->machine_id, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(r->mac, "52:54:00:0a:1b:2c");
  EXPECT_FALSE(r->setup_started);
  EXPECT_EQ(r->clock_step_ms, -86400000);
  EXPECT_EQ(r->clock_rtt_us, 1200);
  EXPECT_EQ(r->work_ms, 340);
  EXPECT_EQ(r->runner_version, "");  // an older runner names none

  // The runner's version, last (as the runner prints it).
  std::string named = kGoodReport;
  named.insert(named.size() - 1, " runner=1-0123456789ab");
  Result<GuestIdentityReport> v = ParseGuestIdentityReport(named, SomeIdentity());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->runner_version, "1-0123456789ab");
  EXPECT_EQ(v->serve_socket, "");
  // And the runner's server, when one runs in the clone.
  named.insert(named.size() - 1, " serve=/home/dev/.warren/run/serve.sock");
  v = ParseGuestIdentityReport(named, SomeIdentity());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->serve_socket, "/home/dev/.warren/run/serve.sock");

  // No NIC, no machine-id (tiny), a setup script started, fields in another order.
  GuestIdentity no_nic = SomeIdentity(false);
  no_nic.hostname.clear();  // not checked
  Result<GuestIdentityReport> tiny = ParseGuestIdentityReport(
      "identity ok work-ms=0 hostname=any.name machine-id=- mac=- setup=started "
      "clock-step-ms=5 clock-rtt-us=0\n",
      no_nic);
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  EXPECT_EQ(tiny->machine_id, "");
  EXPECT_EQ(tiny->mac, "");
  EXPECT_TRUE(tiny->setup_started);
}

TEST(GuestIdentityReportTest, RefusesTruncatedOversizedAndMalformed) {
  std::string good = kGoodReport;
  auto refused = [](std::string_view text, const GuestIdentity& asked) {
    Result<GuestIdentityReport> r = ParseGuestIdentityReport(text, asked);
    return !r.ok() && r.status().code() == Code::kInternal;
  };
  GuestIdentity id = SomeIdentity();
  EXPECT_TRUE(refused("", id));
  EXPECT_TRUE(refused(good.substr(0, good.size() - 1), id));  // no newline: cut short
  EXPECT_TRUE(refused(good.substr(0, 40), id));
  EXPECT_TRUE(refused(good + good, id));  // two lines
  EXPECT_TRUE(refused(good.substr(0, good.size() - 1) + " " + std::string(600, 'x') + "\n", id));
  EXPECT_TRUE(refused(std::string(100000, 'a'), id));
  auto with = [&](std::string_view from, std::string_view to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  for (const std::string& bad : {
           with("identity ok", "identity fine"),
           with("hostname=clone-1 ", ""),                // missing
           with("setup=none", "setup=none setup=none"),  // repeated
           with("setup=none", "setup=none extra=1"),     // unknown
           with("setup=none", "setup=maybe"),
           with("setup=none", "setupnone"),
           with("hostname=clone-1", "hostname=-bad"),
           with("hostname=clone-1", "hostname=a\x1b[2Jb"),
           with("hostname=clone-1", "hostname=" + std::string(64, 'a')),
           with("machine-id=0123456789abcdef0123456789abcdef", "machine-id=0123"),
           with("machine-id=0123456789abcdef0123456789abcdef",
                "machine-id=0123456789ABCDEF0123456789ABCDEF"),
           with("machine-id=0123456789abcdef0123456789abcdef",
                "machine-id=00000000000000000000000000000000"),
           with("clock-step-ms=-86400000", "clock-step-ms=12x"),
           with("clock-step-ms=-86400000", "clock-step-ms="),
           with("clock-step-ms=-86400000", "clock-step-ms=99999999999999999999"),
           with("clock-rtt-us=1200", "clock-rtt-us=-1"),
           with("clock-rtt-us=1200", "clock-rtt-us=9999999999"),
           with("work-ms=340", "work-ms=340 "),
           with(" mac=", "  mac="),
           with("work-ms=340", "work-ms=340 runner="),
           with("work-ms=340", "work-ms=340 runner=1-ABC"),
           with("work-ms=340", "work-ms=340 runner=1-a\x1b[2J"),
           with("work-ms=340", "work-ms=340 runner=" + std::string(65, 'a')),
           with("work-ms=340", "work-ms=340 runner=1-a runner=1-a"),
           with("work-ms=340", "work-ms=340 serve="),
           with("work-ms=340", "work-ms=340 serve=relative/serve.sock"),
           with("work-ms=340", "work-ms=340 serve=/home/a\x1b[2J"),
           with("work-ms=340", "work-ms=340 serve=/x:y"),
           with("work-ms=340", "work-ms=340 serve=/" + std::string(107, 'a')),
           with("work-ms=340", "work-ms=340 serve=/a serve=/a"),
       }) {
    EXPECT_TRUE(refused(bad, id)) << bad;
  }
}

TEST(GuestIdentityReportTest, RefusesLies) {
  std::string good = kGoodReport;
  // A MAC other than the one asked for.
  GuestIdentity other = SomeIdentity();
  other.mac = "52:54:00:99:99:99";
  EXPECT_FALSE(ParseGuestIdentityReport(good, other).ok());
  // A MAC when none was asked for, or none when one was.
  EXPECT_FALSE(ParseGuestIdentityReport(good, SomeIdentity(false)).ok());
  std::string no_mac = good;
  no_mac.replace(no_mac.find("mac=52:54:00:0a:1b:2c"), 21, "mac=-");
  EXPECT_FALSE(ParseGuestIdentityReport(no_mac, SomeIdentity()).ok());
  // A hostname other than the seed's.
  GuestIdentity renamed = SomeIdentity();
  renamed.hostname = "clone-2";
  Result<GuestIdentityReport> r = ParseGuestIdentityReport(good, renamed);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("clone-2"), std::string::npos);
}

// ---- the driver, against a guest played in the test ----

// The guest's side of one raw channel: its thread reads what the host wrote and answers.
// `direct`: a connection to the waiter's socket (kUnix), which has one output stream and
// ends with an `exit N` line instead of an exit status.
class PlayedPipe final : public GuestPipe {
 public:
  // `port`: the identity port (direct, and never closed: the exit line ends it).
  PlayedPipe(std::function<void()> notify, bool direct, bool port = false)
      : notify_(std::move(notify)), direct_(direct || port), port_(port) {}
  bool direct() const { return direct_; }
  bool port() const { return port_; }

 private:
  template <typename F>
  auto Locked(F f) -> decltype(f()) {
    std::lock_guard<std::mutex> lock(mu_);
    return f();
  }

 public:
  // ---- GuestPipe (the host's side) ----
  bool opening() override {
    return Locked([&] { return opening_; });
  }
  Status status() override {
    return Locked([&] { return failure_; });
  }
  size_t Write(std::string_view bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (input_closed_ || closed_by_host_) return 0;
      size_t room = window_ > input_.size() ? window_ - input_.size() : 0;
      size_t n = std::min(bytes.size(), room);
      input_.append(bytes.substr(0, n));
      cv_.notify_all();
      return n;
    }
  }
  void CloseInput() override {
    std::lock_guard<std::mutex> lock(mu_);
    input_closed_ = true;
    cv_.notify_all();
  }
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override {
    bool arrived = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::string& q = is_stderr ? err_ : out_;
      if (!q.empty()) {
        *bytes = q.substr(0, std::min(max, chunk_ == 0 ? max : chunk_));
        return true;
      }
      if (!is_stderr && !after_drain_.empty()) {
        q = std::move(after_drain_);
        after_drain_.clear();
        arrived = true;
      }
    }
    if (arrived) notify_();
    return false;
  }
  void ConsumeOutput(bool is_stderr, size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    (is_stderr ? err_ : out_).erase(0, n);
  }
  End end() override {
    std::lock_guard<std::mutex> lock(mu_);
    End e;
    e.closed = guest_closed_ && out_.empty() && err_.empty();
    e.output_eof = e.closed;
    e.exit_status = exit_status_;
    return e;
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    closed_by_host_ = true;
    cv_.notify_all();
  }

  // ---- the guest's side ----
  void Open() {
    Locked([&] { opening_ = false; });
    notify_();
  }
  void Refuse(Status why) {
    Locked([&] {
      opening_ = false;
      failure_ = std::move(why);
    });
    notify_();
  }
  // One line the host wrote (without its newline); nullopt at EOF, host close or timeout.
  // Takes what the host queued as it comes, as a process reading its stdin would.
  std::optional<std::string> ReadLine(milliseconds timeout = milliseconds(5000)) {
    auto give_up = Clock::now() + timeout;
    for (;;) {
      size_t nl = read_.find('\n');
      if (nl != std::string::npos) {
        std::string line = read_.substr(0, nl);
        read_.erase(0, nl + 1);
        return line;
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        bool got = cv_.wait_until(
            lock, give_up, [&] { return !input_.empty() || input_closed_ || closed_by_host_; });
        if (!got || input_.empty()) return std::nullopt;
        read_ += input_;
        input_.clear();
      }
      notify_();  // room for input, as a real pipe says
    }
  }
  void Send(std::string_view bytes, bool is_stderr = false) {
    Locked([&] { (is_stderr && !direct_ ? err_ : out_).append(bytes); });
    notify_();
  }
  // `bytes` arrive on stdout the moment the host next finds it empty: right after it read
  // all there was, before its next look (a second burst at the worst time).
  void SendWhenDrained(std::string_view bytes) {
    Locked([&] { after_drain_.append(bytes); });
  }
  void Exit(int status) {
    Locked([&] {
      if (direct_) {
        out_ += "exit " + std::to_string(status) + "\n";
      } else {
        exit_status_ = status;
      }
      guest_closed_ = !port_;
    });
    notify_();
  }
  // Ends the channel with nothing sent (direct: a waiter that did not take it).
  void Hangup() {
    Locked([&] { guest_closed_ = true; });
    notify_();
  }
  bool WaitHostClose(milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return closed_by_host_; });
  }
  // Test knobs: how much input the pipe holds, how much output one Peek shows.
  void SetWindow(size_t window) {
    Locked([&] { window_ = window; });
  }
  void SetChunk(size_t chunk) {
    Locked([&] { chunk_ = chunk; });
  }

 private:
  std::function<void()> notify_;
  const bool direct_;
  const bool port_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool opening_ = true;
  Status failure_;
  std::string input_;
  std::string read_;  // the guest's side: taken from input_, not yet a whole line
  bool input_closed_ = false;
  bool closed_by_host_ = false;
  std::string out_, err_;
  std::string after_drain_;
  bool guest_closed_ = false;
  std::optional<int> exit_status_;
  size_t window_ = SIZE_MAX;
  size_t chunk_ = 0;
};

// A GuestControl whose Exec answers at once and whose raw channel is played by `guest` on a
// thread of its own.
class PlayedGuests final : public GuestControl {
 public:
  using Guest = std::function<void(PlayedPipe&)>;
  explicit PlayedGuests(Guest guest) : guest_(std::move(guest)) {}
  ~PlayedGuests() override {
    for (std::thread& t : threads_) t.join();
  }

  Result<GuestProgress> Exec(std::string_view vm_id, const GuestCommand& command,
                             const GuestStreams& streams) override {
    execs.push_back(std::string(vm_id) + ": " + command.command);
    if (exec_hangs) {
      while (!streams.cancel->WaitFor(50)) {
      }
      return Cancelled("cancelled");
    }
    if (!exec_status.ok()) return exec_status;
    GuestProgress p;
    p.job = "0123abcd";
    p.finished = true;
    p.exit_code = 0;
    return p;
  }
  Result<GuestProgress> Wait(std::string_view, std::string_view, uint64_t, uint64_t,
                             const GuestStreams&) override {
    return Internal("not played");
  }
  Status Kill(std::string_view, std::string_view) override { return Internal("not played"); }
  Result<std::vector<GuestJob>> Jobs(std::string_view) override { return Internal("not played"); }
  void Disconnect(std::string_view) override {}
  // Not marked override: the interface gains it with the template work under way.
  Status RepinHostKey(std::string_view, std::string_view) { return Status::Ok(); }
  void NoteRunnerVersion(std::string_view vm_id, std::string_view version,
                         std::string_view serve_socket) override {
    noted.push_back(std::string(vm_id) + ": " + std::string(version) +
                    (serve_socket.empty() ? "" : " serve " + std::string(serve_socket)));
  }
  Result<std::shared_ptr<GuestPipe>> OpenChannel(std::string_view vm_id,
                                                 const GuestChannelRequest& request,
                                                 std::function<void()> notify) override {
    const bool direct = request.kind == GuestChannelRequest::Kind::kUnix;
    const bool port = request.kind == GuestChannelRequest::Kind::kIdentityPort;
    opened.push_back(std::string(vm_id) + ": " +
                     (port     ? "port"
                      : direct ? "unix:" + request.path
                               : request.command));
    if (!direct && !port) {
      EXPECT_EQ(request.kind, GuestChannelRequest::Kind::kExec);
    }
    auto pipe = std::make_shared<PlayedPipe>(std::move(notify), direct, port);
    threads_.emplace_back([this, pipe] { guest_(*pipe); });
    return std::shared_ptr<GuestPipe>(pipe);
  }

  Status Connect(std::string_view vm_id, std::chrono::steady_clock::time_point,
                 std::function<void()> answered) override {
    connects.push_back(std::string(vm_id));
    if (connect_plays) return connect_plays(std::move(answered));
    if (answered && connect_status.ok()) answered();
    return connect_status;
  }

  std::vector<std::string> execs, opened, noted, connects;
  Status connect_status;
  // Plays the connection instead (given `answered`), for the order of the two.
  std::function<Status(std::function<void()>)> connect_plays;
  bool exec_hangs = false;
  Status exec_status;

 private:
  Guest guest_;
  std::vector<std::thread> threads_;  // one per channel
};

// Reads the request the way the runner does; false when it is not what `asked` makes.
bool ReadRequest(PlayedPipe& p, const GuestIdentity& asked, std::string* seen = nullptr) {
  Result<std::string> want = GuestIdentityRequest(asked);
  std::string got;
  bool first = true;
  for (;;) {
    std::optional<std::string> line = p.ReadLine();
    if (!line) return false;
    // Direct, the byte 'D' comes before the request.
    if (first && p.direct() && !p.port() && (line->empty() || (*line)[0] != 'D')) return false;
    if (first && p.direct() && !p.port()) line->erase(0, 1);
    first = false;
    got += *line + "\n";
    if (*line == "end") break;
  }
  if (seen != nullptr) *seen = got;
  return want.ok() && got == *want;
}

std::string ReportFor(const GuestIdentity& id) {
  return "identity ok hostname=" + id.hostname +
         " machine-id=0123456789abcdef0123456789abcdef mac=" + id.mac.value_or("-") +
         " setup=none clock-step-ms=12 clock-rtt-us=800 work-ms=250\n";
}

TEST(ApplyGuestIdentityTest, TheWholeConversation) {
  GuestIdentity id = SomeIdentity();
  int64_t answer_ns = 0, asked_ns = 0;
  bool request_ok = false;
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    request_ok = ReadRequest(p, id);
    timespec t{};
    clock_gettime(CLOCK_REALTIME, &t);
    asked_ns = int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
    p.Send("clock?\n");
    std::optional<std::string> answer = p.ReadLine();
    long long sec = 0, nsec = 0;
    if (answer && std::sscanf(answer->c_str(), "clock %lld.%9lld", &sec, &nsec) == 2 &&
        *answer == GuestClockAnswer(timespec{static_cast<time_t>(sec), static_cast<long>(nsec)})
                       .substr(0, answer->size())) {
      answer_ns = sec * 1000000000 + nsec;
    }
    // The host closes its input after the answer.
    EXPECT_FALSE(p.ReadLine().has_value());
    p.Send(ReportFor(id));
    p.Exit(0);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(request_ok);
  EXPECT_EQ(r->hostname, "clone-1");
  EXPECT_EQ(r->mac, "52:54:00:0a:1b:2c");
  EXPECT_EQ(r->clock_step_ms, 12);
  EXPECT_GE(r->total_ms, 0);
  // The answer is the host's clock when the question came, not later.
  EXPECT_GE(answer_ns, asked_ns);
  EXPECT_LT(answer_ns - asked_ns, 200'000'000)
      << "answered " << (answer_ns - asked_ns) << " ns late";
  // The raw channel with the sudo command line, and no runner check: the identity went well.
  EXPECT_TRUE(guests.execs.empty());
  ASSERT_EQ(guests.opened.size(), 1u);
  EXPECT_EQ(guests.opened[0], "vm1: sudo -n ~/.warren/bin/warren-run identity");
  EXPECT_TRUE(guests.noted.empty());  // this report names no runner version
}

TEST(ApplyGuestIdentityTest, TheRunnerVersionTheReportNamesIsNoted) {
  for (bool prepared : {false, true}) {
    GuestIdentity id = SomeIdentity();
    id.prepared = prepared;
    PlayedGuests guests([&](PlayedPipe& p) {
      p.Open();
      ReadRequest(p, id);
      p.Send("clock?\n");
      p.ReadLine();
      std::string report = ReportFor(id);
      p.Send(report.substr(0, report.size() - 1) +
             " runner=1-0123456789ab serve=/home/dev/.warren/run/serve.sock\n");
      p.Exit(0);
    });
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->runner_version, "1-0123456789ab");
    EXPECT_EQ(guests.noted, std::vector<std::string>{
                                "vm1: 1-0123456789ab serve /home/dev/.warren/run/serve.sock"});
    EXPECT_TRUE(guests.execs.empty());
  }
}

TEST(ApplyGuestIdentityTest, AFailedIdentityChecksTheRunnerAndTriesOnceMore) {
  // The VM's user removed the runner: sudo cannot find it; the runner check puts it back.
  GuestIdentity id = SomeIdentity();
  std::atomic<int> channels{0};
  PlayedGuests guests([&](PlayedPipe& p) {
    if (channels++ == 0) {
      p.Open();
      p.Send("sudo: /home/dev/.warren/bin/warren-run: command not found\n", true);
      return p.Exit(1);
    }
    p.Open();
    ReadRequest(p, id);
    p.Send("clock?\n");
    p.ReadLine();
    p.Send(ReportFor(id));
    p.Exit(0);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(guests.execs, std::vector<std::string>{"vm1: true"});
  EXPECT_EQ(guests.opened,
            (std::vector<std::string>{"vm1: sudo -n ~/.warren/bin/warren-run identity",
                                      "vm1: sudo -n ~/.warren/bin/warren-run identity"}));
  // A guest that cannot be reached is not retried: there is nothing to check.
  PlayedGuests gone([&](PlayedPipe& p) { p.Refuse(Unavailable("the connection went")); });
  r = ApplyGuestIdentity(gone, "vm1", id, milliseconds(1000));
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(gone.execs.empty());
  EXPECT_EQ(gone.opened.size(), 1u);
}

TEST(ApplyGuestIdentityTest, SmallWindowsAndOneByteOutputChunks) {
  GuestIdentity id = SomeIdentity(false);
  bool request_ok = false;
  PlayedGuests guests([&](PlayedPipe& p) {
    p.SetWindow(7);  // the request goes in pieces of 7 bytes at most
    p.SetChunk(1);   // every Peek shows one byte
    p.Open();
    request_ok = ReadRequest(p, id);
    p.Send("clo");
    p.Send("ck?\n");
    if (!p.ReadLine()) return p.Exit(99);
    std::string report = ReportFor(id);
    p.Send(report.substr(0, 10));
    p.Send(report.substr(10));
    p.Exit(0);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(request_ok);
  EXPECT_EQ(r->mac, "");
}

TEST(ApplyGuestIdentityTest, AGuestThatNeverAsksTheTimeTimesOut) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.WaitHostClose(milliseconds(5000));  // says nothing until the host gives up
  });
  auto t0 = Clock::now();
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(300));
  auto took = Clock::now() - t0;
  ASSERT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
  EXPECT_NE(r.status().message().find("clock question"), std::string::npos) << r.status().message();
  EXPECT_LT(took, milliseconds(2000));
  EXPECT_EQ(r.status().message().find(RandomHex(id)), std::string::npos);
}

TEST(ApplyGuestIdentityTest, AGuestThatNeverOpensTimesOut) {
  PlayedGuests guests([&](PlayedPipe& p) { p.WaitHostClose(milliseconds(5000)); });
  Result<GuestIdentityReport> r =
      ApplyGuestIdentity(guests, "vm1", SomeIdentity(), milliseconds(200));
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
}

TEST(ApplyGuestIdentityTest, ARunnerCheckThatHangsTimesOut) {
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    p.Exit(1);  // the identity failed: the runner is checked next, and that hangs
  });
  guests.exec_hangs = true;
  auto t0 = Clock::now();
  Result<GuestIdentityReport> r =
      ApplyGuestIdentity(guests, "vm1", SomeIdentity(), milliseconds(200));
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
  EXPECT_LT(Clock::now() - t0, milliseconds(2000));
  EXPECT_EQ(guests.opened.size(), 1u);
}

TEST(ApplyGuestIdentityTest, AnUnreachableGuest) {
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    p.Exit(1);
  });
  guests.exec_status = Unavailable("VM vm1 did not answer on its control connection");
  Result<GuestIdentityReport> r =
      ApplyGuestIdentity(guests, "vm1", SomeIdentity(), milliseconds(1000));
  EXPECT_EQ(r.status().code(), Code::kUnavailable);

  PlayedGuests refusing([&](PlayedPipe& p) { p.Refuse(Unavailable("the connection went")); });
  r = ApplyGuestIdentity(refusing, "vm1", SomeIdentity(), milliseconds(1000));
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("the connection went"), std::string::npos);
}

TEST(ApplyGuestIdentityTest, AStepThatFailsGivesTheGuestsReason) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("warren-run identity: BLKFLSBUF on /dev/vdb: Permission denied\n", true);
    p.Exit(1);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("exit 1"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("BLKFLSBUF on /dev/vdb: Permission denied"),
            std::string::npos)
      << r.status().message();
}

TEST(ApplyGuestIdentityTest, AFailureAfterTheClockQuestion) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("clock?\n");
    p.ReadLine();
    p.Send("warren-run identity: clock_settime: Operation not permitted\n", true);
    p.Exit(1);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_EQ(r.status().code(), Code::kInternal);
  EXPECT_NE(r.status().message().find("clock_settime"), std::string::npos);
}

TEST(ApplyGuestIdentityTest, NotRootIsPermissionDenied) {
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    p.Send("warren-run identity: must run as root\n", true);
    p.Exit(5);
  });
  Result<GuestIdentityReport> r =
      ApplyGuestIdentity(guests, "vm1", SomeIdentity(), milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied) << r.status().ToString();
}

// The guest's whole identity conversation, answered well.
void PlayIdentity(PlayedPipe& p, const GuestIdentity& id) {
  p.Open();
  if (!ReadRequest(p, id)) return p.Exit(2);
  p.Send("clock?\n");
  if (!p.ReadLine()) return p.Exit(1);
  p.Send(ReportFor(id));
  p.Exit(0);
}

// The waiter at the identity port: the hello answered (after whatever the port held), then
// the identity as on a direct connection.
void PlayPortIdentity(PlayedPipe& p, const GuestIdentity& id, std::string before_answer = "") {
  p.Open();
  if (p.ReadLine() != "warren identity") return p.Exit(2);
  p.Send(before_answer + "identity here\n");
  if (!ReadRequest(p, id)) return p.Exit(2);
  p.Send("clock?\n");
  if (!p.ReadLine()) return p.Exit(1);
  p.Send(ReportFor(id));
  p.Exit(0);
}

TEST(ApplyGuestIdentityTest, AtTheIdentityPortWhileTheConnectionIsMade) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  id.port = true;
  for (std::string held : {"", "stale bytes\nidentity", "x"}) {
    PlayedGuests guests([&](PlayedPipe& p) { PlayPortIdentity(p, id, held); });
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << held << ": " << r.status().ToString();
    EXPECT_EQ(r->hostname, "clone-1");
    EXPECT_EQ(guests.opened, std::vector<std::string>{"vm1: port"});
    EXPECT_EQ(guests.connects, std::vector<std::string>{"vm1"});
    EXPECT_TRUE(guests.execs.empty());
  }
}

// A request that replaces the host key goes to the port's waiter only once the guest's sshd
// for the connection made beside it has answered (the guest's launcher gives that connection
// its spare sshd only while the key is the one the spare read); one that keeps the key (a
// pooled VM's hand-out) goes at once. A connection that fails before any answer lets it go
// when it fails.
TEST(ApplyGuestIdentityTest, TheKeyChangesOnlyOnceTheConnectionsSshdAnswered) {
  using Clock = std::chrono::steady_clock;
  GuestIdentity whole = SomeIdentity();  // from the seed: a key of its own
  GuestIdentity handout = SomeIdentity(/*with_mac=*/false);
  handout.handout = true;
  handout.seed_device.clear();
  handout.host_key = "KEY\n";
  handout.host_key_pub = "PUB\n";
  GuestIdentity keeps = handout;  // a pooled VM's: no key
  keeps.host_key.clear();
  keeps.host_key_pub.clear();
  struct Case {
    GuestIdentity id;
    bool waits;
  };
  for (Case c : {Case{whole, true}, Case{handout, true}, Case{keeps, false}}) {
    c.id.prepared = true;
    c.id.port = true;
    std::atomic<int64_t> request_ns{0}, answered_ns{0};
    auto since = [t0 = Clock::now()] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    };
    PlayedGuests guests([&](PlayedPipe& p) {
      p.Open();
      if (p.ReadLine() != "warren identity") return p.Exit(2);
      p.Send("identity here\n");
      if (!ReadRequest(p, c.id)) return p.Exit(2);
      request_ns = since();
      p.Send("clock?\n");
      if (!p.ReadLine()) return p.Exit(1);
      p.Send(ReportFor(c.id));
      p.Exit(0);
    });
    guests.connect_plays = [&](std::function<void()> answered) {
      // The client's banner on its way: until the request came (it must not, when it waits),
      // however slow the host, for at most a second.
      const auto until = Clock::now() + milliseconds(1000);
      while (request_ns.load() == 0 && Clock::now() < until) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      answered_ns = since();
      answered();
      std::this_thread::sleep_for(milliseconds(100));  // the key exchange
      return Status::Ok();
    };
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", c.id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << c.waits << ": " << r.status().ToString();
    ASSERT_GT(request_ns.load(), 0);
    if (c.waits) {
      EXPECT_GE(request_ns.load(), answered_ns.load());
    } else {
      EXPECT_LT(request_ns.load(), answered_ns.load());
    }
  }
  // The connection fails without an answer: the request goes then (the error says the
  // identity was taken, which needs the report), and that identity is of no use without the
  // connection.
  whole.prepared = true;
  whole.port = true;
  PlayedGuests failing([&](PlayedPipe& p) { PlayPortIdentity(p, whole); });
  failing.connect_plays = [](std::function<void()>) {
    std::this_thread::sleep_for(milliseconds(200));
    return Unavailable("VM vm1 did not answer on its control connection");
  };
  Result<GuestIdentityReport> r = ApplyGuestIdentity(failing, "vm1", whole, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("took its identity"), std::string::npos)
      << r.status().ToString();
}

TEST(ApplyGuestIdentityTest, NoWaiterAtThePortTakesTheConnectionOnceItIsUp) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  id.port = true;
  std::atomic<int> channels{0};
  std::atomic<bool> port_closed{false};
  {
    PlayedGuests guests([&](PlayedPipe& p) {
      if (channels++ == 0) {  // the port: read by nobody (a booted VM's copy)
        p.Open();
        port_closed = p.WaitHostClose(milliseconds(5000));
        return;
      }
      PlayIdentity(p, id);
    });
    const auto t0 = std::chrono::steady_clock::now();
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    // The connection was up at once: the waiter had its grace, then the socket took it.
    EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(300));
    EXPECT_EQ(guests.opened,
              (std::vector<std::string>{"vm1: port", "vm1: unix:/run/warren/identity.sock"}));
  }
  // The played port saw the host close it (its thread joined with `guests`: under ctest -j it
  // may not have run yet when the identity returned).
  EXPECT_TRUE(port_closed.load());

  // A port that cannot be dialled (a domain without it): the connection's routes at once.
  channels = 0;
  PlayedGuests no_port([&](PlayedPipe& p) {
    if (channels++ == 0) return p.Refuse(Unavailable("no such port"));
    PlayIdentity(p, id);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(no_port, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(no_port.opened.size(), 2u);
}

// On a loaded host the waiter gets longer to answer: the grace is stretched by the slowdown.
TEST(ApplyGuestIdentityTest, ALoadedHostGivesTheWaiterLonger) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  id.port = true;
  for (double slowdown : {1.0, 3.0}) {
    id.slowdown = slowdown;
    std::atomic<int> channels{0};
    PlayedGuests guests([&](PlayedPipe& p) {
      if (channels++ == 0) {  // the port's waiter, slow to answer: 600 ms
        p.Open();
        if (p.ReadLine() != "warren identity") return p.Exit(2);
        std::this_thread::sleep_for(milliseconds(600));
        p.Send("identity here\n");
        if (!ReadRequest(p, id)) return p.Exit(2);
        p.Send("clock?\n");
        if (!p.ReadLine()) return p.Exit(1);
        p.Send(ReportFor(id));
        return p.Exit(0);
      }
      PlayIdentity(p, id);
    });
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << slowdown << ": " << r.status().ToString();
    if (slowdown == 1.0) {  // 300 ms: gone over the connection
      EXPECT_EQ(guests.opened,
                (std::vector<std::string>{"vm1: port", "vm1: unix:/run/warren/identity.sock"}));
    } else {  // 900 ms: taken at the port
      EXPECT_EQ(guests.opened, std::vector<std::string>{"vm1: port"});
    }
  }
}

TEST(ApplyGuestIdentityTest, AtThePortWithoutAConnectionFails) {
  // Taken at the port, but the VM cannot be reached over SSH: it is of no use.
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  id.port = true;
  PlayedGuests guests([&](PlayedPipe& p) { PlayPortIdentity(p, id); });
  guests.connect_status = Unavailable("VM vm1 did not answer on its control connection");
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("took its identity"), std::string::npos)
      << r.status().ToString();
  // A port that says something else than the waiter's answer is not the waiter's: in one
  // burst, or in two however the second falls between the host's reads (all of it comes
  // before any waiter's answer).
  for (size_t second_burst : {size_t{0}, size_t{5000}}) {
    PlayedGuests junk([&](PlayedPipe& p) {
      if (p.port()) {
        p.SendWhenDrained(std::string(second_burst, 'j'));
        p.Send(std::string(second_burst == 0 ? 5000 : 100, 'j'));
        p.Open();
        p.WaitHostClose(milliseconds(5000));
        return;
      }
      PlayIdentity(p, id);
    });
    r = ApplyGuestIdentity(junk, "vm1", id, milliseconds(5000));
    ASSERT_TRUE(r.ok()) << second_burst << ": " << r.status().ToString();
    EXPECT_EQ(junk.opened.size(), 2u);
  }
}

TEST(ApplyGuestIdentityTest, APreparedVmIsHandedOverWithoutSudoOrRunnerCheck) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  PlayedGuests guests([&](PlayedPipe& p) { PlayIdentity(p, id); });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->hostname, "clone-1");
  EXPECT_TRUE(guests.execs.empty());  // the preparation checked the runner
  // Straight to the waiting process's socket: no command runs for it.
  EXPECT_EQ(guests.opened, std::vector<std::string>{"vm1: unix:/run/warren/identity.sock"});
}

TEST(ApplyGuestIdentityTest, APreparedVmWithNothingWaitingTakesItThroughSudo) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  std::atomic<int> channels{0};
  PlayedGuests guests([&](PlayedPipe& p) {
    int n = channels++;
    if (n == 0) return p.Refuse(Unavailable("connect failed"));  // no socket
    if (n == 1) {
      p.Open();
      p.Send("warren-run identity: must run as root\n", true);
      return p.Exit(5);
    }
    PlayIdentity(p, id);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(guests.opened,
            (std::vector<std::string>{"vm1: unix:/run/warren/identity.sock",
                                      "vm1: ~/.warren/bin/warren-run identity",
                                      "vm1: sudo -n ~/.warren/bin/warren-run identity"}));
  // Any other failure of the hand-over is the answer: the guest may have applied part.
  for (bool direct_fails : {true, false}) {
    channels = 0;
    PlayedGuests failing([&](PlayedPipe& p) {
      if (channels++ == 0 && !direct_fails) return p.Refuse(Unavailable("connect failed"));
      p.Open();
      p.Send("warren-run identity: apply-seed failed\n", true);
      p.Exit(1);
    });
    r = ApplyGuestIdentity(failing, "vm1", id, milliseconds(5000));
    EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
    EXPECT_NE(r.status().message().find("apply-seed failed"), std::string::npos)
        << r.status().ToString();
    EXPECT_EQ(failing.opened.size(), direct_fails ? 1u : 2u);
  }
}

// A waiter of an older runner takes descriptors only: it drops a direct connection unread,
// and keeps waiting for the hand-over command.
TEST(ApplyGuestIdentityTest, AWaiterThatDropsTheDirectConnectionTakesTheCommand) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  std::atomic<int> channels{0};
  PlayedGuests guests([&](PlayedPipe& p) {
    if (channels++ == 0) {
      p.Open();
      return p.Hangup();
    }
    PlayIdentity(p, id);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(guests.opened, (std::vector<std::string>{"vm1: unix:/run/warren/identity.sock",
                                                     "vm1: ~/.warren/bin/warren-run identity"}));
}

// Direct, the exit line is the exit status: without it, or malformed, the answer is refused.
TEST(ApplyGuestIdentityTest, ADirectAnswerWithoutItsExitLineIsRefused) {
  GuestIdentity id = SomeIdentity();
  id.prepared = true;
  for (std::string last : {"", "exit\n", "exit 0 now\n", "exit 999\n", "exit 0"}) {
    std::atomic<int> channels{0};
    PlayedGuests guests([&](PlayedPipe& p) {
      channels++;
      p.Open();
      if (!ReadRequest(p, id)) return p.Hangup();
      p.Send("clock?\n");
      if (!p.ReadLine()) return p.Hangup();
      p.Send(ReportFor(id) + last);
      p.Hangup();
    });
    Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
    EXPECT_EQ(r.status().code(), Code::kInternal) << last << ": " << r.status().ToString();
    EXPECT_EQ(channels.load(), 1) << last;  // it began: no second try
  }
}

TEST(PrepareGuestIdentityTest, LeavesARootProcessWaiting) {
  bool input_closed = false;
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    input_closed = !p.ReadLine().has_value();  // nothing to read: EOF at once
    p.Send(kGuestIdentityWaits);
    p.Exit(0);
  });
  EXPECT_TRUE(PrepareGuestIdentity(guests, "vm1", milliseconds(5000)).ok());
  EXPECT_TRUE(input_closed);
  EXPECT_EQ(guests.opened,
            std::vector<std::string>{"vm1: sudo -n ~/.warren/bin/warren-run identity-wait"});
}

TEST(PrepareGuestIdentityTest, FailuresSayWhy) {
  PlayedGuests refused([&](PlayedPipe& p) {
    p.Open();
    p.Send("sudo: a password is required\n", true);
    p.Exit(1);
  });
  Status st = PrepareGuestIdentity(refused, "vm1", milliseconds(5000));
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("exit 1): sudo: a password is required"), std::string::npos)
      << st.ToString();
  PlayedGuests odd([&](PlayedPipe& p) {
    p.Open();
    p.Send("\x1b[31mhello\n");
    p.Exit(0);
  });
  st = PrepareGuestIdentity(odd, "vm1", milliseconds(5000));
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_EQ(st.message().find('\x1b'), std::string::npos) << st.ToString();
  PlayedGuests mute([&](PlayedPipe& p) { p.WaitHostClose(milliseconds(5000)); });
  st = PrepareGuestIdentity(mute, "vm1", milliseconds(200));
  EXPECT_EQ(st.code(), Code::kTimeout) << st.ToString();
  PlayedGuests gone([&](PlayedPipe& p) { p.Refuse(Unavailable("the connection went")); });
  st = PrepareGuestIdentity(gone, "vm1", milliseconds(5000));
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
}

TEST(ApplyGuestIdentityTest, ExitZeroWithoutTheQuestionOrReportIsRefused) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests silent([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Exit(0);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(silent, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();

  PlayedGuests no_report([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("clock?\n");
    p.ReadLine();
    p.Exit(0);
  });
  r = ApplyGuestIdentity(no_report, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
}

TEST(ApplyGuestIdentityTest, JunkInsteadOfTheQuestionIsRefusedAtOnce) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("clock!\n");
    p.WaitHostClose(milliseconds(5000));
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("instead of the clock question"), std::string::npos);
}

TEST(ApplyGuestIdentityTest, AnEndlessReportIsCutOff) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("clock?\n");
    p.ReadLine();
    for (int i = 0; i < 100 && !p.WaitHostClose(milliseconds(0)); ++i) {
      p.Send(std::string(1000, 'x'));
    }
    p.WaitHostClose(milliseconds(5000));
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
  EXPECT_NE(r.status().message().find("over 512 bytes"), std::string::npos);
}

TEST(ApplyGuestIdentityTest, ALyingReportIsRefused) {
  GuestIdentity id = SomeIdentity();
  PlayedGuests guests([&](PlayedPipe& p) {
    p.Open();
    ReadRequest(p, id);
    p.Send("clock?\n");
    p.ReadLine();
    GuestIdentity other = id;
    other.mac = "52:54:00:00:00:01";
    p.Send(ReportFor(other));
    p.Exit(0);
  });
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(5000));
  EXPECT_EQ(r.status().code(), Code::kInternal) << r.status().ToString();
}

TEST(ApplyGuestIdentityTest, BadInputNeverReachesTheGuest) {
  PlayedGuests guests([&](PlayedPipe& p) { p.Open(); });
  GuestIdentity id = SomeIdentity();
  id.seed_device = "/dev/sda";
  Result<GuestIdentityReport> r = ApplyGuestIdentity(guests, "vm1", id, milliseconds(1000));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(guests.execs.empty());
  EXPECT_TRUE(guests.opened.empty());
}

}  // namespace
}  // namespace warren
