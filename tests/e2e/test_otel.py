# SPDX-License-Identifier: Apache-2.0
"""OpenTelemetry: W3C trace context in and out, one span per request, and
OTLP metrics, each export decoded by the collector stand-in (protoc, or a
JSON parser) and checked against what the client, the backend stand-in,
the access log and /stats saw."""
import json
import os
import time

from peers import Backend, SSE_HEAD
from harness import Tokentap, raw_request, until
from otlp_collector import CLIENT, SERVER, Collector, exp_quantile

CLIENT_TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
PROMPT = "the prompt text that must never leave tokentap"
SECRET = "sk-secret-key-never-exported"


def chunk(delta, model="gpt-4o", usage=None):
    d = {"id": "c1", "object": "chat.completion.chunk", "model": model,
         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    if usage:
        d = {"id": "c1", "object": "chat.completion.chunk", "model": model,
             "choices": [], "usage": usage}
    return b"data: " + json.dumps(d).encode() + b"\n\n"


def chat_handler(ttft=0.05, gap=0.005, n=5, stall=None):
    """An OpenAI stream: the role chunk at once, n tokens from ttft on,
    gap apart (stall: (after token k, seconds)), usage, [DONE]."""
    def handle(req, c):
        c.send(SSE_HEAD)
        c.chunk(chunk({"role": "assistant"}))
        time.sleep(ttft)
        for i in range(n):
            if i:
                time.sleep(stall[1] if stall and i == stall[0] else gap)
            c.chunk(chunk({"content": f"t{i} "}))
        c.chunk(chunk(None, usage={"prompt_tokens": 7, "completion_tokens": n,
                                   "total_tokens": 7 + n}))
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    return handle


def post(port, headers=b"", body=None, path=b"/v1/chat/completions"):
    body = body or json.dumps({"model": "gpt-4o", "stream": True, "messages": [
        {"role": "user", "content": PROMPT}]}).encode()
    return raw_request(port, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\n"
                       b"Authorization: Bearer " + SECRET.encode() + b"\r\n" + headers +
                       b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)


def config_check(path, text, env=None):
    """tokentap -t on text written to path, with no OTEL_ variable but
    env's: (exit status, what it printed)."""
    import subprocess
    from harness import binary
    with open(path, "w") as f:
        f.write(text)
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    e.update(env or {})
    r = subprocess.run([binary("tokentap"), "-t", "-c", path], capture_output=True,
                       text=True, env=e, timeout=30)
    return r.returncode, r.stdout + r.stderr


def conf(backend_port, collector=None, otel=""):
    text = f"""routes:
  - name: chat
    upstream: http://127.0.0.1:{backend_port}
"""
    if collector is not None:
        text += f"""otel:
  endpoint: {collector.url()}
{otel or "  traces: {delay: 100ms}"}
"""
    return text


def test_span_joins_the_clients_trace():
    """A streamed chat request with the client's traceparent: one span, a
    child of the client's span, in its trace, with the tracestate; the
    backend got tokentap's span as its parent; the access log names both
    ids; TTFT, TTFO and the first-token events are the access log's; no
    prompt, no credential in any export."""
    with Collector() as col, Backend(chat_handler(ttft=0.06)) as b, \
            Tokentap(conf(b.port, col)) as t:
        r = post(t.port, b"traceparent: " + CLIENT_TP.encode() +
                 b"\r\ntracestate: vendor=abc,other=1\r\n")
        assert b" 200 OK" in r.split(b"\r\n")[0]
        line = t.access(1)[0]
        spans = col.wait_spans(2)
        assert len(spans) == 2, spans
        srv = [x for x in spans if x["kind"] == SERVER][0]
        s = [x for x in spans if x["kind"] == CLIENT][0]
        trace_id, client_span = CLIENT_TP.split("-")[1:3]
        # app -> tokentap (SERVER, the client's span its parent) -> the
        # call to the model (CLIENT, the SERVER span its parent)
        assert srv["trace_id"] == s["trace_id"] == trace_id
        assert srv["parent"] == client_span and s["parent"] == srv["span_id"]
        assert len({client_span, srv["span_id"], s["span_id"]}) == 3
        assert len(s["span_id"]) == len(srv["span_id"]) == 16
        assert s["trace_state"] == srv["trace_state"] == "vendor=abc,other=1"
        # both in the same export
        assert len(col.of("/v1/traces")) == 1
        # the HTTP server conventions' span of the request tokentap got
        h = srv["attrs"]
        assert srv["name"] == "POST chat" and srv["status"] == 0
        assert h["http.request.method"] == "POST"
        assert h["url.path"] == "/v1/chat/completions"
        assert h["url.scheme"] == "http" and h["network.protocol.version"] == "1.1"
        assert h["http.route"] == h["tokentap.route"] == "chat"
        assert h["http.response.status_code"] == 200
        assert h["client.address"] == "127.0.0.1"
        assert h["server.address"] == "x" and "server.port" not in h
        assert srv["start"] == s["start"] and srv["end"] == s["end"]
        # the backend's parent is tokentap's span, sampled
        up = b.requests[0]
        assert up.all("traceparent") == [f"00-{trace_id}-{s['span_id']}-01"]
        assert up.header("tracestate") == "vendor=abc,other=1"
        assert line["trace_id"] == trace_id and line["span_id"] == s["span_id"]
        # the GenAI inference span
        a = s["attrs"]
        assert s["name"] == "chat gpt-4o" and s["kind"] == 3 and s["status"] == 0
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-4o"
        assert a["gen_ai.response.model"] == "gpt-4o"
        assert a["gen_ai.request.stream"] is True
        assert a["gen_ai.usage.input_tokens"] == 7 and a["gen_ai.usage.output_tokens"] == 5
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == b.port
        assert a["tokentap.route"] == "chat" and a["tokentap.outcome"] == "ok"
        assert a["tokentap.attempts"] == 1
        # the same figures as the access log's, to the microsecond
        assert round(a["tokentap.time_to_first_token"] * 1e6) == \
            round(line["ttft_ms"] * 1000)
        assert round(a["tokentap.time_to_first_output_token"] * 1e6) == \
            round(line["ttfo_ms"] * 1000)
        assert round(a["tokentap.time_per_output_token"] * 1e6) == \
            round(line["tpot_ms"] * 1000)
        assert 0 < a["gen_ai.response.time_to_first_chunk"] < a["tokentap.time_to_first_token"]
        ev = {e["name"]: e["time"] for e in s["events"]}
        assert abs((ev["tokentap.first_token"] - s["start"]) / 1e3 -
                   line["ttft_ms"] * 1000) <= 1
        assert "tokentap.first_output_token" in ev
        assert abs((s["end"] - s["start"]) / 1e6 - line["duration_ms"]) < 0.01
        assert s["resource"]["service.name"] == "tokentap"
        assert s["resource"]["service.instance.id"]
        raw = b"".join(e["raw"] for e in col.of("/v1/traces"))
        assert PROMPT.encode() not in raw and SECRET.encode() not in raw


def test_time_to_first_chunk_runs_from_the_send_to_the_first_content():
    """gen_ai.response.time_to_first_chunk: from tokentap's send of the
    request to the first chunk with content. A backend sends a role-only
    chunk at once and the content 200 ms later: the attribute lies in the
    bracket the test establishes, from the backend's read of the request
    to its send of the content (a lower bound: tokentap sent the request
    before, read the content after) up to the client's send of the request
    to its read of the content (an upper bound), not at the role chunk."""
    import socket
    marks = {}

    def handle(req, c):
        marks["got"] = time.monotonic()
        c.send(SSE_HEAD)
        c.chunk(chunk({"role": "assistant"}))
        time.sleep(0.2)
        marks["content"] = time.monotonic()
        c.chunk(chunk({"content": "hello"}))
        time.sleep(0.02)
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    body = json.dumps({"model": "gpt-4o", "stream": True, "messages": []}).encode()
    with Collector() as col, Backend(handle) as b, Tokentap(conf(b.port, col)) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.settimeout(30)
        req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ntraceparent: " +
               CLIENT_TP.encode() + b"\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        sent = time.monotonic()
        s.sendall(req)
        data, seen = b"", None
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
            if seen is None and b"hello" in data:
                seen = time.monotonic()
        s.close()
        assert seen is not None, data
        a = col.wait_spans(1, kind=CLIENT)[0]["attrs"]
        ttfc = a["gen_ai.response.time_to_first_chunk"]
        lo, hi = marks["content"] - marks["got"], seen - sent
        assert lo - 2e-5 <= ttfc <= hi + 2e-5, (lo, ttfc, hi)
        assert ttfc > 0.19
        assert ttfc <= a["tokentap.time_to_first_token"]


def test_request_stream_is_what_the_request_asked():
    """gen_ai.request.stream is the request's: a streaming request the
    backend answers 500 (JSON, no stream) is true, a request with
    "stream": false is false, Gemini's :streamGenerateContent (no body
    key) true whatever came back; "stream" found after the model and
    after a prompt with "stream" in a nested object."""
    def handle(req, c):
        body = b'{"error": {"message": "overloaded"}}'
        if b"ok-json" in req.body:
            body = b'{"choices": [], "usage": {"prompt_tokens": 1}}'
            c.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
            return "keep"
        c.send(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return "keep"
    cases = [  # (body, path, want)
        (b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "x", '
         b'"meta": {"stream": false}}], "stream": true}', b"/v1/chat/completions", True),
        (b'{"stream":false,"model":"gpt-4o","messages":[],"x":"ok-json"}',
         b"/v1/chat/completions", False),
        (b'{"contents": []}', b"/v1beta/models/gemini-2.0:streamGenerateContent?alt=sse",
         True),
    ]
    with Collector() as col, Backend(handle) as b, Tokentap(conf(b.port, col)) as t:
        ids = []
        for body, path, _ in cases:
            ids.append(os.urandom(16).hex())
            r = post(t.port, b"traceparent: 00-" + ids[-1].encode() +
                     b"-00f067aa0ba902b7-01\r\n", body=body, path=path)
            assert r.split(b"\r\n")[0].split(b" ")[1] in (b"200", b"500"), r[:100]
        spans = {s["trace_id"]: s for s in col.wait_spans(len(cases), kind=CLIENT)}
        lines = t.access(len(cases))
        for i, (body, path, want) in enumerate(cases):
            s = spans[ids[i]]
            assert s["attrs"]["gen_ai.request.stream"] is want, (body, s["attrs"])
            assert lines[i]["stream"] is False          # no answer streamed
            assert "gen_ai.response.time_to_first_chunk" not in s["attrs"]


def test_trace_context_rules():
    """A malformed traceparent (or two) is dropped with its tracestate,
    never a 400; a request without one starts a trace only when sampled
    (otel.traces.sample); a client's unsampled trace goes on unsampled
    with tokentap's span id and exports nothing."""
    bad = [b"traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01\r\n",
           b"traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01\r\n",
           b"traceparent: ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n",
           b"traceparent: " + CLIENT_TP.encode() + b"-extra\r\n",
           b"traceparent: " + CLIENT_TP.encode() + b"\r\ntraceparent: " +
           CLIENT_TP.encode() + b"\r\n"]
    with Collector() as col, Backend(chat_handler(ttft=0)) as b, \
            Tokentap(conf(b.port, col)) as t:
        for i, h in enumerate(bad):
            r = post(t.port, h + b"tracestate: k=v\r\n")
            assert b" 200 OK" in r.split(b"\r\n")[0], (h, r[:100])
            up = b.requests[-1]
            assert up.all("traceparent") == [] and up.all("tracestate") == [], h
            assert t.access(i + 1)[i]["trace_id"] is None
        # not sampled (flag 00): tokentap's span id goes on, unsampled
        post(t.port, b"traceparent: " + CLIENT_TP[:-2].encode() + b"00\r\n")
        tp = b.requests[-1].header("traceparent").split("-")
        assert tp[1] == CLIENT_TP.split("-")[1] and tp[3] == "00"
        assert tp[2] != CLIENT_TP.split("-")[2]
        assert t.access(len(bad) + 1)[-1]["span_id"] == tp[2]
        # no traceparent, sample 0: none sent
        post(t.port)
        assert b.requests[-1].all("traceparent") == []
        time.sleep(0.5)
        assert col.spans() == []
    with Collector() as col, Backend(chat_handler(ttft=0)) as b, \
            Tokentap(conf(b.port, col, "  traces: {sample: 1, delay: 100ms}")) as t:
        post(t.port)
        s = col.wait_spans(1, kind=CLIENT)[0]
        root = col.wait_spans(1, kind=SERVER)[0]
        assert root["parent"] == "" and s["parent"] == root["span_id"]
        assert b.requests[-1].header("traceparent") == \
            f"00-{s['trace_id']}-{s['span_id']}-01"


def test_without_otel_the_context_passes_untouched():
    """No otel: the client's traceparent reaches the backend as it was
    (the log names its trace and the client's span); a malformed one does
    not."""
    with Backend(chat_handler(ttft=0)) as b, Tokentap(conf(b.port)) as t:
        post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\ntracestate: a=b\r\n")
        assert b.requests[-1].all("traceparent") == [CLIENT_TP]
        assert b.requests[-1].header("tracestate") == "a=b"
        line = t.access(1)[0]
        assert (line["trace_id"], line["span_id"]) == tuple(CLIENT_TP.split("-")[1:3])
        post(t.port, b"traceparent: 00-xyz\r\n")
        assert b.requests[-1].all("traceparent") == []
        assert t.access(2)[1]["trace_id"] is None


def test_stalls_and_failover_are_events():
    """A stream that stalls shows the stall's start and end as events; a
    replica that answers 503 first shows the failover as an event, and
    the span its attempts and the replica that served."""
    def failing(req, c):
        c.send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
        return "keep"
    with Collector() as col, Backend(failing) as bad, \
            Backend(chat_handler(ttft=0.01, n=4, stall=(2, 0.6))) as good, \
            Tokentap(f"""routes:
  - name: chat
    upstreams: [{{url: "http://127.0.0.1:{bad.port}"}}, {{url: "http://127.0.0.1:{good.port}"}}]
    balance: round_robin
    retries: 1
    thresholds: {{stall: 200ms}}
otel:
  endpoint: {col.url()}
  traces: {{delay: 100ms}}
""") as t:
        spans, lines = [], []
        for i in range(2):
            post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
        lines = t.access(2)
        spans = col.wait_spans(2, kind=CLIENT)
        failed = [s for s in spans if s["attrs"]["tokentap.attempts"] == 2]
        assert failed, [s["attrs"] for s in spans]
        s = failed[0]
        fo = [e for e in s["events"] if e["name"] == "tokentap.failover"]
        assert len(fo) == 1 and fo[0]["attrs"]["http.response.status_code"] == 503
        assert fo[0]["attrs"]["tokentap.upstream"] == f"http://127.0.0.1:{bad.port}"
        assert s["attrs"]["server.port"] == good.port
        for s in spans:
            names = [e["name"] for e in s["events"]]
            line = [x for x in lines if x["span_id"] == s["span_id"]][0]
            assert names.count("tokentap.stall.start") == line["stalls"] == 1, names
            assert s["attrs"]["tokentap.stalls"] == 1
            assert names.count("tokentap.stall.end") == 1
            ev = {e["name"]: e["time"] for e in s["events"]}
            gap = (ev["tokentap.stall.end"] - ev["tokentap.stall.start"]) / 1e9
            assert 0.55 < gap < 1.5, gap


def test_json_gzip_and_the_api_key():
    """protocol json and gzip: the collector takes OTLP/JSON (ids in hex,
    64-bit numbers as strings); the API key header goes with each export
    and into no log."""
    key = "otlp-api-key-9c1f"
    with Collector() as col, Backend(chat_handler(ttft=0)) as b, \
            Tokentap(conf(b.port, col, f"""  protocol: json
  compression: gzip
  headers: {{x-api-key: "{key}"}}
  traces: {{delay: 100ms}}
  metrics: {{interval: 300ms}}""")) as t:
        post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
        s = col.wait_spans(1, kind=CLIENT)[0]
        assert s["trace_id"] == CLIENT_TP.split("-")[1]
        m = col.wait_metrics(1)
        assert m["tokentap.time_to_first_token"]["type"] == "exponentialHistogram"
        for e in col.exports:
            assert e["json"] and e["headers"]["Content-Encoding"] == "gzip"
            assert e["headers"]["x-api-key"] == key
        ex = col.of("/v1/traces")[0]["data"]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        assert isinstance(ex["startTimeUnixNano"], str) and len(ex["traceId"]) == 32
        t.stop()
        assert key not in t.stderr()
        assert key not in open(t.log).read()


def test_metric_quantiles_within_3_percent_of_stats():
    """TTFT quantiles computed from the exported exponential histogram
    (tokentap.time_to_first_token) are within 3 % of /stats'; the
    counters are the requests made; delta temporality adds up to the
    cumulative one; explicit buckets carry the classic bounds."""
    delays = [0.005 + 0.002 * i for i in range(30)]

    def varied(req, c):
        n = len([r for r in b.requests if r.target == req.target])
        return chat_handler(ttft=delays[(n - 1) % len(delays)], n=2)(req, c)
    for extra in ("", "    temporality: delta\n", "    histograms: explicit\n"):
        with Collector() as col, Backend(varied) as b, Tokentap(conf(b.port, col, f"""  traces: {{enabled: false}}
  metrics:
    interval: 500ms
{extra}""")) as t:
            for _ in delays:
                post(t.port)
            assert len(t.access(len(delays))) == len(delays)
            from otlp_collector import metrics_of

            def counted():
                """The requests the exports so far count (the last one's,
                or all of them added up in delta): every 500 ms from the
                main thread, later on a busy host."""
                ms = [metrics_of(e) for e in col.of("/v1/metrics")]
                ms = ms if "delta" in extra else ms[-1:]
                return sum(p["value"] for m in ms
                           for p in m.get("tokentap.requests", {"points": []})["points"])
            until(lambda: counted() >= len(delays), 10, "the exports counting every request")
            exports = [e for e in col.of("/v1/metrics")]
            last = metrics_of(exports[-1])
            ttft = last["tokentap.time_to_first_token"]
            req = last["tokentap.requests"]
            assert ttft["unit"] == "s"
            pts = ttft["points"]
            if "delta" in extra:
                assert ttft["temporality"] == 1 and req["temporality"] == 1
                allm = [metrics_of(e) for e in exports]
                total = sum(p["count"] for m in allm
                            for p in m.get("tokentap.time_to_first_token",
                                           {"points": []})["points"])
                assert total == len(delays)
                assert sum(p["value"] for m in allm for p in m.get(
                    "tokentap.requests", {"points": []})["points"]) == len(delays)
                continue
            assert ttft["temporality"] == 2
            assert sum(p["count"] for p in pts) == len(delays)
            assert sum(p["value"] for p in req["points"]) == len(delays)
            if "explicit" in extra:
                assert ttft["type"] == "histogram"
                assert 0.1 in pts[0]["bounds"] and len(pts[0]["counts"]) == \
                    len(pts[0]["bounds"]) + 1
                continue
            assert ttft["type"] == "exponentialHistogram" and pts[0]["scale"] == 6
            # each request in the bucket OTLP's index rule puts it in:
            # bucket k holds (2^(k/64), 2^((k+1)/64)] (Prometheus' index
            # is one higher)
            base, got = 2 ** (1 / 64), {}
            for line in t.access(len(delays)):
                v = line["ttft_ms"] / 1000
                k = next(k for k in range(-2000, 0) if base ** k < v <= base ** (k + 1))
                got[k] = got.get(k, 0) + 1
            want = {pts[0]["offset"] + i: c for i, c in enumerate(pts[0]["counts"]) if c}
            assert got == want, (got, want)
            st = t.stats(by="route")["groups"][0]["ttft_ms"]
            for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
                got = exp_quantile(pts, q) * 1000
                assert abs(got - st[key]) / st[key] <= 0.03, (q, got, st[key])


# The conventions' client metrics: OTLP names and the /metrics names under
# metrics.names: otel (Prometheus' translation of the OTLP name: dots to
# underscores, the unit "s" as _seconds)
CLIENT_METRICS = {"gen_ai.client.operation.duration": "gen_ai_client_operation_duration_seconds",
                  "gen_ai.client.operation.time_to_first_chunk":
                  "gen_ai_client_operation_time_to_first_chunk_seconds",
                  "gen_ai.client.operation.time_per_output_chunk":
                  "gen_ai_client_operation_time_per_output_chunk_seconds",
                  "gen_ai.client.token.usage": "gen_ai_client_token_usage"}


def test_one_naming_convention_over_otlp_and_metrics():
    """tokentap is the model's client: its GenAI metrics are the
    conventions' client metrics over OTLP and on /metrics under
    metrics.names: otel, the same names (as Prometheus translates OTLP's),
    never the model server's gen_ai.server.*; time_to_first_chunk counts
    the streams and sums their span attributes; the rules written for
    metrics.names: otel read only families /metrics has, and promtool
    takes them."""
    import re
    import subprocess
    import tempfile
    from otlp_collector import metrics_of
    from test_alert_rules import rules_for
    with Collector() as col, Backend(chat_handler(ttft=0.03, n=3)) as b, \
            Tokentap(conf(b.port, col, """  traces: {delay: 100ms}
  metrics: {interval: 300ms}""") + """metrics: {names: otel}
alerts:
  thresholds: {ttft_warning: 1s, tpot_warning: 100ms, ttfo_warning: 2s}
""") as t:
        for _ in range(3):
            post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
        spans = col.wait_spans(3, kind=CLIENT)
        def streams():
            ex = col.of("/v1/metrics")
            return ex and sum(p["count"] for p in metrics_of(ex[-1]).get(
                "gen_ai.client.operation.time_to_first_chunk", {"points": []})["points"]) == 3
        until(streams, 10, "an export with the three requests")
        m = metrics_of(col.of("/v1/metrics")[-1])
        otlp = {k for k in m if k.startswith("gen_ai.")}
        assert otlp == set(CLIENT_METRICS), otlp
        text = t.get("/metrics").text
        prom = set(re.findall(r"^# TYPE (gen_ai_\S+) ", text, re.M))
        assert prom == set(CLIENT_METRICS.values()), prom
        assert "gen_ai.server" not in str(m.keys()) and "gen_ai_server" not in text
        for k, v in CLIENT_METRICS.items():
            assert m[k]["unit"] == ("{token}" if "token" in k else "s"), m[k]
        # the histogram and the spans' attribute are one figure
        ttfc = m["gen_ai.client.operation.time_to_first_chunk"]["points"]
        want = sum(s["attrs"]["gen_ai.response.time_to_first_chunk"] for s in spans)
        assert abs(sum(p["sum"] for p in ttfc) - want) < 1e-5, (ttfc, want)
        # the rules of this config read families /metrics has
        d = tempfile.mkdtemp(prefix="tt-otel-rules-")
        rules = open(rules_for(d, open(t.conf).read())).read()
        read = set(re.findall(r"\b((?:tokentap|gen_ai)_[a-z_]+?)(?:_bucket|_count|_sum)?\b[{\[]",
                              rules))
        assert read and "tokentap_time_per_output_token_seconds" in read, read
        have = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
        assert read <= have, read - have


def test_tls_to_the_collector_as_to_upstreams():
    """An https collector: verified against otel.tls.ca_file as a route's
    upstream is; a certificate from a CA not trusted fails each export,
    counted, and the requests go on."""
    from peers import pki
    p = pki()
    with Backend(chat_handler(ttft=0)) as b, \
            Collector(tls=(p["server.crt"], p["server.key"])) as col:
        with Tokentap(conf(b.port, col, f"""  tls: {{ca_file: {p["ca.crt"]}}}
  traces: {{delay: 100ms}}""")) as t:
            post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
            assert col.wait_spans(1)[0]["trace_id"] == CLIENT_TP.split("-")[1]
        with Tokentap(conf(b.port, col, f"""  tls: {{ca_file: {p["evil.crt"]}}}
  traces: {{delay: 100ms}}""")) as t:
            r = post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
            assert b" 200 OK" in r.split(b"\r\n")[0]
            tr = until(lambda: (x := t.stats()["otel"]["traces"])["failed"] and x, 5,
                       "the export refused")
            assert tr["failed"] == 2 and tr["sent"] == 0, tr     # two spans
            assert len(col.spans(CLIENT)) == 1


def test_config_check_names_otel_problems():
    """tokentap -t: otel's keys checked with FILE:LINE:COL, the SDKs'
    variables named; a header's value or a URL's password never echoed;
    the file's value wins over the environment's."""
    import tempfile
    d = tempfile.mkdtemp(prefix="tt-otel-t-")
    path = f"{d}/t.yaml"

    def check(text, env=None):
        return config_check(path, text, env)
    rc, out = check("otel:\n  endpoint: http://u:hunter2@h:4318\n  protocol: grpc\n"
                    "  traces: {sample: 2, batch: 9000}\n  metrics: {temporality: sum}\n")
    assert rc == 1
    for where in ("t.yaml:2:13: otel.endpoint: must not contain credentials",
                  "t.yaml:3:13: otel.protocol: unknown protocol 'grpc'",
                  "t.yaml:4:20: otel.traces.sample", "t.yaml:4:30: otel.traces.batch",
                  "t.yaml:5:26: otel.metrics.temporality"):
        assert where in out, (where, out)
    assert "hunter2" not in out
    rc, out = check("workers: 1\n", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                                     "OTEL_EXPORTER_OTLP_HEADERS": "bad key=hunter2"})
    assert rc == 1 and "environment: OTEL_EXPORTER_OTLP_PROTOCOL" in out and \
        "environment: OTEL_EXPORTER_OTLP_HEADERS" in out and "hunter2" not in out, out
    # the file's protocol wins: the environment's grpc is never read
    rc, out = check("otel: {protocol: json}\n", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                                                 "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1"})
    assert (rc, out) == (0, "configuration OK\n"), out


