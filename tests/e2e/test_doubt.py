# SPDX-License-Identifier: Apache-2.0
"""Every time with its doubt (docs/measurement.md, "Doubt"): the access
log's ttft_doubt_ms says how much earlier the first token may have come
than its kernel stamp, and the true time lies in [TTFT - doubt, TTFT];
head_doubt_ms, ttfo_doubt_ms, last_token_doubt_ms and start_doubt_ms say
the same of the response head, the first output token, the last token and
the request's first byte.

The backend (python, raw sockets) sends the head, the role event
HEAD_GAP_S later, and the tokens on its schedule, bracketing each send
with the monotonic clock; the client brackets its request. An idle
tokentap reads each alone: the stamp is its own, the doubt 0. A held one
is stopped (SIGSTOP) across the head and the role event, across the first
HELD tokens (GAP_S apart), and across the last token and the stream's end:
each is read merged with what came after it, stamped GAP_S or more late,
and its doubt must cover the lateness (the last read that found the
socket drained was before it). Deterministic: no timing is judged but
the brackets, which the test's own threads make; a bracket wider than
BRACKET_MS says they were kept waiting and the request is not judged.
The same over a TLS upstream (its body read by tokentap's own TLS reads:
a read whole when OpenSSL holds none of its bytes)."""
import os
import signal
import socket
import time

from harness import Tokentap
from peers import SSE_HEAD, Backend, TLSBackend, pki

TOKENS = 5
FIRST_S = 0.1       # the first token's delay after the head
HEAD_GAP_S = 0.05   # the role event's after the head
GAP_S = 0.05        # between tokens
HELD = 3            # tokens sent while tokentap is stopped
LOOPBACK_MS = 1.0   # loopback's delivery and the log's rounding
BRACKET_MS = 2.0
REQUESTS = 8        # every other one held


def chunk(text):
    return b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode()


