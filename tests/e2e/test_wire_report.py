# SPDX-License-Identifier: Apache-2.0
"""The wire report and chunks that are not tokens, against real peers.

Two python backends (raw sockets) behind two routes: one that streams as
careless gateways do (CRLF line ends, "data:" without its space, gzip,
usage on every chunk, comment and event pings and an empty delta, no
[DONE], everything in one write) and one that streams by the book (LF,
"data: ", usage in a final chunk, [DONE], one event a write, an error
event inside a 200 on one request). /stats?by=upstream must count each
item of each, exactly. Then a backend that batches tokens (8 in the first
chunk, then 5 an event, usage on every chunk, as vLLM with
continuous_usage_stats and --stream-interval 5), and the same with the
usage only at the end, and tokentap-mock --tokens-per-chunk 5: TPOT is
per token, never per event, tokens per event and the first event's
tokens are in the access log, /stats and /metrics."""
import time
import zlib

from harness import Mock, Tokentap, completion, metric
from peers import Backend

GZIP = {"Accept-Encoding": "gzip"}      # these clients ask for it, as their backends answer

GZIP_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
PLAIN_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")


def usage(n):
    return b'"usage":{"prompt_tokens":3,"completion_tokens":%d}' % n


def careless(req, c):
    """CRLF, no space, gzip, usage on every chunk, pings, an empty delta,
    no [DONE]: the whole body in one write, after the head."""
    ev = [b'data:{"choices":[{"delta":{"role":"assistant"}}],' + usage(0) + b'}\r\n\r\n',
          b': ping\r\n\r\n',
          b'event: ping\r\ndata:{}\r\n\r\n']
    ev += [b'data:{"choices":[{"delta":{"content":"t%d"}}],%s}\r\n\r\n' % (i, usage(i))
           for i in range(1, 6)]
    ev += [b'data:{"choices":[{"delta":{"content":""},"finish_reason":null}]}\r\n\r\n',
           b'data:{"choices":[{"delta":{},"finish_reason":"stop"}],' + usage(5) + b'}\r\n\r\n']
    z = zlib.compressobj(wbits=31)
    body = z.compress(b"".join(ev)) + z.flush()
    c.send(GZIP_HEAD)
    time.sleep(0.05)
    c.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
    return "keep"


def by_the_book(req, c):
    """LF, "data: ", one event a write, usage in a final chunk, [DONE];
    the request with "error" in its path gets an error event in its 200."""
    c.send(PLAIN_HEAD)
    ev = [b'data: {"choices":[{"delta":{"content":"t%d"}}]}\n\n' % i for i in range(3)]
    if "error" in req.target:
        ev.append(b'data: {"error":{"message":"overloaded"}}\n\n')
    ev += [b'data: {"choices":[],' + usage(3) + b'}\n\n', b"data: [DONE]\n\n"]
    for e in ev:
        time.sleep(0.03)
        c.chunk(e)
    c.end_chunks()
    return "keep"


def routes(*ports, extra=""):
    out = "workers: 1\nroutes:\n"
    for i, p in enumerate(ports):
        out += (f"  - name: r{i}\n    match: {{path_prefix: /r{i}/}}\n"
                f"    upstream: http://127.0.0.1:{p}\n    dialect: openai\n"
                f"    strip_prefix: true\n{extra}")
    return out


