"""Every error tokentap answers itself (SPEC §3), each with its outcome in
the access log."""
import json
import socket
import time

from backend import SSE_HEAD, Backend
from harness import Tokentap, free_port, raw_request, split_response


def cfg(port, extra=""):
    return f"""routes:
  - name: r1
    match: {{path_prefix: /v1/}}
    upstream: http://127.0.0.1:{port}
{extra}"""


def status_of(resp):
    head, body = split_response(resp)
    line = head.split(b"\r\n")[0].decode()
    return int(line.split(" ")[1]), body


def ok_backend():
    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return "keep"
    return Backend(handle)


def expect(port, request, status, outcome=None, t=None):
    code, body = status_of(raw_request(port, request))
    assert code == status, (code, body)
    err = json.loads(body)["error"]
    assert err["type"] and err["message"]
    if t is not None:
        line = t.access()[-1]
        assert line["status"] == status and line["outcome"] == outcome, line
    return err["message"]


def test_400_malformed_and_smuggling():
    with ok_backend() as b, Tokentap(cfg(b.port)) as t:
        expect(t.port, b"GARBAGE\r\n\r\n", 400, "rejected", t)
        expect(t.port, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "rejected", t)
        expect(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n",
               400, "rejected", t)
        expect(t.port, b"GET /v1/x HTTP/1.1\r\n\r\n", 400, "rejected", t)
        assert b.requests == []


def test_404_no_route():
    with ok_backend() as b, Tokentap(cfg(b.port)) as t:
        expect(t.port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n", 404, "rejected", t)
        assert t.access()[-1]["route"] is None


def test_413_body_too_large():
    with ok_backend() as b, Tokentap(cfg(b.port, "limits: {max_body_bytes: 1k}\n")) as t:
        expect(t.port, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n",
               413, "rejected", t)
        big = b"%x\r\n%s\r\n0\r\n\r\n" % (3000, b"a" * 3000)
        expect(t.port, b"POST /v1/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               + big, 413, "rejected", t)


def test_431_head_too_large():
    with ok_backend() as b, Tokentap(cfg(b.port, "limits: {max_header_bytes: 2k}\n")) as t:
        expect(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 4000 +
               b"\r\n\r\n", 431, "rejected", t)


def test_502_unreachable_and_bad_response():
    with Tokentap(cfg(free_port())) as t:
        why = expect(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 502,
                     "connect_error", t)
        assert why == "cannot connect: Connection refused", why

    def bad(req, c):
        c.send(b"NOT HTTP AT ALL\r\n\r\n")
        return "close"

    with Backend(bad) as b, Tokentap(cfg(b.port)) as t:
        expect(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 502, "upstream_error", t)


def test_503_over_max_connections():
    """At max_connections, an idle connection (one that has sent nothing,
    or waits between requests) is closed to make room; only when every
    connection is busy does a new client get the 503."""
    with ok_backend() as b, Tokentap(cfg(b.port, "workers: 1\nlimits: {max_connections: 1}\n")) as t:
        busy = socket.create_connection(("127.0.0.1", t.port))
        busy.sendall(b"GET /v1/x HTTP/1.1\r\n")            # a request on its way
        time.sleep(0.1)
        code, _ = status_of(raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n"))
        assert code == 503
        busy.close()
        time.sleep(0.1)
        idle = socket.create_connection(("127.0.0.1", t.port))   # sends nothing
        time.sleep(0.1)
        code, _ = status_of(raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n"
                                        b"Connection: close\r\n\r\n"))
        assert code == 200
        idle.settimeout(2)
        assert idle.recv(1) == b"", "the idle connection was not reclaimed"
        idle.close()


def test_504_first_byte_and_idle_timeouts():
    def silent(req, c):
        c.sleep_watching(3)
        return "close"

    with Backend(silent) as b, Tokentap(cfg(b.port, "    timeouts: {first_byte: 300ms}\n")) as t:
        start = time.monotonic()
        expect(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n", 504, "timeout", t)
        assert 0.25 < time.monotonic() - start < 2

    def stalls(req, c):
        c.send(SSE_HEAD)
        c.chunk(b"data: 1\n\n")
        c.sleep_watching(3)
        return "close"

    with Backend(stalls) as b, Tokentap(cfg(b.port, "    timeouts: {idle: 300ms}\n")) as t:
        resp = raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n")
        assert resp.startswith(b"HTTP/1.1 200"), resp
        line = t.access(1)[0]
        assert line["outcome"] == "timeout" and line["status"] == 200, line


def test_slowloris_client_header_timeout():
    with ok_backend() as b, Tokentap(cfg(b.port, "timeouts: {client_header: 300ms}\n")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHo")
        s.settimeout(3)
        start = time.monotonic()
        data = s.recv(65536)
        assert data.startswith(b"HTTP/1.1 408"), data
        assert time.monotonic() - start < 2
        s.close()


def test_upstream_abort_mid_stream():
    def dies(req, c):
        c.send(SSE_HEAD)
        c.chunk(b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n')
        return "close"

    with Backend(dies) as b, Tokentap(cfg(b.port)) as t:
        raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Length: 2\r\n\r\n{}")
        line = t.access(1)[0]
        assert line["outcome"] == "upstream_abort", line
