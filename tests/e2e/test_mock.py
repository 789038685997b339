"""End-to-end tests of tokentap-mock, the simulated LLM backend.

A small raw-socket HTTP/1.1 client (chunked decoding, SSE split on blank
lines, NDJSON split on newlines) timestamps each event's arrival with
time.monotonic(), so the schedule checked is the one a client measures.
Run alone with `python3 tests/e2e/test_mock.py [name-filter]`.
"""
import json
import os
import re
import resource
import selectors
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
BLANK = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")

# path -> (dialect, content type) as tokentap's `auto` picks them
PATHS = {
    "/v1/chat/completions": "openai",
    "/v1/completions": "openai",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
    "/v1/chat-messages": "dify",
    "/v1/completion-messages": "dify",
    "/v1/workflows/run": "dify-workflow",
    "/v1beta/models/gemini-test:streamGenerateContent?alt=sse": "gemini",
    "/generate_stream": "tgi",
    "/api/chat": "ollama",
    "/api/generate": "ollama",
    "/something/else": "openai",
}


# ---------------------------------------------------------------- client

class Response:
    """An HTTP/1.1 response parsed incrementally from fed bytes; each SSE
    event (or NDJSON line) is kept with the time of the read completing it."""

    def __init__(self):
        self.buf = b""
        self.state = "head"
        self.status = None
        self.headers = {}
        self.length = None
        self.chunked = False
        self.body = b""
        self.chunks = []          # (t, payload) per chunk
        self.events = []          # (t, raw event bytes)
        self.pending = b""
        self.complete = False     # body ended as its framing says
        self.eof = False

    def feed(self, data, t):
        self.buf += data
        while self._step(t):
            pass

    def close(self, t):
        self.eof = True
        if self.state == "close":
            self.complete = True
            self._events(t, final=True)

    def _step(self, t):
        if self.state == "head":
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return False
            lines = self.buf[:i].decode("latin-1").split("\r\n")
            self.buf = self.buf[i + 4:]
            self.status = int(lines[0].split()[1])
            self.status_line = lines[0]
            if 100 <= self.status < 200:
                self.interim = getattr(self, "interim", []) + [self.status]
                return True
            for line in lines[1:]:
                k, v = line.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
            if "chunked" in self.headers.get("transfer-encoding", ""):
                self.chunked, self.state = True, "size"
            elif "content-length" in self.headers:
                self.length = int(self.headers["content-length"])
                self.state = "length"
            else:
                self.state = "close"
            return True
        if self.state == "size":
            i = self.buf.find(b"\r\n")
            if i < 0:
                return False
            size = int(self.buf[:i].split(b";")[0], 16)
            if size == 0:
                if len(self.buf) < i + 4:
                    return False
                assert self.buf[i:i + 4] == b"\r\n\r\n", "bad last chunk"
                self.buf = self.buf[i + 4:]
                self.state, self.complete = "done", True
                self._events(t, final=True)
                return True
            if len(self.buf) < i + 2 + size + 2:
                return False
            payload = self.buf[i + 2:i + 2 + size]
            assert self.buf[i + 2 + size:i + 4 + size] == b"\r\n", "bad chunk end"
            self.buf = self.buf[i + 4 + size:]
            self.chunks.append((t, payload))
            self._body(payload, t)
            return True
        if self.state == "length":
            take = self.buf[:self.length - len(self.body)]
            self.buf = self.buf[len(take):]
            self._body(take, t)
            if len(self.body) == self.length:
                self.state, self.complete = "done", True
            return False
        if self.state == "close":
            data, self.buf = self.buf, b""
            if data:
                self._body(data, t)
            return False
        return False

    def ndjson(self):
        return "ndjson" in self.headers.get("content-type", "")

    def _body(self, data, t):
        self.body += data
        self.pending += data
        self._events(t)

    def _events(self, t, final=False):
        if self.ndjson():
            *lines, self.pending = self.pending.split(b"\n")
            self.events += [(t, ln) for ln in lines if ln.strip()]
            return
        while True:
            m = BLANK.search(self.pending)
            # A lone CR at the end may be the first half of CRLF.
            if m is None or (m.end() == len(self.pending) and
                             self.pending.endswith(b"\r") and not final):
                return
            self.events.append((t, self.pending[:m.start()]))
            self.pending = self.pending[m.end():]




def parse_sse(raw):
    """(event type, data) of one SSE event, WHATWG field rules."""
    etype, data = "", []
    for line in re.split(rb"\r\n|\r|\n", raw):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            etype = value.decode()
        elif name == b"data":
            data.append(value.decode())
    return etype, "\n".join(data) if data else None


def build_request(path, body=None, headers=None, method="POST", close=False):
    if body is None:
        body = {}
    raw = json.dumps(body).encode() if isinstance(body, dict) else body
    h = {"Host": "mock", "Content-Type": "application/json",
         "Content-Length": str(len(raw))}
    if close:
        h["Connection"] = "close"
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode() + raw


