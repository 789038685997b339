# SPDX-License-Identifier: Apache-2.0
"""make bench's timing section: the wall-clock claims that left make test.

How late an event comes against its schedule, how soon a timer fires, how
many microseconds an event takes through tokentap: each measures the host
as much as the code, and on a loaded machine a test asserting them fails
for the host's sake. make test keeps what holds under any load (nothing
comes early, things happen in order, within brackets of causality); the
figures here say how close to its time each came on this host, against
the goal the test used to assert.

Each probe returns rows {name, value, unit, goal, met}; run() takes them
all, quick (smaller loads) or not.
"""
import json
import os
import re
import resource
import selectors
import socket
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from harness import CHAT, Mock, Response, Tokentap, build_request, conf, load, request  # noqa: E402
from peers import SSE_HEAD, Backend  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TOKEN = re.compile(rb'"(content|text)":"[^"]')


def row(name, value, unit, goal, met):
    return {"name": name, "value": value, "unit": unit, "goal": goal,
            "met": None if value is None else bool(met)}


def token_times(resp):
    """Arrival times of the events that carry text (OpenAI, Anthropic)."""
    return [t for t, raw in resp.events if TOKEN.search(raw)]


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


# ---- tokentap-mock's schedule, one stream at a time -------------------------

def mock_schedule(quick):
    """The single-stream cases of test_mock: TTFT from a flag and from a
    header, the role chunk's delay, prefill, a stream: false answer; each
    arrival against the mock's own request time (its log, same clock)."""
    errs, count = {}, 0
    with Mock("--ttft", "300ms", "--tpot", "30ms", "--tokens", "4") as m:
        cases = [("TTFT 300 ms (flag)", "/v1/messages", {}, {}, 0.300, "token"),
                 ("TTFT 20 ms (header)", "/v1/messages", {}, {"X-Mock-TTFT": "20ms"}, 0.020,
                  "token"),
                 ("role chunk at 40 ms", CHAT, {}, {"X-Mock-Role-Delay": "40ms",
                                                    "X-Mock-TTFT": "100ms"}, 0.040, "role"),
                 ("first token at 100 ms after a role delay", CHAT, {},
                  {"X-Mock-Role-Delay": "40ms", "X-Mock-TTFT": "100ms"}, 0.100, "token"),
                 ("prefill: first token at 200 ms", CHAT, json.dumps({"messages": "x" * 3984}),
                  {"X-Mock-Prefill-Per-Token": "100us", "X-Mock-TTFT": "100ms"}, 0.200, "token"),
                 ("stream: false, answer at 40 ms", "/v1/messages", {"stream": False},
                  {"X-Mock-TTFT": "20ms", "X-Mock-TPOT": "5ms", "X-Mock-Tokens": "5"}, 0.040,
                  "head")]
        for name, path, body, headers, due, what in cases:
            worst = 0.0
            for _ in range(2 if quick else 5):
                resp = request(m.port, path, body, headers)
                count += 1
                t_req = m.served(count)[count - 1]["t_req_mono_us"] / 1e6
                if what == "role":
                    at = resp.events[0][0]
                elif what == "head":
                    at = resp.t_head
                else:
                    at = token_times(resp)[0]
                worst = max(worst, abs(at - t_req - due))
            errs[name] = worst
    return [row(f"mock, {name}: worst error", e * 1000, "ms", "<= 10 ms", e <= 0.010)
            for name, e in errs.items()]


# ---- tokentap-mock's schedule at 100 concurrent streams ----------------------

def run_concurrent(port, n, path, headers, spread=0.0):
    """n concurrent streams over selectors, their requests sent `spread`
    seconds apart; per stream (t_sent, Response)."""
    sel = selectors.DefaultSelector()
    states = []
    req = build_request(path, {}, headers, close=True)
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        states.append([s, None, Response()])
    t_next = time.monotonic()
    for st in states:
        # Sleep, not spin: a spinning client would starve the mock of CPU
        # on a busy 2-core machine while it reads these requests.
        if t_next > time.monotonic():
            time.sleep(t_next - time.monotonic())
        st[0].sendall(req)
        st[1] = time.monotonic()
        t_next = st[1] + spread
        st[0].setblocking(False)
        sel.register(st[0], selectors.EVENT_READ, st)
    left = n
    deadline = time.monotonic() + 60
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            st = key.data
            data = st[0].recv(65536)
            t = time.monotonic()
            if data:
                st[2].feed(data, t)
            else:
                st[2].close(t)
            if not data or st[2].complete:
                sel.unregister(st[0])
                st[0].close()
                left -= 1
    sel.close()
    if left:
        raise RuntimeError(f"{left} of {n} streams did not finish")
    return [(st[1], st[2]) for st in states]


