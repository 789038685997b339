# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of tokentap-mock, the simulated LLM backend.

The harness's raw client (chunked decoding, SSE split on blank lines,
NDJSON split on newlines) timestamps each event's arrival, so the schedule
checked is the one a client sees: never an event before its time (the
mock's log gives its request's time, t_req_mono_us, on the same clock).
How close to its time an event comes is the host's as much as the mock's:
make bench measures it (tests/bench/timing.py).
"""
import json
import signal
import socket
import time

from harness import Mock, Response, build_request, completion, parallel, parse_sse, read_response, \
    request

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


# ------------------------------------------------------- dialect readers

def dialect_summary(kind, resp):
    """Token events, reported output count and end marker, read the way
    docs/contract.md §4 defines them for the dialect."""
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


FAST = {"X-Mock-TTFT": "5ms", "X-Mock-TPOT": "2ms"}


# ------------------------------------------------------------------ tests

def test_every_dialect_parses_with_its_counts():
    with Mock() as m:
        for path, kind in PATHS.items():
            resp = request(m.port, path, {"model": "m-7"},
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
        resp = request(m.port, "/v1beta/models/gemini-pro:streamGenerateContent?alt=sse",
                          {}, dict(FAST, **{"X-Mock-Tokens": "2"}))
        assert dialect_summary("gemini", resp)["models"] == {"gemini-pro"}
        resp = request(m.port, "/v1/chat/completions", {},
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
            resp = request(m.port, path, body, FAST)
            want = next(iter(body.values()), 50)
            if isinstance(want, dict):
                want = next(iter(want.values()))
            s = dialect_summary(kind, resp)
            assert len(s["tokens"]) == want and s["usage"] == want, (path, s["usage"])
        # tokens per chunk: events carry K tokens, usage counts tokens
        resp = request(m.port, "/v1/messages", {},
                          dict(FAST, **{"X-Mock-Tokens": "10", "X-Mock-Tokens-Per-Chunk": "3"}))
        s = dialect_summary("anthropic", resp)
        assert len(s["tokens"]) == 4 and s["usage"] == 10, s
    with Mock("--tokens", "9", "--usage", "off") as m:
        resp = request(m.port, "/v1/chat/completions", {"max_tokens": 3}, FAST)
        s = dialect_summary("openai", resp)
        assert len(s["tokens"]) == 9, "--tokens must win over the body"
        assert s["usage"] is None, "--usage off: no usage chunk"
        resp = request(m.port, "/v1/chat/completions",
                          {"stream_options": {"include_usage": True}}, FAST)
        assert dialect_summary("openai", resp)["usage"] == 9, "include_usage asks for it"
        resp = request(m.port, "/v1/messages", {}, FAST)
        assert dialect_summary("anthropic", resp)["usage"] is None


def test_headers_override_flags():
    """X-Mock-* headers win over the flags: the schedule the mock logs is
    the headers', and no token reaches the client before it."""
    with Mock("--ttft", "300ms", "--tpot", "30ms", "--tokens", "4") as m:
        resp = request(m.port, "/v1/messages", {})
        toks = dialect_summary("anthropic", resp)["tokens"]
        assert len(toks) == 4
        resp = request(m.port, "/v1/messages", {},
                       {"X-Mock-TTFT": "20ms", "x-mock-tpot": "5ms", "X-MOCK-TOKENS": "6"})
        toks2 = dialect_summary("anthropic", resp)["tokens"]
        assert len(toks2) == 6
        flags, headers = m.served(2)[:2]
        assert (flags["sched_first_token_us"], flags["sched_last_token_us"]) == \
            (300000, 300000 + 3 * 30000), flags
        assert (headers["sched_first_token_us"], headers["sched_last_token_us"]) == \
            (20000, 20000 + 5 * 5000), headers
        for line, got, tpot in ((flags, toks, 0.030), (headers, toks2, 0.005)):
            due = line["t_req_mono_us"] / 1e6 + line["sched_first_token_us"] / 1e6
            assert all(t >= due + i * tpot for i, t in enumerate(got)), (due, got)
            # each send bracketed: the clock before send(2), then after it
            assert line["first_token_us"] <= line["first_token_end_us"] <= \
                line["last_token_us"] <= line["last_token_end_us"], line
        for bad in ({"X-Mock-TTFT": "soon"}, {"X-Mock-Fault": "explode"},
                    {"X-Mock-Bogus": "1"}, {"X-Mock-Tokens-Per-Chunk": "0"}):
            resp = request(m.port, "/v1/messages", {}, bad)
            assert resp.status == 400, bad
            msg = json.loads(resp.body)["error"]["message"]
            assert next(iter(bad)).lower() in msg.lower(), msg


