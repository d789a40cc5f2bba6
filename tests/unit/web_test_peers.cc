#include "tests/unit/web_test_peers.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace warren::web::test {

SocketPipe::SocketPipe(int port, std::function<void()> notify)
    : notify_(std::move(notify)), wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  pump_ = std::thread([this, port] { Pump(port); });
}

SocketPipe::~SocketPipe() {
  Close();
  pump_.join();
  ::close(wake_fd_);
}

void SocketPipe::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void SocketPipe::Notify() {
  if (notify_) notify_();
}

bool SocketPipe::opening() {
  std::lock_guard<std::mutex> lock(mu_);
  return opening_;
}

Status SocketPipe::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

size_t SocketPipe::Write(std::string_view bytes) {
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || in_eof_ || !status_.ok()) return 0;
    n = std::min(bytes.size(), kBuffer - std::min(kBuffer, in_.size()));
    in_.append(bytes.substr(0, n));
  }
  Wake();
  return n;
}

void SocketPipe::CloseInput() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_eof_ = true;
  }
  Wake();
}

bool SocketPipe::PeekOutput(bool is_stderr, size_t max, std::string* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (is_stderr || out_.empty()) return false;
  bytes->assign(out_, 0, std::min(max, out_.size()));
  return true;
}

void SocketPipe::ConsumeOutput(bool is_stderr, size_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!is_stderr) out_.erase(0, n);
  }
  Wake();
}

GuestPipe::End SocketPipe::end() {
  std::lock_guard<std::mutex> lock(mu_);
  End e;
  e.output_eof = out_eof_ && out_.empty();
  e.closed = e.output_eof;
  return e;
}

void SocketPipe::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  Wake();
}

void SocketPipe::Pump(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      opening_ = false;
      status_ = Unavailable("nothing in the VM accepted a connection on port " +
                            std::to_string(port) + " (" + std::strerror(errno) + ")");
    }
    ::close(fd);
    Notify();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    opening_ = false;
  }
  Notify();
  bool wrote_eof = false;
  char buf[64 * 1024];
  for (;;) {
    bool want_read, want_write;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) break;
      want_read = !out_eof_ && out_.size() < kBuffer;
      want_write = !in_.empty();
      if (in_.empty() && in_eof_ && !wrote_eof) {
        ::shutdown(fd, SHUT_WR);
        wrote_eof = true;
      }
    }
    pollfd p[2] = {
        {fd, static_cast<short>((want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0)), 0},
        {wake_fd_, POLLIN, 0}};
    if (::poll(p, 2, 1000) < 0 && errno != EINTR) break;
    if (p[1].revents != 0) {
      uint64_t v;
      (void)!::read(wake_fd_, &v, sizeof v);
    }
    bool changed = false;
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = want_read ? ::recv(fd, buf, sizeof buf, MSG_DONTWAIT) : -1;
      std::lock_guard<std::mutex> lock(mu_);
      if (n > 0) {
        out_.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (n < 0 && want_read && errno != EAGAIN)) {
        out_eof_ = true;
      }
      changed = true;
    }
    if (p[0].revents & POLLOUT) {
      std::lock_guard<std::mutex> lock(mu_);
      ssize_t n = ::send(fd, in_.data(), in_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) in_.erase(0, static_cast<size_t>(n));
      changed = true;
    }
    if (changed) Notify();
  }
  ::close(fd);
}

// ---- FakeWebGate

void FakeWebGate::AddVm(Vm vm) {
  std::lock_guard<std::mutex> lock(mu_);
  vms_[vm.name] = std::move(vm);
}

void FakeWebGate::SetPublic(const std::string& name, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  vms_[name].is_public = on;
}

void FakeWebGate::SetRunning(const std::string& name, bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  vms_[name].running = on;
}

std::string FakeWebGate::Fresh(const char* kind) {
  return std::string(kind) + "-secret-" + std::to_string(++counter_);
}

std::string FakeWebGate::AddMagicLink(const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string t = Fresh("magic");
  magic_[t] = who;
  return t;
}

void FakeWebGate::AddBearer(const std::string& token, const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  bearer_[token] = who;
}

void FakeWebGate::AddShareLink(const std::string& token, const std::string& vm_name) {
  std::lock_guard<std::mutex> lock(mu_);
  links_[token] = vm_name;
}

void FakeWebGate::RemoveShareLink(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  links_.erase(token);
}

const FakeWebGate::Vm* FakeWebGate::FindVm(const std::string& id) {
  for (auto& [name, vm] : vms_) {
    if (vm.id == id) return &vm;
  }
  return nullptr;
}

