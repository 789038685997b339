"""WebSocket through tokentap: the handshake reaches the backend with its
Upgrade, the 101 reaches the client, and from then on the connection is a
tunnel: frames both ways unchanged, counted, logged once at the close."""
import base64
import hashlib
import os
import socket
import time

from backend import Backend
from harness import Tokentap

# make check leaves out what needs Chromium
CHECK_SKIP = {"test_chromium_websocket_through_tokentap"}


GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def route(port, extra="", timeouts=""):
    return f"""{timeouts}routes:
  - name: ws
    upstream: http://127.0.0.1:{port}
{extra}"""


def accept_key(key):
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def frame(payload, mask=True, opcode=1):
    """One unfragmented frame (RFC 6455 §5.2), masked as a client sends."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    else:
        head += bytes([m | 126]) + n.to_bytes(2, "big")
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_frame(sock):
    """(opcode, payload) of the next frame, unmasking a client's."""
    def exact(n):
        out = b""
        while len(out) < n:
            b = sock.recv(n - len(out))
            if not b:
                raise EOFError
            out += b
        return out
    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(exact(2), "big")
    key = exact(4) if b1 & 0x80 else None
    data = exact(n)
    if key:
        data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return b0 & 0x0F, data


def echo_server(seen):
    """Answers the handshake with 101, then echoes text frames in upper
    case until the client sends a close frame, which it answers."""
    def handle(req, c):
        seen.append(req)
        key = req.header("Sec-WebSocket-Key").encode()
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept_key(key) +
               b"\r\n\r\n" + frame(b"hello", mask=False))
        while True:
            op, data = read_frame(c.sock)
            if op == 8:
                c.send(frame(data, mask=False, opcode=8))
                return "close"
            c.send(frame(data.upper(), mask=False))
    return handle


def handshake(port, key=b"dGhlIHNhbXBsZSBub25jZQ==", extra=b""):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\n" + extra + b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head


def test_websocket_frames_both_ways_then_one_log_line():
    seen = []
    with Backend(echo_server(seen)) as b, Tokentap(route(b.port)) as t:
        s, head = handshake(t.port)
        lines = head.split(b"\r\n")
        assert lines[0] == b"HTTP/1.1 101 Switching Protocols", head
        assert b"Upgrade: websocket" in lines and b"Connection: Upgrade" in lines, head
        assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in lines, head
        # the backend got the handshake it needs, and only one Connection
        req = seen[0]
        assert req.header("Upgrade") == "websocket"
        assert req.all("Connection") == ["Upgrade"]
        assert req.header("Sec-WebSocket-Key") == "dGhlIHNhbXBsZSBub25jZQ=="
        assert read_frame(s) == (1, b"hello")     # sent with the 101
        sent = received = 0
        for word in [b"one", b"two", b"x" * 5000]:
            f = frame(word)
            s.sendall(f)
            sent += len(f)
            assert read_frame(s) == (1, word.upper())
            received += len(word) + (2 if len(word) < 126 else 4)
        time.sleep(0.3)
        assert not t.access(), "a tunnel is logged when it ends, once"
        s.sendall(frame(b"\x03\xe8", opcode=8))
        assert read_frame(s) == (8, b"\x03\xe8")
        s.close()
        [log] = t.access(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log
        assert log["bytes_in"] >= sent + 6 + 2, log
        assert log["bytes_out"] >= received + 7 + 4, log


def test_backend_closing_the_tunnel_closes_the_client():
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n" + frame(b"bye", mask=False))
        return "close"
    with Backend(handle) as b, Tokentap(route(b.port)) as t:
        s, head = handshake(t.port)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert read_frame(s) == (1, b"bye")
        assert s.recv(10) == b""
        [log] = t.access(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log


def test_refused_handshake_is_an_ordinary_response():
    seen = []

    def handle(req, c):
        seen.append(req)
        c.send(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        return "keep"
    with Backend(handle) as b, Tokentap(route(b.port)) as t:
        s, head = handshake(t.port)
        assert head.startswith(b"HTTP/1.1 403 "), head
        assert s.recv(10) == b"no"
        # the connection stays HTTP: a next request is answered
        s.sendall(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 403 ")
        s.close()
        assert [r.target for r in seen] == ["/chat", "/next"]
        assert seen[1].header("Upgrade") is None


def test_idle_tunnel_closed_after_timeouts_idle():
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n")
        c.sleep_watching(5)
        return "close"
    with Backend(handle) as b, Tokentap(route(b.port, timeouts="timeouts: {idle: 1s}\n")) as t:
        s, head = handshake(t.port)
        assert head.startswith(b"HTTP/1.1 101 "), head
        start = time.monotonic()
        assert s.recv(10) == b""
        assert time.monotonic() - start < 4
        [log] = t.access(1)
        assert log["status"] == 101 and log["outcome"] == "timeout", log


def test_upgrade_the_client_did_not_ask_for_is_refused():
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n")
        return "close"
    with Backend(handle) as b, Tokentap(route(b.port)) as t:
        s = socket.create_connection(("127.0.0.1", t.port), timeout=5)
        s.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 502 ")


def test_chromium_websocket_through_tokentap():
    """A browser's WebSocket (its own handshake, masking, close) through
    tokentap to the echo backend."""
    import json
    import subprocess
    from harness import ROOT, node_modules
    seen = []
    with Backend(echo_server(seen)) as b, Tokentap(route(b.port)) as t:
        plan = {"url": f"ws://127.0.0.1:{t.port}/chat", "modules": node_modules(),
                "chromium": "/usr/bin/chromium", "send": ["one", "two", "z" * 9000]}
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "e2e", "ws_check.mjs"),
                            json.dumps(plan)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["got"] == ["hello", "ONE", "TWO", "Z" * 9000], out
        assert out["code"] == 1000, out
        assert seen[0].header("Sec-WebSocket-Version") == "13"
        [log] = t.access(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log