def test_role_delay_prefill_and_keepalive_comments():
    """The role chunk waits for X-Mock-Role-Delay, the first token for the
    TTFT and the prefill on top; keep-alive comments fill the wait and stop
    at the first token. Each arrives no earlier than its time (how late is
    the bench's), and in order."""
    with Mock("--ttft", "100ms") as m:
        resp = request(m.port, "/v1/chat/completions", {},
                       {"X-Mock-Role-Delay": "40ms", "X-Mock-Tokens": "2"})
        t_req = m.served(1)[0]["t_req_mono_us"] / 1e6
        role_t, tok_t = resp.events[0][0], dialect_summary("openai", resp)["tokens"][0]
        assert b'"role":"assistant"' in resp.events[0][1], resp.events[0]
        assert t_req + 0.040 <= role_t <= tok_t, (t_req, role_t, tok_t)
        assert tok_t >= t_req + 0.100, (t_req, tok_t)
        # 4000 body bytes = 1000 input tokens x 100us = 100ms more TTFT
        body = json.dumps({"messages": "x" * 3984}).encode()
        assert len(body) == 4000
        resp = request(m.port, "/v1/chat/completions", body,
                       {"X-Mock-Prefill-Per-Token": "100us", "X-Mock-Tokens": "2"})
        line = m.served(2)[1]
        assert line["sched_first_token_us"] == 200000, line
        tok_t = dialect_summary("openai", resp)["tokens"][0]
        assert tok_t >= line["t_req_mono_us"] / 1e6 + 0.200, (line, tok_t)
        resp = request(m.port, "/v1/messages", {},
                       {"X-Mock-Keepalive": "30ms", "X-Mock-TTFT": "200ms",
                        "X-Mock-Tokens": "1"})
        comments = [i for i, (t, raw) in enumerate(resp.events)
                    if raw.startswith(b": keep-alive")]
        first = next(i for i, (t, raw) in enumerate(resp.events)
                     if b"content_block_delta" in raw)
        # one each 30 ms after the last write, before the token due at 200 ms
        assert 1 <= len(comments) <= 6, f"{len(comments)} keep-alive comments"
        assert all(i < first for i in comments), "keep-alive after the first token"
        assert not any(raw.startswith(b":") for _, raw in resp.events[-4:])


