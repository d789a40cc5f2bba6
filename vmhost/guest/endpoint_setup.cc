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
  // stdout is kept for the one report line (fd 3); everything else goes to stderr.
  std::string script = "exec 3>&1 1>&2\nfail=0\n";
  if (want_ports) {
    // sshd binds a forward's own address only with GatewayPorts clientspecified (else its
    // loopback ones, 127.0.0.1 among them): a VM from an older image gets it here, once,
    // before anything else (the forwards wait for the new connection).
    script +=
        "c=/etc/warren/sshd_config\n"
        "if [ -f $c ] && ! grep -q '^GatewayPorts clientspecified' $c; then\n"
        "echo 'GatewayPorts clientspecified' >> $c && exit " +
        std::to_string(kEndpointSetupReconnect) + "\nfi\n";
  }
  const std::string table = kNftTable, chain = kIptablesChain;
  // Removes our redirect, whichever tool made it (best effort: nothing to remove is fine).
  const std::string unredirect =
      "if command -v nft >/dev/null 2>&1; then nft delete table ip " + table +
      " 2>/dev/null; fi\n"
      "if command -v iptables >/dev/null 2>&1; then\n"
      "iptables -t nat -D OUTPUT -j " +
      chain +
      " 2>/dev/null\n"
      "iptables -t nat -F " +
      chain + " 2>/dev/null; iptables -t nat -X " + chain + " 2>/dev/null\nfi\n";
  bool redirect = want_ports && plain(endpoint.address) && endpoint.http_listen_port != 0 &&
                  endpoint.https_listen_port != 0;
  if (redirect) {
    // The guest's own connections to address:80/:443 are redirected (nat OUTPUT, DNAT to
    // the same address) to the high ports the forwards listen on, so nothing of ours holds
    // 80 or 443 and a service in the VM may bind them. Replaced whole each time, in one
    // transaction (nft: create, delete, add in one -f; iptables: restore of our chain with
    // --noflush, the jump added only when -C does not find it): never doubled, never a
    // moment without the rules.
    const std::string a = endpoint.address;
    const std::string hp = std::to_string(endpoint.http_port),
                      sp = std::to_string(endpoint.https_port),
                      hl = std::to_string(endpoint.http_listen_port),
                      sl = std::to_string(endpoint.https_listen_port);
    script +=
        "nat=\n"
        "if command -v nft >/dev/null 2>&1; then\n"
        "nft -f - <<'WARREN_NFT_EOF' && nat=nft\n"
        "table ip " +
        table +
        "\n"
        "delete table ip " +
        table +
        "\n"
        "table ip " +
        table +
        " {\n"
        "chain output {\n"
        "type nat hook output priority -100; policy accept;\n"
        "ip daddr " +
        a + " tcp dport " + hp + " dnat to " + a + ":" + hl +
        "\n"
        "ip daddr " +
        a + " tcp dport " + sp + " dnat to " + a + ":" + sl +
        "\n"
        "}\n}\n"
        "WARREN_NFT_EOF\n"
        "fi\n"
        "if [ -z \"$nat\" ] && command -v iptables >/dev/null 2>&1 && "
        "command -v iptables-restore >/dev/null 2>&1; then\n"
        "iptables-restore --noflush <<'WARREN_IPT_EOF' && { iptables -t nat -C OUTPUT -j " +
        chain + " 2>/dev/null || iptables -t nat -I OUTPUT -j " + chain +
        "; } && nat=iptables\n"
        "*nat\n"
        ":" +
        chain +
        " - [0:0]\n"
        "-A " +
        chain + " -d " + a + "/32 -p tcp -m tcp --dport " + hp + " -j DNAT --to-destination " + a +
        ":" + hl +
        "\n"
        "-A " +
        chain + " -d " + a + "/32 -p tcp -m tcp --dport " + sp + " -j DNAT --to-destination " + a +
        ":" + sl +
        "\n"
        "COMMIT\n"
        "WARREN_IPT_EOF\n"
        "fi\n"
        "if [ -n \"$nat\" ]; then echo \"warren-endpoint redirect $nat\" >&3\n"
        "else\n"
        "why='no nft or iptables in the guest'\n"
        "if command -v nft >/dev/null 2>&1 || command -v iptables >/dev/null 2>&1; then "
        "why='the NAT redirect failed'; fi\n" +
        // A redirect left from before would lead the ports to where nothing listens now.
        unredirect + "fi\n";
  } else if (!want_ports) {
    script += unredirect;
  }
  int low = std::min(endpoint.http_port, endpoint.https_port);
  if (want_ports && low < 1024) {
    // Without the redirect dev's sshd binds the endpoint's ports for us; below 1024 needs
    // the sysctl lowered.
    std::string p = std::to_string(low);
    script += std::string(redirect ? "if [ -z \"$nat\" ]; then\n" : "") +
              "f=/proc/sys/net/ipv4/ip_unprivileged_port_start\n"
              "cur=$(cat $f 2>/dev/null || echo 1024)\n"
              "if [ \"$cur\" -gt " +
              p + " ]; then echo " + p +
              " > $f || { echo 'cannot lower ip_unprivileged_port_start'; fail=1; }; fi\n" +
              (redirect ? "fi\n" : "");
  }
  if (want_ports && redirect) {
    script += "[ -n \"$nat\" ] || echo \"warren-endpoint direct $why\" >&3\n";
  } else if (want_ports) {
    script += "echo 'warren-endpoint direct no redirect configured' >&3\n";
  }
  // Only a change is written, and atomically: the new file (a copy, so it keeps the mode and
  // owner) is renamed over /etc/hosts, so a lookup or a reader in the guest never sees it
  // empty or half-written (a symlinked /etc/hosts is rewritten through the link instead).
  script += std::string("t=/etc/hosts.warren-int.$$\n") + "cp -p /etc/hosts $t && { sed '/^" +
            kHostsBegin + "$/,/^" + kHostsEnd + "$/d' /etc/hosts";
  if (!hosts_line.empty()) {
    script += "; echo '" + std::string(kHostsBegin) + "'; echo '" + endpoint.address + hosts_line +
              "'; echo '" + kHostsEnd + "'";
  }
  script +=
      "; } > $t && { cmp -s $t /etc/hosts || if [ -L /etc/hosts ]; then cat $t > /etc/hosts; "
      "else mv -f $t /etc/hosts; fi; } || { echo 'cannot rewrite /etc/hosts'; fail=1; }\n"
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

EndpointSetupReport ParseEndpointSetupReport(std::string_view text) {
  // The guest is untrusted: only its first line counts, bounded; either mode is harmless
  // (it picks between two sets of ports the host offered).
  EndpointSetupReport r;
  std::string_view line = text.substr(0, std::min(text.find('\n'), size_t{512}));
  constexpr std::string_view kRedirect = "warren-endpoint redirect";
  constexpr std::string_view kDirect = "warren-endpoint direct";
  std::string_view rest;
  if (line.rfind(kRedirect, 0) == 0) {
    r.mode = EndpointSetupReport::Mode::kRedirect;
    rest = line.substr(kRedirect.size());
  } else if (line.rfind(kDirect, 0) == 0) {
    r.mode = EndpointSetupReport::Mode::kDirect;
    rest = line.substr(kDirect.size());
  }
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  r.detail = SanitizeGuestText(rest, 200);
  if (r.mode == EndpointSetupReport::Mode::kDirect && r.detail.empty()) {
    r.detail = "no redirect in the guest";
  }
  return r;
}

}  // namespace warren::guest