def stopped(p, sig):
    """SIGSTOP or SIGCONT to process p, and back once every thread of it
    is stopped, or none is (a signal is delivered after kill returns: a
    thread not yet stopped could read a token alone)."""
    p.send_signal(sig)
    want = sig == signal.SIGSTOP
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{p.pid}/task"):
            try:
                with open(f"/proc/{p.pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass
        if all((s in "tT") == want for s in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"tokentap not {'stopped' if want else 'running'}: {states}")


def scheduled(sent, pid, held):
    """The head, the role event HEAD_GAP_S later; TOKENS tokens FIRST_S
    later, GAP_S apart; the stream's end GAP_S after the last. A request i
    in held has tokentap (pid()) stopped around its head and role event,
    its first HELD tokens, and its last token and end. sent[i]: the send
    brackets of its head, first token and last token."""
    def bracket(send, data):
        before = time.monotonic()
        send(data)
        return before, time.monotonic()

    def handle(req, c):
        i = len(sent)
        stop = i in held
        got = {}
        sent.append(got)
        if stop:
            stopped(pid(), signal.SIGSTOP)
        got["head"] = bracket(c.send, SSE_HEAD)
        time.sleep(HEAD_GAP_S)
        c.chunk(b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n')
        if stop:
            stopped(pid(), signal.SIGCONT)
        time.sleep(FIRST_S)
        if stop:
            stopped(pid(), signal.SIGSTOP)
        for k in range(TOKENS):
            if k:
                time.sleep(GAP_S)
            if stop and k == TOKENS - 1:
                stopped(pid(), signal.SIGSTOP)
            at = bracket(c.chunk, chunk("t%d" % k))
            if k == 0:
                got["first"] = at
            if stop and k == HELD - 1:
                # the kernel has queued them all (loopback delivers within
                # the send call)
                stopped(pid(), signal.SIGCONT)
        got["last"] = at
        time.sleep(GAP_S)
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        if stop:
            stopped(pid(), signal.SIGCONT)
        return "keep"
    return handle


def request(port, i):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(30)
    body = b'{"model":"m","stream":true}'
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: d-%d\r\n"
           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (i, len(body), body))
    before = time.monotonic()
    s.sendall(req)
    after = time.monotonic()
    data = b""
    while b"0\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    assert b"[DONE]" in data, data[-200:]
    return before, after


def within(kind, name, at, doubt, lo, hi):
    """The truth, somewhere in the bracket [lo, hi] (ms from the request's
    start), within [at - doubt, at], loopback allowed: the stamp no earlier
    than the bracket's start, the floor no later than its end (all that
    a bracket of up to BRACKET_MS can prove)."""
    assert doubt is not None and doubt >= 0, (kind, name, doubt)
    assert lo <= at + LOOPBACK_MS and at - doubt - LOOPBACK_MS <= hi, \
        (kind, name, at, doubt, lo, hi)


def judge(kind, line, req, got, head_whole=True):
    """A request's points against their brackets: each within its doubt;
    held, each stamped late (the test can fail) and doubted so; idle, each
    its own stamp. head_whole: the head's read can be judged whole (a TLS
    upstream's head comes through its bufferevent, never whole: its doubt
    is the whole window, checked to hold the truth all the same)."""
    assert line["timestamps"] == "kernel", line
    ph = line["phases"]
    head_at = sum(ph[k] or 0 for k in ("client_ms", "connect_ms", "send_ms",
                                      "upstream_head_ms"))
    last_at = line["ttft_ms"] + line["tpot_ms"] * (TOKENS - 1)
    points = [("ttft", line["ttft_ms"], line["ttft_doubt_ms"], got["first"], HELD - 1),
              ("last_token", last_at, line["last_token_doubt_ms"], got["last"], 1),
              ("head", head_at, line["head_doubt_ms"], got["head"], 0)]
    # every token is output text: the first output token is the first token
    assert line["ttfo_doubt_ms"] == line["ttft_doubt_ms"], line
    # a connection's first request: no floor known for its first byte
    assert line["start_doubt_ms"] is None, line
    for name, at, doubt, sent, gaps in points:
        lo = (sent[0] - req[1]) * 1000     # the true time's bracket
        hi = (sent[1] - req[0]) * 1000
        within(kind, name, at, doubt, lo, hi)
        if kind == "held":
            # the stamps did merge (a later send's arrival), and the doubt
            # says so
            late = max(gaps * GAP_S, HEAD_GAP_S if name == "head" else GAP_S)
            assert at - hi > late * 1000 * 0.9, (name, at, lo, hi)
            assert doubt > 1, (name, line)
        elif name != "head" or head_whole:
            assert doubt < 1, (name, line)


def run(backend, route, after, head_whole=True):
    """REQUESTS requests, every other one held, each judged where its
    brackets are tight; then after(tokentap, held) while it runs."""
    sent = []
    held = set(range(1, REQUESTS, 2))
    box = []
    with backend(scheduled(sent, lambda: box[0].p, held)) as b, \
            Tokentap(f"workers: 1\ntimestamps: kernel\nroutes:\n  - name: r\n"
                     + route(b) + "    dialect: openai\n") as t:
        box.append(t)
        reqs = [request(t.port, i) for i in range(REQUESTS)]
        lines = {l["request_id"]: l for l in t.wait_logged(REQUESTS)}
        judged = {"held": 0, "idle": 0}
        for i, (req, got) in enumerate(zip(reqs, sent)):
            spans = [(got[k][1] - req[0]) - (got[k][0] - req[1]) for k in got]
            if max(spans) * 1000 > BRACKET_MS:
                continue
            kind = "held" if i in held else "idle"
            judged[kind] += 1
            judge(kind, lines[f"d-{i}"], req, got, head_whole)
        assert judged["held"] >= 2 and judged["idle"] >= 2, judged
        after(t, held)


def uncertain_counted(t, held):
    """The held TTFTs are the uncertain ones, and every one was stamped."""
    g = {g["route"]: g for g in t.stats()["groups"]}["r"]
    assert g["ttft_uncertain"] == len(held), g
    assert g["ttft_uncertain_share"] == round(len(held) / REQUESTS, 3), g
    assert t.metric("tokentap_ttft_uncertain_total", route="r") == len(held)
    assert t.metric("tokentap_ttft_stamped_total", route="r") == REQUESTS


def test_every_point_lies_within_its_doubt():
    run(Backend, lambda b: f"    upstream: http://127.0.0.1:{b.port}\n", uncertain_counted)


def test_a_tls_upstream_read_whole_has_its_own_stamp():
    """OpenSSL holds none of a read's bytes once its records are taken:
    the tokens' doubts are 0 idle, as a plain upstream's, and cover the
    truth held; the TTFTs count as stamped."""
    p = pki()
    run(lambda h: TLSBackend(h, p["server.crt"], p["server.key"]),
        lambda b: f"    upstream: https://localhost:{b.port}\n"
                  f"    tls: {{ca_file: {p['ca.crt']}}}\n", uncertain_counted, head_whole=False)


def keep_ok(req, c):
    c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    return "keep"


def two_requests(s, prefix, pause):
    """Two requests on the connection s, a pause after each answer: the
    monotonic times before each send and after each answer."""
    s.settimeout(30)
    marks = []
    for i in range(2):
        marks.append(time.monotonic())
        s.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s-%d\r\n\r\n"
                  % (prefix, i))
        data = b""
        while not data.endswith(b"ok"):
            data += s.recv(65536)
        marks.append(time.monotonic())
        time.sleep(pause)
    s.close()
    return marks