def _prefix_bodies(system, users):
    """Chat bodies sharing a system prompt, each with its own question."""
    return [json.dumps({"model": "m", "stream": True, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": u}]}).encode() for u in users]


def _common_blocks(body, seen):
    """The model's cached blocks of body: the leading 64-byte blocks that
    every byte up to their end shares with a body sent before."""
    best = 0
    for b in seen:
        n = 0
        while n < min(len(b), len(body)) and b[n] == body[n]:
            n += 1
        best = max(best, n // 64)
    return best


def test_prefix_cache_prefills_the_cached_blocks_at_their_cost():
    """--prefix-cache: a body whose leading 64-byte blocks (16 tokens each)
    were seen prefills them at --prefix-cache-cost of the price, so its
    TTFT is ttft + prefill-per-token x (input - cached + cost x cached),
    at the client within 5 %; the log and the usage give the cached tokens.
    Without the cache every request pays the whole prefill."""
    system = " ".join(["shared system prompt"] * 400)       # 8,399 bytes
    bodies = _prefix_bodies(system, ["q1", "second question", "q1", "third"])
    other = _prefix_bodies("another " + system, ["q1"])[0]
    order = [bodies[0], bodies[1], other, bodies[2], bodies[3]]
    ttft, per_token, cost = 100000, 200, 0.25
    for cache in (True, False):
        flags = ["--ttft", "100ms", "--prefill-per-token", "200us", "--tokens", "3"]
        if cache:
            flags += ["--prefix-cache", "60s", "--prefix-cache-cost", str(cost)]
        with Mock(*flags) as m:
            got = []
            for i, body in enumerate(order):
                resp = request(m.port, "/v1/chat/completions", body, {})
                line = m.served(i + 1)[i]
                got.append((resp, line))
            # a blocking answer's usage says so too: every whole block cached
            whole = json.dumps({"stream": False, "messages": system}).encode()
            for _ in range(2):
                usage = json.loads(request(m.port, "/v1/chat/completions", whole,
                                           {"X-Mock-TTFT": "1ms", "X-Mock-Tokens": "1"}
                                           ).body)["usage"]
            assert usage.get("prompt_tokens_details") == (
                {"cached_tokens": 16 * (len(whole) // 64)} if cache else None), usage
        seen = []
        for body, (resp, line) in zip(order, got):
            tokens = len(body) // 4
            cached = 16 * _common_blocks(body, seen) if cache else 0
            seen.append(body)
            want = ttft + per_token * (tokens - cached) + round(per_token * cached * cost)
            assert line["input_tokens"] == tokens, line
            assert line["cached_tokens"] == cached, (line, cached)
            assert line["sched_first_token_us"] == want, (line, want)
            # at the client: never early, at most 5 % late
            first = dialect_summary("openai", resp)["tokens"][0]
            measured = (first - line["t_req_mono_us"] / 1e6) * 1e6
            assert want <= measured <= want * 1.05, (measured, want, line)
            usage = json.loads(parse_sse(resp.events[-2][1])[1])["usage"]
            if cache:
                assert usage["prompt_tokens_details"] == {"cached_tokens": cached}, usage
            else:
                assert "prompt_tokens_details" not in usage, usage
        sched = [line["sched_first_token_us"] for _, line in got]
        if cache:
            # the repeats found the 2,100-odd tokens of the system prompt,
            # 75 % of their 420 ms prefill saved; another system prompt
            # shares only the block of the JSON before it
            assert sched[0] - sched[1] > 300000 and sched[0] - sched[3] > 300000, sched
            assert abs(sched[2] - sched[0]) < 5000, sched
        else:
            assert max(sched) - min(sched) <= 200 * 5, sched


def test_slots_queue_first_come_first_served():
    """--slots 2: of 5 streams sent 10 ms apart the first two decode at once,
    and the slots, in the order their holders free them, go to the other
    three in the order they came (first come, first served); a waiting stream's first
    token is due the TTFT after its slot, and the log says how long it
    waited. With --tpot-per-stream the gap grows by it for each other
    sequence decoding (the slots' holders), never for the ones waiting."""
    n = 6
    with Mock("--slots", "2", "--ttft", "20ms", "--tpot", "10ms",
              "--tpot-per-stream", "2ms", "--tokens", str(n)) as m:
        def one(i):
            time.sleep(0.010 * i)           # the requests 10 ms apart, in order
            return completion(m.port, timeout=30)
        res = parallel(one, range(5), 5)
        # in the order the mock's loop read them, which is the queue's (two
        # that arrived while it was busy are read in either order)
        logs = sorted(m.served(5), key=lambda x: x["t_req_mono_us"] + x["read_wait_us"])
    assert all(len(dialect_summary("openai", r)["tokens"]) == n for r in res)
    read = [x["t_req_mono_us"] for x in logs]
    slot = [r + x["queue_us"] for r, x in zip(read, logs)]
    end = [r + x["last_token_us"] for r, x in zip(read, logs)]
    assert logs[0]["queue_us"] == logs[1]["queue_us"] == 0, logs
    # the k-th waiter got the slot the k-th last token freed (at once; a
    # busy machine may pause the mock between the two). Which holder ends
    # first is not the read order's business: each schedule starts at its
    # request's arrival, and two read in one loop turn may have arrived in
    # either order (seen: the second read ended 3.4 ms before the first)
    freed = sorted(end)
    for k, waiter in enumerate((2, 3, 4)):
        assert 0 <= slot[waiter] - freed[k] < 50000, (waiter, slot, end)
        # it waited (about 60 ms when sent on time; a busy host sends late)
        assert logs[waiter]["queue_us"] > 0, logs[waiter]
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
            resp = request(m.port, "/v1/chat/completions", body, hdr)
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
        assert all(x["tokens"] == 12 and x["events"] == 5 for x in m.served(3))


def test_jitter_is_seeded_and_never_negative():
    with Mock("--ttft", "5ms", "--tokens", "30", "--tpot", "2ms") as m:
        for seed in ("7", "7", "8"):
            request(m.port, "/v1/chat/completions", {},
                    {"X-Mock-Jitter": "uniform:2ms", "X-Mock-Seed": seed})
        resp = request(m.port, "/v1/chat/completions", {},
                       {"X-Mock-Jitter": "exp:1ms", "X-Mock-TPOT": "0", "X-Mock-Seed": "3"})
        exp_toks = dialect_summary("openai", resp)["tokens"]
        resp7 = request(m.port, "/v1/chat/completions", {}, {"X-Mock-Seed": "7"})
        resp7b = request(m.port, "/v1/chat/completions", {}, {"X-Mock-Seed": "7"})
        logs = m.served(6)
    a, b, c = (x["sched_last_token_us"] for x in logs[:3])
    assert a == b, "same seed, same schedule"
    assert a != c, "another seed, another schedule"
    assert a != 5000 + 29 * 2000, "uniform jitter moved the schedule"
    # exp jitter with tpot 0: every gap is the jitter (mean 1 ms: 29 ms over
    # 29 gaps, seeded), never negative
    exp = logs[3]
    span = exp["sched_last_token_us"] - exp["sched_first_token_us"]
    assert 10000 < span < 60000, exp
    assert len(exp_toks) == 30 and all(y >= x for x, y in zip(exp_toks, exp_toks[1:]))
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
            resp = request(m.port, path, {})
            assert resp.status == 429, path
            assert resp.headers["content-type"] == "application/json"
            assert want[kind](json.loads(resp.body)), (path, resp.body)
        resp = request(m.port, "/v1/messages", {}, {"X-Mock-Fault": "status:503"})
        assert resp.status == 503
        resp = request(m.port, "/v1/messages", {},
                          dict(FAST, **{"X-Mock-Fault": "none", "X-Mock-Tokens": "2"}))
        assert resp.status == 200


def test_status_lines_have_the_rfc9110_reasons():
    want = {413: "Content Too Large", 422: "Unprocessable Content",
            429: "Too Many Requests", 529: "Overloaded", 418: "Error"}
    with Mock() as m:
        for status, text in want.items():
            resp = request(m.port, "/v1/messages", {},
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
            resp = request(m.port, path, {})
            s = dialect_summary(kind, resp)
            assert resp.complete, f"{path}: body must still end properly"
            assert len(s["tokens"]) == 3, (path, len(s["tokens"]))
            assert s["errors"] >= 1, f"{path}: no error event"
            if kind not in ("gemini", "tgi"):
                assert not s["end"], f"{path}: end marker after an error"
        logs = m.served(len(PATHS))
        assert all(x["outcome"] == "fault_error" and x["tokens"] == 3 for x in logs)


def test_close_after_and_stall_after():
    with Mock("--ttft", "5ms", "--tpot", "5ms", "--tokens", "10") as m:
        for path, kind in (("/v1/chat/completions", "openai"), ("/api/chat", "ollama")):
            resp = request(m.port, path, {}, {"X-Mock-Fault": "close-after:4"})
            s = dialect_summary(kind, resp)
            assert resp.eof and not resp.complete, "close must cut the chunked body"
            assert len(s["tokens"]) == 4 and not s["end"], s
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(build_request("/v1/messages", {}, {"X-Mock-Fault": "stall-after:2"}))
        resp = Response()
        s.settimeout(10)
        while len(dialect_summary("anthropic", resp)["tokens"]) < 2:
            data = s.recv(65536)
            assert data, "stalled stream must stay open"
            resp.feed(data)
        s.settimeout(0.4)              # and then nothing more
        try:
            data = s.recv(65536)
            assert data, "stalled stream must stay open"
            resp.feed(data)
        except socket.timeout:
            pass
        st = dialect_summary("anthropic", resp)
        assert len(st["tokens"]) == 2 and not resp.complete, st
        s.close()
        logs = m.served(3)
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
        r2.feed(r1.rest)
        r2 = read_response(s, r2)
        assert len(dialect_summary("anthropic", r1)["tokens"]) == 3
        assert len(dialect_summary("ollama", r2)["tokens"]) == 3
        s.close()
        assert len(m.served(5)) == 5


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
            resp = request(m.port, path, {"stream": False})
            assert resp.status == 200 and "content-length" in resp.headers, path
            assert resp.headers["content-type"] == "application/json"
            assert ok(json.loads(resp.body)), (path, resp.body)
        resp = request(m.port, "/v1/chat-messages", {"response_mode": "blocking"})
        d = json.loads(resp.body)
        assert d["metadata"]["usage"]["completion_tokens"] == 5
        # it comes when the last token would have: 20ms + 4 x 5ms, not before
        resp = request(m.port, "/v1/messages", {"stream": False})
        last = m.served(9)[-1]
        assert last["stream"] is False and last["sched_last_token_us"] == 40000, last
        assert resp.t_head >= last["t_req_mono_us"] / 1e6 + 0.040, (resp.t_head, last)


def test_close_framing_and_http10():
    with Mock("--framing", "close", "--ttft", "5ms", "--tpot", "2ms", "--tokens", "4") as m:
        resp = request(m.port, "/v1/messages", {})
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
        s.settimeout(10)
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        resp = read_response(s)
        sm = dialect_summary("anthropic", resp)
        assert resp.status == 200 and len(sm["tokens"]) == 2
        # a model name with a raw control byte is not echoed into events
        resp2 = request(m.port, "/v1/messages", b'{"model": "a\nb", "max_tokens": 1}',
                        {"X-Mock-TTFT": "1ms"})
        assert dialect_summary("anthropic", resp2)["models"] == {"mock-1"}
        s.sendall(b"BROKEN\r\n\r\n")
        resp = read_response(s)
        assert resp.status == 400
        s.close()


def test_sigterm_right_after_start_exits():
    """SIGTERM as soon as the port answers (before a worker has entered its
    loop): the mock exits 0 at once. It hung in 8 of 150 starts: the
    break was asked before the loop began, which forgets it."""
    for _ in range(100):
        m = Mock()
        m.p.send_signal(signal.SIGTERM)
        try:
            assert m.p.wait(5) == 0, m.stderr()
        finally:
            m.__exit__(None, None, None)


def test_workers_and_clean_shutdown_mid_stream():
    with Mock("--workers", "2", "--ttft", "5ms", "--tpot", "1ms", "--tokens", "3") as m:
        for _ in range(6):
            resp = request(m.port, "/v1/messages", {})
            assert len(dialect_summary("anthropic", resp)["tokens"]) == 3
        s = socket.create_connection(("127.0.0.1", m.port))
        s.sendall(build_request("/v1/messages", {}, {"X-Mock-Tokens": "1000"}))
        s.recv(100)
        m.p.send_signal(signal.SIGTERM)
        assert m.p.wait(5) == 0
        s.close()


def test_prompt_bytes_per_token_counts_the_prompt_text():
    """--prompt-bytes-per-token R: the input tokens (the log's, usage's
    prompt count in every API) are the prompt's text bytes / R, rounded
    up: every content, prompt, input, text, inputs, query and system
    string, escapes decoded (a \\u escape its UTF-8 bytes), the JSON
    around them not counted; X-Mock-Prompt-Bytes-Per-Token sets it per
    request. Without it, the body's bytes / 4."""
    text = "caf\u00e9 \U0001F600 line\n" * 20        # 16 bytes a repeat: 320
    nbytes = len(text.encode())
    bodies = {
        "/v1/chat/completions": {"messages": [{"role": "system", "content": "abc"},
                                              {"role": "user", "content": text}]},
        "/v1/responses": {"input": [{"role": "user", "content": [
            {"type": "input_text", "text": text + "abc"}]}]},
        "/v1/messages": {"system": "abc", "messages": [{"role": "user",
                                                        "content": text}]},
        "/generate_stream": {"inputs": text + "abc", "parameters": {}},
        "/api/generate": {"prompt": text + "abc"},
        "/v1/chat-messages": {"inputs": {}, "query": text + "abc"},
        "/v1beta/models/g:streamGenerateContent?alt=sse": {
            "contents": [{"parts": [{"text": text + "abc"}]}]},
    }
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "2",
              "--prompt-bytes-per-token", "3.1") as m:
        for i, (path, body) in enumerate(bodies.items()):
            raw = json.dumps(dict(body, model="m", stream=True)).encode()
            assert b"\\u00e9" in raw and b"\\ud83d" in raw    # escaped on the wire
            request(m.port, path, raw, {})
            line = m.served(i + 1)[i]
            assert line["input_tokens"] == -(-(nbytes + 3) * 10 // 31), (path, line)
        # a blocking answer's usage, and the header's own ratio
        raw = json.dumps({"model": "m", "stream": False, "messages": [
            {"role": "user", "content": text}]}).encode()
        usage = json.loads(request(m.port, "/v1/chat/completions", raw,
                                   {"X-Mock-Prompt-Bytes-Per-Token": "2"}).body)["usage"]
        assert usage["prompt_tokens"] == nbytes // 2, usage
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "2") as m:
        request(m.port, "/v1/chat/completions", raw, {})
        assert m.served(1)[0]["input_tokens"] == len(raw) // 4