def read_response(sock, resp=None, timeout=10.0):
    """Reads one response from a blocking socket until its body ends."""
    resp = resp or Response()
    sock.settimeout(timeout)
    while not resp.complete:
        data = sock.recv(65536)
        t = time.monotonic()
        if not data:
            resp.close(t)
            break
        resp.feed(data, t)
    return resp


def request(port, path, body=None, headers=None, timeout=10.0):
    """One request on its own connection: (response, time last byte sent)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        s.sendall(build_request(path, body, headers, close=True))
        t_sent = time.monotonic()
        return read_response(s, timeout=timeout), t_sent
    finally:
        s.close()


class Mock(harness.Mock):
    """The harness's logged mock; its own tests also want it to exit 0."""

    @property
    def proc(self):       # the tests reach the process as m.proc.p
        return self

    def log_lines(self, want=None, timeout=3.0):
        return self.served(want, timeout)

    def __exit__(self, *exc):
        rc = self.stop()   # raises on a sanitizer report
        try:
            assert rc == 0, f"tokentap-mock exited {rc}: {self.stderr()[-3000:]}"
        finally:
            super().__exit__(*exc)


# ------------------------------------------------------- dialect readers

def dialect_summary(kind, resp):
    """Token events, reported output count and end marker, read the way
    SPEC §4 defines them for the dialect."""
    tokens, usage, end, errors, models = [], None, False, 0, set()
    for t, raw in resp.events:
        if kind == "ollama":
            etype, data = "", raw.decode()
        else:
            etype, data = parse_sse(raw)
        if data is None:
            continue
        if data == "[DONE]":
            end = True
            continue
        d = json.loads(data)
        if kind == "openai":
            if "error" in d:
                errors += 1
                continue
            models.add(d.get("model"))
            for c in d["choices"]:
                if c.get("delta", {}).get("content") or c.get("text"):
                    tokens.append(t)
            if d.get("usage"):
                usage = d["usage"]["completion_tokens"]
        elif kind == "openai-responses":
            assert etype == d["type"], "event field and type differ"
            if etype.endswith(".delta"):
                tokens.append(t)
            elif etype == "response.completed":
                end = True
                models.add(d["response"]["model"])
                if d["response"]["usage"]:
                    usage = d["response"]["usage"]["output_tokens"]
            elif etype in ("error", "response.failed"):
                errors += 1
        elif kind == "anthropic":
            assert etype == d["type"], "event field and type differ"
            if etype == "message_start":
                models.add(d["message"]["model"])
            elif etype == "content_block_delta":
                tokens.append(t)
            elif etype == "message_delta" and "usage" in d:
                usage = d["usage"]["output_tokens"]
            elif etype == "message_stop":
                end = True
            elif etype == "error":
                errors += 1
        elif kind in ("dify", "dify-workflow"):
            ev = d["event"]
            if ev == "message" and d["answer"]:
                tokens.append(t)
            elif ev == "text_chunk" and d["data"]["text"]:
                tokens.append(t)
            elif ev == "message_end":
                end = True
                if "usage" in d["metadata"]:
                    usage = d["metadata"]["usage"]["completion_tokens"]
            elif ev == "workflow_finished":
                end = True
                usage = d["data"].get("total_tokens")
            elif ev == "error":
                errors += 1
        elif kind == "gemini":
            if "error" in d:
                errors += 1
                continue
            models.add(d["modelVersion"])
            if any(p.get("text") for c in d["candidates"]
                   for p in c["content"]["parts"]):
                tokens.append(t)
            if "usageMetadata" in d:
                usage = d["usageMetadata"]["candidatesTokenCount"]
        elif kind == "tgi":
            if "error" in d:
                errors += 1
                continue
            if not d["token"]["special"]:
                tokens.append(t)
            if d["details"]:
                usage = d["details"]["generated_tokens"]
        elif kind == "ollama":
            if "error" in d:
                errors += 1
                continue
            models.add(d["model"])
            if d.get("message", {}).get("content") or d.get("response"):
                tokens.append(t)
            if d["done"]:
                end = True
                usage = d.get("eval_count")
    if kind in ("gemini", "tgi"):
        end = resp.complete   # end of body is their end marker
    return {"tokens": tokens, "usage": usage, "end": end, "errors": errors,
            "models": models}


def quantiles(xs):
    xs = sorted(xs)
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]  # noqa: E731
    return pick(0.5), pick(0.99), xs[-1]


def report(msg):
    print("REPORT " + msg, flush=True)


FAST = {"X-Mock-TTFT": "5ms", "X-Mock-TPOT": "2ms"}


# ------------------------------------------------------------------ tests

