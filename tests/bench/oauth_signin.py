#!/usr/bin/python3
"""OAuth sign-in cost in one run, against baselines measured alongside it:

  - a whole sign-in (register, sign-in page, `ssh HOST authorize CODE` over OpenSSH, one
    status poll, code redemption) vs one plain `ssh HOST whoami` (what the person's approval
    costs at least);
  - MCP initialize with an OAuth access token vs with a `ssh-key generate-api-key` token
    (the audience check's cost);
  - a refresh-token rotation (one write transaction) vs GET /healthz.

Starts its own lobby-only `warren serve` and removes everything it made. Usage:
  tests/bench/oauth_signin.py [--runs 15]
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import oauth_flow  # noqa: E402
import warren_harness as h  # noqa: E402

REDIRECT = "http://127.0.0.1:9/cb"


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


class Bench(h.LobbyTestCase):
    def runTest(self):
        pass

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        # Every run registers a client from one address: above the per-source default.
        return super().start_server(data_dir, admin_key,
                                    list(extra_args) + ["--oauth-register-rate", "6000"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    runs = ap.parse_args().runs
    Bench.setUpClass()
    b = Bench()
    try:
        web = oauth_flow.Http(b.server.http_port)

        def sign_in():
            client_id = web.register([REDIRECT], "Bench")
            verifier, challenge = oauth_flow.pkce()
            _, _, _, code, secret = web.open_page(client_id, REDIRECT, challenge)
            b.ssh_ok(b.admin, "authorize", code)
            q = oauth_flow.code_from_redirect(web.poll(secret)["redirect"])
            status, _, tokens = web.redeem(client_id, q["code"], verifier, REDIRECT)
            assert status == 200, tokens
            return client_id, tokens

        results = {"signin": [], "ssh": [], "mcp_oauth": [], "mcp_api": [], "refresh": [],
                   "healthz": []}
        client_id, tokens = sign_in()
        api = b.ssh_ok(b.admin, "ssh-key", "generate-api-key", "--label", "bench").stdout.strip()
        refresh = tokens["refresh_token"]
        for _ in range(runs):
            results["signin"].append(timed(sign_in))
            results["ssh"].append(timed(lambda: b.ssh_ok(b.admin, "whoami")))
            # Alternate which goes first, so neither always follows the ssh call.
            pair = [("mcp_oauth", tokens["access_token"]), ("mcp_api", api)]
            for name, token in (pair if len(results["ssh"]) % 2 else pair[::-1]):
                results[name].append(timed(
                    lambda: web.mcp_initialize(token)[0] == 200 or 1 / 0))

            def rotate():
                nonlocal refresh
                status, _, body = web.refresh(client_id, refresh)
                assert status == 200, body
                refresh = body["refresh_token"]
            results["refresh"].append(timed(rotate))
            results["healthz"].append(timed(lambda: web.request("GET", "/healthz")))
        med = {k: statistics.median(v) for k, v in results.items()}
        print("runs: %d (medians, ms)" % runs)
        print("sign-in, whole flow:        %7.1f   vs ssh whoami %7.1f   ratio %.2f"
              % (med["signin"], med["ssh"], med["signin"] / med["ssh"]))
        print("MCP initialize, OAuth token:%7.1f   vs API token  %7.1f   ratio %.2f"
              % (med["mcp_oauth"], med["mcp_api"], med["mcp_oauth"] / med["mcp_api"]))
        print("refresh rotation:           %7.1f   vs /healthz   %7.1f   ratio %.2f"
              % (med["refresh"], med["healthz"], med["refresh"] / med["healthz"]))
    finally:
        Bench.doClassCleanups()


if __name__ == "__main__":
    main()
