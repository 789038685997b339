# SPDX-License-Identifier: Apache-2.0
"""TLS on both sides: https upstreams against real TLS peers (nginx from
Debian, and Python's OpenSSL server where a test needs to look at the
handshake), TLS listeners with curl, and the openai npm SDK."""
import json
import os
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time

from harness import (Mock, Response, Tokentap, conf, metric, raw_request, read_response, request,
                     run, until)
from peers import SSE_HEAD, Backend, Nginx, RecordBackend, TLSBackend, curl, node, pki, sse_handler

SANITIZER_SKIP = {"test_openai_sdk_streams_through_plain_and_tls"}


def route(port, tls="", host="localhost"):
    return conf(f"https://{host}:{port}", f"    tls: {{{tls}}}\n" if tls else "", "secure")


STREAM = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(30)] + \
    [b"data: [DONE]\n\n"]


def test_https_upstream_through_nginx_is_byte_identical():
    p = pki()
    with Backend(sse_handler(STREAM, gap=0.002)) as b, Nginx(b.port, tls=True) as n, \
            Tokentap("workers: 1\n" + route(n.port, f"ca_file: {p['ca.crt']}")) as t:
        for _ in range(2):
            r = request(t.port)
            assert r.status == 200 and r.body == b"".join(STREAM), r.head
        first, second = t.wait_logged(2)
        assert first["outcome"] == "ok" and first["output_tokens"] == 30
        assert first["phases"]["tls_ms"] is not None and first["phases"]["tls_ms"] > 0
        assert first["phases"]["tls_ms"] <= first["phases"]["connect_ms"] + 0.01
        assert second["phases"]["tls_ms"] is None     # the pooled connection


def test_a_new_upstream_connection_resumes_while_the_first_stays_pooled():
    """The tickets of a connection that stays in the pool are kept as they
    come: a second connection, opened while the first is busy, resumes its
    session (no certificate to verify, on either side) instead of waiting
    for the first to close. Python's OpenSSL server tells which resumed."""
    p = pki()
    gate = {"n": 1}
    barriers = {1: threading.Barrier(1, timeout=20), 2: threading.Barrier(2, timeout=20)}

    def handle(req, c):
        barriers[gate["n"]].wait()      # round 2: both in flight at once
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(STREAM[0]), STREAM[0]))
        return "keep"

    with TLSBackend(handle, p["server.crt"], p["server.key"]) as b, \
            Tokentap("workers: 1\n" + route(b.port, f"ca_file: {p['ca.crt']}")) as t:
        assert request(t.port).status == 200
        t.wait_logged(1)                # the first connection is pooled
        gate["n"] = 2
        out = []
        threads = [threading.Thread(target=lambda: out.append(request(t.port).status))
                   for _ in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert out == [200, 200], out
        assert len(b.conns) == 2, len(b.conns)
        assert b.reused == [False, True], b.reused


def expect_502(t, words):
    r = request(t.port)
    assert r.status == 502, r.head
    msg = r.json()["error"]["message"]
    assert any(w in msg for w in words), msg
    line = t.wait_logged(1)[-1]
    assert line["outcome"] == "connect_error", line
    return msg


def test_unknown_ca_and_wrong_name_are_502():
    p = pki()
    with TLSBackend(sse_handler(STREAM), p["evilserver.crt"], p["evilserver.key"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}")) as t:
        msg = expect_502(t, ["certificate verif"])
        assert "certificate" in t.stderr()
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}, sni: api.example.com")) as t:
        msg = expect_502(t, ["hostname mismatch", "certificate verif"])
        assert "mismatch" in msg, msg


def test_verify_false_passes_and_ip_literal_verifies():
    p = pki()
    with TLSBackend(sse_handler(STREAM), p["evilserver.crt"], p["evilserver.key"]) as b, \
            Tokentap(route(b.port, "verify: false")) as t:
        assert request(t.port).body == b"".join(STREAM)
        assert "tls.verify is false" in t.stderr()
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}", host="127.0.0.1")) as t:
        assert request(t.port).body == b"".join(STREAM)


