# SPDX-License-Identifier: Apache-2.0
"""WebSocket through tokentap: the handshake reaches the backend with its
Upgrade, the 101 reaches the client, and from then on the connection is a
tunnel: frames both ways unchanged, counted, logged once at the close."""
import json
import os
import socket
import subprocess
import time

from harness import ROOT, Tokentap, conf, node_modules
from peers import Backend, echo_server, frame, handshake, read_frame

# make check leaves out what needs Chromium
CHECK_SKIP = {"test_chromium_websocket_through_tokentap"}


def test_websocket_frames_both_ways_then_one_log_line():
    seen = []
    with Backend(echo_server(seen)) as b, Tokentap(conf(b, name="ws")) as t:
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
        [log] = t.wait_logged(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log
        assert log["bytes_in"] >= sent + 6 + 2, log
        assert log["bytes_out"] >= received + 7 + 4, log


def test_backend_closing_the_tunnel_closes_the_client():
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n" + frame(b"bye", mask=False))
        return "close"
    with Backend(handle) as b, Tokentap(conf(b, name="ws")) as t:
        s, head = handshake(t.port)
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert read_frame(s) == (1, b"bye")
        assert s.recv(10) == b""
        [log] = t.wait_logged(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log


def test_refused_handshake_is_an_ordinary_response():
    seen = []

    def handle(req, c):
        seen.append(req)
        c.send(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        return "keep"
    with Backend(handle) as b, Tokentap(conf(b, name="ws")) as t:
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
    with Backend(handle) as b, Tokentap(conf(b, top="timeouts: {idle: 1s}\n", name="ws")) as t:
        s, head = handshake(t.port)
        assert head.startswith(b"HTTP/1.1 101 "), head
        s.settimeout(20)
        start = time.monotonic()
        assert s.recv(10) == b""
        # 1 s configured (60 s by default): a second, and what a busy host
        # adds (the timer started when the 101 went out: a client late to
        # read it sees less than the second)
        assert 0.5 < time.monotonic() - start < 10
        [log] = t.wait_logged(1)
        assert log["status"] == 101 and log["outcome"] == "timeout", log


def test_upgrade_the_client_did_not_ask_for_is_refused():
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\n\r\n")
        return "close"
    with Backend(handle) as b, Tokentap(conf(b, name="ws")) as t:
        s = socket.create_connection(("127.0.0.1", t.port), timeout=5)
        s.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 502 ")


def test_chromium_websocket_through_tokentap():
    """A browser's WebSocket (its own handshake, masking, close) through
    tokentap to the echo backend."""
    seen = []
    with Backend(echo_server(seen)) as b, Tokentap(conf(b, name="ws")) as t:
        plan = {"url": f"ws://127.0.0.1:{t.port}/chat", "modules": node_modules(),
                "chromium": "/usr/bin/chromium", "send": ["one", "two", "z" * 9000]}
        r = subprocess.run(["node", os.path.join(ROOT, "tests", "e2e", "ws_check.mjs"),
                            json.dumps(plan)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["got"] == ["hello", "ONE", "TWO", "Z" * 9000], out
        assert out["code"] == 1000, out
        assert seen[0].header("Sec-WebSocket-Version") == "13"
        [log] = t.wait_logged(1)
        assert log["status"] == 101 and log["outcome"] == "ok", log
