#include "lobby/integrations/endpoint_sink.h"

#include <utility>

#include "lobby/relay/byte_stream.h"

namespace warren::integrations {

std::function<void()> IntegrationEndpointSink::Accept(std::string_view vm_id, bool https,
                                                      std::shared_ptr<GuestPipe> pipe) {
  auto stream = std::make_unique<GuestPipeStream>(std::move(pipe));
  // The stream closes the pipe before it goes (also when Serve drops it at once), and a
  // closed pipe never calls its notify again, nor installs one: the raw pointer outlives
  // every call.
  GuestPipeStream* raw = stream.get();
  proxy_->Serve(std::string(vm_id), https, std::move(stream));
  return [raw] { raw->Notify(); };
}

}  // namespace warren::integrations
