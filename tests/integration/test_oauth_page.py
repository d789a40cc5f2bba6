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
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse
import zlib

import oauth_flow
import warren_harness as h

WIDTH, HEIGHT = 390, 844  # a phone


class Cdp:
    """Chrome DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, user_data_dir):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        args = ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
                "--user-data-dir=" + user_data_dir, "--window-size=%d,%d" % (WIDTH, HEIGHT),
                "--force-device-scale-factor=1", "about:blank"]
        # The pipe must be fds 3 and 4 in chromium: bash puts them there.
        self.proc = subprocess.Popen(
            ["bash", "-c", 'exec "$@" 3<&%d 4>&%d' % (to_child_r, from_child_w), "chromium"]
            + args,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=h._die_with_parent, pass_fds=(to_child_r, from_child_w))
        os.close(to_child_r)
        os.close(from_child_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_child, self.from_child):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read_message(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply["result"]
            self.events.append(reply)

    def evaluate(self, session, expression):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                      session)
        return r["result"].get("value")


def png_pixels(data):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


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
        target = [t for t in cdp.send("Target.getTargets")["targetInfos"] if t["type"] == "page"][0]
        session = cdp.send("Target.attachToTarget",
                           {"targetId": target["targetId"], "flatten": True})["sessionId"]
        cdp.send("Page.enable", session=session)
        # A phone's viewport (headless windows have a minimum width of their own).
        cdp.send("Emulation.setDeviceMetricsOverride",
                 {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": True},
                 session)
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
