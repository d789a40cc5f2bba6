#!/usr/bin/python3
"""The OAuth sign-in page in real headless Chromium (Debian's `chromium`), driven over the
DevTools protocol on a pipe: the page renders at phone width without overflow, shows the code
(read from the DOM and found as ink in the screenshot where the code's box is), and — once
the test approves the code over OpenSSH — completes by itself, navigating to the client's
redirect URI with the code and state."""
import base64
import http.server
import json
import os
import shutil
import tempfile
import threading
import time
import urllib.parse

import oauth_flow
import warren_harness as h
from cdp import HEIGHT, WIDTH, Cdp, attach_page, png_pixels

class Callback(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        Callback.seen.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"signed in")

    def log_message(self, *args):
        pass


class OAuthPageTest(h.LobbyTestCase):
    def test_page_in_headless_chromium_completes_once_approved(self):
        self.assertIsNotNone(shutil.which("chromium"), "apt-get install chromium")
        callback = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Callback)
        threading.Thread(target=callback.serve_forever, daemon=True).start()
        self.addCleanup(callback.server_close)
        self.addCleanup(callback.shutdown)
        redirect = "http://127.0.0.1:%d/cb" % callback.server_address[1]

        web = oauth_flow.Http(self.server.http_port)
        client_id = web.register([redirect], "Chromium Client")
        verifier, challenge = oauth_flow.pkce()
        url = web.base + web.authorize_query(client_id, redirect, challenge, state="chr-st")

        profile = tempfile.mkdtemp(prefix="chromium-", dir=self.tmp)
        cdp = Cdp(profile)
        self.addCleanup(cdp.close)
        # A phone's viewport (headless windows have a minimum width of their own).
        session = attach_page(cdp, WIDTH, HEIGHT, mobile=True)
        cdp.send("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + 30
        code = None
        while time.monotonic() < deadline and not code:
            code = cdp.evaluate(session, "document.getElementById('code') && "
                                         "document.getElementById('code').textContent")
            time.sleep(0.1)
        self.assertRegex(code or "", r"^[A-Z0-9]{4}-[A-Z0-9]{4}$")
        page = cdp.evaluate(session, "JSON.stringify({text: document.body.innerText, "
                                     "scroll: document.documentElement.scrollWidth, "
                                     "inner: window.innerWidth, "
                                     "box: document.getElementById('code').getBoundingClientRect(), "
                                     "status: document.getElementById('status').textContent})")
        page = json.loads(page)
        self.assertIn("ssh -p %d localhost authorize %s" % (self.server.port, code), page["text"])
        self.assertIn("Chromium Client", page["text"])
        self.assertLessEqual(page["scroll"], page["inner"], "no sideways scrolling on a phone")
        self.assertIn("Waiting", page["status"])

        # The screenshot: the right size, not blank, and ink where the code's box is.
        shot = base64.b64decode(cdp.send("Page.captureScreenshot", {"format": "png"},
                                         session)["data"])
        with open(os.path.join(self.tmp, "signin.png"), "wb") as f:
            f.write(shot)
        width, height, bpp, rows = png_pixels(shot)
        self.assertEqual((width, height), (WIDTH, HEIGHT))
        box = page["box"]
        self.assertGreater(box["width"], 100)
        self.assertGreater(box["height"], 30)

        def luma(x, y):
            p = rows[y][x * bpp:x * bpp + 3]
            return (p[0] * 299 + p[1] * 587 + p[2] * 114) // 1000

        inside = [luma(x, y)
                  for y in range(int(box["top"]) + 4, int(box["bottom"]) - 4, 2)
                  for x in range(int(box["left"]) + 4, int(box["right"]) - 4, 2)]
        dark = sum(1 for v in inside if v < 100)
        light = sum(1 for v in inside if v > 180)
        # Glyphs: dark strokes on the light box, a few percent of its area each way.
        self.assertGreater(dark, len(inside) * 0.03, "no text drawn in the code box")
        self.assertGreater(light, len(inside) * 0.3, "the code box is not light")
        everywhere = {rows[y][x * bpp] for y in range(0, height, 7) for x in range(0, width, 7)}
        self.assertGreater(len(everywhere), 8, "the screenshot is blank")

        # Approve over SSH: the page notices by itself and goes to the redirect URI.
        approved = self.ssh_json(self.admin, "authorize", code, "--tag", "browser")
        self.assertEqual(approved["client"]["name"], "Chromium Client")
        deadline = time.monotonic() + 30
        href = ""
        while time.monotonic() < deadline and not href.startswith(redirect):
            href = cdp.evaluate(session, "location.href") or ""
            time.sleep(0.2)
        self.assertTrue(href.startswith(redirect + "?"), href)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(href).query).items()}
        self.assertEqual(q["state"], "chr-st")
        body = cdp.evaluate(session, "document.body ? document.body.innerText : ''")
        self.assertEqual(body, "signed in", "the redirect target's answer is shown")
        hits = [p for p in Callback.seen if p.startswith("/cb?")]
        self.assertEqual(len(hits), 1, Callback.seen)
        self.assertIn("code=" + urllib.parse.quote(q["code"]), hits[0])
        # The code the browser carried redeems for a token.
        status, _, tokens = web.redeem(client_id, q["code"], verifier, redirect)
        self.assertEqual(status, 200, tokens)
        self.assertTrue(tokens["access_token"].startswith("wr1."))


if __name__ == "__main__":
    h.main()
