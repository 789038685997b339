# SPDX-License-Identifier: Apache-2.0
"""A collector that answers without end (a 1 GiB body, header lines or
chunks until 1 GiB, a chunk size that never ends its line) or trickles
its answer a byte at a time: the export fails with a log line and a
count of its reason, at otel.timeout from its start at the latest, and
tokentap's memory stays under 64 MB whatever the collector sent. An
export waiting to retry across a reload that changed otel.protocol and
otel.compression goes as it was written. /metrics with OpenTelemetry on
passes promtool."""
import json
import os
import time

from harness import Tokentap, metric, promtool_check, raw_request, until
from otlp_collector import Collector
from peers import SSE_HEAD, Backend, flood

TIME_LIMITS = {"test_collector_sends_endless_chunks": 180}
RSS_MAX_KIB = 64 * 1024
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def chat(req, c):
    c.send(SSE_HEAD)
    c.chunk(b'data: {"choices":[{"delta":{"content":"a"}}],"model":"m"}\n\n')
    c.chunk(b"data: [DONE]\n\n")
    c.end_chunks()
    return "keep"


def post(port, i=1):
    tp = f"00-{i:032x}-{i:016x}-01"
    body = b'{"model":"m","stream":true}'
    r = raw_request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    b"traceparent: " + tp.encode() + b"\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n" % len(body) + body)
    assert b" 200 OK" in r.split(b"\r\n")[0], r[:200]


def conf(backend, collector_port, otel=""):
    return f"""routes:
  - name: chat
    upstream: http://127.0.0.1:{backend}
otel:
  endpoint: http://127.0.0.1:{collector_port}
  timeout: 1s
  traces: {{delay: 50ms}}
  metrics: {{enabled: false}}
{otel}"""


def peak_kib(t):
    return t.rss_kib("VmHWM")


def against(kind, reason, words):
    """One span exported to a collector answering `kind`: the export fails
    for `reason`, logged with `words`; tokentap's RSS, now and at its
    peak, stays under 64 MB."""
    log = []
    with Backend(flood(kind, log=log)) as col, Backend(chat) as b, \
            Tokentap(conf(b.port, col.port)) as t:
        post(t.port)
        until(lambda: t.stats()["otel"]["traces"]["exports_failed"] >= 1, 30,
              f"the export to a collector sending {kind} given up")
        until(lambda: log, 30, "the collector seeing tokentap stop reading")
        rss, peak = t.rss_kib(), peak_kib(t)
        print(f"{kind}: collector sent {log[0][3]} bytes in {log[0][2] - log[0][1]:.2f} s; "
              f"tokentap VmRSS {rss} KiB, VmHWM {peak} KiB")
        assert log[0][3] < (1 << 30), log          # it stopped reading before the end
        assert rss < RSS_MAX_KIB and peak < RSS_MAX_KIB, (rss, peak)
        until(lambda: words in t.stderr(), 10, "the failure logged")
        assert metric(t, "tokentap_otel_export_failures_total", signal="traces",
                      reason=reason) >= 1
        tr = t.stats()["otel"]["traces"]
        # the request's two spans (SERVER and CLIENT) in the one export
        assert tr["failed"] == 2 and tr["sent"] == 0, tr
        assert tr["failures"][reason] >= 1 and set(tr["failures"]) == \
            {"deadline", "too_large", "invalid", "connection", "status"}, tr


def test_collector_sends_a_1gib_body():
    against("body", "too_large", "answer too large")


def test_collector_sends_endless_headers():
    against("headers", "invalid", "a head over 64 KiB")


def test_collector_sends_endless_chunks():
    against("chunks", "too_large", "answer too large")


def test_collector_sends_a_chunk_size_without_end():
    """Nothing libevent parses ends: what waits unparsed is bounded, and
    the deadline ends the attempt."""
    against("line", "deadline", "no complete answer within otel.timeout")


def test_trickling_collector_ends_at_the_timeout():
    """A byte every 0.2 s never lets an inactivity timeout of 1 s fire: the
    attempt still ends at otel.timeout from its start, logged and
    counted (before, it lasted as long as the collector trickled)."""
    against("trickle", "deadline", "no complete answer within otel.timeout")


def test_a_retried_export_keeps_its_encoding_across_a_reload():
    """An export written as gzip protobuf, answered 503 with Retry-After,
    then a reload to json without compression: the retry goes as gzip
    protobuf (which it is), and the next export as json."""
    with Collector(("status", 503, 3)) as col, Backend(chat) as b, \
            Tokentap(conf(b.port, col.port, "  protocol: protobuf\n  compression: gzip\n")) \
            as t:
        post(t.port, 1)
        until(lambda: any(a[2] == 503 for a in col.attempts), 15, "the first answer, 503")
        t.reload("  protocol: protobuf\n  compression: gzip\n",
                 "  protocol: json\n  compression: none\n")
        until(lambda: "(json)" in t.stderr(), 15, "the reload to json")
        col.mode = "ok"
        first = col.wait_spans(2, timeout=30)
        assert len(first) == 2, col.attempts     # the SERVER and the CLIENT span
        e = col.of("/v1/traces")[0]
        assert not e["json"], e["headers"]
        assert e["headers"]["Content-Type"] == "application/x-protobuf", e["headers"]
        assert e["headers"].get("Content-Encoding") == "gzip", e["headers"]
        # the next export is written, and labelled, as the reload says
        post(t.port, 2)
        until(lambda: len(col.of("/v1/traces")) >= 2, 15, "the second export")
        e = col.of("/v1/traces")[1]
        assert e["json"] and e["headers"]["Content-Type"] == "application/json"
        assert "Content-Encoding" not in e["headers"], e["headers"]
        assert t.stats()["otel"]["traces"]["retries"] >= 1


def test_metrics_with_otel_pass_promtool():
    """Both signals on: each tokentap_otel_ family once (two HELP lines of
    one name and promtool refuses the exposition)."""
    with Collector() as col, Backend(chat) as b, \
            Tokentap(conf(b.port, col.port).replace("metrics: {enabled: false}",
                                                    "metrics: {interval: 200ms}")) as t:
        post(t.port)
        col.wait_spans(1)
        col.wait_metrics(1)
        # counted when tokentap has the collector's answer, a moment after
        # the collector has the export
        until(lambda: metric(t, "tokentap_otel_exports_total", signal="traces",
                             result="ok") == 1, 15, "the traces export counted")
        text = t.get("/metrics").text
        for family in ("tokentap_otel_exports_total", "tokentap_otel_export_retries_total",
                       "tokentap_otel_items_total", "tokentap_otel_export_failures_total"):
            assert text.count(f"# HELP {family} ") == 1, family
        assert 'tokentap_otel_exports_total{signal="metrics",result="ok"}' in text
        assert 'tokentap_otel_exports_total{signal="traces",result="ok"} 1' in text
        promtool_check(text)
