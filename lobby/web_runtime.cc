#include "lobby/web_runtime.h"

#include <string>
#include <utility>

#include "lobby/base/log.h"

namespace warren {

// The proxy's questions, answered by WebAccess one for one: the seam keeps lobby/web free
// of the store and the interpreter, and every rule in lobby/commands.
class WebRuntime::Gate final : public web::WebGate {
 public:
  explicit Gate(WebAccess& access) : access_(access) {}

  Result<WebSite> Resolve(std::string_view label) override { return access_.Resolve(label); }
  Result<WebVisitor> Admit(const WebSite& site, const WebCredentials& creds) override {
    return access_.Admit(site, creds);
  }
  Result<std::shared_ptr<GuestPipe>> Open(const WebSite& site, const WebVisitor& visitor,
                                          std::function<void()> notify) override {
    return access_.Open(site, visitor, std::move(notify));
  }
  Result<std::string> RedeemMagicLink(std::string_view token) override {
    return access_.RedeemMagicLink(token);
  }
  Result<std::string> IssueHostTicket(std::string_view domain_session,
                                      std::string_view host) override {
    return access_.IssueHostTicket(domain_session, host);
  }
  Result<std::string> RedeemHostTicket(std::string_view ticket, std::string_view host) override {
    return access_.RedeemHostTicket(ticket, host);
  }
  Result<WebVisitor> SessionVisitor(std::string_view session, std::string_view host) override {
    return access_.SessionVisitor(session, host);
  }
  Status EndSession(std::string_view session) override { return access_.EndSession(session); }

 private:
  WebAccess& access_;
};

Result<std::unique_ptr<WebRuntime>> WebRuntime::Start(web::WebServerOptions options,
                                                      Interpreter& interpreter,
                                                      std::chrono::milliseconds revalidate) {
  ServerInfo& info = interpreter.services().info;
  options.domain = info.domain;
  options.sign_in_command =
      "ssh -p " + std::to_string(info.ssh_port) + " " + info.ssh_host + " browser";
  std::unique_ptr<WebRuntime> rt(new WebRuntime());
  rt->access_ = std::make_unique<WebAccess>(interpreter);
  rt->gate_ = std::make_unique<Gate>(*rt->access_);
  rt->server_ = std::make_unique<web::WebServer>(std::move(options), rt->gate_.get());
  WARREN_RETURN_IF_ERROR(rt->server_->Start());
  info.web_scheme = rt->server_->https() ? "https" : "http";
  info.web_port = rt->server_->port();
  rt->sweeper_ = std::thread([raw = rt.get(), revalidate] { raw->Sweep(revalidate); });
  return rt;
}

void WebRuntime::Sweep(std::chrono::milliseconds every) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, every, [&] { return stopping_; })) {
    lock.unlock();
    const int cut = server_->Revalidate();
    if (cut > 0) LogInfo("web: cut " + std::to_string(cut) + " request(s) whose access ended");
    access_->FlushLinkUses();
    lock.lock();
  }
}

WebRuntime::~WebRuntime() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  if (server_ != nullptr) server_->Stop();
  server_.reset();
  gate_.reset();
  access_.reset();
}

}  // namespace warren
