#!/usr/bin/python3
"""OAuth 2.1 sign-in for MCP clients, approved over SSH, against the real `warren serve`:
discovery (RFC 9728, 8414), registration (RFC 7591), the code flow with PKCE S256, the
resource bound into the token (RFC 8707), rotating refresh tokens, the token as an API
token (ssh-key list/remove), and every refusal the issue lists, each with nothing issued."""
import json
import time

import oauth_flow
import warren_harness as h

REDIRECT = "http://127.0.0.1:9/callback"


class SignInTestCase(h.LobbyTestCase):
    """A server and the steps of a sign-in, for the test classes below."""
    EXTRA = ()

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.web = oauth_flow.Http(cls.server.http_port)

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        return super().start_server(data_dir, admin_key, list(extra_args) + list(cls.EXTRA))

    # ---- helpers

    def labels(self):
        return {l["label"]: l for l in self.ssh_json(self.admin, "ssh-key", "list")["api_tokens"]}

    def approve(self, code, *flags, key=None):
        return self.ssh_json(key or self.admin, "authorize", code, *flags)

    def start(self, redirect=REDIRECT, name="Test Client", client_id=None):
        client_id = client_id or self.web.register([redirect], name)
        verifier, challenge = oauth_flow.pkce()
        status, _, _, code, secret = self.web.open_page(client_id, redirect, challenge)
        self.assertEqual(status, 200)
        self.assertTrue(code and secret)
        return client_id, verifier, code, secret

    def approved_code(self, secret):
        poll = self.web.poll(secret)
        self.assertEqual(poll["status"], "approved", poll)
        self.assertTrue(poll["redirect"].startswith(REDIRECT + "?"))
        q = oauth_flow.code_from_redirect(poll["redirect"])
        self.assertEqual(q["state"], "st-123")
        self.assertEqual(q["iss"], self.web.base)
        return q["code"]

    def sign_in(self, *flags, name="Test Client"):
        client_id, verifier, code, secret = self.start(name=name)
        self.approve(code, *flags)
        auth_code = self.approved_code(secret)
        status, hdrs, tokens = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual(status, 200, tokens)
        self.assertEqual(hdrs.get("cache-control"), "no-store")
        return client_id, tokens

    def assert_mcp_ok(self, token):
        status, _, msg = self.web.mcp_initialize(token)
        self.assertEqual(status, 200, msg)
        return msg["result"]

    def assert_mcp_refused(self, token):
        status, hdrs, _ = self.web.mcp_initialize(token)
        self.assertEqual(status, 401)
        return hdrs