def test_every_dialect_parses_with_its_counts():
    with Mock() as m:
        for path, kind in PATHS.items():
            resp, _ = request(m.port, path, {"model": "m-7"},
                              dict(FAST, **{"X-Mock-Tokens": "7"}))
            assert resp.status == 200, (path, resp.status)
            want_type = "application/x-ndjson" if kind == "ollama" else "text/event-stream"
            assert resp.headers["content-type"] == want_type, path
            assert resp.headers["transfer-encoding"] == "chunked", path
            assert resp.complete, path
            s = dialect_summary(kind, resp)
            assert len(s["tokens"]) == 7, (path, len(s["tokens"]))
            input_tokens = len(json.dumps({"model": "m-7"})) // 4
            want_usage = 7 + input_tokens if kind == "dify-workflow" else 7
            assert s["usage"] == want_usage, (path, s["usage"])
            assert s["end"], f"{path}: no end marker"
            assert s["errors"] == 0, path
            if kind in ("openai", "openai-responses", "anthropic", "ollama", "gemini"):
                assert s["models"] == {"m-7"}, (path, s["models"])
            if kind == "gemini":
                assert b"\r\n\r\n" in resp.body and b"\n\n" not in resp.body.replace(
                    b"\r\n", b""), "gemini must use CRLF line ends"
            # each event is its own chunk
            payloads = [p for _, p in resp.chunks]
            assert len(payloads) == len(resp.events), (path, len(payloads))


def test_gemini_model_from_path_and_openai_wire_details():
    with Mock() as m:
        resp, _ = request(m.port, "/v1beta/models/gemini-pro:streamGenerateContent?alt=sse",
                          {}, dict(FAST, **{"X-Mock-Tokens": "2"}))
        assert dialect_summary("gemini", resp)["models"] == {"gemini-pro"}
        resp, _ = request(m.port, "/v1/chat/completions", {},
                          dict(FAST, **{"X-Mock-Tokens": "3"}))
        datas = [parse_sse(raw)[1] for _, raw in resp.events]
        first = json.loads(datas[0])
        assert first["choices"][0]["delta"] == {"role": "assistant", "content": "",
                                                "refusal": None}
        assert json.loads(datas[1])["model"] == "mock-1"
        finish = json.loads(datas[-3])
        assert finish["choices"][0]["finish_reason"] == "stop"
        assert finish["choices"][0]["delta"] == {}
        usage = json.loads(datas[-2])
        assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 3
        assert datas[-1] == "[DONE]"


def test_token_count_sources():
    with Mock() as m:
        # the request's max tokens, per API
        cases = [("/v1/chat/completions", {"max_tokens": 4}, "openai"),
                 ("/v1/chat/completions", {"max_completion_tokens": 6}, "openai"),
                 ("/v1/responses", {"max_output_tokens": 5}, "openai-responses"),
                 ("/api/chat", {"options": {"num_predict": 3}}, "ollama"),
                 ("/generate_stream", {"parameters": {"max_new_tokens": 2}}, "tgi"),
                 ("/v1/messages", {}, "anthropic")]
        for path, body, kind in cases:
            resp, _ = request(m.port, path, body, FAST)
            want = next(iter(body.values()), 50)
            if isinstance(want, dict):
                want = next(iter(want.values()))
            s = dialect_summary(kind, resp)
            assert len(s["tokens"]) == want and s["usage"] == want, (path, s["usage"])
        # tokens per chunk: events carry K tokens, usage counts tokens
        resp, _ = request(m.port, "/v1/messages", {},
                          dict(FAST, **{"X-Mock-Tokens": "10", "X-Mock-Tokens-Per-Chunk": "3"}))
        s = dialect_summary("anthropic", resp)
        assert len(s["tokens"]) == 4 and s["usage"] == 10, s
    with Mock("--tokens", "9", "--usage", "off") as m:
        resp, _ = request(m.port, "/v1/chat/completions", {"max_tokens": 3}, FAST)
        s = dialect_summary("openai", resp)
        assert len(s["tokens"]) == 9, "--tokens must win over the body"
        assert s["usage"] is None, "--usage off: no usage chunk"
        resp, _ = request(m.port, "/v1/chat/completions",
                          {"stream_options": {"include_usage": True}}, FAST)
        assert dialect_summary("openai", resp)["usage"] == 9, "include_usage asks for it"
        resp, _ = request(m.port, "/v1/messages", {}, FAST)
        assert dialect_summary("anthropic", resp)["usage"] is None


def run_concurrent(port, n, path, headers, body=None, spread=0.0):
    """n concurrent streams over selectors, their requests sent `spread`
    seconds apart; per stream (t_sent, Response)."""
    sel = selectors.DefaultSelector()
    states = []
    req = build_request(path, body, headers, close=True)
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
    deadline = time.monotonic() + 30
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
    assert left == 0, f"{left} streams did not finish"
    return [(st[1], st[2]) for st in states]


