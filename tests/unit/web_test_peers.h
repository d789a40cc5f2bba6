// Test peers for the web proxy: a WebGate whose rules the test sets (sites, sessions bound to
// hosts, tokens, share links, public VMs, magic links and tickets), and a GuestPipe over a
// loopback TCP connection to a "guest" server of the test's own (tests/unit/web_peers.py),
// bounded both ways and notify-driven like the real channel. Thread-safe where the proxy
// calls them.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lobby/web/web_gate.h"

namespace warren::web::test {

// A GuestPipe to 127.0.0.1:port. A refused connect fails the pipe as the guest control does
// ("nothing in the VM accepted a connection on port P").
class SocketPipe final : public GuestPipe {
 public:
  static constexpr size_t kBuffer = 256 * 1024;
  SocketPipe(int port, std::function<void()> notify);
  ~SocketPipe() override;

  bool opening() override;
  Status status() override;
  size_t Write(std::string_view bytes) override;
  void CloseInput() override;
  void Resize(const GuestTerminal&) override {}
  void Signal(std::string_view) override {}
  bool PeekOutput(bool is_stderr, size_t max, std::string* bytes) override;
  void ConsumeOutput(bool is_stderr, size_t n) override;
  End end() override;
  void Close() override;

 private:
  void Pump(int port);
  void Wake();
  void Notify();

  std::function<void()> notify_;
  int wake_fd_ = -1;
  std::mutex mu_;
  bool opening_ = true;
  Status status_;
  std::string in_, out_;  // to the server, from it
  bool in_eof_ = false, out_eof_ = false, closed_ = false;
  std::thread pump_;
};

class FakeWebGate final : public WebGate {
 public:
  // ---- The rules.
  struct Vm {
    std::string id, name, owner;  // owner: "user:alice"
    int route_port = 8000;
    bool running = true;
    bool is_public = false;
    std::set<std::string> shared_with;  // "user:bob"
    // The guest's ports → the loopback port of the test's server (absent: refused).
    std::map<int, int> ports;
  };
  void AddVm(Vm vm);
  void SetPublic(const std::string& name, bool on);
  void SetRunning(const std::string& name, bool on);
  // A magic link for `who`; returns its token.
  std::string AddMagicLink(const std::string& who);
  void AddBearer(const std::string& token, const std::string& who);
  void AddShareLink(const std::string& token, const std::string& vm_name);
  void RemoveShareLink(const std::string& token);

  // ---- What the proxy asked.
  int opens() const { return opens_.load(); }

  // ---- WebGate.
  Result<WebSite> Resolve(std::string_view label) override;
  Result<WebVisitor> Admit(const WebSite& site, const WebCredentials& creds) override;
  Result<std::shared_ptr<GuestPipe>> Open(const WebSite& site, const WebVisitor& visitor,
                                          std::function<void()> notify) override;
  Result<std::string> RedeemMagicLink(std::string_view token) override;
  Result<std::string> IssueHostTicket(std::string_view domain_session,
                                      std::string_view host) override;
  Result<std::string> RedeemHostTicket(std::string_view ticket, std::string_view host) override;
  Result<WebVisitor> SessionVisitor(std::string_view session, std::string_view host) override;
  Status EndSession(std::string_view session) override;

  std::string domain = "warren.localhost";

 private:
  struct Session {
    std::string who, host, root;  // root: the domain session it came from
  };
  std::string Fresh(const char* kind);
  const Vm* FindVm(const std::string& id);

  std::mutex mu_;
  int counter_ = 0;
  std::map<std::string, Vm> vms_;  // by name
  std::map<std::string, std::string> magic_, bearer_, links_;
  std::map<std::string, Session> sessions_;
  std::map<std::string, std::pair<std::string, std::string>> tickets_;  // → (root, host)
  std::atomic<int> opens_{0};
};

}  // namespace warren::web::test
