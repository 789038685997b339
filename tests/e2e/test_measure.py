"""Measurement: the access log's timeline against a backend whose schedule
is known, for the dialects whose first bytes are not tokens."""
import json
import socket
import threading
import time

from backend import SSE_HEAD, Backend
from harness import Tokentap, raw_request


def cfg(port, extra=""):
    return f"routes:\n  - name: llm\n    upstream: http://127.0.0.1:{port}\n{extra}"


def chunk(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def openai_schedule(n_tokens=40, first=0.3, gap=0.02, usage=True, role_at=0.05):
    """(delay from request, bytes) pairs: role chunk, content, finish, usage."""
    out = [(role_at, chunk({"model": "m-up", "choices": [{"delta": {"role": "assistant", "content": ""}}]}))]
    for i in range(n_tokens):
        out.append((first + i * gap, chunk({"choices": [{"delta": {"content": f"w{i} "}}]})))
    last = first + (n_tokens - 1) * gap
    out.append((last + 0.001, chunk({"choices": [{"delta": {}, "finish_reason": "stop"}]})))
    if usage:
        out.append((last + 0.002, chunk({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": n_tokens}})))
    out.append((last + 0.003, b"data: [DONE]\n\n"))
    return out


def anthropic_schedule(n_tokens=20, first=0.2, gap=0.02):
    def ev(name, obj):
        return b"event: " + name.encode() + b"\ndata: " + json.dumps(obj).encode() + b"\n\n"
    out = [(0.0, ev("message_start", {"type": "message_start", "message": {"model": "claude-x", "usage": {"input_tokens": 9, "output_tokens": 1}}})),
           (0.01, ev("ping", {"type": "ping"})),
           (0.02, ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))]
    for i in range(n_tokens):
        out.append((first + i * gap, ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"t{i}"}})))
    last = first + (n_tokens - 1) * gap
    out += [(last + 0.001, ev("content_block_stop", {"type": "content_block_stop", "index": 0})),
            (last + 0.002, ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": n_tokens}})),
            (last + 0.003, ev("message_stop", {"type": "message_stop"}))]
    return out


def dify_schedule(n_tokens=15, first=0.25, gap=0.02):
    def ev(obj):
        return b"data: " + json.dumps(obj).encode() + b"\n\n"
    out = [(0.0, ev({"event": "workflow_started", "data": {}})),
           (0.05, b"event: ping\n\n"),
           (0.1, ev({"event": "node_started", "data": {}}))]
    for i in range(n_tokens):
        out.append((first + i * gap, ev({"event": "message", "answer": f"a{i}"})))
    last = first + (n_tokens - 1) * gap
    out.append((last + 0.002, ev({"event": "message_end", "metadata": {"usage": {"completion_tokens": n_tokens, "prompt_tokens": 7}}})))
    return out


# When the backend really sent each scheduled piece, and when the client
# sent its request: the same monotonic clock, since both live in this test.
SENT = []
CLIENT = {}


def scheduled_backend(schedule):
    def handle(req, c):
        start = time.monotonic()
        c.send(SSE_HEAD)
        SENT.clear()
        for at, data in schedule:
            delay = start + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            before = time.monotonic()
            c.chunk(data)
            SENT.append((before, time.monotonic()))
        c.end_chunks()
        return "keep"
    return handle


def post(port, path, body=b'{"model":"m-req","stream":true}', headers=b""):
    CLIENT["t"] = time.monotonic()
    return raw_request(port, b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       b"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
                       % (len(body), headers, body))


def retry_once(test):
    """The timeline tests compare against this test process's own clock
    readings: on a busy machine, a stall of the test's threads can pass for
    an error of the proxy's. A real error repeats; a stall does not."""
    def run():
        try:
            test()
        except AssertionError:
            time.sleep(0.5)
            test()
    run.__name__ = test.__name__
    return run


def check_timeline(line, first_idx, n):
    """TTFT within 2 ms of when the first token really left the backend
    (counted from the client's send), TPOT within 2 %."""
    # the backend notes the time just before and just after each send: the
    # test's own thread scheduling goes into that bracket, not the error
    lo = (SENT[first_idx][0] - CLIENT["t"]) * 1000
    hi = (SENT[first_idx][1] - CLIENT["t"]) * 1000
    assert lo - 2 < line["ttft_ms"] < hi + 2, (lo, hi, line)
    tpot = (SENT[first_idx + n - 1][1] - SENT[first_idx][1]) * 1000 / (n - 1)
    assert abs(line["tpot_ms"] - tpot) <= tpot * 0.02, (tpot, line)
    assert line["output_tokens"] == n


@retry_once
def test_openai_timeline_usage_and_phases():
    with Backend(scheduled_backend(openai_schedule())) as b, Tokentap(cfg(b.port)) as t:
        post(t.port, b"/v1/chat/completions")
        line = t.access(1)[0]
        check_timeline(line, 1, 40)
        assert line["token_source"] == "usage" and line["input_tokens"] == 12
        assert line["stream"] is True and line["dialect"] == "openai"
        assert line["model"] == "m-req" and line["outcome"] == "ok"
        assert line["events"] == 44
        phases = line["phases"]
        total = sum(v for v in phases.values() if v is not None)
        assert abs(total - line["ttft_ms"]) < 0.01, (total, line)
        assert 40 < phases["first_event_ms"] + phases["upstream_head_ms"] < 60, phases
        assert phases["first_token_ms"] > 200
        assert 18 < line["itl_max_ms"] < 30


def test_openai_without_usage_counts_events():
    with Backend(scheduled_backend(openai_schedule(n_tokens=10, usage=False))) as b, \
            Tokentap(cfg(b.port)) as t:
        post(t.port, b"/v1/chat/completions", b'{"stream":true}')
        line = t.access(1)[0]
        assert line["token_source"] == "events" and line["output_tokens"] == 10
        assert line["model"] == "m-up"          # from the first response chunk


@retry_once
def test_anthropic_ping_and_message_start_are_not_tokens():
    with Backend(scheduled_backend(anthropic_schedule())) as b, Tokentap(cfg(b.port)) as t:
        post(t.port, b"/v1/messages", b'{"stream":true,"messages":[],"model":"claude-req"}')
        line = t.access(1)[0]
        check_timeline(line, 3, 20)
        assert line["dialect"] == "anthropic" and line["input_tokens"] == 9
        assert line["model"] == "claude-req"


@retry_once
def test_dify_ping_and_workflow_events_are_not_tokens():
    with Backend(scheduled_backend(dify_schedule())) as b, Tokentap(cfg(b.port)) as t:
        post(t.port, b"/v1/chat-messages", b'{"query":"hi","response_mode":"streaming"}')
        line = t.access(1)[0]
        check_timeline(line, 3, 15)
        assert line["dialect"] == "dify" and line["token_source"] == "usage"
        assert line["model"] == "llm"           # no model anywhere: the route's name


def test_in_stream_error_is_upstream_error():
    sched = openai_schedule(n_tokens=3)[:3] + [(0.35, chunk({"error": {"message": "boom"}}))]
    with Backend(scheduled_backend(sched)) as b, Tokentap(cfg(b.port)) as t:
        post(t.port, b"/v1/chat/completions")
        assert t.access(1)[0]["outcome"] == "upstream_error"


def test_tenant_from_header_and_api_key():
    key_sha = __import__("hashlib").sha256(b"sk-acme").hexdigest()
    extra = f"tenant:\n  header: X-Tenant\n  api_keys: {{acme: \"{key_sha}\"}}\n"
    with Backend(scheduled_backend(openai_schedule(n_tokens=2, first=0.01))) as b, \
            Tokentap(cfg(b.port, extra)) as t:
        post(t.port, b"/v1/chat/completions", headers=b"X-Tenant: team-a\r\n")
        post(t.port, b"/v1/chat/completions", headers=b"Authorization: Bearer sk-acme\r\n")
        post(t.port, b"/v1/chat/completions", headers=b"x-api-key: sk-other\r\n")
        post(t.port, b"/v1/chat/completions")
        tenants = [l["tenant"] for l in t.access(4)]
        other = "key:" + __import__("hashlib").sha256(b"sk-other").hexdigest()[:8]
        assert tenants == ["team-a", "acme", other, "-"], tenants
        with open(t.log) as f:
            assert "sk-acme" not in f.read()


def test_secret_query_values_masked():
    """Every credential parameter of SPEC §5, in any case, and the ones the
    config adds (access_log_mask), logged as ***; nothing else."""
    names = ["key", "API_KEY", "apikey", "api-key", "Token", "access_token", "sig",
             "signature", "auth", "password", "secret", "session_id"]
    query = "&".join(f"{n}=S{i}CRET" for i, n in enumerate(names))
    with Backend(scheduled_backend(openai_schedule(n_tokens=2, first=0.01))) as b, \
            Tokentap(cfg(b.port, "access_log_mask: [Session_ID]\n")) as t:
        post(t.port, b"/v1beta/models/gemini-pro:streamGenerateContent?alt=sse&"
             + query.encode() + b"&x=1&keys=kept")
        line = t.access(1)[0]
        want = "&".join(f"{n}=***" for n in names)
        assert line["path"] == ("/v1beta/models/gemini-pro:streamGenerateContent?alt=sse&"
                                + want + "&x=1&keys=kept"), line["path"]
        with open(t.log) as f:
            assert "CRET" not in f.read()
        assert line["model"] == "m-req"


def test_concurrency_and_every_stream_logged():
    n = 20
    with Backend(scheduled_backend(openai_schedule(n_tokens=5, first=0.2))) as b, \
            Tokentap(cfg(b.port)) as t:
        threads = [threading.Thread(target=post, args=(t.port, b"/v1/chat/completions"))
                   for _ in range(n)]
        for th in threads:
            th.start()
            time.sleep(0.005)
        for th in threads:
            th.join()
        lines = t.access(n)
        assert len(lines) == n
        assert max(l["concurrency"] for l in lines) >= n // 2
        assert len({l["request_id"] for l in lines}) == n


def test_auto_tells_the_dialect_from_the_first_events():
    """`dialect: auto` on a path that names no API (an EventSource GET on
    /events): the first events show an OpenAI stream, so TTFT is the first
    content 200 ms in, not the role chunk at once (raw would take it)."""
    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
        c.chunk(chunk({"choices": [{"delta": {"role": "assistant"}}]}))
        time.sleep(0.2)
        for i in range(3):
            c.chunk(chunk({"choices": [{"delta": {"content": f"w{i}"}}]}))
            time.sleep(0.01)
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"

    with Backend(handle) as b, Tokentap(cfg(b.port)) as t:
        raw_request(t.port, b"GET /events HTTP/1.1\r\nHost: x\r\n"
                    b"Accept: text/event-stream\r\nConnection: close\r\n\r\n")
        e = t.access(1)[0]
        assert e["dialect"] == "openai", e
        assert e["ttft_ms"] >= 195, e
        assert e["output_tokens"] == 3 and e["outcome"] == "ok", e


GZIP_SDK = r"""
const OpenAI = require('openai');
async function main() {
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: process.argv[2], maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'm-gz', stream: true, messages: [{ role: 'user', content: 'hi' }] });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  console.log(JSON.stringify({ text }));
}
main().catch(e => { console.error(e); process.exit(1); });
"""


def test_gzip_stream_is_measured_and_passes_unchanged():
    """An upstream that compresses its event stream (gzip, a sync flush
    after each event, as servers behind a compressing hop do) for the
    openai SDK, whose default headers ask for gzip: the SDK reads the text
    it was sent, the bytes pass unchanged, and the access log measures the
    decoded events (before, it said ok with TTFT, TPOT and tokens null)."""
    import os
    import subprocess
    import zlib
    from harness import node_modules

    got = {}

    def handle(req, c):
        got["accept"] = req.header("accept-encoding")
        z = zlib.compressobj(wbits=31)
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
        events = [chunk({"model": "m-gz", "choices": [{"delta": {"role": "assistant"}}]})]
        events += [chunk({"choices": [{"delta": {"content": f"w{i} "}}]}) for i in range(5)]
        events += [chunk({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
                   b"data: [DONE]\n\n"]
        for i, ev in enumerate(events):
            if i == 1:
                time.sleep(0.15)
            c.chunk(z.compress(ev) + z.flush(zlib.Z_SYNC_FLUSH))
            time.sleep(0.01)
        c.chunk(z.flush())
        c.end_chunks()
        return "keep"

    mods = node_modules()
    script = os.path.join(os.path.dirname(mods), "gzip_stream.js")
    with open(script, "w") as f:
        f.write(GZIP_SDK)
    with Backend(handle) as b, Tokentap(cfg(b.port)) as t:
        r = subprocess.run(["node", script, f"http://127.0.0.1:{t.port}/v1"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, NODE_PATH=mods))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["text"] == "w0 w1 w2 w3 w4 ", r.stdout
        assert "gzip" in (got["accept"] or ""), got
        e = t.access(1)[0]
        assert e["outcome"] == "ok" and e["events"] == 8, e
        assert e["output_tokens"] == 5 and e["token_source"] == "usage", e
        assert e["ttft_ms"] >= 145 and e["tpot_ms"] is not None, e


def test_unmeasured_coding_is_said_once_per_route():
    """A coding the meter does not decode (compress) is forwarded unchanged
    and left unmeasured, never miscounted; tokentap says so once per route
    (br and zstd are decoded: test_encodings)."""
    body = b"\x1f\x9d\x90data: not decoded\n\n"

    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Encoding: compress\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        return "keep"

    with Backend(handle) as b, Tokentap(cfg(b.port)) as t:
        for _ in range(2):
            out = raw_request(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
            assert out.endswith(body), out
        log = t.access(2)
        assert all(e["events"] == 0 and e["ttft_ms"] is None for e in log), log
        assert all(e["unmeasured"] == "coding" for e in log), log
        assert t.stderr().count('Content-Encoding "compress"') == 1, t.stderr()