def mock_100_streams(quick):
    """100 staggered streams (TTFT 200 ms, TPOT 20 ms, 50 tokens): the
    client-side TTFT and TPOT errors; the test asserted a median TTFT error
    within 0.5 ms, 80 of 100 within 1 ms and every TPOT within 2 %."""
    ttft, tpot, n_tok = 0.200, 0.020, 50
    with Mock() as m:
        # arrivals spread over one TPOT, as real traffic is: otherwise all
        # 100 events of a round fall due at once, and the Python client,
        # reading them one by one, measures its own backlog
        res = run_concurrent(m.port, 100, CHAT,
                             {"X-Mock-TTFT": "200ms", "X-Mock-TPOT": "20ms",
                              "X-Mock-Tokens": str(n_tok)}, spread=tpot / 100)
        logs = m.served(100)
    ttft_err, tpot_err = [], []
    for t_sent, resp in res:
        toks = token_times(resp)
        if len(toks) != n_tok:
            raise RuntimeError(f"{len(toks)} token events of {n_tok}")
        ttft_err.append(abs(toks[0] - t_sent - ttft))
        tpot_err.append(abs((toks[-1] - toks[0]) / (n_tok - 1) - tpot) / tpot)
    srv = quantile([x["first_token_us"] - x["sched_first_token_us"] for x in logs], 0.99)
    within = sum(e <= 0.001 for e in ttft_err)
    med = statistics.median(ttft_err)
    return [row("mock at 100 streams, TTFT error median", med * 1000, "ms", "<= 0.5 ms",
                med <= 0.0005),
            row("mock at 100 streams, TTFT within 1 ms", within, "of 100", ">= 80",
                within >= 80),
            row("mock at 100 streams, TPOT error max", max(tpot_err) * 100, "%", "<= 2 %",
                max(tpot_err) <= 0.02),
            row("mock at 100 streams, its own first-token lateness p99", srv / 1000, "ms",
                "(reported)", True)]


# ---- 10,000 streams at once ---------------------------------------------------

def realtime_offset():
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few reads."""
    best = None
    for _ in range(20):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) / 2)
    return best[1]


def kernel_rx_time(anc, offset):
    """The SO_TIMESTAMPNS receive time of a recvmsg(), on the monotonic clock."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec * 1e-9 - offset
    return None


def mock_many_streams(quick):
    """The mock holds n streams (10,000; 1,000 quick) at 2 events a second
    each: how many completed, its RSS per stream, and each event's arrival
    (the kernel's receive time, so not the Python client's backlog) against
    the schedule."""
    n, ttft, tpot, n_tok = (1000 if quick else 10000), 1.0, 0.5, 6
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 2 * n:
        return [row(f"mock, {n} streams", None, "", "all complete", None)]
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 3 * n)), hard))
    offset = realtime_offset()
    with Mock("--ttft", "1s", "--tpot", "500ms", "--tokens", str(n_tok),
              "--workers", "2") as m:
        sel = selectors.DefaultSelector()
        states, left, opened, connecting = [], n, 0, 0
        t_start = time.monotonic()
        while left and time.monotonic() - t_start < 60:
            # a few hundred connects in flight: the accept backlog never overflows
            while opened < n and connecting < 256:
                s = socket.socket()
                s.setblocking(False)
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                s.connect_ex(("127.0.0.1", m.port))
                states.append([s, None, Response(), f"r{opened}"])
                sel.register(s, selectors.EVENT_WRITE, states[-1])
                opened += 1
                connecting += 1
            for key, _ in sel.select(timeout=1):
                st = key.data
                if st[1] is None:
                    st[0].send(build_request(CHAT, {}, {"X-Request-Id": st[3]}, close=True))
                    st[1] = time.monotonic()
                    connecting -= 1
                    sel.modify(st[0], selectors.EVENT_READ, st)
                    continue
                data, anc, _, _ = st[0].recvmsg(65536, 256)
                t = time.monotonic()
                kt = kernel_rx_time(anc, offset)
                if data:
                    st[2].feed(data, kt if kt is not None else t)
                else:
                    st[2].close(t)
                if not data or st[2].complete:
                    sel.unregister(st[0])
                    st[0].close()
                    left -= 1
        rss = m.rss_kib("VmHWM")
        logs = {x["request_id"]: x for x in m.served(n)}
    done = [st for st in states if st[2].complete and len(token_times(st[2])) == n_tok]
    late = []
    for st in done:
        if st[3] in logs:
            t_req = logs[st[3]]["t_req_mono_us"] / 1e6
            late += [t - (t_req + ttft + i * tpot) for i, t in enumerate(token_times(st[2]))]
    p99 = quantile(late, 0.99)
    return [row(f"mock, {n} streams at once: complete", len(done), f"of {n}", "all",
                len(done) == n),
            row(f"mock, {n} streams: RSS per stream", rss / n, "KiB", "(reported)", True),
            row(f"mock, {n} streams: event arrival (kernel rx) after its time, p99",
                None if p99 is None else p99 * 1000, "ms", "(reported)", True)]


