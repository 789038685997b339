# SPDX-License-Identifier: Apache-2.0
"""health.throughput: a stream too slow to keep is caught before the client
sees a byte of it.

Two python backends behind one route: one streams 2 tokens a second
(alive, never idle: no idle timer would fire), the other 100. With the
probe on, a request whose first attempt meets the slow replica is held
after its first token; when the window passes with too few tokens the
attempt is closed (the backend sees the close) and the fast replica
answers: the client gets one complete stream, byte for byte the fast
one's, and the access log names the slow attempt with reason throughput.
A request that meets the fast replica first passes the probe and is left
alone. Without the probe (the same route, min_rate 0) the slow stream is
what the client gets: the test sees what it guards."""

from peers import Backend, SSE_HEAD
from harness import Tokentap, completion, samples

TOKENS = 12


def streamer(name, gap, closed):
    """TOKENS tokens gap apart, then [DONE]; notes when the peer closed."""
    def handle(req, c):
        c.send(SSE_HEAD)
        c.chunk(b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n')
        for i in range(TOKENS):
            if i and not c.sleep_watching(gap):
                closed.append(name)
                return "close"
            c.chunk(b'data: {"choices":[{"delta":{"content":"%s%d "}}]}\n\n'
                    % (name.encode(), i))
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    return handle


def route(slow, fast, min_rate):
    return (f"workers: 1\nroutes:\n  - name: pool\n    dialect: openai\n"
            f"    balance: round_robin\n    upstreams:\n"
            f"      - {{url: http://127.0.0.1:{slow}}}\n"
            f"      - {{url: http://127.0.0.1:{fast}}}\n"
            f"    health: {{throughput: {{min_rate: {min_rate}, tokens: 8, window: 1s}}}}\n")


def expected(name):
    out = b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
    for i in range(TOKENS):
        out += b'data: {"choices":[{"delta":{"content":"%s%d "}}]}\n\n' % (name.encode(), i)
    return out + b"data: [DONE]\n\n"


def probes(t):
    return {ls["result"]: v for n, ls, v in samples(t.get("/metrics").text)
            if n == "tokentap_throughput_probes_total"}


def test_a_slow_replica_is_left_before_the_client_sees_it():
    closed = []
    with Backend(streamer("slow", 0.5, closed)) as slow, \
            Backend(streamer("fast", 0.01, closed)) as fast, \
            Tokentap(route(slow.port, fast.port, 20)) as t:
        results = [completion(t.port, headers={"X-Request-Id": f"p{i}"}, timeout=20)
                   for i in range(2)]
        lines = {l["request_id"]: l for l in t.access(2)}
        counted = probes(t)
    moved = [l for l in lines.values() if l["attempts"]]
    alone = [l for l in lines.values() if not l["attempts"]]
    # round robin, and the slow replica ejected once caught: whichever
    # came first, one request met it and one did not
    assert len(moved) == 1 and len(alone) == 1, lines
    m = moved[0]
    assert m["attempts"][0]["upstream"] == f"http://127.0.0.1:{slow.port}", m
    assert m["attempts"][0]["reason"] == "throughput", m
    assert m["attempts"][0]["ms"] >= 1000, m     # the window ran its second
    assert m["upstream"] == f"http://127.0.0.1:{fast.port}" and m["outcome"] == "ok", m
    assert m["output_tokens"] == TOKENS, m
    assert alone[0]["upstream"] == f"http://127.0.0.1:{fast.port}", alone[0]
    # every client got one complete stream, the fast one's, byte for byte
    for r in results:
        assert r.status == 200, r.head
        assert r.body == expected("fast"), r.body
    assert closed == ["slow"], closed         # the slow backend was stopped
    assert counted == {"pass": 1, "slow": 1, "kept": 0}, counted


def test_without_the_probe_the_slow_stream_is_the_clients():
    closed = []
    with Backend(streamer("slow", 0.25, closed)) as slow, \
            Backend(streamer("fast", 0.01, closed)) as fast, \
            Tokentap(route(slow.port, fast.port, 0)) as t:
        results = [completion(t.port, headers={"X-Request-Id": f"n{i}"}, timeout=20)
                   for i in range(2)]
        lines = t.access(2)
    assert all(not l["attempts"] for l in lines), lines
    assert sorted(r.body for r in results) == sorted([expected("fast"), expected("slow")])


def test_a_fast_replica_pays_its_first_tokens_in_ttft():
    """The cost: the client's first byte waits for the probe's tokens (8 at
    10 ms: about 80 ms after the first token), the logged TTFT does not."""
    closed = []
    with Backend(streamer("fast", 0.01, closed)) as a, \
            Backend(streamer("fast", 0.01, closed)) as b, \
            Tokentap(route(a.port, b.port, 20)) as t:
        r = completion(t.port, headers={"X-Request-Id": "f0"}, timeout=20)
        first = r.t_head - r.t_sent                 # the client's first byte
        line = t.access(1)[0]
    assert r.body == expected("fast") and not line["attempts"], line
    assert first * 1000 >= line["ttft_ms"] + 8 * 10 * 0.9, (first, line["ttft_ms"])