def measure_100_streams():
    """Runs 100 staggered streams; returns the figures and a failure text
    ("" when the schedule was met)."""
    ttft, tpot, n_tok = 0.200, 0.020, 50
    with Mock() as m:
        # Arrivals spread over one TPOT, as real traffic is: otherwise all
        # 100 events of a round fall due at once, and the Python client,
        # reading them one by one, measures its own backlog.
        res = run_concurrent(m.port, 100, "/v1/chat/completions",
                             {"X-Mock-TTFT": "200ms", "X-Mock-TPOT": "20ms",
                              "X-Mock-Tokens": str(n_tok)}, spread=tpot / 100)
        logs = m.log_lines(100)
    ttft_err, tpot_err, late = [], [], []
    for t_sent, resp in res:
        toks = dialect_summary("openai", resp)["tokens"]
        assert len(toks) == n_tok, f"{len(toks)} token events"
        ttft_err.append(abs(toks[0] - t_sent - ttft))
        tpot_err.append(abs((toks[-1] - toks[0]) / (n_tok - 1) - tpot) / tpot)
        late += [toks[i] - (t_sent + ttft + i * tpot) for i in range(n_tok)]
    assert len(logs) == 100 and all(x["outcome"] == "ok" and x["tokens"] == n_tok
                                    for x in logs)
    p50, p99, mx = quantiles(late)
    srv = quantiles([x["first_token_us"] - x["sched_first_token_us"] for x in logs])
    srv_max = [x["late_max_us"] for x in logs]
    within = sum(e <= 0.001 for e in ttft_err)
    report(f"100 streams, client-side lateness vs schedule: p50 {p50*1e6:.0f} us, "
           f"p99 {p99*1e6:.0f} us, max {mx*1e6:.0f} us")
    report(f"100 streams, mock-side first-token lateness p50/p99/max "
           f"{srv[0]}/{srv[1]}/{srv[2]} us; worst event per stream p50/max "
           f"{quantiles(srv_max)[0]}/{max(srv_max)} us")
    report(f"100 streams, TTFT error p50 {quantiles(ttft_err)[0]*1e3:.3f} ms, "
           f"max {max(ttft_err)*1e3:.3f} ms, {within}/100 within 1 ms; "
           f"TPOT error max {max(tpot_err)*100:.3f} %")
    failures = []
    # the median catches a schedule that is off (a coarse timer, a late
    # start); the tail is the host's: under ASan on a VM that steals CPU,
    # 88 of 100 were seen with the mock itself 2-3 ms late at p99
    if quantiles(ttft_err)[0] > 0.0005 or within < 80:
        failures.append(f"TTFT: median {quantiles(ttft_err)[0]*1e3:.3f} ms, "
                        f"{within}/100 within 1 ms")
    if max(tpot_err) > 0.02:
        failures.append(f"TPOT off by up to {max(tpot_err)*100:.2f} %")
    return "; ".join(failures)


def test_schedule_at_100_concurrent_streams():
    """TTFT within 1 ms (median, and 80 of 100 streams: on a shared 2-core
    box another job can hold a core while one request is read) and every
    TPOT within 2 %, as the client measures them. One retry."""
    failure = measure_100_streams()
    if failure:
        report(f"100 streams: retrying once after: {failure}")
        failure = measure_100_streams()
    assert not failure, failure


def test_headers_override_flags():
    with Mock("--ttft", "300ms", "--tpot", "30ms", "--tokens", "4") as m:
        resp, t0 = request(m.port, "/v1/messages", {})
        toks = dialect_summary("anthropic", resp)["tokens"]
        assert len(toks) == 4
        assert abs(toks[0] - t0 - 0.300) < 0.010, toks[0] - t0
        resp, t0 = request(m.port, "/v1/messages", {},
                           {"X-Mock-TTFT": "20ms", "x-mock-tpot": "5ms",
                            "X-MOCK-TOKENS": "6"})
        toks = dialect_summary("anthropic", resp)["tokens"]
        assert len(toks) == 6
        assert abs(toks[0] - t0 - 0.020) < 0.010, toks[0] - t0
        flags, headers = m.log_lines(2)[:2]
        assert (flags["sched_first_token_us"], flags["sched_last_token_us"]) == \
            (300000, 300000 + 3 * 30000), flags
        assert (headers["sched_first_token_us"], headers["sched_last_token_us"]) == \
            (20000, 20000 + 5 * 5000), headers
        for bad in ({"X-Mock-TTFT": "soon"}, {"X-Mock-Fault": "explode"},
                    {"X-Mock-Bogus": "1"}, {"X-Mock-Tokens-Per-Chunk": "0"}):
            resp, _ = request(m.port, "/v1/messages", {}, bad)
            assert resp.status == 400, bad
            msg = json.loads(resp.body)["error"]["message"]
            assert next(iter(bad)).lower() in msg.lower(), msg


