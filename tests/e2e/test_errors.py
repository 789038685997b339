# SPDX-License-Identifier: Apache-2.0
"""Every error tokentap answers itself (docs/contract.md §3), each with its
outcome in the access log."""
import socket
import time

from harness import Tokentap, conf, free_port, metric, parse_response, raw_request, until
from peers import SSE_HEAD, Backend, answer


def expect(t, request, status, outcome):
    """tokentap answers the raw request itself: status, a JSON error, and
    the access log's last line says status and outcome. The message."""
    n = len(t.access())
    r = parse_response(raw_request(t.port, request))
    assert r.status == status, (r.status, r.body)
    err = r.json()["error"]
    assert err["type"] and err["message"]
    line = t.wait_logged(n + 1)[n]
    assert line["status"] == status and line["outcome"] == outcome, line
    return err["message"]


def test_400_malformed_and_smuggling():
    with Backend(answer()) as b, Tokentap(conf(b, prefix="/v1/")) as t:
        expect(t, b"GARBAGE\r\n\r\n", 400, "rejected")
        expect(t, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "rejected")
        expect(t, b"GET /v1/x HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n",
               400, "rejected")
        expect(t, b"GET /v1/x HTTP/1.1\r\n\r\n", 400, "rejected")
        assert b.requests == []


def test_404_no_route():
    with Backend(answer()) as b, Tokentap(conf(b, prefix="/v1/")) as t:
        expect(t, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n", 404, "rejected")
        assert t.access()[-1]["route"] is None


def test_413_body_too_large():
    with Backend(answer()) as b, Tokentap(conf(b, "limits: {max_body_bytes: 1k}\n",
                                               prefix="/v1/")) as t:
        expect(t, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n",
               413, "rejected")
        big = b"%x\r\n%s\r\n0\r\n\r\n" % (3000, b"a" * 3000)
        expect(t, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               + big, 413, "rejected")


def test_431_head_too_large():
    with Backend(answer()) as b, Tokentap(conf(b, "limits: {max_header_bytes: 2k}\n",
                                               prefix="/v1/")) as t:
        expect(t, b"GET /v1/x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4000 +
               b"\r\n\r\n", 431, "rejected")


def test_502_unreachable_and_bad_response():
    with Tokentap(conf(free_port(), prefix="/v1/")) as t:
        why = expect(t, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 502,
                     "connect_error")
        assert why == "cannot connect: Connection refused", why

    def bad(req, c):
        c.send(b"NOT HTTP AT ALL\r\n\r\n")
        return "close"

    with Backend(bad) as b, Tokentap(conf(b, prefix="/v1/")) as t:
        expect(t, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 502, "upstream_error")


def test_503_over_max_connections():
    """At max_connections, an idle connection (one that has sent nothing,
    or waits between requests) is closed to make room; only when every
    connection is busy does a new client get the 503."""
    with Backend(answer()) as b, Tokentap(conf(b, "workers: 1\nlimits: {max_connections: 1}\n",
                                               prefix="/v1/")) as t:
        def connections(n):
            until(lambda: metric(t, "tokentap_active_connections") == n, 10,
                  f"{n} connection(s) held")
        busy = socket.create_connection(("127.0.0.1", t.port))
        busy.sendall(b"GET /v1/x HTTP/1.1\r\n")            # a request on its way
        connections(1)
        r = parse_response(raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n"))
        assert r.status == 503
        busy.close()
        connections(0)
        idle = socket.create_connection(("127.0.0.1", t.port))   # sends nothing
        connections(1)
        r = parse_response(raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n"
                                       b"Connection: close\r\n\r\n"))
        assert r.status == 200
        idle.settimeout(10)
        assert idle.recv(1) == b"", "the idle connection was not reclaimed"
        idle.close()


def test_504_first_byte_and_idle_timeouts():
    def silent(req, c):
        c.sleep_watching(3)
        return "close"

    with Backend(silent) as b, Tokentap(conf(b, "    timeouts: {first_byte: 300ms}\n",
                                             prefix="/v1/")) as t:
        start = time.monotonic()
        expect(t, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 504, "timeout")
        # 300 ms configured, 120 s the default: 0.3 s and what a busy host adds
        assert 0.25 < time.monotonic() - start < 10

    def stalls(req, c):
        c.send(SSE_HEAD)
        c.chunk(b"data: 1\n\n")
        c.sleep_watching(3)
        return "close"

    with Backend(stalls) as b, Tokentap(conf(b, "    timeouts: {idle: 300ms}\n",
                                             prefix="/v1/")) as t:
        resp = raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert resp.startswith(b"HTTP/1.1 200"), resp
        line = t.wait_logged(1)[0]
        assert line["outcome"] == "timeout" and line["status"] == 200, line


def test_slowloris_client_header_timeout():
    with Backend(answer()) as b, Tokentap(conf(b, "timeouts: {client_header: 300ms}\n",
                                               prefix="/v1/")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHo")
        s.settimeout(20)
        start = time.monotonic()
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 408"), data
        # 300 ms configured, 10 s the default
        assert time.monotonic() - start < 5
        s.close()


def test_client_header_timeout_on_a_kept_alive_connection():
    """The session's timer is lazy (proxy.c, timer_due): a deadline later
    than the one armed leaves the timer alone. A shorter one must still
    re-arm it: after a response the keep-alive wait (timeouts.idle, 30 s)
    is armed; a request head that then stalls gets its 408 after
    client_header (300 ms), not after the idle wait."""
    with Backend(answer()) as b, Tokentap(conf(b, "timeouts: {client_header: 300ms, idle: 30s}\n",
                                               prefix="/v1/")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.settimeout(20)
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"ok"):
            data += s.recv(65536)
        assert data.startswith(b"HTTP/1.1 200"), data
        time.sleep(0.5)      # past the first head's deadline: its timer went off
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHo")
        start = time.monotonic()
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 408"), data
        # 300 ms configured against the 30 s wait it replaced
        assert time.monotonic() - start < 10
        s.close()


def test_upstream_abort_mid_stream():
    def dies(req, c):
        c.send(SSE_HEAD)
        c.chunk(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n')
        return "close"

    with Backend(dies) as b, Tokentap(conf(b, prefix="/v1/")) as t:
        raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 2\r\n\r\n{}")
        line = t.wait_logged(1)[0]
        assert line["outcome"] == "upstream_abort", line
