# SPDX-License-Identifier: Apache-2.0
"""Forwarding: what the client gets is what the upstream sent, byte for byte,
and what the upstream gets is the client's request with the proxy's few
documented rewrites."""
import os
import re
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import CHAT, Response, Tokentap, conf, dechunk, parse_response, read_response, \
    report, request, until
from peers import SSE_HEAD, Backend, sse_handler


# Streams whose framing a careless proxy or parser would change.
ODD_STREAMS = [
    [b"data: a\r\n\r\n", b"data: b\r\r", b"data: c\n\n"],
    [b"\xef\xbb\xbfdata: bom\n\n", b": comment\n\n", b"event: x\ndata\n\n"],
    [b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", b"data: [DONE]\n\n"],
]


def test_byte_identical_odd_streams():
    for chunks in ODD_STREAMS:
        with Backend(sse_handler(chunks)) as b, Tokentap(conf(b)) as t:
            r = request(t.port)
            assert r.status_line == "HTTP/1.1 200 OK"
            expect = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
            assert r.raw == expect and r.rest == b"", (r.raw, expect)


def test_events_split_at_every_byte():
    stream = b"event: message\r\ndata: {\"x\": 1}\r\n\r\ndata: two\n\n"
    chunks = [stream[i:i + 1] for i in range(len(stream))]
    with Backend(sse_handler(chunks)) as b, Tokentap(conf(b)) as t:
        r = request(t.port)
        assert r.body == stream
        assert r.raw.count(b"\r\n") == 2 * len(chunks) + 2   # framing kept as sent


def test_one_mib_event_and_curl():
    big = b"data: " + b"x" * (1 << 20) + b"\n\n"
    with Backend(sse_handler([big[:300000], big[300000:]])) as b, Tokentap(conf(b)) as t:
        out = subprocess.run(["curl", "-sN", "--raw", "-d", "{}", t.url(CHAT)],
                             capture_output=True, timeout=20).stdout
        assert dechunk(out) == big


def test_close_delimited_body():
    """A body delimited by the close passes whole; its outcome follows the
    one rule (docs/contract.md §4): on an OpenAI route, ok with the stream's
    end marker, upstream_abort without it (the stream was cut short)."""
    for done, outcome in ((b"data: [DONE]\n\n", "ok"), (b"", "upstream_abort")):
        payload = b"data: a\n\ndata: b\n\n" + done

        def handle(req, c):
            c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Connection: close\r\n\r\n")
            c.send(payload[:5])
            time.sleep(0.05)
            c.send(payload[5:])
            return "close"

        with Backend(handle) as b, Tokentap(conf(b)) as t:
            r = request(t.port)
            assert r.body == payload
            assert r.headers["connection"] == "close"
            log = t.access(1)[0]
            assert log["outcome"] == outcome, log
            assert log["events"] == 2 + bool(done), log


def test_http10_client_gets_decoded_body():
    chunks = [b"data: 1\n\n", b"data: 2\n\n"]
    with Backend(sse_handler(chunks)) as b, Tokentap(conf(b)) as t:
        r = request(t.port, version="1.0")
        assert r.body == b"".join(chunks)
        assert "transfer-encoding" not in r.headers


def test_upstream_request_rewrites():
    def handle(req, c):
        c.send(b"HTTP/1.1 204 No Content\r\nX-Up: 1\r\nKeep-Alive: timeout=5\r\n\r\n")
        return "keep"

    extra = """    match: {path_prefix: /api/}
    strip_prefix: true
    set_headers: {Authorization: "Bearer upstream-key"}
"""
    with Backend(handle) as b:
        with Tokentap(conf(f"http://127.0.0.1:{b.port}/base", extra)) as t:
            r = request(t.port, "/api/v1/chat?x=1", headers=[
                "Authorization: Bearer client", "X-Forwarded-For: 10.0.0.9",
                "Connection: close, X-Drop", "X-Drop: 1", "Keep-Alive: 5", "TE: trailers",
                "X-Keep: yes"])
            assert r.status_line == "HTTP/1.1 204 No Content", r.head
            assert ("X-Up", "1") in r.header_list and "keep-alive" not in r.headers
            r = b.requests[0]
            assert r.target == "/base/v1/chat?x=1", r.target
            assert r.header("Host") == f"127.0.0.1:{b.port}"
            assert r.all("Authorization") == ["Bearer upstream-key"]
            assert r.header("X-Forwarded-For") == "10.0.0.9, 127.0.0.1"
            assert r.header("X-Forwarded-Proto") == "http"
            assert r.header("X-Keep") == "yes"
            for hop in ("X-Drop", "Keep-Alive", "TE", "Connection"):
                assert r.header(hop) is None, hop
            rid = r.header("X-Request-Id")
            assert rid and len(rid) == 32
            assert t.access(1)[0]["request_id"] == rid
            request(t.port, "/api/x", headers=["X-Request-Id: abc-123"])
            assert b.requests[1].header("X-Request-Id") == "abc-123"
            assert b.requests[1].target == "/base/x"


def test_keepalive_reuse_both_sides():
    body = b"data: ok\n\n"

    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return "keep"

    with Backend(handle) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        for i in range(3):
            s.sendall(b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while not data.endswith(body):
                data += s.recv(65536)
            assert data.startswith(b"HTTP/1.1 200 OK"), data
        s.close()
        assert len(b.requests) == 3
        assert len(b.conns) == 1, "the upstream connection was not reused"


def test_limits_upstream_keepalive_caps_the_idle_pool():
    """Five requests at once need five upstream connections. By default
    all five are kept idle and the next five reuse them; with
    limits.upstream_keepalive: 2 three are closed as they are released, and
    the next five open three new ones (as nginx's keepalive 2 does)."""
    body = b"data: ok\n\n"

    def round_of_five(t, b):
        gate = threading.Barrier(5, timeout=20)

        def handle(req, c):
            gate.wait()               # all five in flight: five connections
            c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            return "keep"
        b.handler = handle
        out = []
        threads = [threading.Thread(target=lambda: out.append(
            request(t.port, "/v1/chat/completions").status)) for _ in range(5)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert out == [200] * 5, out

    for extra, conns in (("", 5), ("limits: {upstream_keepalive: 2}\n", 8)):
        with Backend(None) as b, Tokentap(conf(b, top="workers: 1\n" + extra)) as t:
            round_of_five(t, b)
            t.wait_logged(5)          # each released before its log line
            round_of_five(t, b)
            t.wait_logged(10)
            assert len(b.requests) == 10
            assert len(b.conns) == conns, (extra, len(b.conns))


def test_a_post_is_never_sent_twice():
    """A backend that closes a pooled connection right after reading a POST
    (the keep-alive race): the request is not sent again on a new
    connection, where the backend would generate twice; the client gets a
    502 (as from nginx). A GET in the same spot is retried, once."""
    body = b'{"ok":1}'

    def handle(req, c):
        if req.target.endswith("/drop"):
            return "close"              # read it, answer nothing
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return "keep"

    with Backend(handle) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        assert request(t.port, "/v1/completions").body == body    # pools the connection
        assert request(t.port, "/v1/completions/drop").status == 502
        assert [r.target for r in b.requests].count("/v1/completions/drop") == 1
        log = t.wait_logged(2)[1]
        assert log["outcome"] == "upstream_error" and log["status"] == 502, log

        assert request(t.port, "/v1/models", method="GET").body == body   # pools again
        out = request(t.port, "/v1/models/drop", method="GET")
        # retried once on a new connection, which the backend drops too
        assert [r.target for r in b.requests].count("/v1/models/drop") == 2
        assert out.status == 502, out.head


def test_client_disconnect_closes_the_upstream_at_once():
    """A client that leaves mid-stream: tokentap closes the upstream while
    the backend still streams (its 20 s stream is cut short), logged
    client_abort. How soon is reported; a bound on it would be the host's."""
    state = {}

    def handle(req, c):
        c.send(SSE_HEAD)
        for i in range(2000):
            c.chunk(b"data: %d\n\n" % i)
            if not c.sleep_watching(0.01):
                break
        state["sent"] = i + 1
        state["closed_at"] = c.peer_closed_at
        return "close"

    with Backend(handle) as b, Tokentap(conf(b)) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.sendall(b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
        s.recv(100)
        time.sleep(0.1)
        gone = time.monotonic()
        s.close()
        until(lambda: "sent" in state, 30, "the backend's stream ending")
        assert state["closed_at"] is not None and state["sent"] < 2000, state
        report(f"upstream closed {(state['closed_at'] - gone) * 1000:.1f} ms after the client")
        assert t.wait_logged(1)[0]["outcome"] == "client_abort"


def test_each_read_is_written_in_the_same_loop_turn():
    """docs/contract.md §3: a read from the upstream goes to the client
    before the next read, without waiting a loop turn for write readiness:
    in the system
    calls, each upstream read (recvmsg, or libevent's readv) is followed by
    the client write (sendto or writev), and no epoll_ctl toggles interest
    per event. Both sockets have TCP_NODELAY: Nagle would hold a small
    event until the last one's ACK (40 ms on a delayed ACK). (How many
    microseconds an event takes through tokentap is the bench's figure,
    make bench, latency.)"""
    n = 40
    chunks = [b"data: %d\n\n" % i for i in range(n)]
    trace = tempfile.mktemp(prefix="tt-strace-")
    # 20 ms apart: under strace (every call of every thread stopped) on a
    # busy host, events 5 ms apart were read together
    with Backend(sse_handler(chunks, gap=0.02)) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        st = subprocess.Popen(["strace", "-f", "-p", str(t.p.pid), "-o", trace,
                               "-e", "trace=readv,writev,recvfrom,recvmsg,sendto,"
                               "epoll_ctl,epoll_wait,ioctl,setsockopt"],
                              stderr=subprocess.PIPE)
        st.stderr.readline()                 # "Process N attached"
        time.sleep(0.2)
        r = request(t.port)
        st.send_signal(signal.SIGINT)
        st.wait(10)
        assert r.body == b"".join(chunks)
    # strace -f interleaves the threads' calls: the main thread's
    # epoll_wait can land between a worker's read and its write, so the
    # order is checked within the thread that reads the stream.
    with open(trace) as f:
        traced = [l.split(None, 1) for l in f if re.match(r"\d+ +\w+\(", l)]
    os.unlink(trace)
    lines = [(tid, c) for tid, c in traced if not c.startswith("setsockopt(")]
    tids = {tid for tid, c in lines
            if c.startswith(("readv(", "recvfrom(", "recvmsg(")) and 'data: ' in c}
    assert len(tids) == 1, tids
    calls = [c for tid, c in lines if tid in tids]
    reads = [i for i, c in enumerate(calls)
             if c.startswith(("readv(", "recvfrom(", "recvmsg(")) and 'data: ' in c]
    assert len(reads) >= n // 2, calls[:20]
    not_followed = [calls[i:i + 3] for i in reads
                    if i + 1 >= len(calls) or
                    not calls[i + 1].startswith(("writev(", "sendto("))]
    assert not not_followed, not_followed[:3]
    during = calls[reads[0]:reads[-1]]
    assert sum(c.startswith("epoll_ctl(") for c in during) == 0, during[:12]
    # the body is read without asking the kernel how much there is first
    assert sum(c.startswith("ioctl(") for c in during) == 0, during[:12]
    # the client's socket (accepted) and the upstream's (connected) by the
    # worker that streamed
    nodelay = [c for tid, c in traced if tid in tids and c.startswith("setsockopt(") and
               "TCP_NODELAY, [1]" in c]
    assert len(nodelay) >= 2, [c for tid, c in traced if c.startswith("setsockopt(")]


def strace_calls(path):
    """strace -f's calls as (thread, call), in each thread's order. A call
    another thread's interrupted is written in two pieces ("recvfrom(17,
    <unfinished ...>", later "<... recvfrom resumed>...)"): made whole
    again, at its end."""
    out, pending = [], {}
    with open(path) as f:
        for raw in f:
            m = re.match(r"(\d+) +(.*)", raw.rstrip("\n"))
            if m is None:
                continue
            tid, call = m.groups()
            if call.endswith("<unfinished ...>"):
                pending[tid] = call[:-len("<unfinished ...>")]
                continue
            r = re.match(r"<\.\.\. \w+ resumed>(.*)", call)
            if r is not None and tid in pending:
                call = pending.pop(tid) + r.group(1)
            if re.match(r"\w+\(", call):
                out.append((tid, call))
    return out


def test_request_on_a_pooled_connection_leaves_in_the_same_loop_turn():
    """A request read from the client goes to a kept-alive upstream
    connection in the same loop turn: the worker's read of the request is
    followed by its write upstream, with no epoll_ctl (arming EPOLLOUT) or
    epoll_wait between them, only the pooled connection's check (one
    recv MSG_PEEK: is it still open?); handing the connection back to the
    pool costs one epoll_ctl."""
    body = b"data: ok\n\n"

    def handle(req, c):
        # the body in two reads: the second one by the direct read event
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body[:4]))
        time.sleep(0.02)
        c.send(body[4:])
        return "keep"

    trace = tempfile.mktemp(prefix="tt-strace-")
    with Backend(handle) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))

        def exchange(i):
            s.sendall(b"GET /v1/req-%d HTTP/1.1\r\nHost: x\r\n\r\n" % i)
            data = b""
            while not data.endswith(body):
                data += s.recv(65536)

        exchange(0)                          # opens the upstream connection
        st = subprocess.Popen(["strace", "-f", "-p", str(t.p.pid), "-o", trace,
                               "-e", "trace=readv,writev,recvfrom,recvmsg,sendto,"
                               "epoll_ctl,epoll_wait,ioctl"],
                              stderr=subprocess.PIPE)
        st.stderr.readline()
        time.sleep(0.2)
        for i in range(1, 4):
            exchange(i)
        st.send_signal(signal.SIGINT)
        st.wait(10)
        s.close()
        assert len(b.conns) == 1, "the upstream connection was not reused"
    lines = strace_calls(trace)
    os.unlink(trace)
    reads = [(tid, i) for i, (tid, c) in enumerate(lines)
             if c.startswith(("readv(", "recvfrom(", "recvmsg(")) and "GET /v1/req-" in c]
    assert len(reads) == 3, [c for _, c in lines][:20]
    for tid, i in reads:
        calls = [c for t2, c in lines[i + 1:] if t2 == tid]
        assert calls and calls[0].startswith("recvfrom(") and "MSG_PEEK" in calls[0], \
            calls[:4]
        assert calls[1].startswith(("writev(", "sendto(")) and \
            "GET /v1/req-" in calls[1], calls[:4]
    # handing the connection back to the pool swaps its read event: one
    # epoll_ctl a request (the changelist folds the delete and the add)
    ctl = [c for t2, c in lines[reads[0][1]:] if t2 == reads[0][0]
           and c.startswith("epoll_ctl(")]
    assert len(ctl) <= 3, ctl