def test_control_bytes_in_header_values_are_refused():
    """tokentap -t refuses a header value with a control byte (CR, LF,
    NUL, another C0 but tab, DEL): in otel.headers with FILE:LINE:COL,
    in OTEL_EXPORTER_OTLP_HEADERS and its _TRACES_ and _METRICS_ forms,
    percent-encoded, with the variable's name; the value is never
    echoed. A tab inside a value is a header's own."""
    import tempfile
    d = tempfile.mkdtemp(prefix="tt-otel-h-")
    path = f"{d}/t.yaml"

    def check(text, env=None):
        return config_check(path, text, env)
    rc, out = check('otel:\n  endpoint: http://h:4318\n  headers: {x-a: "hunter2\\x01", '
                    'x-b: "hunter2\\x7f", x-c: "hunter2\\r\\nX: 1", x-d: "a\\tb"}\n')
    assert rc == 1, out
    for where in ("t.yaml:3:18: otel.headers.x-a: must not contain a control character "
                  "(byte 0x01)",
                  "t.yaml:3:38: otel.headers.x-b: must not contain a control character "
                  "(byte 0x7F)",
                  "t.yaml:3:58: otel.headers.x-c: must not contain CR or LF"):
        assert where in out, (where, out)
    assert "x-d" not in out and "hunter2" not in out, out
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "OTEL_EXPORTER_OTLP_METRICS_HEADERS"):
        for bad in ("hunter2%0D%0AX-Injected: 1", "hunter2%0A", "hunter2%00tail",
                    "hunter2%1B", "hunter2%7F"):
            rc, out = check("workers: 1\n", {var: f"ok=1,x-key={bad}"})
            assert rc == 1 and f"environment: {var}: a value holds a control character" \
                in out and "hunter2" not in out, (var, bad, out)
        rc, out = check("workers: 1\n", {var: "x-key=a%09b,y=%20c"})
        assert (rc, out) == (0, "configuration OK\n"), (var, out)