class OAuthTest(SignInTestCase):
    KEYS = ("guesser", "narrow")
    # Every test registers from 127.0.0.1: rates are OAuthFloodTest's subject, not these.
    EXTRA = ("--oauth-register-rate", "6000", "--oauth-signin-rate", "6000")

    # ---- discovery

    def test_discovery_documents(self):
        base = self.web.base
        hdrs = self.assert_mcp_refused(None)
        self.assertEqual(hdrs.get("www-authenticate"),
                         'Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"'
                         % base)
        for path, resource in (("/.well-known/oauth-protected-resource/mcp", base + "/mcp"),
                               ("/.well-known/oauth-protected-resource", base)):
            status, _, prm = self.web.json("GET", path)
            self.assertEqual(status, 200)
            self.assertEqual(prm["resource"], resource)
            self.assertEqual(prm["authorization_servers"], [base])
        status, _, meta = self.web.json("GET", "/.well-known/oauth-authorization-server")
        self.assertEqual(status, 200)
        self.assertEqual(meta["issuer"], base)
        self.assertEqual(meta["code_challenge_methods_supported"], ["S256"])
        self.assertEqual(meta["token_endpoint"], base + "/oauth/token")
        self.assertEqual(meta["registration_endpoint"], base + "/oauth/register")
        self.assertEqual(meta["authorization_endpoint"], base + "/oauth/authorize")

    # ---- the whole flow

    def test_flow_token_is_a_scoped_api_token_and_refresh_rotates(self):
        client_id, verifier, code, secret = self.start(name="Flow Client")
        self.assertEqual(self.web.poll(secret)["status"], "pending")
        approved = self.approve(code, "--tag", "agents", "--exp", "1d")
        self.assertEqual(approved["client"]["name"], "Flow Client")
        self.assertEqual(approved["redirect_uri"], REDIRECT)
        self.assertEqual(approved["restrictions"]["tag"], "agents")
        auth_code = self.approved_code(secret)
        # The page's secret cannot fetch the code a second time.
        self.assertEqual(self.web.poll(secret)["status"], "done")
        status, _, tokens = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual(status, 200, tokens)
        self.assertEqual(tokens["token_type"], "Bearer")
        self.assertTrue(tokens["access_token"].startswith("wr1."))
        self.assertLessEqual(tokens["expires_in"], 3600)

        # An API token like any other: listed with its limits, told them in instructions.
        label = self.labels()["oauth-flow-client-1"]
        self.assertEqual(label["tokens"][-1]["restrictions"]["tag"], "agents")
        init = self.assert_mcp_ok(tokens["access_token"])
        self.assertIn("agents", init["instructions"])
        # Bound to /mcp: /exec is another audience.
        status, _, _ = self.web.request("POST", "/exec", "whoami",
                                        {"Authorization": "Bearer " + tokens["access_token"]})
        self.assertEqual(status, 401)

        # Refresh rotates: new tokens, the old refresh token is spent.
        status, _, second = self.web.refresh(client_id, tokens["refresh_token"])
        self.assertEqual(status, 200, second)
        self.assertNotEqual(second["refresh_token"], tokens["refresh_token"])
        self.assert_mcp_ok(second["access_token"])
        # Replaying the rotated one is refused and revokes the whole sign-in.
        status, _, err = self.web.refresh(client_id, tokens["refresh_token"])
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))
        self.assertNotIn("oauth-flow-client-1", self.labels())
        self.assert_mcp_refused(second["access_token"])
        self.assert_mcp_refused(tokens["access_token"])
        status, _, err = self.web.refresh(client_id, second["refresh_token"])
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))

    def test_ssh_key_remove_revokes_access_and_refresh(self):
        client_id, tokens = self.sign_in(name="Removable")
        self.assert_mcp_ok(tokens["access_token"])
        self.ssh_ok(self.admin, "ssh-key", "remove", "oauth-removable-1")
        self.assert_mcp_refused(tokens["access_token"])
        status, _, err = self.web.refresh(client_id, tokens["refresh_token"])
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))

    # ---- refusals, each with nothing issued

    def test_wrong_or_reused_pkce_verifier(self):
        _, first = self.sign_in(name="First")  # its verifier is spent below
        client_id, verifier, code, secret = self.start(name="Pkce")
        self.approve(code)
        auth_code = self.approved_code(secret)
        before = set(self.labels())
        other_verifier, _ = oauth_flow.pkce()
        for bad in (other_verifier, verifier[:-1] + ("A" if verifier[-1] != "A" else "B")):
            status, _, err = self.web.redeem(client_id, auth_code, bad, REDIRECT)
            self.assertEqual((status, err["error"]), (400, "invalid_grant"), err)
            self.assertNotIn("access_token", err)
        self.assertEqual(set(self.labels()), before)
        self.assertTrue(first["access_token"])

    def test_verifier_of_another_flow_is_refused(self):
        client_a, verifier_a, code_a, secret_a = self.start(name="Flow A")
        self.approve(code_a)
        auth_a = self.approved_code(secret_a)
        status, _, _ = self.web.redeem(client_a, auth_a, verifier_a, REDIRECT)
        self.assertEqual(status, 200)
        # A second sign-in of the same client, redeemed with the first one's verifier.
        _, _, code_b, secret_b = self.start(client_id=client_a)
        self.approve(code_b)
        auth_b = self.approved_code(secret_b)
        before = set(self.labels())
        status, _, err = self.web.redeem(client_a, auth_b, verifier_a, REDIRECT)
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))
        self.assertEqual(set(self.labels()), before)

    def test_code_used_twice_is_refused_and_revokes(self):
        client_id, verifier, code, secret = self.start(name="Twice")
        self.approve(code)
        auth_code = self.approved_code(secret)
        status, _, tokens = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual(status, 200)
        status, _, err = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))
        self.assertNotIn("access_token", err)
        # RFC 6749 §4.1.2: what the code was exchanged for is revoked.
        self.assert_mcp_refused(tokens["access_token"])
        self.assertNotIn("oauth-twice-1", self.labels())

    def test_user_code_works_once(self):
        _, _, code, _ = self.start(name="Once")
        self.approve(code)
        r = self.ssh(self.admin, "authorize", code)
        self.assert_status(r, "conflict")

    def test_redirect_uri_differing_by_one_character(self):
        client_id = self.web.register([REDIRECT], "Redirects")
        verifier, challenge = oauth_flow.pkce()
        status, hdrs, html, code, _ = self.web.open_page(client_id, REDIRECT[:-1] + "X", challenge)
        self.assertEqual(status, 400)
        self.assertNotIn("location", hdrs)
        self.assertIsNone(code)
        self.assertIn("redirect", html)
        # At the token endpoint too: the code is bound to the exact redirect URI.
        _, verifier, code, secret = self.start(client_id=client_id)
        self.approve(code)
        auth_code = self.approved_code(secret)
        before = set(self.labels())
        status, _, err = self.web.redeem(client_id, auth_code, verifier, REDIRECT + "/")
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))
        self.assertEqual(set(self.labels()), before)
        # Registration refuses what is neither https nor loopback.
        for bad in (["http://evil.example/cb"], ["https://a.example/cb#x"], ["javascript:x"]):
            status, _, err = self.web.json("POST", "/oauth/register",
                                           {"client_name": "x", "redirect_uris": bad})
            self.assertEqual((status, err["error"]), (400, "invalid_redirect_uri"), bad)

    def test_plain_pkce_and_foreign_resource_are_refused_by_redirect(self):
        client_id = self.web.register([REDIRECT], "Plain")
        verifier, challenge = oauth_flow.pkce()
        for kw, error in (({"method": "plain"}, "invalid_request"),
                          ({"resource": "http://evil.example/mcp"}, "invalid_target")):
            status, hdrs, _ = self.web.request(
                "GET", self.web.authorize_query(client_id, REDIRECT, challenge, **kw))
            self.assertEqual(status, 302)
            q = oauth_flow.code_from_redirect(hdrs["location"])
            self.assertEqual(q["error"], error)
            self.assertEqual(q["state"], "st-123")
            self.assertNotIn("code", q)
        status, _, err = self.web.request(
            "GET", self.web.authorize_query("wc-unknown", REDIRECT, challenge))
        self.assertEqual(status, 400)

    def test_registration_is_bounded(self):
        cases = [
            {"client_name": "x" * 101, "redirect_uris": [REDIRECT]},
            {"client_name": "x", "redirect_uris": [REDIRECT] * 9},
            {"client_name": "x", "redirect_uris": ["https://a.example/" + "a" * 1000]},
            {"client_name": "x", "redirect_uris": []},
            {"client_name": "x", "redirect_uris": [REDIRECT], "grant_types": ["password"]},
        ]
        for body in cases:
            status, _, err = self.web.json("POST", "/oauth/register", body)
            self.assertEqual(status, 400, body)
            self.assertIn(err["error"], ("invalid_redirect_uri", "invalid_client_metadata"))
        status, _, _ = self.web.request("POST", "/oauth/register", "x" * 20000,
                                        {"Content-Type": "application/json"})
        self.assertEqual(status, 413)

    def test_guessing_codes_is_limited(self):
        self.make_user("guesser", self.keys["guesser"])
        statuses = [self.ssh(self.keys["guesser"], "authorize", "AAAA-AAAA").returncode
                    for _ in range(11)]
        self.assertEqual(statuses[:10], [h.EXIT["not_found"]] * 10)
        self.assertEqual(statuses[10], h.EXIT["limit_exceeded"])

    def test_restricted_key_can_only_approve_narrower(self):
        self.ssh_ok(self.admin, "ssh-key", "add", "--name", "narrow", "--tag", "ci",
                    input=self.keys["narrow"].public_line + "\n")
        _, _, code, secret = self.start(name="Narrow")
        r = self.ssh(self.keys["narrow"], "authorize", code, "--tag", "prod")
        self.assert_status(r, "permission_denied")
        self.assertEqual(self.web.poll(secret)["status"], "pending")  # nothing used up
        approved = self.approve(code, key=self.keys["narrow"])
        self.assertEqual(approved["restrictions"]["tag"], "ci")  # inherited

    def test_denied_sign_in(self):
        _, _, code, secret = self.start(name="Denied")
        self.approve(code, "--deny")
        poll = self.web.poll(secret)
        self.assertEqual(poll["status"], "denied")
        q = oauth_flow.code_from_redirect(poll["redirect"])
        self.assertEqual((q["error"], q["state"]), ("access_denied", "st-123"))
        self.assertNotIn("code", q)

    def test_page_is_plain_and_self_contained(self):
        client_id = self.web.register([REDIRECT], "Page <b>Client</b>")
        _, challenge = oauth_flow.pkce()
        status, hdrs, html, code, _ = self.web.open_page(client_id, REDIRECT, challenge)
        self.assertEqual(status, 200)
        self.assertIn("default-src 'none'", hdrs["content-security-policy"])
        self.assertEqual(hdrs["cache-control"], "no-store")
        self.assertIn('name="viewport"', html)
        self.assertIn("ssh -p %d localhost authorize %s" % (self.server.port, code), html)
        self.assertIn("Page &lt;b&gt;Client&lt;/b&gt;", html)
        self.assertIn("127.0.0.1:9", html)
        self.assertNotIn("src=", html)
        self.assertLess(len(html), 8000)


