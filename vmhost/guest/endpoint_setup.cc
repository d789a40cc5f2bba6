#include "vmhost/guest/endpoint_setup.h"

#include <algorithm>
#include <cctype>

#include "vmhost/guest/runner_protocol.h"

namespace warren::guest {

bool ValidEndpointName(const std::string& name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
  });
}

std::string EndpointSetupCommand(const GuestEndpoint& endpoint,
                                 const std::vector<std::string>& names, bool want_ports) {
  // The domain and address come from the server's flags; anything odd in them keeps the
  // block empty rather than reach the script.
  auto plain = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':';
    });
  };
  std::string hosts_line;
  for (const std::string& n : names) {
    if (ValidEndpointName(n) && plain(endpoint.domain) && plain(endpoint.address)) {
      hosts_line += " " + n + "." + endpoint.domain;
    }
  }
  std::string script = "exec 1>&2\nfail=0\n";
  if (want_ports) {
    // sshd binds a forward's own address only with GatewayPorts clientspecified (else its
    // loopback ones, 127.0.0.1:80 among them): a VM from an older image gets it here, once,
    // before anything else (the forwards wait for the new connection).
    script +=
        "c=/etc/warren/sshd_config\n"
        "if [ -f $c ] && ! grep -q '^GatewayPorts clientspecified' $c; then\n"
        "echo 'GatewayPorts clientspecified' >> $c && exit " +
        std::to_string(kEndpointSetupReconnect) + "\nfi\n";
  }
  int low = std::min(endpoint.http_port, endpoint.https_port);
  if (want_ports && low < 1024) {
    // dev's sshd binds the endpoint's ports for us; below 1024 needs the sysctl lowered.
    std::string p = std::to_string(low);
    script +=
        "f=/proc/sys/net/ipv4/ip_unprivileged_port_start\n"
        "cur=$(cat $f 2>/dev/null || echo 1024)\n"
        "if [ \"$cur\" -gt " +
        p + " ]; then echo " + p +
        " > $f || { echo 'cannot lower ip_unprivileged_port_start'; fail=1; }; fi\n";
  }
  // The block is rewritten in place (cat >, not mv): /etc/hosts keeps its inode and mode.
  script += std::string("t=/etc/hosts.warren-int.$$\n") + "{ sed '/^" + kHostsBegin + "$/,/^" +
            kHostsEnd + "$/d' /etc/hosts";
  if (!hosts_line.empty()) {
    script += "; echo '" + std::string(kHostsBegin) + "'; echo '" + endpoint.address + hosts_line +
              "'; echo '" + kHostsEnd + "'";
  }
  script +=
      "; } > $t && cat $t > /etc/hosts || { echo 'cannot rewrite /etc/hosts'; fail=1; }\n"
      "rm -f $t\n";
  if (!endpoint.ca_pem.empty()) {
    // Only where there is a CA store. Kept in /usr/local/share/ca-certificates (so every
    // later update-ca-certificates keeps it), and added to the bundle and the hashed
    // directory directly: update-ca-certificates itself takes over 30 s under TCG.
    script +=
        "d=/usr/local/share/ca-certificates\n"
        "b=/etc/ssl/certs/ca-certificates.crt\n"
        "if [ -d $d ] && [ -f $b ]; then\n"
        "cat > $d/warren-int-ca.crt <<'WARREN_CA_EOF'\n" +
        endpoint.ca_pem + (endpoint.ca_pem.back() == '\n' ? "" : "\n") +
        "WARREN_CA_EOF\n"
        "k=\"$(sed -n 2p $d/warren-int-ca.crt)\"\n"
        "grep -qF \"$k\" $b || cat $d/warren-int-ca.crt >> $b || "
        "{ echo 'cannot add the CA to the bundle'; fail=1; }\n"
        "h=$(openssl x509 -hash -noout -in $d/warren-int-ca.crt 2>/dev/null) && "
        "ln -sf $d/warren-int-ca.crt /etc/ssl/certs/$h.0\n"
        "fi\n";
  }
  script += "exit $fail\n";
  return "sudo -n /bin/sh -c " + ShellQuote(script) + " </dev/null";
}

}  // namespace warren::guest
