// One connection of the web proxy as its worker holds it (web_server.cc admits and counts it,
// web_exchange.cc serves it). Internal to lobby/web.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lobby/commands/web_visit.h"
#include "lobby/relay/byte_stream.h"
#include "lobby/relay/http_head.h"
#include "lobby/web/web_names.h"
#include "lobby/web/web_server.h"

namespace warren::web {

struct WebServer::Conn {
  uint64_t id = 0;
  std::string peer;  // the visitor's address
  bool https = false;
  // The visitor's side: the socket (kept for Cancel) and what is spoken over it (TLS on top,
  // or the same stream); the VM's channel once open. Set and cancelled under WebServer::mu_.
  std::shared_ptr<relay::ByteStream> down_base, down, up;
  bool cancelled = false;
  std::string site_counted;  // the VM id counted in per_site_, once it was

  relay::RequestHead req;
  std::string rest;  // bytes read past the head
  WebHost host;
  WebSite site;
  WebCredentials creds;  // what admitted this request, asked again by Revalidate

  // The log line.
  std::string visitor = "-";
  int status = 0;
  uint64_t up_bytes = 0, down_bytes = 0;
  std::string error;

  // Whether another request may follow on this connection (set per answer).
  bool keep_alive = false;

  // Before the next request on a kept-alive connection: everything of the last one goes.
  void Reset() {
    req = {};
    rest.clear();
    host = {};
    site = {};
    creds = {};
    visitor = "-";
    status = 0;
    up_bytes = down_bytes = 0;
    error.clear();
    keep_alive = false;
  }
};

}  // namespace warren::web
