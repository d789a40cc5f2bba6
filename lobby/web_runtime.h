// WebRuntime: the web proxy (lobby/web) joined to the interpreter — the WebGate it asks,
// answered by WebAccess (lobby/commands/web_access.h, the one home of web access policy),
// and the listener on `serve --web`. Once listening, it tells the interpreter's ServerInfo
// the scheme and port browsers reach it on, so every command prints a URL that works (and,
// with `--web off`, none). A sweeper thread asks the gate again, every `revalidate`, about
// every request being forwarded (a download, server-sent events, a WebSocket), so taking
// access away — set-private, a share or link removed, a key or token removed, browser
// --revoke — also ends what is already open, within that period; new requests are checked
// at once anyway. Lives beside main.cc, the one place that joins the modules.
// Threads: Start and the destructor on the main thread; the gate from the proxy's workers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "lobby/base/status.h"
#include "lobby/commands/interpreter.h"
#include "lobby/commands/web_access.h"
#include "lobby/web/web_server.h"

namespace warren {

class WebRuntime {
 public:
  // Starts the proxy with `options` (its domain and sign-in hint are set here from
  // `interpreter`'s ServerInfo) and records its scheme and port there.
  static Result<std::unique_ptr<WebRuntime>> Start(
      web::WebServerOptions options, Interpreter& interpreter,
      std::chrono::milliseconds revalidate = std::chrono::seconds(2));
  ~WebRuntime();  // stops the proxy, then writes the share-link uses still pending

  uint16_t port() const { return server_->port(); }
  // The listener's new TLS certificate and key (SIGHUP): web::WebServer::ReloadTls.
  Status ReloadTls(const std::string& cert_file, const std::string& key_file) {
    return server_->ReloadTls(cert_file, key_file);
  }
  bool https() const { return server_->https(); }

 private:
  class Gate;
  WebRuntime() = default;
  void Sweep(std::chrono::milliseconds every);

  std::unique_ptr<WebAccess> access_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<web::WebServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread sweeper_;
};

}  // namespace warren
