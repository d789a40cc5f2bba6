"""The loopback HTTP upstream the integration tests and the benchmark proxy to: a threaded
server on 127.0.0.1 port 0 that records every request (method, path with query, headers,
body size and SHA-256) and answers

  GET  …/big?bytes=N[&delay_ms=D]  N bytes of a fixed pseudo-random pattern (Content-Length),
                                  64 KiB at a time, sleeping D ms between writes
  POST (any path)                 the body's size and SHA-256 (read as framed: length or chunked)
  anything else                   "ok PATH\n"

It never echoes a header back: what the guest sees must not carry what warren added.
"""
import hashlib
import http.server
import os
import threading
import time
import urllib.parse

BLOCK = 64 * 1024
_PATTERN = os.urandom(BLOCK)


def big_body_sha256(n):
    """The SHA-256 of /big?bytes=n."""
    h = hashlib.sha256()
    full, rest = divmod(n, BLOCK)
    for _ in range(full):
        h.update(_PATTERN)
    h.update(_PATTERN[:rest])
    return h.hexdigest()


class Upstream:
    def __init__(self):
        self.requests = []  # dicts, in arrival order
        self.lock = threading.Lock()
        self.sent = {}  # path -> bytes written so far (for /big)
        self.broken = []  # paths whose client went away mid-body
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def record(self, body_len=0, body_sha=None):
                with upstream.lock:
                    upstream.requests.append({
                        "method": self.command, "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "header_list": list(self.headers.items()),
                        "body_len": body_len, "body_sha": body_sha})

            def read_body(self):
                h = hashlib.sha256()
                n = 0
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            break
                        left = size
                        while left:
                            chunk = self.rfile.read(min(left, BLOCK))
                            h.update(chunk)
                            n += len(chunk)
                            left -= len(chunk)
                        self.rfile.readline()
                else:
                    left = int(self.headers.get("Content-Length", "0"))
                    while left:
                        chunk = self.rfile.read(min(left, BLOCK))
                        if not chunk:
                            break
                        h.update(chunk)
                        n += len(chunk)
                        left -= len(chunk)
                return n, h.hexdigest()

            def answer(self, body, status=200):
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                self.record()
                if url.path.endswith("/big"):
                    q = dict(urllib.parse.parse_qsl(url.query))
                    n = int(q.get("bytes", "0"))
                    delay = int(q.get("delay_ms", "0")) / 1000.0
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(n))
                    self.end_headers()
                    left = n
                    try:
                        while left:
                            chunk = _PATTERN[:min(left, BLOCK)]
                            self.wfile.write(chunk)
                            left -= len(chunk)
                            with upstream.lock:
                                upstream.sent[self.path] = n - left
                            if delay:
                                time.sleep(delay)
                    except OSError:
                        with upstream.lock:
                            upstream.broken.append(self.path)
                    return
                self.answer(("ok %s\n" % self.path).encode())

            def do_POST(self):
                n, sha = self.read_body()
                self.record(n, sha)
                self.answer(("%d %s\n" % (n, sha)).encode())

            do_PUT = do_POST

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def matching(self, path_prefix):
        with self.lock:
            return [r for r in self.requests if r["path"].startswith(path_prefix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
