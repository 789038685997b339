"""TLS on both sides: https upstreams against real TLS peers (nginx from
Debian, and Python's OpenSSL server where a test needs to look at the
handshake), TLS listeners with curl, and the openai npm SDK."""
import json
import os
import shutil
import socket
import tempfile
import time

from harness import Mock, Response, Tokentap, conf, raw_request, read_response, request, run
from peers import SSE_HEAD, Backend, Nginx, TLSBackend, curl, node, pki, sse_handler

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