def test_role_delay_prefill_and_keepalive_comments():
    with Mock("--ttft", "100ms") as m:
        resp, t0 = request(m.port, "/v1/chat/completions", {},
                           {"X-Mock-Role-Delay": "40ms", "X-Mock-Tokens": "2"})
        role_t = resp.events[0][0] - t0
        assert abs(role_t - 0.040) < 0.010, f"role chunk at {role_t}"
        tok_t = dialect_summary("openai", resp)["tokens"][0] - t0
        assert abs(tok_t - 0.100) < 0.010, f"first token at {tok_t}"
        # 4000 body bytes = 1000 input tokens x 100us = 100ms more TTFT
        body = json.dumps({"messages": "x" * 3984}).encode()
        assert len(body) == 4000
        resp, t0 = request(m.port, "/v1/chat/completions", body,
                           {"X-Mock-Prefill-Per-Token": "100us", "X-Mock-Tokens": "2"})
        tok_t = dialect_summary("openai", resp)["tokens"][0] - t0
        assert abs(tok_t - 0.200) < 0.010, f"prefill: first token at {tok_t}"
        assert m.log_lines(2)[1]["sched_first_token_us"] == 200000
        resp, t0 = request(m.port, "/v1/messages", {},
                           {"X-Mock-Keepalive": "30ms", "X-Mock-TTFT": "200ms",
                            "X-Mock-Tokens": "1"})
        comments = [t for t, raw in resp.events if raw.startswith(b": keep-alive")]
        assert 5 <= len(comments) <= 7, f"{len(comments)} keep-alive comments"
        assert all(t - t0 < 0.2 for t in comments), "keep-alive after the first token"
        assert not any(raw.startswith(b":") for _, raw in resp.events[-4:])


def test_slots_queue_first_come_first_served():
    """--slots 2: of 5 streams sent 10 ms apart the first two decode at once,
    the third takes the slot the first frees, the fourth the second's, the
    fifth the third's (first come, first served); a waiting stream's first
    token is due the TTFT after its slot, and the log says how long it
    waited. With --tpot-per-stream the gap grows by it for each other
    sequence decoding (the slots' holders), never for the ones waiting."""
    n = 6
    with Mock("--slots", "2", "--ttft", "20ms", "--tpot", "10ms",
              "--tpot-per-stream", "2ms", "--tokens", str(n)) as m:
        res = run_concurrent(m.port, 5, "/v1/chat/completions", {}, spread=0.010)
        logs = sorted(m.log_lines(5), key=lambda x: x["t_req_mono_us"])
    assert all(len(dialect_summary("openai", r)["tokens"]) == n for _, r in res)
    read = [x["t_req_mono_us"] for x in logs]
    slot = [r + x["queue_us"] for r, x in zip(read, logs)]
    end = [r + x["last_token_us"] for r, x in zip(read, logs)]
    assert logs[0]["queue_us"] == logs[1]["queue_us"] == 0, logs
    # each waiter got the slot the oldest holder freed with its last token
    # (at once; a busy machine may pause the mock between the two)
    for waiter, freed_by in ((2, 0), (3, 1), (4, 2)):
        assert 0 <= slot[waiter] - end[freed_by] < 5000, (waiter, slot, end)
        assert logs[waiter]["queue_us"] > 50000, logs[waiter]
    for x in logs:
        # the first token is the TTFT after the slot, not after the request
        assert x["sched_first_token_us"] - x["queue_us"] == 20000, x
    # two decoding but for the last one's end: 12 ms gaps, 10 ms alone;
    # from the schedule (a busy machine's late sends move the sent times)
    tpots = [(x["sched_last_token_us"] - x["sched_first_token_us"]) / (n - 1)
             for x in logs]
    assert all(t == 12000 for t in tpots[:4]), tpots
    assert 10000 <= tpots[4] < 12000, tpots


def test_first_chunk_tokens_and_continuous_usage():
    """--first-chunk-tokens 8: the first token event holds 8 tokens, the
    rest one each; a usage on every chunk (--continuous-usage, or the
    request's stream_options.continuous_usage_stats as vLLM reads it) counts
    the tokens so far; without it only the last chunk has the usage."""
    with Mock("--ttft", "5ms", "--tpot", "2ms", "--first-chunk-tokens", "8",
              "--tokens", "12") as m:
        for how in ("flag", "body", "none"):
            hdr = {"X-Mock-Continuous-Usage": "on"} if how == "flag" else {}
            body = {"stream_options": {"include_usage": True,
                                       "continuous_usage_stats": how == "body"}}
            resp, _ = request(m.port, "/v1/chat/completions", body, hdr)
            chunks = [json.loads(parse_sse(raw)[1]) for _, raw in resp.events
                      if parse_sse(raw)[1] not in (None, "[DONE]")]
            texts = [c["choices"][0]["delta"].get("content") for c in chunks
                     if c["choices"] and c["choices"][0]["delta"].get("content")]
            assert len(texts) == 5, texts                  # 8 + 1 + 1 + 1 + 1
            counts = [c["usage"]["completion_tokens"] for c in chunks
                      if c.get("usage") and c["choices"]]
            if how == "none":
                assert counts == [], counts
            else:
                assert counts == [8, 9, 10, 11, 12], (how, counts)
            assert dialect_summary("openai", resp)["usage"] == 12
        assert all(x["tokens"] == 12 and x["events"] == 5 for x in m.log_lines(3))