def test_client_certificate_is_presented():
    p = pki()
    tls = f"ca_file: {p['ca.crt']}, client_cert: {p['client.crt']}, client_key: {p['client.key']}"
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"], client_ca=p["ca.crt"]) as b, \
            Tokentap(route(b.port, tls)) as t:
        assert request(t.port).body == b"".join(STREAM)
        subject = dict(x[0] for x in b.peer_certs[0]["subject"])
        assert subject["commonName"] == "tokentap-client"
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"], client_ca=p["ca.crt"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}")) as t:
        expect_502(t, ["TLS", "closed"])


def test_bad_certificate_files_fail_the_config_check():
    d = tempfile.mkdtemp()
    path = os.path.join(d, "t.yaml")
    with open(path, "w") as f:
        f.write("listen:\n  - address: 127.0.0.1:1\n    tls: {cert: /nonexistent.crt, key: /nonexistent.key}\n"
                "routes:\n  - name: r\n    upstream: https://127.0.0.1:9\n"
                "    tls:\n      ca_file: /nonexistent-ca.pem\n")
    r = run("tokentap", "-t", "-c", path)
    assert r.returncode != 0, r.stderr
    # FILE:LINE:COL of the key whose file does not load, as for any
    # other configuration error
    assert f"{path}:3:17: listen 127.0.0.1:1: tls: /nonexistent.crt:" in r.stderr, r.stderr
    assert f"{path}:8:16: route r: tls: /nonexistent-ca.pem:" in r.stderr, r.stderr
    shutil.rmtree(d)


def tls_listener(extra=""):
    p = pki()
    return (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: {p['server.crt']}, "
            f"key: {p['server.key']}}}\n" + extra)