class OAuthFloodTest(SignInTestCase):
    """Fair shares under abuse, at the default limits: floods come from other loopback
    addresses (each is a source of its own to the server), the owner signs in from
    127.0.0.1 all the same; and admins see and remove clients."""
    KEYS = ("member",)

    def test_registration_flood_from_one_source_gets_429_while_another_registers(self):
        flood = oauth_flow.Http(self.server.http_port, source="127.0.0.2")
        body = {"client_name": "Flood", "redirect_uris": [REDIRECT]}
        statuses, last = [], None
        for _ in range(30):
            status, hdrs, last = flood.json("POST", "/oauth/register", body)
            statuses.append(status)
            if status == 429:
                self.assertTrue(hdrs.get("retry-after", "").isdigit(), hdrs)
        self.assertEqual(statuses[:10], [201] * 10)  # a minute's worth at once
        self.assertEqual(statuses[-1], 429)
        self.assertEqual(last["error"], "temporarily_unavailable")
        self.assertTrue(self.web.register([REDIRECT], "Owner's app"))

    def test_pending_sign_in_flood_from_one_source_does_not_block_another(self):
        client_id = oauth_flow.Http(self.server.http_port, "127.0.0.3").register([REDIRECT])
        flood = oauth_flow.Http(self.server.http_port, source="127.0.0.4")
        _, challenge = oauth_flow.pkce()
        statuses = [flood.open_page(client_id, REDIRECT, challenge)[0] for _ in range(12)]
        self.assertEqual(statuses[:10], [200] * 10)
        self.assertEqual(statuses[10:], [429, 429])
        # The owner's sign-in, from 127.0.0.1, goes through.
        _, tokens = self.sign_in(name="Owner")
        self.assert_mcp_ok(tokens["access_token"])

    def test_admin_lists_and_removes_clients(self):
        client_id, tokens = self.sign_in(name="Listed App")
        listed = self.ssh_json(self.admin, "oauth", "clients", "list")["clients"]
        entry = [c for c in listed if c["id"] == client_id][0]
        self.assertEqual(entry["name"], "Listed App")
        self.assertEqual(entry["source"], "127.0.0.1")
        self.assertGreater(entry["last_used_at"], 0)
        self.assertIn("Listed App", self.ssh_ok(self.admin, "oauth", "clients", "list").stdout)
        self.make_user("member", self.keys["member"])
        self.assert_status(self.ssh(self.keys["member"], "oauth", "clients", "list"),
                           "permission_denied")
        removed = self.ssh_json(self.admin, "oauth", "clients", "remove", client_id)
        self.assertEqual(removed["sign_ins_revoked"], 1)
        # Signed out everywhere: the access token, the refresh token and the label.
        self.assert_mcp_refused(tokens["access_token"])
        status, _, err = self.web.refresh(client_id, tokens["refresh_token"])
        self.assertEqual(status, 401, err)
        self.assertFalse([l for l in self.labels() if l.startswith("oauth-listed-app")])
        listed = self.ssh_json(self.admin, "oauth", "clients", "list")["clients"]
        self.assertFalse([c for c in listed if c["id"] == client_id])
        self.assert_status(self.ssh(self.admin, "oauth", "clients", "remove", client_id),
                           "not_found")


