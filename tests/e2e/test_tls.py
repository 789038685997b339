"""TLS on both sides: https upstreams against real TLS peers (nginx from
Debian, and Python's OpenSSL server where a test needs to look at the
handshake), TLS listeners with curl, and the openai npm SDK."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time

from backend import SSE_HEAD, Backend, sse_handler
from harness import ROOT, Proc, Tokentap, binary, dechunk, free_port, node_modules, \
    raw_request, split_response, wait_port

SANITIZER_SKIP = {"test_openai_sdk_streams_through_plain_and_tls"}

_PKI = {}


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def pki():
    """A test CA, a server certificate for localhost / 127.0.0.1, a client
    certificate, and a second CA nobody trusts: made once per run."""
    if _PKI:
        return _PKI
    d = tempfile.mkdtemp(prefix="tt-pki-")
    for ca in ("ca", "evil"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-subj", f"/CN=tokentap test {ca}", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, ca, ext in (("server", "ca", True), ("client", "ca", False), ("evilserver", "evil", True)):
        cn = "tokentap-client" if name == "client" else "localhost"
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.crt"]
        if ext:
            args += ["-extfile", "san.ext"]
        openssl(*args, cwd=d)
    _PKI.update({k: os.path.join(d, k) for k in os.listdir(d)})
    _PKI["dir"] = d
    return _PKI


class TLSBackend(Backend):
    """The scriptable backend behind Python's OpenSSL server socket; it
    records the client certificate each connection presented."""

    def __init__(self, handler, cert, key, client_ca=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
        self.peer_certs = []
        self.tls_ctx = ctx
        super().__init__(handler)

    def _accept(self):
        while not self.stopped:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(raw,), daemon=True).start()

    def _handshake(self, raw):
        from backend import Conn
        try:
            s = self.tls_ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        self.peer_certs.append(s.getpeercert())
        c = Conn(s)
        with self.lock:
            self.conns.append(c)
            cid = len(self.conns) - 1
        self._serve(c, cid)


class Nginx:
    """nginx terminating TLS in front of an HTTP backend, streaming."""

    def __init__(self, backend_port):
        p = pki()
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tt-nginx-")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""user root;
worker_processes 1;
error_log stderr warn;
pid {self.dir}/nginx.pid;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {self.dir}/body;
  proxy_temp_path {self.dir}/proxy;
  fastcgi_temp_path {self.dir}/fcgi;
  uwsgi_temp_path {self.dir}/uwsgi;
  scgi_temp_path {self.dir}/scgi;
  server {{
    listen 127.0.0.1:{self.port} ssl;
    ssl_certificate {p['server.crt']};
    ssl_certificate_key {p['server.key']};
    location / {{
      proxy_pass http://127.0.0.1:{backend_port};
      proxy_buffering off;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
""")
        self.proc = Proc(["nginx", "-p", self.dir, "-c", conf, "-g", "daemon off;"])
        wait_port(self.port)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.__exit__(*exc)
        shutil.rmtree(self.dir, ignore_errors=True)


def route(port, tls="", host="localhost"):
    return (f"routes:\n  - name: secure\n    upstream: https://{host}:{port}\n"
            + (f"    tls: {{{tls}}}\n" if tls else ""))


def post(port):
    return raw_request(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                       b"Content-Length: 2\r\n\r\n{}")


STREAM = [b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(30)] + \
    [b"data: [DONE]\n\n"]


def test_https_upstream_through_nginx_is_byte_identical():
    p = pki()
    with Backend(sse_handler(STREAM, gap=0.002)) as b, Nginx(b.port) as n, \
            Tokentap("workers: 1\n" + route(n.port, f"ca_file: {p['ca.crt']}")) as t:
        for _ in range(2):
            head, body = split_response(post(t.port))
            assert head.startswith(b"HTTP/1.1 200"), head
            assert dechunk(body) == b"".join(STREAM)
        first, second = t.access(2)
        assert first["outcome"] == "ok" and first["output_tokens"] == 30
        assert first["phases"]["tls_ms"] is not None and first["phases"]["tls_ms"] > 0
        assert first["phases"]["tls_ms"] <= first["phases"]["connect_ms"] + 0.01
        assert second["phases"]["tls_ms"] is None     # the pooled connection


def expect_502(t, words):
    head, body = split_response(post(t.port))
    assert head.startswith(b"HTTP/1.1 502"), head
    msg = json.loads(body)["error"]["message"]
    assert any(w in msg for w in words), msg
    line = t.access(1)[-1]
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
        assert dechunk(split_response(post(t.port))[1]) == b"".join(STREAM)
        assert "tls.verify is false" in t.stderr()
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}", host="127.0.0.1")) as t:
        assert dechunk(split_response(post(t.port))[1]) == b"".join(STREAM)


