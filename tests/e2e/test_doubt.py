# SPDX-License-Identifier: Apache-2.0
"""Every time with its doubt (docs/measurement.md, "Doubt"): the access
log's ttft_doubt_ms says how much earlier the first token may have come
than its kernel stamp, and the true time lies in [TTFT - doubt, TTFT].

The backend (python, raw sockets) sends the head at once and the tokens
on its schedule, bracketing each send with the monotonic clock; the
client brackets its request. An idle tokentap reads each token alone: the
stamp is its own, the doubt 0. A held one (SIGSTOP after the head was
read, SIGCONT after three tokens were sent, GAP_S apart) reads the three
in one read, stamped with the third's arrival: TTFT two gaps late, and
the doubt must cover them (the last read that found the socket drained
was the head's, before the first token). Deterministic: no timing is
judged but the brackets, which the test's own threads make; a bracket
wider than BRACKET_MS says they were kept waiting and the request is not
judged."""
import os
import signal
import socket
import time

from harness import Tokentap
from peers import Backend, SSE_HEAD

TOKENS = 5
FIRST_S = 0.1       # the first token's delay after the head
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
    """Head and role at once; TOKENS tokens FIRST_S later, GAP_S apart;
    a request i in held has tokentap (pid()) stopped around its first
    HELD tokens. sent[i]: the first token's send bracket."""
    def handle(req, c):
        i = len(sent)
        sent.append(None)
        c.send(SSE_HEAD)
        c.chunk(b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n')
        time.sleep(FIRST_S)
        stop = i in held
        if stop:
            stopped(pid(), signal.SIGSTOP)
        for k in range(TOKENS):
            if k:
                time.sleep(GAP_S)
            before = time.monotonic()
            c.chunk(chunk("t%d" % k))
            if k == 0:
                sent[i] = (before, time.monotonic())
            if stop and k == HELD - 1:
                # the kernel has queued them all (loopback delivers within
                # the send call)
                stopped(pid(), signal.SIGCONT)
        time.sleep(GAP_S)
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
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


def test_the_first_token_lies_within_its_doubt():
    sent = []
    held = set(range(1, REQUESTS, 2))
    box = []
    with Backend(scheduled(sent, lambda: box[0].p, held)) as b, \
            Tokentap(f"workers: 1\ntimestamps: kernel\nroutes:\n  - name: r\n"
                     f"    upstream: http://127.0.0.1:{b.port}\n    dialect: openai\n") as t:
        box.append(t)
        reqs = [request(t.port, i) for i in range(REQUESTS)]
        lines = {l["request_id"]: l for l in t.wait_logged(REQUESTS)}
        judged = {"held": 0, "idle": 0}
        for i, (req, first) in enumerate(zip(reqs, sent)):
            line = lines[f"d-{i}"]
            assert line["timestamps"] == "kernel", line
            ttft, doubt = line["ttft_ms"], line["ttft_doubt_ms"]
            lo = (first[0] - req[1]) * 1000     # the true TTFT's bracket
            hi = (first[1] - req[0]) * 1000
            if hi - lo > BRACKET_MS:
                continue
            kind = "held" if i in held else "idle"
            judged[kind] += 1
            # the truth within [ttft - doubt, ttft], loopback allowed
            assert ttft - doubt - LOOPBACK_MS <= lo and hi <= ttft + LOOPBACK_MS, \
                (kind, ttft, doubt, lo, hi)
            if kind == "held":
                # the stamps did merge (the third token's arrival), and
                # the doubt says so: the test can fail
                assert ttft - hi > GAP_S * 1000, (ttft, lo, hi)
                assert doubt > 1, line
            else:
                assert doubt < 1, line
        assert judged["held"] >= 2 and judged["idle"] >= 2, judged
        g = {g["route"]: g for g in t.stats()["groups"]}["r"]
        assert g["ttft_uncertain"] == len(held), g
        assert g["ttft_uncertain_share"] == round(len(held) / REQUESTS, 3), g
        assert t.metric("tokentap_ttft_uncertain_total", route="r") == len(held)
        assert t.metric("tokentap_ttft_stamped_total", route="r") == REQUESTS
