// MetricsHandler: GET /metrics, the Metrics registry in Prometheus text format, for
// operators. It asks no credential, so `warren serve` mounts it only on a listener of its
// own (--metrics, loopback by default), never on --http where users and agents arrive; the
// figures name no user or VM. Thread-safe.
#pragma once

#include <string>

#include "bridge/http_handler.h"
#include "bridge/metrics.h"

namespace warren {

class MetricsHandler final : public HttpHandler {
 public:
  // `metrics` must outlive the handler.
  explicit MetricsHandler(const Metrics& metrics) : metrics_(metrics) {}

  bool Matches(std::string_view path) const override { return path == "/metrics"; }
  std::string route() const override { return "/metrics"; }
  size_t max_body_bytes() const override { return 0; }
  void Handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) override {
    if (request.method != "GET" && request.method != "HEAD") {
      return RespondJsonError(*responder, 405, "use GET", {{"Allow", "GET, HEAD"}});
    }
    responder->Respond(200,
                       {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"},
                        {"Cache-Control", "no-store"}},
                       metrics_.Render());
  }

 private:
  const Metrics& metrics_;
};

}  // namespace warren