# ---- an event through tokentap -------------------------------------------------

def proxy_event_lag(quick):
    """30 events 20 ms apart from a Python backend through tokentap: the
    client's arrival after the backend's send. The test asserted a median
    under 5 ms and the third worst under 30 ms (Nagle or a flush timer
    would add 40-200 ms; make test now checks TCP_NODELAY itself)."""
    n, sent = 30, []

    def handle(req, c):
        c.send(SSE_HEAD)
        for i in range(n):
            time.sleep(0.02)
            c.chunk(b"data: %d\n\n" % i)
            sent.append(time.monotonic())
        c.end_chunks()
        return "keep"

    with Backend(handle) as b, Tokentap(conf(b)) as t:
        resp = request(t.port, method="GET")
    lags = sorted(tr - ts for (tr, _), ts in zip(resp.events, sent))
    med = statistics.median(lags)
    return [row("an event through tokentap, median lag", med * 1000, "ms", "<= 5 ms",
                med <= 0.005),
            row("an event through tokentap, third-worst lag", lags[-3] * 1000, "ms",
                "<= 30 ms", lags[-3] <= 0.030)]


def fast_model_not_flagged(quick):
    """A token a millisecond at 100 streams through one worker: tokentap
    reads several at once when it falls behind, but milliseconds apart,
    not the tenths of a second of a buffering hop (test_health asserted no
    stream flagged and every clump gap under 10 ms: on a busy host the
    proxy really does read clumps, so that is the host's figure)."""
    with Mock("--workers", "1") as m, Tokentap(conf(m, "workers: 1\n")) as t:
        load("-c", "100", "-n", "100", "--max-tokens", "300", "-H", "X-Mock-TPOT: 1ms",
             "-H", "X-Mock-TTFT: 20ms", t.url(CHAT))
        log = t.wait_logged(100)
    flagged = sum(1 for e in log if e["buffered"] is not False)
    gap = max(e["clump_gap_ms"] for e in log)
    return [row("1 ms a token at 100 streams: streams flagged buffered", flagged, "of 100",
                "0", flagged == 0),
            row("1 ms a token at 100 streams: the largest clump gap", gap, "ms", "< 10 ms",
                gap < 10)]


def load_closed_loop(quick):
    """tokentap-load, 20 users against the mock at TTFT 150 ms and TPOT
    20 ms: its P50s against the schedule (test_load asserted 4 ms, 2 %
    and 3 %, and 4 ms from the mock's own account of its sends)."""
    with Mock("--ttft", "150ms", "--tpot", "20ms") as m:
        j = load("-c", "20", "-d", "2.5s", "--max-tokens", "16", m.url(CHAT))
        served = m.served(j["requests"])
    mock = statistics.median(x["first_token_us"] / 1000 for x in served)
    ttft, tpot, itl = j["ttft_ms"]["p50"], j["tpot_ms"]["p50"], j["itl_ms"]["p50"]
    return [row("tokentap-load, TTFT p50 against 150 ms", ttft - 150, "ms", "<= 4 ms",
                abs(ttft - 150) <= 4),
            row("tokentap-load, TTFT p50 against the mock's sends", ttft - mock, "ms", "<= 4 ms",
                abs(ttft - mock) <= 4),
            row("tokentap-load, TPOT p50 against 20 ms", 100 * (tpot - 20) / 20, "%", "<= 2 %",
                abs(tpot - 20) <= 0.4),
            row("tokentap-load, ITL p50 against 20 ms", 100 * (itl - 20) / 20, "%", "<= 3 %",
                abs(itl - 20) <= 0.6)]


PROBES = [mock_schedule, load_closed_loop, mock_100_streams, mock_many_streams, proxy_event_lag,
          fast_model_not_flagged]


def run(quick, log=print):
    rows = []
    for probe in PROBES:
        log(f"timing: {probe.__name__}")
        try:
            rows += probe(quick)
        except Exception as e:       # noqa: BLE001 - a probe that broke is a row too
            rows.append(row(f"{probe.__name__}: failed ({e})", None, "", "runs", None))
    return {"probes": rows}
