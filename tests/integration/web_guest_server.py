#!/usr/bin/python3
"""A VM's web server for the web proxy's tests and benchmark, standard library only (it runs
inside a debian guest): `python3 web_guest_server.py PORT [NAME]`, listening on 0.0.0.0.

  /            a small HTML page naming NAME (what a browser renders and a screenshot shows)
  /hello.txt   "hello from NAME\\n"
  /headers     the request's headers as JSON (what reached the VM: nothing of warren's)
  /big?bytes=N N bytes, streamed in 64 KiB writes, with a Content-Length
  /chunked     a chunked body of 5 parts
  /sse         5 server-sent events, 0.2 s apart
  /cookie      sets a cookie with Domain= of the parent domain (the proxy must strip it)
  /ws          a WebSocket echo (RFC 6455, text and binary frames, unmasked replies)
"""
import base64
import hashlib
import http.server
import json
import socketserver
import struct
import sys
import time
import urllib.parse

NAME = "vm"  # set from argv when run
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PAGE_TEMPLATE = ("<!doctype html><html><head><title>%s</title></head>"
        "<body style='margin:0;background:#1565c0'><h1 id='who' style='color:#fff;"
        "font:bold 48px sans-serif;padding:40px'>page of %s</h1></body></html>")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, body, ctype="text/plain"):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        got = 0
        while got < n:
            chunk = self.rfile.read(min(65536, n - got))
            if not chunk:
                break
            got += len(chunk)
        self.send_body(json.dumps({"received": got}).encode(), "application/json")

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/":
            self.send_body((PAGE_TEMPLATE % (NAME, NAME)).encode(), "text/html; charset=utf-8")
        elif url.path == "/hello.txt":
            self.send_body(("hello from %s\n" % NAME).encode())
        elif url.path == "/headers":
            body = {"path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
            self.send_body(json.dumps(body).encode(), "application/json")
        elif url.path == "/big":
            n = int(q.get("bytes", ["0"])[0])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"w" * 65536
            while n > 0:
                self.wfile.write(block[:min(n, len(block))])
                n -= min(n, len(block))
        elif url.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(5):
                part = ("part %d\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(5):
                self.wfile.write(("data: tick %d\n\n" % i).encode())
                self.wfile.flush()
                time.sleep(0.2)
            self.close_connection = True
        elif url.path == "/cookie":
            host = self.headers.get("Host", "").split(":")[0]
            parent = host.split(".", 1)[1] if "." in host else host
            self.send_response(200)
            self.send_header("Set-Cookie", "vmcookie=1; Domain=%s; Path=/" % parent)
            self.send_header("Set-Cookie", "warren_session=planted; Path=/")
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")
        elif url.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            self.websocket()
        else:
            self.send_error(404)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if opcode == 8:  # close: answer it and end
                self.wfile.write(b"\x88\x00")
                return
            if opcode in (1, 2):
                out = bytes([0x80 | opcode])
                if len(data) < 126:
                    out += bytes([len(data)])
                elif len(data) < 65536:
                    out += b"\x7e" + struct.pack(">H", len(data))
                else:
                    out += b"\x7f" + struct.pack(">Q", len(data))
                self.wfile.write(out + data)
                self.wfile.flush()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def start_command(port, name):
    """For the host: the guest shell command that writes this server into the guest (as
    /tmp/srv.py) and starts it in the background on `port`, naming itself `name`."""
    with open(__file__, "rb") as f:
        source = base64.b64encode(f.read()).decode()
    return ("echo %s | base64 -d > /tmp/srv.py && (setsid python3 /tmp/srv.py %d %s "
            ">/tmp/srv%d.log 2>&1 </dev/null &)" % (source, port, name, port))


if __name__ == "__main__":
    NAME = sys.argv[2] if len(sys.argv) > 2 else "vm"
    Server(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
