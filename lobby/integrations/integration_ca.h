// IntegrationCa: warren's own certificate authority for the integrations endpoint, so a VM
// can speak https:// to NAME.<int-domain>. The CA key and certificate live in the data
// directory (integrations-ca.key, mode 0600; integrations-ca.crt), made at first start and
// reused after; the proxy's certificate (*.<int-domain>, ECDSA P-256) is made in memory at
// every start, signed by the CA, so a changed --int-domain needs nothing on disk.
// Thread-safe once made (immutable).
#pragma once

#include <string>

#include "lobby/base/status.h"
#include "lobby/relay/tls_stream.h"

namespace warren::integrations {

using relay::SslCtxPtr;

struct IntegrationCa {
  std::string ca_pem;  // the CA certificate, for guests to trust
  SslCtxPtr server;    // TLS server context with the *.<domain> certificate and its chain
};

// Loads (or, when neither file exists, makes) DATA_DIR/integrations-ca.{key,crt}, then
// issues the certificate for `domain`. Internal when only one of the files exists or they
// cannot be read or written.
Result<IntegrationCa> LoadOrCreateIntegrationCa(const std::string& data_dir,
                                                const std::string& domain);

}  // namespace warren::integrations