def test_plain_upstream_backpressure_bounds_memory_and_loses_nothing():
    """A client that stops reading behind a fast plain upstream: the proxy
    stops reading the upstream (its memory stays near the 256 KiB high
    mark, not the 24 MB sent) and, when the client reads again, resumes
    with every byte in order."""
    big = [b"data: " + (b"%06d" % i) * 2000 + b"\n\n" for i in range(2000)]   # ~24 MB
    with Backend(sse_handler(big)) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        before = t.rss_kib()
        s = socket.create_connection(("127.0.0.1", t.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 131072)
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(20)
        r = Response()
        r.feed(s.recv(1024))
        time.sleep(1.0)                     # the client stalls; the upstream is fast
        stalled = t.rss_kib()
        read_response(s, r, timeout=20)
        s.close()
        assert r.complete and r.body == b"".join(big)
        assert stalled - before < 4096, (before, stalled)


def test_a_client_paused_while_the_connect_waits_is_read_again():
    """request_buffering off, a connect that takes a second (the backend's
    accept queue is full, so the kernel drops tokentap's SYN and sends it
    again a second later): the client, paused past the 256 KiB high mark
    meanwhile, is read again once what it sent has gone, and the backend
    gets the whole body. Seen failing when the connect callback wrote the
    request itself and told no one: libevent, finding the output empty,
    calls no write callback, and the client stayed paused."""
    n = 600_000
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(0)
    port = ls.getsockname()[1]
    plug = socket.create_connection(("127.0.0.1", port))    # the queue's one place
    got = {}

    def serve():
        time.sleep(0.5)                 # tokentap's first SYN is dropped by now
        p, _ = ls.accept()
        p.close()
        c, _ = ls.accept()
        c.settimeout(20)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += c.recv(65536)
        body = buf.split(b"\r\n\r\n", 1)[1]
        while len(body) < n:
            data = c.recv(1 << 20)
            if not data:
                break
            body += data
        got["body"] = body
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        with Tokentap(conf(port, "    request_buffering: false\n")) as t:
            s = socket.create_connection(("127.0.0.1", t.port))
            s.settimeout(10)
            head = f"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n" \
                   "Connection: close\r\n\r\n"
            s.sendall(head.encode() + b"y" * n)
            r = Response()
            read_response(s, r, timeout=10)
            s.close()
            assert r.complete and r.body == b"ok", r.status_line
            th.join(10)
            assert got.get("body") == b"y" * n, len(got.get("body", b""))
            line = t.wait_logged(1)[0]
            # the connect waited (else nothing was paused meanwhile)
            assert line["outcome"] == "ok" and line["duration_ms"] > 500, line
    finally:
        plug.close()
        ls.close()


def test_bytes_after_the_response_are_not_forwarded():
    """An upstream that sends more than its response framing says, in the
    same packet as the body's end: the client gets the response exactly,
    and the connection that misbehaved is not reused."""
    bodies = [b"data: one\n\n", b"data: two\n\n"]

    def handle(req, c):
        body = bodies[len(b.requests) - 1]
        if len(b.requests) == 1:
            c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body))
            time.sleep(0.05)                # the body comes in a read of its own
            c.send(body + b"GARBAGE")
        else:
            c.send(SSE_HEAD)
            time.sleep(0.05)
            c.send(b"%x\r\n%s\r\n0\r\n\r\nMORE" % (len(body), body))
        return "keep"

    with Backend(handle) as b, Tokentap(conf(b, "workers: 1\n")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        got = []
        for i in range(2):
            s.sendall(b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            s.settimeout(5)
            while not (data.endswith(bodies[0]) or data.endswith(b"0\r\n\r\n")):
                data += s.recv(65536)
            got.append(data)
        s.settimeout(0.3)
        try:
            extra = s.recv(100)
        except socket.timeout:
            extra = b""
        s.close()
        for data, body in zip(got, bodies):
            r = parse_response(data)
            assert r.complete and r.body == body and r.rest == b"", data
        assert extra == b"", extra
        assert len(b.conns) == 2, "a connection that sent stray bytes was reused"


def test_descriptor_table_is_grown_before_the_workers_start():
    """Linux grows a threaded process's descriptor table with an RCU wait
    (10-20 ms here) inside the accept(2) that crosses each power of two:
    tokentap grows it at startup for max_connections instead, so no worker
    ever waits there with streams in flight."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(2 * 3000 + 1024, soft)
    with Tokentap(conf(1, "limits:\n  max_connections: 3000\n")) as t:
        with open(f"/proc/{t.p.pid}/status") as f:
            size = [int(l.split()[1]) for l in f if l.startswith("FDSize:")][0]
        assert size >= want, (size, want)


def test_main_thread_yields_to_the_workers():
    """The main thread (statistics, admin, alerts) runs 10 nice levels
    below the workers, so that its timer does not take a worker's CPU
    while streams are forwarded; the workers keep the process's own."""
    own = os.getpriority(os.PRIO_PROCESS, 0)
    want = min(own + 10, 19)

    def nice_of_threads(pid):
        nice = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                nice[int(tid)] = int(f.read().rsplit(")", 1)[1].split()[16])
        return nice

    with Tokentap(conf(1, "workers: 2\n")) as t:
        # the listening socket is bound before the workers start, so the
        # port answers a moment before the threads exist: wait for them
        deadline = time.time() + 10
        while True:
            nice = nice_of_threads(t.p.pid)
            if (len(nice) >= 3 and nice[t.p.pid] == want) or time.time() > deadline:
                break
            time.sleep(0.05)
    main = nice.pop(t.p.pid)
    assert len(nice) >= 2, nice
    assert set(nice.values()) == {own}, nice
    assert main == want, (main, own)