def test_signal_headers_from_the_environment():
    """OTEL_EXPORTER_OTLP_TRACES_HEADERS and _METRICS_HEADERS take the
    place of OTEL_EXPORTER_OTLP_HEADERS for their signal."""
    with Collector() as col, Backend(chat_handler(ttft=0)) as b, \
            Tokentap(conf(b.port, col, "  traces: {delay: 100ms}\n  metrics: {interval: 300ms}"),
                     env={"OTEL_EXPORTER_OTLP_HEADERS": "x-all=1",
                          "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-t=2,x-u=3"}) as t:
        post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
        col.wait_spans(1)
        col.wait_metrics(1)
        tr, me = col.of("/v1/traces")[0]["headers"], col.of("/v1/metrics")[0]["headers"]
        assert (tr.get("x-t"), tr.get("x-u"), tr.get("x-all")) == ("2", "3", None), tr
        assert (me.get("x-all"), me.get("x-t")) == ("1", None), me


def test_client_bytes_reach_the_span_as_valid_utf8():
    """A model and a tenant of bytes that are not UTF-8 (and control
    bytes) reach the span cleaned, as every other output has them: protoc
    decodes the export (a string field must be UTF-8)."""
    body = b'{"model":"m\xff\\u0001x","stream":true,"messages":[]}'
    with Collector() as col, Backend(chat_handler(ttft=0, n=1)) as b, \
            Tokentap(conf(b.port, col) + "tenant: {header: x-tenant}\n") as t:
        post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\nx-tenant: t\xc3\x28\r\n",
             body=body)
        s = col.wait_spans(1, kind=CLIENT)[0]
        assert s["attrs"]["gen_ai.request.model"] == "m\ufffd?x", s["attrs"]
        assert s["attrs"]["tokentap.tenant"] == "t\ufffd(", s["attrs"]
        assert s["name"] == "chat m\ufffd?x"
        line = t.access(1)[0]
        assert line["model"] == s["attrs"]["gen_ai.request.model"]


def test_metrics_page_with_both_signals_passes_promtool():
    """With traces and metrics both exported, /metrics names each of the
    export's families once (HELP and TYPE), a sample per signal: promtool
    takes the page (it refused a second HELP line for
    tokentap_otel_exports_total)."""
    import re
    from harness import promtool_check
    with Collector() as col, Backend(chat_handler(ttft=0)) as b, \
            Tokentap(conf(b.port, col, """  traces: {delay: 100ms}
  metrics: {interval: 300ms}""")) as t:
        post(t.port, b"traceparent: " + CLIENT_TP.encode() + b"\r\n")
        col.wait_spans(1)
        text = t.get("/metrics").text
        for fam in ("tokentap_otel_exports_total", "tokentap_otel_export_retries_total",
                    "tokentap_otel_items_total"):
            assert len(re.findall(rf"^# HELP {fam} ", text, re.M)) == 1, fam
            for signal in ("traces", "metrics"):
                assert re.search(rf'^{fam}{{signal="{signal}"', text, re.M), (fam, signal)
        promtool_check(text)