def test_each_backend_is_seen_as_it_sends():
    with Backend(careless) as a, Backend(by_the_book) as b, \
            Tokentap(routes(a.port, b.port)) as t:
        for i in range(2):
            completion(t.port, "/r0/v1/chat/completions",
                       headers={"X-Request-Id": f"a{i}", **GZIP})
        completion(t.port, "/r1/v1/chat/completions", headers={"X-Request-Id": "b0", **GZIP})
        completion(t.port, "/r1/v1/chat/completions?error=1",
                   headers={"X-Request-Id": "b1", **GZIP})
        lines = {l["request_id"]: l for l in t.access(4)}
        doc = t.stats(by="upstream")
        by_route = t.stats(by="route")
    # the report is the replicas': rows by route have none
    assert by_route["groups"] and all("wire" not in g for g in by_route["groups"])
    rows = {g["upstream"]: g for g in doc["groups"]}
    wa = rows[f"http://127.0.0.1:{a.port}"]["wire"]
    wb = rows[f"http://127.0.0.1:{b.port}"]["wire"]
    # the careless one, per stream: 21 CRLF lines, 9 bare data fields, a
    # comment, a ping event, an empty delta, 9 events in one read
    assert wa["streams"] == 2, wa
    assert wa["line_ends"] == {"lf": 0, "crlf": 42, "cr": 0}, wa
    assert wa["data_space"] == {"with": 0, "without": 18}, wa
    assert wa["compressed"] == {"gzip": 2, "deflate": 0, "br": 0, "zstd": 0}, wa
    assert wa["end_marker"] == {"names": ["[DONE]"], "seen": 0, "missing": 2}, wa
    assert wa["usage"] == {"none": 0, "final": 0, "every_chunk": 2}, wa
    assert wa["heartbeats"]["comments"] == 2 and wa["heartbeats"]["pings"] == 2 and \
        wa["heartbeats"]["empty_deltas"] == 2, wa
    assert wa["heartbeats"]["interval_ms"] == 0, wa      # all in one read
    assert wa["events_per_read"] == 9.0, wa
    assert wa["errors_in_2xx"] == 0, wa
    # the other: LF, "data: ", [DONE], usage at the end, one error event
    assert wb["streams"] == 2, wb
    assert wb["line_ends"] == {"lf": 22, "crlf": 0, "cr": 0}, wb
    assert wb["data_space"] == {"with": 11, "without": 0}, wb
    assert wb["compressed"] == {"gzip": 0, "deflate": 0, "br": 0, "zstd": 0}, wb
    assert wb["end_marker"] == {"names": ["[DONE]"], "seen": 2, "missing": 0}, wb
    assert wb["usage"] == {"none": 0, "final": 2, "every_chunk": 0}, wb
    assert wb["heartbeats"] == {"comments": 0, "pings": 0, "empty_deltas": 0,
                                "interval_ms": None}, wb
    assert wb["errors_in_2xx"] == 1, wb
    assert wb["events_per_read"] >= 1.0, wb
    # what the access log says of them
    assert lines["a0"]["outcome"] == "upstream_abort", lines["a0"]   # no [DONE]
    assert lines["a0"]["token_source"] == "continuous_usage", lines["a0"]
    assert lines["a0"]["output_tokens"] == 5 and lines["a0"]["token_events"] == 5
    assert lines["b0"]["outcome"] == "ok" and lines["b0"]["token_source"] == "usage"
    assert lines["b1"]["outcome"] == "upstream_error" and lines["b1"]["status"] == 200


def batching(with_usage_each, gap):
    """8 tokens in the first event, then 5 an event gap apart, usage on
    every chunk or only at the end; the sends' times noted."""
    sent = []

    def handle(req, c):
        c.send(PLAIN_HEAD)
        marks = []
        sent.append(marks)
        n = 0
        for i, k in enumerate([8, 5, 5, 5, 5]):
            if i:
                time.sleep(gap)
            n += k
            u = (b"," + usage(n)) if with_usage_each else b""
            before = time.monotonic()
            c.chunk(b'data: {"choices":[{"delta":{"content":"%s"}}]%s}\n\n'
                    % (b"x" * k, u))
            marks.append((before, time.monotonic()))
        if not with_usage_each:
            c.chunk(b'data: {"choices":[],' + usage(n) + b"}\n\n")
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    return handle, sent


