# SPDX-License-Identifier: Apache-2.0
"""Upgrade lists, with raw sockets on both sides: a client may only switch
to a protocol its route allows (`upgrades`, websocket by default), the
backend sees only those in Upgrade, and a 101 to anything else is a 502,
so that no bytes of another protocol (an HTTP/2 preface, a request for
an internal path) reach the backend through a tunnel.
"""
import socket
import time

from harness import Tokentap, conf, until
from peers import Backend

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SMUGGLED = b"GET /internal/admin HTTP/1.1\r\nHost: internal\r\n\r\n"


def switching(protocol, raw):
    """A backend that answers every request 101 to protocol, then keeps
    whatever bytes come through the tunnel in raw (until 2 s of silence)."""
    def handle(req, c):
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + protocol +
               b"\r\nConnection: Upgrade\r\n\r\n")
        c.sock.settimeout(2)
        try:
            while True:
                d = c.sock.recv(65536)
                if not d:
                    break
                raw.append(d)
        except OSError:
            pass
        return "close"
    return handle


def attempt(port, upgrade):
    """The client's handshake asking for upgrade, then at once the bytes
    an h2c client sends next and a request for an internal path. What
    came back before the close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
              b"Upgrade: " + upgrade + b"\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n")
    time.sleep(0.2)
    try:
        s.sendall(PREFACE + SMUGGLED)
    except OSError:
        pass
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except OSError:
        pass
    s.close()
    return out


def test_h2c_beside_websocket_reaches_no_backend_as_a_tunnel():
    """`Upgrade: h2c, websocket`: the backend is asked for websocket only,
    and its 101 to h2c is a 502; the preface and the internal request
    that followed never reach it."""
    raw = []
    with Backend(switching(b"h2c", raw)) as b, Tokentap(conf(b, prefix="/")) as t:
        out = attempt(t.port, b"h2c, websocket")
        assert out.startswith(b"HTTP/1.1 502 "), out
        assert b"did not ask for" in out, out
        assert b.requests[0].all("Upgrade") == ["websocket"], b.requests[0].headers
        assert b.requests[0].header("HTTP2-Settings") is None
        time.sleep(0.6)
        assert not any(PREFACE in d or b"/internal/admin" in d for d in raw), raw
        [log] = t.wait_logged(1)
        assert log["status"] == 502 and log["outcome"] == "upstream_error", log


def test_h2c_alone_is_an_ordinary_request():
    """`Upgrade: h2c` alone: the backend sees a plain GET, no Upgrade; its
    101 (nobody asked) is a 502, and nothing follows."""
    raw = []
    with Backend(switching(b"h2c", raw)) as b, Tokentap(conf(b, prefix="/")) as t:
        out = attempt(t.port, b"h2c")
        assert out.startswith(b"HTTP/1.1 502 "), out
        assert b.requests[0].header("Upgrade") is None, b.requests[0].headers
        time.sleep(0.6)
        assert not any(PREFACE in d for d in raw), raw


def test_a_101_to_another_protocol_than_asked_is_a_502():
    """The client asked for websocket; the backend switches to something
    else: 502, and the client's next bytes are not tunnelled."""
    raw = []
    with Backend(switching(b"example/2", raw)) as b, Tokentap(conf(b, prefix="/")) as t:
        out = attempt(t.port, b"websocket")
        assert out.startswith(b"HTTP/1.1 502 "), out
        time.sleep(0.6)
        assert not any(b"/internal/admin" in d for d in raw), raw


def test_route_upgrades_key():
    """`upgrades: [h2c]` lets a route switch to h2c (and only to it):
    the tunnel carries the client's bytes; `upgrades: []` lets none
    through, websocket included."""
    raw = []
    with Backend(switching(b"h2c", raw)) as b, \
            Tokentap(conf(b, "    upgrades: [h2c]\n", prefix="/")) as t:
        out = attempt(t.port, b"h2c, websocket")
        assert out.startswith(b"HTTP/1.1 101 "), out
        assert b.requests[0].all("Upgrade") == ["h2c"], b.requests[0].headers
        until(lambda: PREFACE + SMUGGLED in b"".join(raw), 10, "the tunnelled bytes")
    raw = []
    with Backend(switching(b"websocket", raw)) as b, \
            Tokentap(conf(b, "    upgrades: []\n", prefix="/")) as t:
        out = attempt(t.port, b"websocket")
        assert out.startswith(b"HTTP/1.1 502 "), out
        assert b.requests[0].header("Upgrade") is None, b.requests[0].headers