class OAuthExpiryTest(h.LobbyTestCase):
    """Short-lived codes (--oauth-code-lifetime), and a token presented to a server whose
    public URL — hence its resource — changed."""

    LIFETIME = 6

    @classmethod
    def setUpClass(cls):
        cls.extra = ["--oauth-code-lifetime", str(cls.LIFETIME)]
        super().setUpClass()

    @classmethod
    def start_server(cls, data_dir=None, admin_key="default", extra_args=()):
        return super().start_server(data_dir, admin_key, list(extra_args) + cls.extra)

    def setUp(self):
        self.web = oauth_flow.Http(self.server.http_port)

    def test_expired_user_code(self):
        client_id = self.web.register([REDIRECT], "Slow")
        _, challenge = oauth_flow.pkce()
        _, _, _, code, secret = self.web.open_page(client_id, REDIRECT, challenge)
        time.sleep(self.LIFETIME + 1)
        r = self.ssh(self.admin, "authorize", code)
        self.assert_status(r, "not_found")
        self.assertEqual(self.web.poll(secret)["status"], "expired")

    def test_expired_authorization_code(self):
        client_id = self.web.register([REDIRECT], "Late")
        verifier, challenge = oauth_flow.pkce()
        _, _, _, code, secret = self.web.open_page(client_id, REDIRECT, challenge)
        self.ssh_ok(self.admin, "authorize", code)
        poll = self.web.poll(secret)
        self.assertEqual(poll["status"], "approved", poll)
        auth_code = oauth_flow.code_from_redirect(poll["redirect"])["code"]
        time.sleep(self.LIFETIME + 1)
        status, _, err = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual((status, err["error"]), (400, "invalid_grant"))
        labels = self.ssh_json(self.admin, "ssh-key", "list")["api_tokens"]
        self.assertFalse([l for l in labels if l["label"].startswith("oauth-late")])

    def test_token_for_another_audience_is_refused(self):
        client_id = self.web.register([REDIRECT], "Moved")
        verifier, challenge = oauth_flow.pkce()
        _, _, _, code, secret = self.web.open_page(client_id, REDIRECT, challenge)
        self.ssh_ok(self.admin, "authorize", code)
        auth_code = oauth_flow.code_from_redirect(self.web.poll(secret)["redirect"])["code"]
        status, _, tokens = self.web.redeem(client_id, auth_code, verifier, REDIRECT)
        self.assertEqual(status, 200, tokens)
        status, _, _ = self.web.mcp_initialize(tokens["access_token"])
        self.assertEqual(status, 200)
        # The same store and signing key behind another public URL: another resource.
        data_dir = self.server.data_dir
        self.server.stop()
        moved = h.Server(data_dir, self.admin,
                         self.extra + ["--public-url", "http://warren.example:8443"])
        self.addCleanup(moved.stop)
        moved.start()
        web = oauth_flow.Http(moved.http_port)
        status, hdrs, msg = web.mcp_initialize(tokens["access_token"])
        self.assertEqual(status, 401, msg)
        self.assertIn("http://warren.example:8443/.well-known/oauth-protected-resource/mcp",
                      hdrs["www-authenticate"])
        self.assertIn("another resource", json.dumps(msg))
        # Restart where it was, for the other tests of the class.
        moved.stop()
        type(self).server = self.start_server(data_dir)


if __name__ == "__main__":
    h.main()