def test_batched_tokens_give_tpot_per_token():
    gap = 0.04
    h1, sent1 = batching(True, gap)
    h2, sent2 = batching(False, gap)
    with Backend(h1) as a, Backend(h2) as b, Tokentap(routes(a.port, b.port)) as t:
        completion(t.port, "/r0/v1/chat/completions", headers={"X-Request-Id": "cont", **GZIP})
        completion(t.port, "/r1/v1/chat/completions", headers={"X-Request-Id": "final", **GZIP})
        lines = {l["request_id"]: l for l in t.access(2)}
        doc = t.stats(by="upstream")
        up_a = f"http://127.0.0.1:{a.port}"
        events = metric(t, "tokentap_token_events_total", upstream=up_a)
        tokens = metric(t, "tokentap_token_event_tokens_total", upstream=up_a)
    for rid, marks, after in (("cont", sent1[0], 20), ("final", sent2[0], 22.4)):
        line = lines[rid]
        # 28 tokens made, 20 of them after the first event, in 4 gaps:
        # per token the gap over 5, bracketed by the backend's sends; with
        # the first event's 8 not told, 28 - 28 / 5 = 22.4 after it. A
        # stamp is its read's newest segment: the last token read with the
        # usage and [DONE] after it is late by up to its doubt (a busy
        # host: CI saw it), the first token early by none.
        fd, ld = line["ttft_doubt_ms"], line["last_token_doubt_ms"]
        lo = ((marks[-1][0] - marks[0][1]) * 1000 - fd) / after
        hi = ((marks[-1][1] - marks[0][0]) * 1000 + ld) / after
        assert line["output_tokens"] == 28 and line["token_events"] == 5, line
        assert lo - 0.01 <= line["tpot_ms"] <= hi + 0.01, (rid, line["tpot_ms"], lo, hi)
        assert line["tokens_per_event"] == 5.6, line
        # ITL stays per event: about the gap, five tokens' worth
        assert line["itl_max_ms"] >= gap * 1000 * 0.9, line
    assert lines["cont"]["token_source"] == "continuous_usage"
    assert lines["cont"]["first_event_tokens"] == 8 and not lines["cont"]["tpot_estimated"]
    # with the usage only at the end the first event's 8 are not told: it is
    # taken as the mean (5.6), and TPOT says it is an estimate (22.4 tokens
    # after the first event, not 20: within 12 %)
    assert lines["final"]["token_source"] == "usage"
    assert lines["final"]["first_event_tokens"] is None
    assert lines["final"]["tpot_estimated"] is True
    rows = {g["upstream"]: g for g in doc["groups"]}
    assert rows[up_a]["tokens_per_event"] == 5.6 and rows[up_a]["first_event_tokens"] == 8.0
    assert rows[f"http://127.0.0.1:{b.port}"]["tpot_estimated"] == 1
    assert events == 5 and tokens == 28, (events, tokens)


def test_mock_tokens_per_chunk():
    """tokentap-mock --tokens-per-chunk 5, usage at the end: TPOT is the
    mock's event gap over 5 (uniform chunks: the mean is exact)."""
    with Mock("--tokens-per-chunk", "5", "--tpot", "20ms", "--ttft", "30ms") as m, \
            Tokentap(f"routes:\n  - name: m\n    upstream: {m.url()}\n") as t:
        for i in range(3):
            completion(t.port, "/v1/chat/completions", headers={"X-Request-Id": f"m{i}", **GZIP})
        lines = t.wait_logged(3)
        served = {x["request_id"]: x for x in m.served(3)}
    for line in lines:
        n = line["output_tokens"]
        assert n % 5 == 0 and line["token_events"] == n // 5, line
        assert line["tokens_per_event"] == 5.0, line
        # the mock's own first and last sends (about 20 ms / 5 a token,
        # later when the host is busy): the gap over the tokens after the
        # first chunk's 5, within 0.2 ms a token
        s = served[line["request_id"]]
        want = (s["last_token_us"] - s["first_token_us"]) / 1000 / (n - 5)
        assert abs(line["tpot_ms"] - want) < 0.2, (line, s)
