# SPDX-License-Identifier: Apache-2.0
"""Whose fault it was: a client too slow to send its request or to take its
answer ends `client_timeout`, an outcome the SLOs and the error-rate alert
leave out as they leave out `client_abort`; a client that holds a stream
back is no stall of the model's.

nginx 1.22 is the reference where it has a figure: a stalled upload gets
408 at client_body_timeout, buffered or not."""
import socket
import threading
import time

from harness import Tokentap, conf, metric, parallel, until
from peers import SSE_HEAD, STREAM_HI, Backend, Nginx
from test_expect_continue import routes

POST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\n")
TOKEN = b'data: {"choices":[{"delta":{"content":"tok"}}]}\n\n'


def stalled_upload(port, path=b"/v1/chat/completions", wait=10):
    """Sends a head and 9 bytes of a 100-byte body, then nothing (path
    None: half a head): (the response, seconds until it came)."""
    t0 = time.monotonic()       # before the connect: no timer starts earlier
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHo" if path is None else
              POST.replace(b"/v1/chat/completions", path) +
              b"Content-Length: 100\r\n\r\n{\"model\":")
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError:
        pass
    s.close()
    return buf, time.monotonic() - t0


SLO = """stats: {windows: [1m]}
slos:
  - {name: all, ttft: 500ms, objective: 0.9}
alerts:
  evaluate_every: 200ms
  min_samples: 2
  thresholds: {error_rate_warning: 0.2}
"""


def quiet(t, n):
    """n requests were counted; none burned the budget, no alert moved."""
    until(lambda: (metric(t, "tokentap_requests_total") or 0) >= n, 15, f"{n} requests counted")
    time.sleep(0.6)                                  # three evaluations
    slo = t.get("/slo", json=True)["slos"][0]
    assert (slo["budget"]["eligible"], slo["budget"]["bad"]) == (0, 0), slo
    alerts = t.get("/alerts", json=True)
    assert alerts["transitions"] == [], alerts["transitions"]
    assert all(r["state"] == "ok" for r in alerts["rules"]), alerts["rules"]


def test_a_stalled_upload_is_the_clients_408():
    """A client that stops sending its body: 408 after timeouts.client_body,
    outcome client_timeout, with the body held (the backend never hears of
    it) or streamed (the backend's connection closes, its request cut);
    nginx answers 408 at client_body_timeout in both modes. A stalled head
    is the client's too (408 at timeouts.client_header, before `rejected`).
    Together they fire no ErrorRateHigh and burn no budget (before: 504
    "upstream idle timeout", outcome timeout, counted bad). A backend that
    takes none of a streamed body is still the backend's: 504, timeout."""
    with Backend(STREAM_HI) as b, Tokentap(routes(b.port, "timeouts: {client_body: 1s, "
                                                "client_header: 1s, idle: 10s}\n" + SLO)) as t:
        got = parallel(stalled_upload, [(t.port, p) for p in
                                        [b"/v1/chat/completions", b"/s/v1/chat/completions"] * 2
                                        + [None]], 5)
        for resp, took in got:
            assert resp.startswith(b"HTTP/1.1 408 Request Timeout"), resp
            assert 0.9 < took < 5, took
        assert [b"timeouts.client_body" in r for r, _ in got] == [True] * 4 + [False]
        log = t.wait_logged(5)
        assert sorted((e["route"] or "-", e["status"], e["outcome"]) for e in log) == \
            [("-", 408, "client_timeout")] + [("llm", 408, "client_timeout")] * 2 + \
            [("streamed", 408, "client_timeout")] * 2, log
        # only the streamed uploads went up, and their connections closed
        until(lambda: all(c.sock.fileno() == -1 for c in b.conns), 10,
              "the streamed uploads' upstream connections closed")
        assert b.requests == [] and len(b.conns) == 2, b.conns
        assert all(c.sock.fileno() == -1 for c in b.conns)
        assert metric(t, "tokentap_requests_total", route="llm", outcome="client_timeout",
                      code="4xx") == 2
        quiet(t, 5)
        assert "no request body bytes for" in t.stderr()

    for streamed in ("", "proxy_request_buffering off;"):
        with Backend(STREAM_HI) as b, Nginx(b.port, "client_body_timeout 1s; " + streamed) as ng:
            resp, took = stalled_upload(ng.port)
            ng.stop()
            assert '"POST /v1/chat/completions HTTP/1.1" 408' in ng.access_log()
            assert 0.9 < took < 5, took

    # the backend takes none of a streamed body: tokentap stops reading the
    # client (backpressure); that pause is the backend's
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)                                  # accepted by the kernel, never read
    try:
        with Tokentap(routes(lsock.getsockname()[1], "timeouts: {client_body: 1s, idle: 10s}\n"
                             "limits: {max_body_bytes: 64m}\n")) as t:
            s = socket.create_connection(("127.0.0.1", t.port), timeout=10)
            size = 64 << 20
            # the head and the body in one stream: the body starts at once
            data = b"POST /s/v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size \
                + b"x" * size

            def push():
                try:
                    s.sendall(data)
                except OSError:
                    pass
            threading.Thread(target=push, daemon=True).start()
            head = s.recv(4096)
            s.close()
            e = t.wait_logged(1)[0]
            assert head.startswith(b"HTTP/1.1 504"), head
            assert (e["status"], e["outcome"]) == (504, "timeout"), e
    finally:
        lsock.close()


def flood(req, c):
    """Token events as fast as tokentap takes them, until it closes."""
    c.send(SSE_HEAD)
    batch = b"%x\r\n%s\r\n" % (len(TOKEN * 100), TOKEN * 100)
    try:
        while True:
            c.sock.sendall(batch)
    except OSError:
        pass
    return "close"


def test_a_client_that_stops_reading_is_no_stall_and_burns_no_budget():
    """Three clients that read a stream's head and stop: tokentap stops
    reading the upstream (backpressure), and that time is theirs. With
    StreamStalled at 1 s, token_idle 1.5s, idle 1s, timeouts.send 3s and an
    SLO: no stall, no alert, no token_idle cut, no upstream idle timeout,
    no budget burned; each is let go by timeouts.send, logged 200
    client_timeout with client_held_ms. Before: StreamStalled fired,
    token_idle (or idle) cut each as `timeout`, and the SLO counted them
    bad."""
    with Backend(flood) as b, Tokentap(conf(b, "    thresholds: {stall: 1s}\n" + SLO,
                                            top="timeouts: {send: 3s, token_idle: 1500ms, "
                                                "idle: 1s}\n")) as t:
        socks = []
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", t.port))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(POST + b"Content-Length: 2\r\n\r\n{}")
            s.settimeout(5)
            assert s.recv(64).startswith(b"HTTP/1.1 200"), "no head"
            socks.append(s)                          # ...and read no more
        log = t.wait_logged(3, timeout=15)
        for s in socks:
            s.close()
        assert len(log) == 3, log
        for e in log:
            assert (e["status"], e["outcome"], e["stalls"]) == (200, "client_timeout", 0), e
            assert e["client_held_ms"] > 2000 and e["gap_max_ms"] < 1000, e
            assert e["output_tokens"] > 1000 and e["tpot_ms"] is not None, e
        quiet(t, 3)
        assert metric(t, "tokentap_requests_total", outcome="client_timeout") == 3
        assert metric(t, "tokentap_stalls_total") == 0
        assert t.stats()["groups"][0]["stalls"] == 0
        err = t.stderr()
        assert "took no bytes for 3000 ms" in err and "no token for" not in err, err
        assert "upstream idle" not in err, err
