"""The OAuth sign-in flow against a real `warren serve`, with http.client, for the OAuth
tests (test_oauth.py, test_oauth_page.py): register a client, open the sign-in page, read
its code, approve over OpenSSH, poll, redeem, refresh, and call /mcp with the token."""
import base64
import hashlib
import http.client
import json
import re
import secrets
import urllib.parse


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


class Http:
    def __init__(self, port, source=None):
        """`source`: the local address to connect from (another 127/8 address is another
        source to the server's per-source limits)."""
        self.port = port
        self.base = "http://127.0.0.1:%d" % port
        self.source = (source, 0) if source else None

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30,
                                          source_address=self.source)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
                headers = dict(headers or {}, **{"Content-Type": "application/json"})
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def json(self, method, path, body=None, headers=None):
        status, hdrs, data = self.request(method, path, body, headers)
        return status, hdrs, (json.loads(data) if data else None)

    def form(self, path, fields):
        return self.json("POST", path, urllib.parse.urlencode(fields),
                         {"Content-Type": "application/x-www-form-urlencoded"})

    # ---- the flow, step by step

    def register(self, redirect_uris, name="Test Client"):
        status, _, body = self.json("POST", "/oauth/register",
                                    {"client_name": name, "redirect_uris": redirect_uris,
                                     "token_endpoint_auth_method": "none",
                                     "grant_types": ["authorization_code", "refresh_token"],
                                     "response_types": ["code"]})
        assert status == 201, (status, body)
        return body["client_id"]

    def authorize_query(self, client_id, redirect_uri, challenge, state="st-123",
                        resource=None, method="S256"):
        q = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
             "code_challenge": challenge, "code_challenge_method": method, "state": state,
             "resource": resource or self.base + "/mcp"}
        return "/oauth/authorize?" + urllib.parse.urlencode(q)

    def open_page(self, client_id, redirect_uri, challenge, **kw):
        """GET the sign-in page: (status, headers, html, user code, page secret)."""
        status, hdrs, data = self.request("GET", self.authorize_query(
            client_id, redirect_uri, challenge, **kw))
        html = data.decode("utf-8")
        code = re.search(r'id="code">([A-Z0-9]{4}-[A-Z0-9]{4})<', html)
        secret = re.search(r'var s="([A-Za-z0-9_-]+)"', html)
        return (status, hdrs, html, code.group(1) if code else None,
                secret.group(1) if secret else None)

    def poll(self, secret):
        status, _, body = self.json("POST", "/oauth/status", secret,
                                    {"Content-Type": "text/plain"})
        assert status == 200, (status, body)
        return body

    def redeem(self, client_id, code, verifier, redirect_uri, resource=None):
        fields = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier,
                  "redirect_uri": redirect_uri, "client_id": client_id,
                  "resource": resource or self.base + "/mcp"}
        return self.form("/oauth/token", fields)

    def refresh(self, client_id, refresh_token):
        return self.form("/oauth/token", {"grant_type": "refresh_token",
                                          "refresh_token": refresh_token,
                                          "client_id": client_id,
                                          "resource": self.base + "/mcp"})

    def mcp_initialize(self, token, path="/mcp"):
        """POST initialize to /mcp: (status, headers, JSON-RPC message or None)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "oauth-test", "version": "1"}}}
        hdrs = {"Accept": "application/json, text/event-stream",
                "Content-Type": "application/json"}
        if token:
            hdrs["Authorization"] = "Bearer " + token
        status, rh, data = self.request("POST", path, json.dumps(body), hdrs)
        text = data.decode("utf-8", "replace")
        msg = None
        if rh.get("content-type", "").startswith("text/event-stream"):
            for line in text.splitlines():
                if line.startswith("data: "):
                    msg = json.loads(line[6:])
        elif text.strip():
            msg = json.loads(text)
        return status, rh, msg


def code_from_redirect(url):
    q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    return {k: v[0] for k, v in q.items()}