def test_jitter_is_seeded_and_never_negative():
    with Mock("--ttft", "5ms", "--tokens", "30", "--tpot", "2ms") as m:
        for seed in ("7", "7", "8"):
            request(m.port, "/v1/chat/completions", {},
                    {"X-Mock-Jitter": "uniform:2ms", "X-Mock-Seed": seed})
        resp, _ = request(m.port, "/v1/chat/completions", {},
                          {"X-Mock-Jitter": "exp:1ms", "X-Mock-TPOT": "0"})
        exp_toks = dialect_summary("openai", resp)["tokens"]
        resp7, _ = request(m.port, "/v1/chat/completions", {}, {"X-Mock-Seed": "7"})
        resp7b, _ = request(m.port, "/v1/chat/completions", {}, {"X-Mock-Seed": "7"})
        logs = m.log_lines(6)
    a, b, c = (x["sched_last_token_us"] for x in logs[:3])
    assert a == b, "same seed, same schedule"
    assert a != c, "another seed, another schedule"
    assert a != 5000 + 29 * 2000, "uniform jitter moved the schedule"
    # exp jitter with tpot 0: every gap is the jitter, mean 1ms, never negative
    span = exp_toks[-1] - exp_toks[0]
    assert 0.010 < span < 0.060, span
    assert all(y >= x for x, y in zip(exp_toks, exp_toks[1:]))
    assert resp7.body.split(b'"created"')[0] == resp7b.body.split(b'"created"')[0]


def test_status_fault_in_each_dialect():
    want = {"openai": lambda d: d["error"]["type"] == "rate_limit_error",
            "openai-responses": lambda d: d["error"]["message"],
            "anthropic": lambda d: d["type"] == "error" and
            d["error"]["type"] == "rate_limit_error",
            "dify": lambda d: d["status"] == 429,
            "dify-workflow": lambda d: d["status"] == 429,
            "gemini": lambda d: d["error"]["status"] == "RESOURCE_EXHAUSTED",
            "tgi": lambda d: d["error_type"] == "overloaded",
            "ollama": lambda d: d["error"]}
    with Mock("--fault", "status:429") as m:
        for path, kind in PATHS.items():
            resp, _ = request(m.port, path, {})
            assert resp.status == 429, path
            assert resp.headers["content-type"] == "application/json"
            assert want[kind](json.loads(resp.body)), (path, resp.body)
        resp, _ = request(m.port, "/v1/messages", {}, {"X-Mock-Fault": "status:503"})
        assert resp.status == 503
        resp, _ = request(m.port, "/v1/messages", {},
                          dict(FAST, **{"X-Mock-Fault": "none", "X-Mock-Tokens": "2"}))
        assert resp.status == 200


def test_status_lines_have_the_rfc9110_reasons():
    want = {413: "Content Too Large", 422: "Unprocessable Content",
            429: "Too Many Requests", 529: "Overloaded", 418: "Error"}
    with Mock() as m:
        for status, text in want.items():
            resp, _ = request(m.port, "/v1/messages", {},
                              {"X-Mock-Fault": f"status:{status}"})
            assert resp.status_line == f"HTTP/1.1 {status} {text}", resp.status_line
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(b"BROKEN\r\n\r\n")
        assert read_response(s).status_line == "HTTP/1.1 400 Bad Request"
        s.close()


def test_error_after_in_each_dialect():
    with Mock("--fault", "error-after:3", "--ttft", "5ms", "--tpot", "2ms",
              "--tokens", "10") as m:
        for path, kind in PATHS.items():
            resp, _ = request(m.port, path, {})
            s = dialect_summary(kind, resp)
            assert resp.complete, f"{path}: body must still end properly"
            assert len(s["tokens"]) == 3, (path, len(s["tokens"]))
            assert s["errors"] >= 1, f"{path}: no error event"
            if kind not in ("gemini", "tgi"):
                assert not s["end"], f"{path}: end marker after an error"
        logs = m.log_lines(len(PATHS))
        assert all(x["outcome"] == "fault_error" and x["tokens"] == 3 for x in logs)


def test_close_after_and_stall_after():
    with Mock("--ttft", "5ms", "--tpot", "5ms", "--tokens", "10") as m:
        for path, kind in (("/v1/chat/completions", "openai"), ("/api/chat", "ollama")):
            resp, _ = request(m.port, path, {}, {"X-Mock-Fault": "close-after:4"})
            s = dialect_summary(kind, resp)
            assert resp.eof and not resp.complete, "close must cut the chunked body"
            assert len(s["tokens"]) == 4 and not s["end"], s
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(build_request("/v1/messages", {}, {"X-Mock-Fault": "stall-after:2"}))
        resp = Response()
        s.settimeout(0.4)
        try:
            while True:
                data = s.recv(65536)
                assert data, "stalled stream must stay open"
                resp.feed(data, time.monotonic())
        except socket.timeout:
            pass
        st = dialect_summary("anthropic", resp)
        assert len(st["tokens"]) == 2 and not resp.complete, st
        s.close()
        logs = m.log_lines(3)
        assert [x["outcome"] for x in logs] == ["fault_close", "fault_close", "fault_stall"]


