# SPDX-License-Identifier: Apache-2.0
"""Compressed responses (Content-Encoding br and zstd beside gzip): the
bytes pass unchanged, curl (--compressed) reads what was sent, and the
access log measures the decoded events; what cannot be measured is said
by cause in the access log (`unmeasured`) and in /metrics
(tokentap_unmeasured_responses_total{cause}). The compressed bytes are
made at test time by real encoders: node's zlib (brotli with a flush after
each event, as a compressing server writes a stream), the brotli and zstd
tools.
"""
import base64
import json
import subprocess
import time

from harness import CHAT, Tokentap, conf, metric, request, sse_data
from peers import Backend, answer, curl

EVENTS = ([sse_data({"model": "m-z", "choices": [{"delta": {"role": "assistant"}}]})] +
          [sse_data({"choices": [{"delta": {"content": f"w{i} "}}]}) for i in range(5)] +
          [sse_data({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
           b"data: [DONE]\n\n"])

NODE_BROTLI = r"""
const zlib = require('zlib');
const parts = JSON.parse(process.argv[1]).map(p => Buffer.from(p, 'base64'));
const z = zlib.createBrotliCompress();
const out = [];
let i = 0;
z.on('data', d => { out[i] = Buffer.concat([out[i] || Buffer.alloc(0), d]); });
function next() {
  if (i === parts.length) { z.end(); return; }
  z.write(parts[i]);
  z.flush(zlib.constants.BROTLI_OPERATION_FLUSH, () => { i++; next(); });
}
z.on('end', () => {
  const last = out[parts.length];
  if (last) out[parts.length - 1] = Buffer.concat([out[parts.length - 1], last]);
  console.log(JSON.stringify(out.slice(0, parts.length).map(b => b.toString('base64'))));
});
next();
"""


def brotli_flushed(parts):
    """Each part compressed as a brotli stream writer flushes it (node's
    zlib, Google's brotli): piece i decodes to part i once pieces 0..i
    arrived; the stream's end rides on the last piece."""
    r = subprocess.run(["node", "-e", NODE_BROTLI,
                        json.dumps([base64.b64encode(p).decode() for p in parts])],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [base64.b64decode(p) for p in json.loads(r.stdout)]


def tool(args, data):
    r = subprocess.run(args, input=data, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def streaming(coding, pieces, first_gap=0.15):
    """A backend streaming the pieces (chunked), first_gap before the
    first token's."""
    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Encoding: " + coding + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i, p in enumerate(pieces):
            if i == 1:
                time.sleep(first_gap)
            c.chunk(p)
            time.sleep(0.01)
        c.end_chunks()
        return "keep"
    return handle


def measured(t):
    """The stream curl read (--compressed: it asks for deflate, gzip, br and
    zstd and decodes them) is the events as sent, and the access log
    measured them."""
    r = curl(t.url(CHAT), "--compressed", headers=["Content-Type: application/json"],
             timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"".join(EVENTS)
    e = t.wait_logged(1)[0]
    assert e["outcome"] == "ok" and e["unmeasured"] is None, e
    assert e["events"] == 8 and e["output_tokens"] == 5 and e["token_source"] == "usage", e
    assert e["ttft_ms"] >= 145 and e["tpot_ms"] is not None, e


def test_brotli_stream_flushed_per_event_is_measured():
    """A brotli event stream, flushed after each event: curl reads the
    events as sent, and the log measures them (before: ok, with TTFT,
    TPOT and tokens null)."""
    pieces = brotli_flushed(EVENTS)
    with Backend(streaming(b"br", pieces)) as b, Tokentap(conf(b)) as t:
        measured(t)
        for cause in ("coding", "decode_error", "no_memory"):
            assert metric(t, "tokentap_unmeasured_responses_total", cause=cause) == 0, cause


def test_zstd_stream_frame_per_event_is_measured():
    # a zstd frame per event: frames follow each other in one body, as
    # RFC 8878 allows
    pieces = [tool(["zstd", "-q", "-c"], p) for p in EVENTS]
    with Backend(streaming(b"zstd", pieces)) as b, Tokentap(conf(b)) as t:
        measured(t)


def test_compressed_json_bodies_report_their_usage():
    """A completion that is no stream, compressed whole by the brotli and
    zstd tools: its usage is read from the decoded body."""
    body = json.dumps({"model": "m-json", "choices": [{"message": {"content": "hi " * 500}}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 11}}).encode()
    for coding, data in ((b"br", tool(["brotli", "-c"], body)),
                         (b"zstd", tool(["zstd", "-q", "-c"], body))):
        with Backend(answer(data, b"application/json", headers=[b"Content-Encoding: " + coding])) as b, \
                Tokentap(conf(b)) as t:
            assert request(t.port).body == data           # passed unchanged
            e = t.wait_logged(1)[0]
            assert e["unmeasured"] is None and e["output_tokens"] == 11, (coding, e)
            assert e["input_tokens"] == 7 and e["model"] == "m-json", (coding, e)


def test_what_cannot_be_measured_is_counted_by_cause():
    """A coding no decoder reads (compress), bytes that are not of their
    coding (br), a zstd frame whose window passes RFC 9659's 8 MiB: each
    is forwarded unchanged, logged with its cause in `unmeasured`, and
    counted by cause in /metrics; a HEAD (no body) is no unmeasured body."""
    big_window = tool(["zstd", "-q", "-c", "--long=24"], b"\0" * 9_000_000)
    cases = [(b"compress", b"\x1f\x9d\x90data: x\n\n", "coding"),
             (b"br", b"data: not really brotli\n\n", "decode_error"),
             (b"zstd", big_window, "decode_error")]
    for coding, body, cause in cases:
        with Backend(answer(body, b"text/event-stream",
                                   headers=[b"Content-Encoding: " + coding])) as b, \
                Tokentap(conf(b)) as t:
            for method in ("POST", "POST", "HEAD"):
                r = request(t.port, body=b"{}", method=method)
                if method == "POST":
                    assert r.body == body, (coding, r.body[-100:])
            # by method: a line is written just after the last byte went
            # out, and the next request can be logged first
            log = t.wait_logged(3)
            assert sorted((e["method"], e["unmeasured"] or "") for e in log) == \
                [("HEAD", ""), ("POST", cause), ("POST", cause)], (coding, log)
            assert all(e["events"] == 0 and e["ttft_ms"] is None for e in log), log
            for c in ("coding", "decode_error", "no_memory"):
                assert metric(t, "tokentap_unmeasured_responses_total", cause=c) == \
                    (2 if c == cause else 0), (coding, c)
            said = t.stderr().count('Content-Encoding "compress"')
            assert said == (1 if coding == b"compress" else 0), t.stderr()