def test_the_start_doubt_reaches_back_to_the_last_drained_read():
    """A keep-alive connection's next request: its first byte came after
    the read that drained the client's socket, no later than the request
    before it ended, and the doubt says so (wider than the pause between
    them, narrower than both requests' span)."""
    with Backend(keep_ok) as b, \
            Tokentap(f"timestamps: kernel\nroutes:\n  - name: r\n"
                     f"    upstream: http://127.0.0.1:{b.port}\n") as t:
        marks = two_requests(socket.create_connection(("127.0.0.1", t.port)), b"k", 0.1)
        lines = {l["request_id"]: l for l in t.wait_logged(2)}
    assert lines["k-0"]["start_doubt_ms"] is None, lines["k-0"]
    doubt = lines["k-1"]["start_doubt_ms"]
    assert doubt is not None, lines["k-1"]
    # floor <= the first response's end < the second's send <= its stamp
    assert doubt >= (marks[2] - marks[1]) * 1000 - LOOPBACK_MS, (doubt, marks)
    # floor >= the first request's send, stamp <= the second's reply
    assert doubt <= (marks[3] - marks[0]) * 1000 + LOOPBACK_MS, (doubt, marks)


def test_a_pipelined_request_has_no_start_doubt():
    """The second request came with the first (one write): its first byte
    was already in a read that took the first's, so no read that found
    the socket drained came before it, and no floor is known (a floor from
    the read that carried it would lie after the truth)."""
    with Backend(keep_ok) as b, \
            Tokentap(f"timestamps: kernel\nroutes:\n  - name: r\n"
                     f"    upstream: http://127.0.0.1:{b.port}\n") as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.settimeout(30)
        s.sendall(b"".join(b"GET /x HTTP/1.1\r\nHost: x\r\nX-Request-Id: p-%d\r\n\r\n" % i
                           for i in range(2)))
        data = b""
        while data.count(b"ok") < 2:
            data += s.recv(65536)
        s.close()
        lines = {l["request_id"]: l for l in t.wait_logged(2)}
    assert lines["p-0"]["start_doubt_ms"] is None, lines["p-0"]
    assert lines["p-1"]["start_doubt_ms"] is None, lines["p-1"]


def test_a_tls_connections_requests_reach_back_no_further_than_known():
    """Over a TLS listener a request's floor is the last read of the socket
    that found it drained: for the first, one after the handshake (null
    when the request came with the handshake's last flight: the
    ClientHello's read is no floor); for the next, one after the first
    (or the handshake's, or null, when OpenSSL never read the socket dry
    since). Where there is one, it lies within the connection's span."""
    import ssl
    p = pki()
    with Backend(keep_ok) as b, \
            Tokentap(f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: "
                     f"{p['server.crt']}, key: {p['server.key']}}}\n"
                     f"timestamps: kernel\nroutes:\n  - name: r\n"
                     f"    upstream: http://127.0.0.1:{b.port}\n") as t:
        ctx = ssl.create_default_context(cafile=p["ca.crt"])
        marks = [time.monotonic()]
        marks += two_requests(ctx.wrap_socket(socket.create_connection(("127.0.0.1", t.port)),
                                              server_hostname="localhost"), b"s", 0.1)
        lines = {l["request_id"]: l for l in t.wait_logged(2)}
    first = lines["s-0"]["start_doubt_ms"]
    # floor >= the connection's start, stamp <= the first reply
    assert first is None or 0 <= first <= (marks[2] - marks[0]) * 1000 + LOOPBACK_MS, \
        (first, marks)
    # the next: null where OpenSSL's reads never found the socket drained
    # (the bufferevent reads a record's exact length and may stop there:
    # seen on a fresh Debian 12), else its floor is no later than the
    # pause before it, and no earlier than the connection (it can be a
    # read of the handshake's: OpenSSL read nothing dry since)
    doubt = lines["s-1"]["start_doubt_ms"]
    assert doubt is None or doubt >= (marks[3] - marks[2]) * 1000 - LOOPBACK_MS, \
        (doubt, marks)
    assert doubt is None or doubt <= (marks[4] - marks[0]) * 1000 + LOOPBACK_MS, \
        (doubt, marks)
