"""Compressed responses (Content-Encoding br and zstd beside gzip): the
bytes pass unchanged, curl (--compressed) reads what was sent, and the
access log measures the decoded events; what cannot be measured is said
by cause in the access log (`unmeasured`) and in /metrics
(tokentap_unmeasured_responses_total{cause}). The compressed bytes are
made at test time by real encoders: node's zlib (brotli with a flush after
each event, as a compressing server writes a stream), the brotli and zstd
tools.

Run alone with `python3 tests/e2e/test_encodings.py [name-filter]`.
"""
import base64
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend import Backend  # noqa: E402
from harness import Tokentap, raw_request  # noqa: E402

CHAT = "/v1/chat/completions"


def chunk(obj):
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


EVENTS = ([chunk({"model": "m-z", "choices": [{"delta": {"role": "assistant"}}]})] +
          [chunk({"choices": [{"delta": {"content": f"w{i} "}}]}) for i in range(5)] +
          [chunk({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}),
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


def zstd_frames(parts):
    """A zstd frame per part (the zstd tool): frames follow each other in
    one body, as RFC 8878 allows."""
    return [tool(["zstd", "-q", "-c"], p) for p in parts]


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


def whole(coding, ctype, body):
    def handle(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: " + ctype + b"\r\nContent-Encoding: " +
               coding + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        return "keep"
    return handle


def cfg(port):
    return f"routes:\n  - name: llm\n    upstream: http://127.0.0.1:{port}\n"


def curl(t):
    """curl --compressed (it asks for deflate, gzip, br, zstd and decodes
    them): what it read."""
    r = subprocess.run(["curl", "-sS", "-N", "--compressed", "-H", "Content-Type: application/json",
                        "-d", '{"model":"m","stream":true}', t.url(CHAT)],
                       capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def unmeasured_metric(t):
    out = raw_request(t.admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    got = {}
    for line in out.decode().splitlines():
        if line.startswith("tokentap_unmeasured_responses_total{"):
            got[line.split('cause="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
    return got


def measured(e):
    assert e["outcome"] == "ok" and e["unmeasured"] is None, e
    assert e["events"] == 8 and e["output_tokens"] == 5 and e["token_source"] == "usage", e
    assert e["ttft_ms"] >= 145 and e["tpot_ms"] is not None, e


def test_brotli_stream_flushed_per_event_is_measured():
    """A brotli event stream, flushed after each event: curl reads the
    events as sent, and the log measures them (before: ok, with TTFT,
    TPOT and tokens null)."""
    pieces = brotli_flushed(EVENTS)
    with Backend(streaming(b"br", pieces)) as b, Tokentap(cfg(b.port)) as t:
        assert curl(t) == b"".join(EVENTS)
        measured(t.access(1)[0])
        assert unmeasured_metric(t) == {"coding": 0, "decode_error": 0, "no_memory": 0}


def test_zstd_stream_frame_per_event_is_measured():
    pieces = zstd_frames(EVENTS)
    with Backend(streaming(b"zstd", pieces)) as b, Tokentap(cfg(b.port)) as t:
        assert curl(t) == b"".join(EVENTS)
        measured(t.access(1)[0])


def test_compressed_json_bodies_report_their_usage():
    """A completion that is no stream, compressed whole by the brotli and
    zstd tools: its usage is read from the decoded body."""
    body = json.dumps({"model": "m-json", "choices": [{"message": {"content": "hi " * 500}}],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 11}}).encode()
    for coding, data in ((b"br", tool(["brotli", "-c"], body)),
                         (b"zstd", tool(["zstd", "-q", "-c"], body))):
        with Backend(whole(coding, b"application/json", data)) as b, \
                Tokentap(cfg(b.port)) as t:
            out = raw_request(t.port, b"POST " + CHAT.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
            assert out.endswith(data), out[-200:]          # passed unchanged
            e = t.access(1)[0]
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
        with Backend(whole(coding, b"text/event-stream", body)) as b, \
                Tokentap(cfg(b.port)) as t:
            for method in (b"POST", b"POST", b"HEAD"):
                out = raw_request(t.port, method + b" " + CHAT.encode() + b" HTTP/1.1\r\n"
                                  b"Host: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                if method == b"POST":
                    assert out.endswith(body), (coding, out[-100:])
            log = t.access(3)
            assert [e["unmeasured"] for e in log] == [cause, cause, None], (coding, log)
            assert all(e["events"] == 0 and e["ttft_ms"] is None for e in log), log
            want = {"coding": 0, "decode_error": 0, "no_memory": 0}
            want[cause] = 2
            assert unmeasured_metric(t) == want, (coding, unmeasured_metric(t))
            said = t.stderr().count('Content-Encoding "compress"')
            assert said == (1 if coding == b"compress" else 0), t.stderr()


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and (len(sys.argv) < 2 or sys.argv[1] in name):
            fn()
            print("ok", name)