def test_curl_through_a_tls_listener():
    p = pki()
    with Backend(sse_handler(STREAM)) as b, \
            Tokentap(tls_listener(conf(b))) as t:
        out = curl(f"https://localhost:{t.port}/v1/chat/completions", "--cacert", p["ca.crt"],
                   data="{}", timeout=20)
        assert out.returncode == 0, out.stderr
        assert out.stdout == b"".join(STREAM)
        assert b.requests[0].header("X-Forwarded-Proto") == "https"
        # a plain-HTTP client on the TLS port gets no answer, and nothing breaks
        try:
            assert not raw_request(t.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", timeout=1).startswith(b"HTTP")
        except ConnectionResetError:
            pass
        out = curl(f"https://localhost:{t.port}/v1/chat/completions", "--cacert", p["ca.crt"],
                   data="{}", timeout=20)
        assert out.stdout == b"".join(STREAM)


def test_tls_upstream_backpressure_loses_nothing():
    """A slow client behind a fast TLS upstream: the proxy pauses reading
    the upstream and must resume with every byte OpenSSL had decrypted."""
    p = pki()
    big = [b"data: " + (b"%06d" % i) * 2000 + b"\n\n" for i in range(300)]   # ~3.6 MB
    with TLSBackend(sse_handler(big), p["server.crt"], p["server.key"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}")) as t:
        s = socket.create_connection(("127.0.0.1", t.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 131072)
        s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = Response()
        s.settimeout(10)
        while len(r.raw) < 1 << 20 and not r.complete:
            r.feed(s.recv(8192))
            time.sleep(0.002)            # slow at first, so backpressure engages
        read_response(s, r)
        s.close()
        assert r.complete and r.body == b"".join(big)


NODE_SCRIPT = r"""
const OpenAI = require('openai');
async function main() {
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: process.argv[2], maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: 'mock-1', stream: true, max_tokens: 12,
    messages: [{ role: 'user', content: 'hello' }],
  }, { headers: { 'X-Mock-Seed': '7', 'X-Mock-TTFT': '20ms', 'X-Mock-TPOT': '2ms' } });
  const chunks = [];
  for await (const chunk of stream) { delete chunk.created; chunks.push(chunk); }
  console.log(JSON.stringify(chunks));
}
main().catch(e => { console.error(e); process.exit(1); });
"""


def test_openai_sdk_streams_through_plain_and_tls():
    p = pki()
    env = {"NODE_EXTRA_CA_CERTS": p["ca.crt"]}
    with Mock() as m:
        direct = json.loads(node(NODE_SCRIPT, m.url("/v1"), env=env).stdout)
        assert len(direct) >= 12 and direct[1]["choices"][0]["delta"]["content"]
        with Tokentap(conf(m)) as t:
            assert json.loads(node(NODE_SCRIPT, t.url("/v1"), env=env).stdout) == direct
        with Tokentap(tls_listener(conf(m))) as t:
            # the listener is 127.0.0.1 only, and the certificate names that
            # address: Debian's /etc/hosts gives localhost ::1 too, which
            # Node 18 (no happy eyeballs) tries alone and is refused
            got = node(NODE_SCRIPT, f"https://127.0.0.1:{t.port}/v1", env=env).stdout
            assert json.loads(got) == direct
            line = t.wait_logged(1)[0]
            assert line["output_tokens"] == 12 and line["model"] == "mock-1"


def slow_tls_client(port, p):
    """A TLS client that reads nothing at first, so that the proxy's writes
    of small events find its socket full (the write that must be retried
    with the same bytes), then reads to the end: the bytes it got."""
    import ssl
    ctx = ssl.create_default_context(cafile=p["ca.crt"])
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.settimeout(20)
    time.sleep(0.5)                      # the proxy meets a full socket
    data = bytearray()
    while not data.endswith(b"\r\n0\r\n\r\n"):
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return bytes(data)


def test_tls_client_small_events_behind_a_full_socket_lose_nothing():
    """Small events (each written at once with one SSL_write while the
    client's output is empty) to a TLS client that lags: a write the socket
    did not take is retried from the output with the same bytes; every
    byte arrives in order, from a plain and from a TLS upstream."""
    p = pki()
    events = [b'data: {"choices":[{"delta":{"content":"%05d"}}]}\n\n' % i
              for i in range(8000)] + [b"data: [DONE]\n\n"]   # ~400 KB
    listen = (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: "
              f"{p['server.crt']}, key: {p['server.key']}}}\n")
    framed = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"

    def at_once(req, c):
        c.send(SSE_HEAD)
        c.send(framed)          # as fast as the kernel takes it
        return "keep"
    for tls_up in (False, True):
        backend = TLSBackend(at_once, p["server.crt"], p["server.key"]) \
            if tls_up else Backend(at_once)
        with backend as b:
            up = (f"https://localhost:{b.port}", f"    tls: {{ca_file: {p['ca.crt']}}}\n") \
                if tls_up else (f"http://127.0.0.1:{b.port}", "")
            with Tokentap(listen + conf(up[0], up[1], "r")) as t:
                got = slow_tls_client(t.port, p)
                head, _, body = got.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), head
                assert body == framed, (tls_up, len(body), len(framed))
                line = t.access(1)[0]
                assert line["outcome"] == "ok" and line["events"] == len(events), line


# ---- a TLS upstream's body read by tokentap's own TLS read path (one
# recv(2) brings many records, read-ahead on) -------------------------------

def token(i):
    return b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i


def chunked(events):
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)


def tls_route(b, p, extra="", dialect="openai"):
    return conf(f"https://localhost:{b.port}", f"    tls: {{ca_file: {p['ca.crt']}}}\n"
                f"    dialect: {dialect}\n", "r") + extra


def dirty_close(c):
    """Closes without close_notify: the TCP connection just ends."""
    c.sock.close()


def clean_close(c):
    """close_notify, then the close (tokentap sends none back: its SSL_shutdown
    read meets the close)."""
    c.sock.settimeout(5)
    try:
        c.sock.unwrap()
    except (OSError, ValueError):
        pass


def reset_close(c):
    """A reset (SO_LINGER 0): the read fails with ECONNRESET."""
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.sock.close()


def garbage_close(c):
    """Bytes that are no TLS record, on the socket under TLS: OpenSSL fails
    the read (SSL_ERROR_SSL)."""
    os.write(c.sock.fileno(), b"\x17\x03\x03\x00\x20" + b"x" * 32)
    time.sleep(0.2)
    c.sock.close()


ENDS = {"dirty": dirty_close, "clean": clean_close, "reset": reset_close,
        "garbage": garbage_close}


def cut_stream(end, framed=True):
    """A handler that sends a head and three events (framed: chunked; else
    delimited by the close), then ends the connection as end does."""
    head = SSE_HEAD if framed else (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                    b"Connection: close\r\n\r\n")
    events = [token(i) for i in range(3)]

    def handle(req, c):
        c.send(head)
        for e in events:
            c.send(b"%x\r\n%s\r\n" % (len(e), e) if framed else e)
            time.sleep(0.02)
        time.sleep(0.1)
        ENDS[end](c)
    return handle, events


def test_tls_upstream_cut_mid_stream_outcomes():
    """A chunked stream the TLS upstream ends before its last chunk, with a
    close_notify or without, by a reset or by bytes that are no record: the
    client has every event that came, then the close; the access log says
    upstream_abort (the outcomes tokentap gave before its own TLS read
    path)."""
    p = pki()
    for end in ENDS:
        handle, events = cut_stream(end)
        with TLSBackend(handle, p["server.crt"], p["server.key"]) as b, \
                Tokentap(tls_route(b, p)) as t:
            r = request(t.port)
            assert r.status == 200 and not r.complete and r.eof, (end, r.head)
            assert r.body == b"".join(events), (end, r.body)
            line = t.wait_logged(1)[0]
            assert line["outcome"] == "upstream_abort", (end, line)
            assert line["output_tokens"] == 3 and line["events"] == 3, (end, line)


def test_tls_upstream_close_delimited_body_outcomes():
    """A body delimited by the close (no length, not chunked), of a dialect
    without an end marker: the close ends it, close_notify or not, and so
    does a reset or a broken record: ok each time, every byte forwarded (as
    tokentap gave it before its own TLS read path: a TLS upstream's end is
    its close, whatever the kind)."""
    p = pki()
    for end in ENDS:
        handle, events = cut_stream(end, framed=False)
        with TLSBackend(handle, p["server.crt"], p["server.key"]) as b, \
                Tokentap(tls_route(b, p, dialect="raw")) as t:
            r = request(t.port)
            assert r.status == 200 and r.body == b"".join(events), (end, r.head, r.body)
            line = t.wait_logged(1)[0]
            assert r.complete and r.eof, (end, r.head)
            assert line["outcome"] == "ok" and line["events"] == 3, (end, line)


K, BURSTS = 40, 3                 # events a burst, and bursts
FIRST_S, GAP_S = 0.1, 0.15        # before the first burst, between bursts
SLACK_MS = 0.05                   # the log's µs rounding, the clocks'


def bursts(sent):
    """A stream whose events come in bursts: K events, each its own TLS
    record, all in one send (one segment: one read brings them all), a gap
    apart; [DONE] a gap after the last. The bracket of each burst's send in
    sent[request] = [(before, after), ...]."""
    def handle(req, c):
        marks = []
        sent.append(marks)
        c.send(SSE_HEAD)
        time.sleep(FIRST_S)
        for b in range(BURSTS):
            if b:
                time.sleep(GAP_S)
            wire = b"".join(c.sock.seal(chunked([token(b * K + i)])) for i in range(K))
            before = time.monotonic()
            c.sock.raw(wire)
            marks.append((before, time.monotonic()))
        time.sleep(GAP_S)
        c.chunk(b"data: [DONE]\n\n")
        c.end_chunks()
        return "keep"
    return handle


def client_conn(port, tls):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls:
        ctx = ssl.create_default_context(cafile=pki()["ca.crt"])
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.settimeout(20)
    return s


def stream_once(s, i):
    """One request on the kept-alive s: the bracket of its send and the raw
    body (chunked, as the backend framed it)."""
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: burst-%d\r\n"
           b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" % i)
    before = time.monotonic()
    s.sendall(req)
    after = time.monotonic()
    data = b""
    while not data.endswith(b"\r\n0\r\n\r\n"):
        d = s.recv(65536)
        assert d, data[-200:]
        data += d
    return (before, after), data.partition(b"\r\n\r\n")[2]


def test_tls_upstream_bursts_of_records_are_read_whole_and_timed():
    """One read of the TLS upstream brings K records at once: every event
    reaches the client byte for byte (a plain one, and a TLS one), every
    token counts, and the tokens are timed by the read that brought them:
    TTFT and TPOT lie within what the backend's sends allow (a record left
    in OpenSSL's buffer until more bytes came would be timed a gap late:
    the [DONE] is sent a gap after the last burst)."""
    p = pki()
    events = [token(i) for i in range(K * BURSTS)] + [b"data: [DONE]\n\n"]
    expect = chunked(events) + b"0\r\n\r\n"
    for tls_client in (False, True):
        sent = []
        listen = (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: "
                  f"{p['server.crt']}, key: {p['server.key']}}}\n") if tls_client else ""
        with RecordBackend(bursts(sent), p["server.crt"], p["server.key"]) as b, \
                Tokentap(listen + "workers: 1\n" + tls_route(b, p)) as t:
            s = client_conn(t.port, tls_client)
            reqs = []
            for i in range(3):
                req, body = stream_once(s, i)
                assert body == expect, (tls_client, i, len(body), len(expect))
                reqs.append(req)
            s.close()
            lines = {l["request_id"]: l for l in t.wait_logged(3)}
        for i, req in enumerate(reqs):
            line, marks = lines[f"burst-{i}"], sent[i]
            assert line["outcome"] == "ok" and line["timestamps"] == "kernel", line
            assert line["output_tokens"] == K * BURSTS and line["events"] == K * BURSTS + 1, line
            first, last = marks[0], marks[-1]
            ttft = ((first[0] - req[1]) * 1000, (first[1] - req[0]) * 1000)
            tpot = ((last[0] - first[1]) * 1000 / (K * BURSTS - 1),
                    (last[1] - first[0]) * 1000 / (K * BURSTS - 1))
            # brackets this narrow tell a gap (150 ms) from none
            assert ttft[1] - ttft[0] < GAP_S * 1000 / 3, ttft
            assert ttft[0] - SLACK_MS <= line["ttft_ms"] <= ttft[1] + SLACK_MS, \
                (tls_client, i, line["ttft_ms"], ttft)
            assert tpot[0] - SLACK_MS <= line["tpot_ms"] <= tpot[1] + SLACK_MS, \
                (tls_client, i, line["tpot_ms"], tpot)


def past_the_end(kind):
    """A keep-alive chunked stream whose last bytes come with more after
    the response's end, in the first response on a connection: in the same
    record (kind "record"), in a record of their own in the same send
    ("records"), or as the first half of a record ("partial"). Later
    responses on a connection are clean."""
    stale = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nSTALE"
    events = [token(i) for i in range(3)] + [b"data: [DONE]\n\n"]
    seen = set()

    def handle(req, c):
        c.send(SSE_HEAD)
        time.sleep(0.05)            # the body comes by tokentap's own reads
        c.chunk(events[0])
        time.sleep(0.02)
        end = chunked(events[1:]) + b"0\r\n\r\n"
        if req.conn_id in seen:
            c.send(end)
            return "keep"
        seen.add(req.conn_id)
        if kind == "record":
            wire = c.sock.seal(end + stale)
        else:
            wire = c.sock.seal(end)       # sealed in their order: records are numbered
            extra = c.sock.seal(stale)
            wire += extra if kind == "records" else extra[:len(extra) // 2]
        c.sock.raw(wire)
        return "keep"
    return handle, events


def test_tls_upstream_bytes_past_the_end_keep_the_connection_out_of_the_pool():
    """Bytes after a response's end on a kept-alive TLS upstream (read by
    tokentap's own TLS reads along with the end): the connection is not
    reused, and the next request has a clean answer on a new one."""
    p = pki()
    for kind in ("record", "records", "partial"):
        handle, events = past_the_end(kind)
        with RecordBackend(handle, p["server.crt"], p["server.key"]) as b, \
                Tokentap("workers: 1\n" + tls_route(b, p)) as t:
            for i in range(2):
                r = request(t.port)
                assert r.status == 200 and r.complete, (kind, i, r.head)
                assert r.body == b"".join(events), (kind, i, r.body)
            assert [q.conn_id for q in b.requests] == [0, 1], (kind, [q.conn_id for q in b.requests])
            assert [l["outcome"] for l in t.wait_logged(2)] == ["ok", "ok"], kind


def test_tls_upstream_reused_after_a_body_that_began_with_its_head():
    """The head and the first events in one record (the bufferevent reads
    them, and tokentap's own reads take the body on from there): the
    connection goes back to the pool in order, and the next request on it
    is read and answered whole."""
    p = pki()
    events = [token(i) for i in range(6)] + [b"data: [DONE]\n\n"]

    def handle(req, c):
        c.send(SSE_HEAD + chunked(events[:2]))
        for e in events[2:]:
            time.sleep(0.01)
            c.chunk(e)
        c.end_chunks()
        return "keep"
    with RecordBackend(handle, p["server.crt"], p["server.key"]) as b, \
            Tokentap("workers: 1\n" + tls_route(b, p)) as t:
        for i in range(3):
            r = request(t.port, timeout=5)
            assert r.status == 200 and r.complete and r.body == b"".join(events), (i, r.body)
        assert [q.conn_id for q in b.requests] == [0, 0, 0], [q.conn_id for q in b.requests]
        assert [l["outcome"] for l in t.wait_logged(3)] == ["ok"] * 3


def tls_reader(port, ctx, window=None):
    """A TLS client with a stream on its way. window: a receive buffer that
    small, and small segments, which keep tokentap's send buffer small too
    (loopback's 64 KiB ones grow it to megabytes): tokentap must soon hold
    what the client does not read."""
    raw = socket.socket()
    if window:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    raw.connect(("127.0.0.1", port))
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    s.settimeout(20)
    return s


def backlog(t):
    return metric(t, "tokentap_client_backlog_bytes") or 0


def settled(t):
    """Once what tokentap holds for its clients stops changing (0.3 s)."""
    last, same = None, 0
    for _ in range(50):
        time.sleep(0.1)
        now = backlog(t)
        same = same + 1 if now == last else 0
        last = now
        if same >= 3:
            return


def read_slowly(s, pause):
    """The body of the response on s, read 4 KiB at a time, pause apart."""
    data = bytearray()
    while not data.endswith(b"\r\n0\r\n\r\n"):
        d = s.recv(4096)
        assert d, len(data)
        data += d
        time.sleep(pause)
    s.close()
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return body


def test_tls_upstream_paused_for_slow_tls_clients_loses_nothing():
    """Past limits.client_backlog (TLS clients hold it, reading nothing),
    tokentap reads a TLS upstream 4 KiB at a time, with records
    (or the rest of one) left in OpenSSL's buffer, of which the socket says
    nothing: a stream's last 16 KB come in one segment and nothing after
    them. Read on at once for a client that keeps up, and for one that
    lags (paused as soon as it does) once it has caught up: every byte
    arrives in order, and every stream ends ok."""
    p = pki()
    size = 300
    events = [b"data: " + (b"%06d" % i) * 660 + b"\n\n" for i in range(size)]   # ~4 KB
    framed = chunked(events) + b"0\r\n\r\n"

    def flood(req, c):
        c.send(SSE_HEAD)
        for e in events[:-4]:
            c.chunk(e)              # a record each, as fast as tokentap takes them
        c.sock.raw(b"".join(c.sock.seal(chunked([e])) for e in events[-4:]) +
                   c.sock.seal(b"0\r\n\r\n"))
        return "keep"

    listen = (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: "
              f"{p['server.crt']}, key: {p['server.key']}}}\n")
    ctx = ssl.create_default_context(cafile=p["ca.crt"])
    with RecordBackend(flood, p["server.crt"], p["server.key"]) as b, \
            Tokentap(listen + "workers: 1\nlimits: {client_backlog: 1m}\n" +
                     tls_route(b, p, dialect="raw")) as t:
        # holders, one after another, until what tokentap holds for them
        # is past the limit, with a little room (each holds about 250 KiB
        # before it pauses; once the limit is passed, a few KiB); paused,
        # and reading nothing, they keep it there
        holders = []
        while backlog(t) <= (1 << 20) + 8192:
            assert len(holders) < 16, backlog(t)
            holders.append(tls_reader(t.port, ctx, window=1))
            settled(t)
        # these run past the limit from their first byte to their last
        assert read_slowly(tls_reader(t.port, ctx), 0) == framed
        assert read_slowly(tls_reader(t.port, ctx, window=16384), 0.003) == framed
        assert backlog(t) > 1 << 20
        for k, s in enumerate(holders):
            assert read_slowly(s, 0) == framed, k
        lines = t.wait_logged(len(holders) + 2)
        assert all(l["outcome"] == "ok" and l["events"] == size for l in lines), \
            [(l["outcome"], l["events"]) for l in lines]