def test_keepalive_connection_serves_three_requests():
    with Mock("--ttft", "5ms", "--tpot", "2ms", "--tokens", "3") as m:
        s = socket.create_connection(("127.0.0.1", m.port))
        for path, kind in (("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic"),
                           ("/api/generate", "ollama")):
            s.sendall(build_request(path, {}))
            resp = read_response(s)
            assert resp.complete and not resp.eof
            assert "close" not in resp.headers.get("connection", "")
            assert len(dialect_summary(kind, resp)["tokens"]) == 3
        # pipelined: two requests in one write, answered in order
        s.sendall(build_request("/v1/messages", {}) + build_request("/api/chat", {}))
        r1 = read_response(s)
        r2 = Response()
        r2.feed(r1.buf, time.monotonic())
        r2 = read_response(s, r2)
        assert len(dialect_summary("anthropic", r1)["tokens"]) == 3
        assert len(dialect_summary("ollama", r2)["tokens"]) == 3
        s.close()
        assert len(m.log_lines(5)) == 5


def test_stream_false_gives_one_json_with_usage():
    with Mock("--ttft", "20ms", "--tpot", "5ms", "--tokens", "5") as m:
        checks = {
            "/v1/chat/completions": lambda d: d["usage"]["completion_tokens"] == 5 and
            len(d["choices"][0]["message"]["content"].split()) == 5,
            "/v1/completions": lambda d: d["usage"]["completion_tokens"] == 5,
            "/v1/responses": lambda d: d["usage"]["output_tokens"] == 5,
            "/v1/messages": lambda d: d["usage"]["output_tokens"] == 5,
            "/generate_stream": lambda d: d["details"]["generated_tokens"] == 5,
            "/api/chat": lambda d: d["eval_count"] == 5 and d["done"],
            "/v1beta/models/g:streamGenerateContent":
                lambda d: d["usageMetadata"]["candidatesTokenCount"] == 5,
        }
        for path, ok in checks.items():
            resp, t0 = request(m.port, path, {"stream": False})
            assert resp.status == 200 and "content-length" in resp.headers, path
            assert resp.headers["content-type"] == "application/json"
            assert ok(json.loads(resp.body)), (path, resp.body)
        resp, t0 = request(m.port, "/v1/chat-messages", {"response_mode": "blocking"})
        d = json.loads(resp.body)
        assert d["metadata"]["usage"]["completion_tokens"] == 5
        # it comes when the last token would have: 20ms + 4 x 5ms
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(build_request("/v1/messages", {"stream": False}))
        t0 = time.monotonic()
        read_response(s)
        s.close()
        assert abs(time.monotonic() - t0 - 0.040) < 0.010
        last = m.log_lines(9)[-1]
        assert last["stream"] is False and last["sched_last_token_us"] == 40000, last


def test_close_framing_and_http10():
    with Mock("--framing", "close", "--ttft", "5ms", "--tpot", "2ms", "--tokens", "4") as m:
        resp, _ = request(m.port, "/v1/messages", {})
        assert "transfer-encoding" not in resp.headers
        assert resp.headers["connection"] == "close"
        assert resp.complete and resp.eof
        s = dialect_summary("anthropic", resp)
        assert len(s["tokens"]) == 4 and s["end"]
    with Mock("--ttft", "5ms", "--tpot", "2ms", "--tokens", "4") as m:
        raw = build_request("/api/chat", {}).replace(b"HTTP/1.1", b"HTTP/1.0", 1)
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(raw)
        resp = read_response(s)
        s.close()
        assert "transfer-encoding" not in resp.headers and resp.eof
        assert len(dialect_summary("ollama", resp)["tokens"]) == 4


def test_request_framing_healthz_and_bad_requests():
    with Mock() as m:
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = read_response(s)
        assert resp.status == 200 and resp.body == b"ok\n"
        # a chunked request body
        body = b'{"max_tokens": 2, "model": "chunky"}'
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"X-Mock-TTFT: 1ms\r\nTransfer-Encoding: chunked\r\n\r\n" +
                  b"5\r\n" + body[:5] + b"\r\n" + b"%x\r\n" % (len(body) - 5) +
                  body[5:] + b"\r\n0\r\n\r\n")
        resp = read_response(s)
        sm = dialect_summary("openai", resp)
        assert len(sm["tokens"]) == 2 and sm["models"] == {"chunky"}
        # Expect: 100-continue is answered at once, before the body comes
        body = json.dumps({"max_tokens": 2, "pad": "x" * 2000}).encode()
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Mock-TTFT: 10ms\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        s.settimeout(0.5)
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        t0 = time.monotonic()
        resp = read_response(s)
        sm = dialect_summary("anthropic", resp)
        assert resp.status == 200 and len(sm["tokens"]) == 2
        assert sm["tokens"][0] - t0 < 0.1
        # a model name with a raw control byte is not echoed into events
        resp2, _ = request(m.port, "/v1/messages", b'{"model": "a\nb", "max_tokens": 1}',
                           {"X-Mock-TTFT": "1ms"})
        assert dialect_summary("anthropic", resp2)["models"] == {"mock-1"}
        s.sendall(b"BROKEN\r\n\r\n")
        resp = read_response(s)
        assert resp.status == 400
        s.close()