Result<WebSite> FakeWebGate::Resolve(std::string_view label) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string l(label);
  auto it = vms_.find(l);
  if (it != vms_.end())
    return WebSite{it->second.id, it->second.name, it->second.route_port, false};
  size_t p = l.rfind("-p");
  if (p != std::string::npos) {
    auto owner = vms_.find(l.substr(0, p));
    std::string digits = l.substr(p + 2);
    if (owner != vms_.end() && !digits.empty() &&
        digits.find_first_not_of("0123456789") == std::string::npos && digits.size() == 4) {
      int port = std::stoi(digits);
      if (port >= 3000 && port <= 9999) {
        return WebSite{owner->second.id, owner->second.name, port, true};
      }
    }
  }
  return NotFound("no such site: " + l + "." + domain);
}

Result<WebVisitor> FakeWebGate::Admit(const WebSite& site, const WebCredentials& creds) {
  std::lock_guard<std::mutex> lock(mu_);
  const Vm* vm = FindVm(site.vm_id);
  if (vm == nullptr) return NotFound("no such site");
  std::string host =
      site.vm_name + (site.owner_only ? "-p" + std::to_string(site.port) : "") + "." + domain;
  std::string who;
  if (!creds.session.empty()) {
    auto s = sessions_.find(creds.session);
    if (s != sessions_.end() && s->second.host == host) who = s->second.who;
  }
  if (who.empty() && !creds.bearer.empty()) {
    auto b = bearer_.find(creds.bearer);
    if (b != bearer_.end()) who = b->second;
  }
  if (!who.empty() && who == vm->owner) return WebVisitor{who};
  if (site.owner_only) {
    if (!who.empty()) return PermissionDenied("only the owner sees this port; you are " + who);
    return Unauthenticated("sign in");
  }
  if (vm->is_public) return WebVisitor{who.empty() ? "public" : who};
  if (!who.empty() && vm->shared_with.count(who) > 0) return WebVisitor{who};
  if (!creds.share_link.empty()) {
    auto l = links_.find(creds.share_link);
    if (l != links_.end() && l->second == vm->name) return WebVisitor{"link:L1"};
  }
  if (!who.empty()) return PermissionDenied(vm->name + " is not shared with " + who);
  return Unauthenticated("sign in");
}

Result<std::shared_ptr<GuestPipe>> FakeWebGate::Open(const WebSite& site, const WebVisitor&,
                                                     std::function<void()> notify) {
  ++opens_;
  int port = 1;  // nobody listens there: refused
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Vm* vm = FindVm(site.vm_id);
    if (vm == nullptr) return NotFound("no such VM");
    if (!vm->running) {
      return Unavailable("VM " + vm->name + " is stopped; start it with: ssh HOST start " +
                         vm->name);
    }
    auto it = vm->ports.find(site.port);
    if (it != vm->ports.end()) port = it->second;
  }
  return std::shared_ptr<GuestPipe>(std::make_shared<SocketPipe>(port, std::move(notify)));
}

Result<std::string> FakeWebGate::RedeemMagicLink(std::string_view token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = magic_.find(std::string(token));
  if (it == magic_.end()) return Unauthenticated("this sign-in link was used or has expired");
  std::string s = Fresh("session");
  sessions_[s] = Session{it->second, domain, s};
  magic_.erase(it);
  return s;
}

Result<std::string> FakeWebGate::IssueHostTicket(std::string_view domain_session,
                                                 std::string_view host) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(std::string(domain_session));
  if (it == sessions_.end() || it->second.host != domain) return Unauthenticated("signed out");
  std::string t = Fresh("ticket");
  tickets_[t] = {it->second.root, std::string(host)};
  return t;
}

Result<std::string> FakeWebGate::RedeemHostTicket(std::string_view ticket, std::string_view host) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tickets_.find(std::string(ticket));
  if (it == tickets_.end() || it->second.second != host) return Unauthenticated("no ticket");
  auto root = sessions_.find(it->second.first);
  tickets_.erase(it);
  if (root == sessions_.end()) return Unauthenticated("signed out");
  std::string s = Fresh("hostsession");
  sessions_[s] = Session{root->second.who, std::string(host), root->second.root};
  return s;
}

Result<WebVisitor> FakeWebGate::SessionVisitor(std::string_view session, std::string_view host) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(std::string(session));
  if (it == sessions_.end() || it->second.host != host) return Unauthenticated("not signed in");
  return WebVisitor{it->second.who};
}

Status FakeWebGate::EndSession(std::string_view session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(std::string(session));
  if (it == sessions_.end()) return Status::Ok();
  std::string root = it->second.root;
  for (auto s = sessions_.begin(); s != sessions_.end();) {
    s = s->second.root == root ? sessions_.erase(s) : std::next(s);
  }
  return Status::Ok();
}

}  // namespace warren::web::test
