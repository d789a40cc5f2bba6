#!/usr/bin/python3
"""Peers for the web proxy's unit tests (stdlib only).

    web_peers.py serve            a "guest" HTTP server on 127.0.0.1:0; prints its port
    web_peers.py ws URL [CAFILE]  a WebSocket client: sends three messages through URL
                                  (ws-eager: the first one with the handshake)
                                  (ws:// or wss://, connecting to 127.0.0.1 at URL's port)
                                  and prints what came back, one line each

The server's paths:
    /headers          the request line and headers as JSON ({"target":…, "headers":[[k,v]…]})
    /bytes?n=N        N bytes of 'x', with Content-Length, written 1 MiB at a time
    /chunked          three chunks, Transfer-Encoding: chunked
    /close            a body delimited by the server closing the connection
    /sse              three server-sent events, a moment apart
    /cookies          Set-Cookie lines with Domain= and with warren's own cookie names
    /upload (POST)    the number of body bytes it read
    /ws               a WebSocket echo (text frames)
"""

import base64
import hashlib
import http.server
import json
import os
import socket
import ssl
import struct
import sys
import time
import urllib.parse

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        # A socket, or the request handler's buffered reader (which may hold bytes that came
        # right behind the handshake).
        got = sock.recv(n - len(buf)) if hasattr(sock, "recv") else sock.read1(n - len(buf))
        if not got:
            raise EOFError("closed")
        buf += got
    return buf


def read_frame(sock):
    b1, b2 = recv_exact(sock, 2)
    opcode = b1 & 0x0F
    masked = b2 & 0x80
    n = b2 & 0x7F
    if n == 126:
        n = struct.unpack(">H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(sock, 8))[0]
    mask = recv_exact(sock, 4) if masked else b""
    data = recv_exact(sock, n)
    if masked:
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
    return opcode, data


def frame(opcode, data, mask):
    head = bytes([0x80 | opcode])
    n = len(data)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack(">H", n)
    else:
        head += bytes([bit | 127]) + struct.pack(">Q", n)
    if mask:
        key = os.urandom(4)
        return head + key + bytes(c ^ key[i % 4] for i, c in enumerate(data))
    return head + data


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

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/headers":
            self.send_body(json.dumps({"target": self.path,
                                       "headers": [[k, v] for k, v in self.headers.items()]})
                           .encode(), "application/json")
        elif url.path == "/bytes":
            n = int(q["n"][0])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = b"x" * (1 << 20)
            while n > 0:
                k = min(n, len(block))
                self.wfile.write(block[:k])
                n -= k
        elif url.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one ", b"two ", b"three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif url.path == "/close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until the end")
            self.close_connection = True
        elif url.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                self.wfile.write(b"data: event %d\n\n" % i)
                self.wfile.flush()
                time.sleep(0.2)
            self.close_connection = True
        elif url.path == "/cookies":
            self.send_response(200)
            self.send_header("Set-Cookie", "app=1; Domain=warren.localhost; Path=/")
            self.send_header("Set-Cookie", "other=2; path=/; domain=.warren.localhost; HttpOnly")
            self.send_header("Set-Cookie", "warren_session=stolen; Path=/")
            self.send_header("Set-Cookie", "__Host-warren_link=stolen; Path=/; Secure")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif url.path == "/ws":
            self.websocket()
        else:
            self.send_body(b"hello from the guest " + self.path.encode() + b"\n")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        got = 0
        while got < n:
            got += len(self.rfile.read(min(65536, n - got)))
        self.send_body(b"read %d\n" % got)

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        while True:
            try:
                opcode, data = read_frame(self.rfile)
            except EOFError:
                break
            if opcode == 8:
                sock.sendall(frame(8, data, False))
                break
            sock.sendall(frame(1, b"echo: " + data, False))
        self.close_connection = True


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 512  # hundreds of visitors at once


def serve():
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def ws_client(url, cafile=None, eager=False):
    u = urllib.parse.urlsplit(url)
    sock = socket.create_connection(("127.0.0.1", u.port), timeout=10)
    if u.scheme == "wss":
        ctx = ssl.create_default_context(cafile=cafile)
        sock = ctx.wrap_socket(sock, server_hostname=u.hostname)
    key = base64.b64encode(os.urandom(16)).decode()
    hello = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
             % (u.path or "/", u.netloc, key)).encode()
    messages = ["first", "second", "x" * 70000]
    if eager:
        # The first message goes with the handshake, before the 101 is back.
        hello += frame(1, messages[0].encode(), True)
    sock.sendall(hello)
    head = b""
    while b"\r\n\r\n" not in head:
        got = sock.recv(1)
        if not got:
            raise SystemExit("closed during the handshake: %r" % head)
        head += got
    status = head.split(b"\r\n")[0].decode()
    print(status)
    want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    if ("Sec-WebSocket-Accept: " + want).encode() not in head:
        raise SystemExit("bad accept: %r" % head)
    for i, msg in enumerate(messages):
        if not (eager and i == 0):
            sock.sendall(frame(1, msg.encode(), True))
        opcode, data = read_frame(sock)
        print(data.decode()[:40], len(data))
    sock.sendall(frame(8, b"", True))
    opcode, _ = read_frame(sock)
    print("closed" if opcode == 8 else "opcode %d" % opcode)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    elif sys.argv[1] in ("ws", "ws-eager"):
        ws_client(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None,
                  eager=sys.argv[1] == "ws-eager")