def test_workers_and_clean_shutdown_mid_stream():
    with Mock("--workers", "2", "--ttft", "5ms", "--tpot", "1ms", "--tokens", "3") as m:
        for _ in range(6):
            resp, _ = request(m.port, "/v1/messages", {})
            assert len(dialect_summary("anthropic", resp)["tokens"]) == 3
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(build_request("/v1/messages", {}, {"X-Mock-Tokens": "1000"}))
        s.recv(100)
        m.proc.p.send_signal(signal.SIGTERM)
        assert m.proc.p.wait(5) == 0
        s.close()


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


def test_10k_concurrent_streams():
    """Holds 10,000 streams; reports timer precision (not asserted). Event
    arrival is taken from the kernel's receive timestamp, so the figure is
    the mock's lateness plus loopback delivery, not the Python client's own
    backlog (reported apart)."""
    # 2 events/s per stream: a rate the Python client can follow, so kernel
    # receive times are those of single events, not of coalesced backlogs.
    n, ttft, tpot, n_tok = 10000, 1.0, 0.5, 6
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 20000:
        report(f"10k streams skipped: RLIMIT_NOFILE hard limit {hard} < 20000")
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 30000)), hard))
    offset = realtime_offset()
    py_delay = []
    with Mock("--ttft", "1s", "--tpot", "500ms", "--tokens", str(n_tok),
              "--workers", "2") as m:
        sel = selectors.DefaultSelector()
        states, left, opened, connecting = [], n, 0, 0
        t_start = time.monotonic()
        while left and time.monotonic() - t_start < 40:
            # A few hundred connects in flight: the accept backlog never overflows.
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
                    st[0].send(build_request("/v1/chat/completions", {},
                                             {"X-Request-Id": st[3]}, close=True))
                    st[1] = time.monotonic()
                    connecting -= 1
                    sel.modify(st[0], selectors.EVENT_READ, st)
                    continue
                data, anc, _, _ = st[0].recvmsg(65536, 256)
                t = time.monotonic()
                kt = kernel_rx_time(anc, offset)
                if kt is not None:
                    py_delay.append(t - kt)
                if data:
                    st[2].feed(data, kt if kt is not None else t)
                else:
                    st[2].close(t)
                if not data or st[2].complete:
                    sel.unregister(st[0])
                    st[0].close()
                    left -= 1
        with open(f"/proc/{m.proc.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        wall_s = time.monotonic() - t_start
        with open(f"/proc/{m.proc.p.pid}/status") as f:
            rss = next(int(x.split()[1]) for x in f if x.startswith("VmHWM"))
        logs = {x["request_id"]: x for x in m.log_lines(n)}
    ramp = max(st[1] or 0 for st in states) - t_start
    done = [st for st in states if st[2].complete and
            len(dialect_summary("openai", st[2])["tokens"]) == n_tok]
    late = []
    for st in done:
        t_req = logs[st[3]]["t_req_mono_us"] / 1e6
        toks = dialect_summary("openai", st[2])["tokens"]
        late += [toks[i] - (t_req + ttft + i * tpot) for i in range(n_tok)]
    first = quantiles([x["first_token_us"] - x["sched_first_token_us"]
                       for x in logs.values()])
    worst = quantiles([x["late_max_us"] for x in logs.values()])
    report(f"10k streams: {len(done)}/{n} complete, connect ramp {ramp:.2f}s, mock peak "
           f"RSS {rss/1024:.1f} MiB ({rss/n:.1f} KiB/stream), mock CPU {cpu_s:.2f}s "
           f"in {wall_s:.2f}s")
    if late:
        p50, p99, mx = quantiles(late)
        report(f"10k streams, event arrival (kernel rx time) vs the mock's schedule: "
               f"p50 {p50*1e6:.0f} us, p99 {p99*1e6:.0f} us, max {mx*1e6:.0f} us")
    if py_delay:
        p50, p99, mx = quantiles(py_delay)
        report(f"10k streams, Python client's own delay after kernel rx: p50 "
               f"{p50*1e3:.2f} ms, p99 {p99*1e3:.2f} ms, max {mx*1e3:.2f} ms")
    report(f"10k streams, mock-side first-token lateness p50/p99/max "
           f"{first[0]}/{first[1]}/{first[2]} us; worst event per stream "
           f"p50/p99/max {worst[0]}/{worst[1]}/{worst[2]} us")
    assert len(done) == n, f"only {len(done)} of {n} streams complete"
    assert len(logs) == n and all(x["outcome"] == "ok" for x in logs.values())


def main():
    names = [k for k in sorted(globals()) if k.startswith("test_")]
    if len(sys.argv) > 1:
        names = [k for k in names if any(a in k for a in sys.argv[1:])]
    passed = failed = 0
    for name in names:
        t0 = time.monotonic()
        try:
            globals()[name]()
            passed += 1
            print(f"PASS {name} ({time.monotonic() - t0:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