def test_client_certificate_is_presented():
    p = pki()
    tls = f"ca_file: {p['ca.crt']}, client_cert: {p['client.crt']}, client_key: {p['client.key']}"
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"], client_ca=p["ca.crt"]) as b, \
            Tokentap(route(b.port, tls)) as t:
        assert dechunk(split_response(post(t.port))[1]) == b"".join(STREAM)
        subject = dict(x[0] for x in b.peer_certs[0]["subject"])
        assert subject["commonName"] == "tokentap-client"
    with TLSBackend(sse_handler(STREAM), p["server.crt"], p["server.key"], client_ca=p["ca.crt"]) as b, \
            Tokentap(route(b.port, f"ca_file: {p['ca.crt']}")) as t:
        expect_502(t, ["TLS", "closed"])


def test_bad_certificate_files_fail_the_config_check():
    d = tempfile.mkdtemp()
    conf = os.path.join(d, "t.yaml")
    with open(conf, "w") as f:
        f.write("listen:\n  - address: 127.0.0.1:1\n    tls: {cert: /nonexistent.crt, key: /nonexistent.key}\n"
                "routes:\n  - name: r\n    upstream: https://127.0.0.1:9\n"
                "    tls:\n      ca_file: /nonexistent-ca.pem\n")
    r = subprocess.run([binary("tokentap"), "-t", "-c", conf], capture_output=True, text=True)
    assert r.returncode != 0, r.stderr
    # FILE:LINE:COL of the key whose file does not load, as for any
    # other configuration error
    assert f"{conf}:3:17: listen 127.0.0.1:1: tls: /nonexistent.crt:" in r.stderr, r.stderr
    assert f"{conf}:8:16: route r: tls: /nonexistent-ca.pem:" in r.stderr, r.stderr
    shutil.rmtree(d)


def tls_listener(extra=""):
    p = pki()
    return (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: {p['server.crt']}, "
            f"key: {p['server.key']}}}\n" + extra)


def test_curl_through_a_tls_listener():
    p = pki()
    with Backend(sse_handler(STREAM)) as b, \
            Tokentap(tls_listener(f"routes:\n  - name: r\n    upstream: http://127.0.0.1:{b.port}\n")) as t:
        out = subprocess.run(["curl", "-sN", "--cacert", p["ca.crt"], "-d", "{}",
                              f"https://localhost:{t.port}/v1/chat/completions"],
                             capture_output=True, timeout=20)
        assert out.returncode == 0, out.stderr
        assert out.stdout == b"".join(STREAM)
        assert b.requests[0].header("X-Forwarded-Proto") == "https"
        # a plain-HTTP client on the TLS port gets no answer, and nothing breaks
        try:
            assert not raw_request(t.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", timeout=1).startswith(b"HTTP")
        except ConnectionResetError:
            pass
        out = subprocess.run(["curl", "-s", "--cacert", p["ca.crt"], "-d", "{}",
                              f"https://localhost:{t.port}/v1/chat/completions"],
                             capture_output=True, timeout=20)
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
        data = b""
        s.settimeout(10)
        while True:
            d = s.recv(8192)
            if not d:
                break
            data += d
            if len(data) < 1 << 20:
                time.sleep(0.002)        # slow at first, so backpressure engages
        s.close()
        assert dechunk(split_response(data)[1]) == b"".join(big)


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
    mods = node_modules()
    script = os.path.join(os.path.dirname(mods), "stream.js")
    with open(script, "w") as f:
        f.write(NODE_SCRIPT)
    mock_port = free_port()
    env = dict(os.environ, NODE_EXTRA_CA_CERTS=p["ca.crt"], NODE_PATH=mods)

    def run(url):
        r = subprocess.run(["node", script, url], capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    with Proc([binary("tokentap-mock"), "-l", f"127.0.0.1:{mock_port}"]):
        wait_port(mock_port)
        direct = run(f"http://127.0.0.1:{mock_port}/v1")
        assert len(direct) >= 12 and direct[1]["choices"][0]["delta"]["content"]
        plain_yaml = f"routes:\n  - name: r\n    upstream: http://127.0.0.1:{mock_port}\n"
        with Tokentap(plain_yaml) as t:
            assert run(f"http://127.0.0.1:{t.port}/v1") == direct
        with Tokentap(tls_listener(plain_yaml)) as t:
            # the listener is 127.0.0.1 only, and the certificate names that
            # address: Debian's /etc/hosts gives localhost ::1 too, which
            # Node 18 (no happy eyeballs) tries alone and is refused
            assert run(f"https://127.0.0.1:{t.port}/v1") == direct
            line = t.access(1)[0]
            assert line["output_tokens"] == 12 and line["model"] == "mock-1"
