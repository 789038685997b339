# SPDX-License-Identifier: Apache-2.0
"""Finish reasons: gen_ai.response.finish_reasons on the span (a string
array, decoded by the collector stand-in with protoc, or as OTLP/JSON) and
finish_reason in the access log, for tokentap-mock's streams and bodies,
which end as the recorded real ones do (OpenAI "stop", Anthropic
"end_turn", Gemini "STOP", Ollama's done_reason "stop"), and for a stream
whose choices give two."""
import json
import os
import time

from peers import SSE_HEAD, Backend
from harness import Mock, Tokentap, raw_request
from otlp_collector import CLIENT, Collector

# path, streamed, the reason tokentap-mock's answer gives
CASES = [
    ("/v1/chat/completions", True, "stop"),
    ("/v1/messages", True, "end_turn"),
    ("/v1beta/models/g-1:streamGenerateContent?alt=sse", True, "STOP"),
    ("/api/chat", True, "stop"),
    ("/v1/chat/completions", False, "stop"),
]


def post(port, path, stream, trace_id):
    body = json.dumps({"model": "m-1", "stream": stream, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    tp = f"00-{trace_id}-00f067aa0ba902b7-01".encode()
    return raw_request(port, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                       b"Content-Type: application/json\r\ntraceparent: " + tp +
                       b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) +
                       body)


def conf(port, col, protocol="protobuf"):
    return f"""routes:
  - name: r
    upstream: http://127.0.0.1:{port}
otel:
  endpoint: {col.url()}
  protocol: {protocol}
  traces: {{delay: 100ms}}
"""


def by_trace(spans, lines):
    """Each access-log line with its span, found by the trace id."""
    spans = {s["trace_id"]: s for s in spans}
    return [(line, spans.get(line["trace_id"])) for line in lines]


def test_finish_reasons_of_each_dialect():
    """Each of tokentap-mock's dialects, streamed and not: the span's
    gen_ai.response.finish_reasons is the one reason the answer gave, the
    access log's finish_reason the same string."""
    with Mock() as m, Collector() as col, Tokentap(conf(m.port, col)) as t:
        ids = []
        for i, (path, stream, _) in enumerate(CASES):
            ids.append(os.urandom(16).hex())
            r = post(t.port, path, stream, ids[-1])
            assert b" 200 OK" in r.split(b"\r\n")[0], (path, r[:200])
        lines = t.access(len(CASES))
        spans = col.wait_spans(len(CASES), kind=CLIENT)
        assert len(spans) == len(CASES), spans
        got = {line["trace_id"]: (line, s) for line, s in by_trace(spans, lines)}
        for trace_id, (path, stream, want) in zip(ids, CASES):
            line, s = got[trace_id]
            assert line["outcome"] == "ok" and line["stream"] is stream, (path, line)
            assert line["finish_reason"] == want, (path, line)
            assert s is not None, path
            assert s["attrs"]["gen_ai.response.finish_reasons"] == [want], (path, s["attrs"])


def chunk(choices):
    return b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk",
                                   "model": "m-1", "choices": choices}).encode() + b"\n\n"


def two_choices(req, c):
    """n = 2: each choice's tokens, then each its own finish chunk (as the
    recorded n = 3 stream does), a reason with bytes a log must not take
    as they are, then [DONE]."""
    c.send(SSE_HEAD)
    for i in range(3):
        for k in range(2):
            c.chunk(chunk([{"index": k, "delta": {"content": f"t{i}"},
                            "finish_reason": None}]))
        time.sleep(0.005)
    c.chunk(chunk([{"index": 1, "delta": {}, "finish_reason": "length"}]))
    c.chunk(chunk([{"index": 0, "delta": {}, "finish_reason": "stop\"<x>"}]))
    c.chunk(b"data: [DONE]\n\n")
    c.end_chunks()
    return "keep"


def test_finish_reasons_of_several_choices():
    """Two choices that end apart: both reasons on the span, in the order
    they came, cleaned (the raw JSON text: its backslash too); the access log's is the first. OTLP/JSON this
    time (the array as arrayValue.values)."""
    with Backend(two_choices) as b, Collector() as col, \
            Tokentap(conf(b.port, col, "json")) as t:
        trace_id = os.urandom(16).hex()
        r = post(t.port, "/v1/chat/completions", True, trace_id)
        assert b" 200 OK" in r.split(b"\r\n")[0], r[:200]
        line = t.access(1)[0]
        s = col.wait_spans(1, kind=CLIENT)[0]
        assert col.of("/v1/traces")[0]["json"]
        assert s["trace_id"] == trace_id
        assert s["attrs"]["gen_ai.response.finish_reasons"] == ["length", "stop___x_"]
        assert line["finish_reason"] == "length", line
        # every byte the backend sent reached the client
        assert r.count(b"finish_reason") == 2 + 6
