# SPDX-License-Identifier: Apache-2.0
"""The peers of the end-to-end tests, the other side of tokentap: a
scriptable HTTP/1.1 upstream on raw sockets (and behind TLS), nginx 1.22
(the reference proxy, and a TLS terminator), Prometheus, Alertmanager, a
webhook receiver, test certificates, WebSocket frames, curl and node.

A Backend's handler(req, conn) writes exactly the bytes it wants (head,
chunks, delays, abrupt closes) and returns "keep" to read the connection's
next request; the backend records every request and connection so tests
can check what tokentap sent upstream.
"""
import base64
import hashlib
import http.server
import json
import os
import select
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.parse

from harness import Proc, free_port, get, node_modules, until, wait_port

SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


# ------------------------------------------------------------ the backend

class Request:
    def __init__(self, method, target, version, headers, body, conn_id):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers          # list of (name, value), as received
        self.body = body
        self.conn_id = conn_id

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.sent_at = []               # (monotonic time, bytes) per send
        self.peer_closed_at = None

    def send(self, data):
        self.sock.sendall(data)
        self.sent_at.append((time.monotonic(), data))

    def chunk(self, data):
        self.send(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self):
        self.send(b"0\r\n\r\n")

    def sleep_watching(self, seconds):
        """Sleeps, noting when the peer closes. Returns False once it has."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                try:
                    data = self.sock.recv(65536, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    self.peer_closed_at = time.monotonic()
                    return False
                time.sleep(min(left, 0.005))


def read_request(sock, buf):
    """Reads one request from sock; returns (Request fields, rest) or None."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers.append((k, v.strip()))
    hmap = {k.lower(): v for k, v in headers}
    body = b""
    if "content-length" in hmap:
        n = int(hmap["content-length"])
        while len(buf) < n:
            d = sock.recv(65536)
            if not d:
                return None
            buf += d
        body, buf = buf[:n], buf[n:]
    elif hmap.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in buf:
                buf += sock.recv(65536)
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                buf += sock.recv(65536)
            if size == 0:
                buf = buf[2:]
                break
            body += buf[:size]
            buf = buf[size + 2:]
    return (method, target, version, headers, body), buf


class Backend:
    """The scriptable upstream on a port of its own (b.port): each request
    read is handed to handler(req, conn) on the connection's thread."""

    def __init__(self, handler):
        self.handler = handler
        self.requests = []
        self.conns = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve_new, args=(s,), daemon=True).start()

    def _serve_new(self, s):
        c = Conn(s)
        with self.lock:
            self.conns.append(c)
            cid = len(self.conns) - 1
        self._serve(c, cid)

    def _serve(self, c, cid):
        buf = b""
        try:
            while True:
                r = read_request(c.sock, buf)
                if r is None:
                    break
                (method, target, version, headers, body), buf = r
                req = Request(method, target, version, headers, body, cid)
                with self.lock:
                    self.requests.append(req)
                if self.handler(req, c) != "keep":
                    break
        except OSError:
            pass
        finally:
            try:
                c.sock.close()
            except OSError:
                pass

    def close(self):
        self.stopped = True
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


FLOOD_TOTAL = 1 << 30


def flood(kind, total=FLOOD_TOTAL, log=None):
    """A handler for a Backend that answers a client (a collector's or a
    webhook receiver's, say) without end, streamed, never held in memory:
    "body" (200, a Content-Length of total and that many bytes), "headers"
    (header lines until total), "chunks" (4 KiB chunks until total), "line"
    (a chunk size that never ends its line), "trickle" (a body one byte
    every 0.2 s: 60,000 of them). log: a list that gets (kind, start, end, bytes sent)
    of each answer when the client stopped reading it (or all was sent)."""
    block = b"x" * 65536

    def handle(req, c):
        start, sent = time.monotonic(), 0
        s = c.sock

        def send(data):
            nonlocal sent
            s.sendall(data)
            sent += len(data)
        try:
            if kind == "body":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
                while sent < total:
                    send(block)
            elif kind == "headers":
                send(b"HTTP/1.1 200 OK\r\n")
                line = b"X-Flood: " + b"y" * 1000 + b"\r\n"
                while sent < total:
                    send(line * 64)
            elif kind == "chunks":
                send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                chunk = b"1000\r\n" + b"z" * 4096 + b"\r\n"
                while sent < total:
                    send(chunk * 16)
            elif kind == "line":
                send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1")
                zeros = b"0" * 65536
                while sent < total:
                    send(zeros)
            elif kind == "trickle":
                send(b"HTTP/1.1 200 OK\r\nContent-Length: 60000\r\n\r\n")
                while sent < 60000:
                    send(b"t")
                    time.sleep(0.2)
        except OSError:
            pass                    # the client stopped reading: what is tested
        if log is not None:
            log.append((kind, start, time.monotonic(), sent))
        return "close"
    return handle


class TLSBackend(Backend):
    """The scriptable backend behind Python's OpenSSL server socket; it
    records the client certificate each connection presented, and whether
    its handshake resumed a session (reused)."""

    def __init__(self, handler, cert, key, client_ca=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
        self.peer_certs = []
        self.reused = []
        self.tls_ctx = ctx
        super().__init__(handler)

    def _serve_new(self, raw):
        try:
            s = self.tls_ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        self.peer_certs.append(s.getpeercert())
        self.reused.append(s.session_reused)
        super()._serve_new(s)


class RecordSock:
    """A server-side TLS connection over a raw socket through Python's
    ssl.SSLObject (memory BIOs), so that its handler places the records
    itself: seal(data) is the records of data (one per 16 KiB) as bytes,
    raw(bytes) sends bytes as they are (several records in one send, a
    part of one, ...); sendall, recv and close as a socket's (close: no
    close_notify)."""

    def __init__(self, raw, ctx):
        self.sock = raw
        self.inb, self.outb = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inb, self.outb, server_side=True)
        self._io(self.obj.do_handshake)

    def _io(self, op):
        while True:
            try:
                r = op()
                self.raw(self.outb.read())
                return r
            except ssl.SSLWantReadError:
                self.raw(self.outb.read())
                data = self.sock.recv(65536)
                if not data:
                    self.inb.write_eof()
                else:
                    self.inb.write(data)

    def seal(self, data):
        self.obj.write(data)
        return self.outb.read()

    def raw(self, data):
        if data:
            self.sock.sendall(data)

    def sendall(self, data):
        self.raw(self.seal(data))

    def recv(self, n):
        try:
            return self._io(lambda: self.obj.read(n))
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            return b""

    def setsockopt(self, *a):
        self.sock.setsockopt(*a)

    def fileno(self):
        return self.sock.fileno()

    def close(self):
        self.sock.close()


class RecordBackend(TLSBackend):
    """TLSBackend whose connections are RecordSocks: a handler's c.sock
    places the TLS records on the wire (c.sock.seal, c.sock.raw)."""

    def _serve_new(self, raw):
        try:
            s = RecordSock(raw, self.tls_ctx)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        Backend._serve_new(self, s)


def sse_handler(chunks, gap=0.0, head=SSE_HEAD):
    """A handler that streams the given chunks (chunked framing), gap apart."""
    def handle(req, c):
        c.send(head)
        for i, ch in enumerate(chunks):
            if gap and i:
                time.sleep(gap)
            c.chunk(ch)
        c.end_chunks()
        return "keep"
    return handle


def answer(body=b"ok", ctype=None, status=b"200 OK", headers=()):
    """A handler that answers every request with body (Content-Length), and
    headers (b"Name: value" each)."""
    head = b"HTTP/1.1 " + status + b"\r\n" + \
        (b"Content-Type: " + ctype + b"\r\n" if ctype else b"") + \
        b"".join(h + b"\r\n" for h in headers)
    data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    def handle(req, c):
        c.send(data)
        return "keep"
    return handle


# one short completion: a token and [DONE]
STREAM_HI = sse_handler([b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
                         b"data: [DONE]\n\n"])


# ------------------------------------------------------------ nginx

class Nginx:
    """nginx 1.22 in front of the upstream port, streaming (proxy_buffering
    off, HTTP/1.1 upstream), in the foreground with a directory of its own
    (n.dir, its access.log there). location: more directives for the
    location; tls: listen with the test CA's server certificate; keepalive:
    an upstream block keeping that many idle connections."""

    def __init__(self, upstream_port, location="", tls=False, keepalive=0, http="",
                 path="/", proxy_pass=None):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tt-nginx-")
        d = self.dir
        ssl_conf = ""
        if tls:
            p = pki()
            ssl_conf = f"ssl_certificate {p['server.crt']}; ssl_certificate_key {p['server.key']};"
        up = f"http://127.0.0.1:{upstream_port}"
        upstream = ""
        if keepalive:
            upstream = f"upstream up {{ server 127.0.0.1:{upstream_port}; keepalive {keepalive}; }}"
            up = "http://up"
            location = 'proxy_set_header Connection "";' + location
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(f"""worker_processes 1; pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
    uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
    {http}
    {upstream}
    server {{
        listen 127.0.0.1:{self.port}{' ssl' if tls else ''};
        {ssl_conf}
        location {path} {{
            proxy_pass {proxy_pass or up}; proxy_http_version 1.1;
            proxy_buffering off;
            {location}
        }}
    }}
}}
""")
        args = ["nginx", "-p", d + "/", "-c", os.path.join(d, "nginx.conf"), "-e", "stderr",
                "-g", "daemon off;"]
        if os.geteuid() == 0:
            args[-1] += " user root;"
        self.proc = Proc(args)
        wait_port(self.port, proc=self.proc.p)

    def access_log(self):
        with open(os.path.join(self.dir, "access.log")) as f:
            return f.read()

    def stop(self):
        return self.proc.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.proc.__exit__(*exc)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------ Prometheus

class Prometheus:
    """A Prometheus scraping the admin ports of targets each second (native
    histograms on with native=True), its data in a directory of its own."""

    def __init__(self, *targets, native=False):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tt-prom-")
        conf = os.path.join(self.dir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n  - job_name: tokentap\n    static_configs:\n"
                    "      - targets: [" +
                    ", ".join(f"'127.0.0.1:{getattr(t, 'admin', t)}'" for t in targets) + "]\n")
        args = ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={self.dir}/data",
                f"--web.listen-address=127.0.0.1:{self.port}"]
        if native:
            args.append("--enable-feature=native-histograms")
        self.proc = Proc(args)
        wait_port(self.port, 20, proc=self.proc.p)

    def query(self, expr):
        """The result vector of an instant query; [] while Prometheus is not
        ready (it answers 503 then)."""
        r = get(self.port, "/api/v1/query?query=" + urllib.parse.quote(expr), timeout=30)
        if r.status == 503:
            return []
        assert r.status == 200, (expr, r.status, r.body[:2000])
        return r.json()["data"]["result"]

    def get(self, path):
        """An API document of Prometheus (JSON)."""
        return get(self.port, path, json=True)

    def values(self, expr, label=None):
        """{the label's value (or None): float} of a query's result, NaN left out."""
        return {x["metric"].get(label): float(x["value"][1]) for x in self.query(expr)
                if x["value"][1] != "NaN"}

    def wait_count(self, expr, want, timeout=30):
        """Until the sum of expr's latest samples (a count) reaches want."""
        until(lambda: sum(self.values(expr).values()) >= want, timeout,
              f"Prometheus seeing {want} for {expr}", every=0.5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.proc.__exit__(*exc)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


ALERTMANAGER = "/usr/bin/prometheus-alertmanager"


class Alertmanager:
    """An Alertmanager that routes every alert to nobody (a.url for
    tokentap's notify, a.alerts() the active ones)."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="tt-am-")
        with open(os.path.join(self.dir, "am.yml"), "w") as f:
            f.write('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
        self.proc = Proc([ALERTMANAGER, f"--config.file={self.dir}/am.yml",
                          f"--storage.path={self.dir}/data",
                          f"--web.listen-address=127.0.0.1:{self.port}",
                          "--cluster.listen-address="])
        wait_port(self.port, 15, proc=self.proc.p)

    def alerts(self):
        return get(self.port, "/api/v2/alerts", json=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            assert self.proc.p.poll() is None, self.proc.stderr()[-2000:]
        finally:
            self.proc.__exit__(*exc)
            shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------ webhooks

class Hook:
    """A webhook receiver: each POST's (arrival time, path, headers, body)
    in h.got; delay: seconds before it answers; tls: a server context."""

    def __init__(self, status=200, delay=0.0, tls=None):
        self.got = []
        self.cond = threading.Condition()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(delay)
                with hook.cond:
                    hook.got.append((time.monotonic(), self.path, dict(self.headers),
                                     json.loads(body)))
                    hook.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.srv.socket = tls.wrap_socket(self.srv.socket, server_side=True)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def wait(self, pred, timeout):
        """The first delivery (time, path, headers, body) whose body matches."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for g in self.got:
                    if pred(g[3]):
                        return g
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching webhook within {timeout}s: {self.got}")
                self.cond.wait(left)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


# ------------------------------------------------------------ certificates

_PKI = {}


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def pki():
    """A test CA, a server certificate for localhost / 127.0.0.1, a client
    certificate, and a second CA nobody trusts: made once per run."""
    if _PKI:
        return _PKI
    d = tempfile.mkdtemp(prefix="tt-pki-")
    for ca in ("ca", "evil"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-subj",
                 f"/CN=tokentap test {ca}", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name, ca, ext in (("server", "ca", True), ("client", "ca", False),
                          ("evilserver", "evil", True)):
        cn = "tokentap-client" if name == "client" else "localhost"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.crt"]
        if ext:
            args += ["-extfile", "san.ext"]
        _openssl(*args, cwd=d)
    _PKI.update({k: os.path.join(d, k) for k in os.listdir(d)})
    _PKI["dir"] = d
    return _PKI


def self_signed(cn, san):
    """A self-signed certificate (its file, for SSL_CERT_FILE) and a server
    context that presents it."""
    d = tempfile.mkdtemp(prefix="tt-tls-")
    cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
             "-days", "2", "-subj", f"/CN={cn}", "-addext", f"subjectAltName={san}", cwd=d)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return cert, ctx


# ------------------------------------------------------------ WebSocket

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def accept_key(key):
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def frame(payload, mask=True, opcode=1):
    """One unfragmented frame (RFC 6455 §5.2), masked as a client sends."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head += bytes([m | n])
    else:
        head += bytes([m | 126]) + n.to_bytes(2, "big")
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_frame(sock):
    """(opcode, payload) of the next frame, unmasking a client's."""
    def exact(n):
        out = b""
        while len(out) < n:
            b = sock.recv(n - len(out))
            if not b:
                raise EOFError
            out += b
        return out
    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(exact(2), "big")
    key = exact(4) if b1 & 0x80 else None
    data = exact(n)
    if key:
        data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
    return b0 & 0x0F, data


def echo_server(seen):
    """A handler answering the handshake with 101 (and a "hello" frame),
    then echoing text frames in upper case until the client's close frame,
    which it answers; each handshake request goes to seen."""
    def handle(req, c):
        seen.append(req)
        key = req.header("Sec-WebSocket-Key").encode()
        c.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept_key(key) +
               b"\r\n\r\n" + frame(b"hello", mask=False))
        while True:
            op, data = read_frame(c.sock)
            if op == 8:
                c.send(frame(data, mask=False, opcode=8))
                return "close"
            c.send(frame(data.upper(), mask=False))
    return handle


def handshake(port, key=b"dGhlIHNhbXBsZSBub25jZQ==", extra=b""):
    """A client's WebSocket handshake on /chat: (the socket, the response head)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
              b"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\n" + extra + b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head


# ------------------------------------------------------------ curl, node

def curl(url, *args, data='{"model":"m","stream":true}', headers=(), timeout=60,
         background=False):
    """curl -sS -N posting data (None: a GET) to url, with headers ("Name:
    value") and more args: the CompletedProcess (bytes), or the running
    Popen with background=True."""
    cmd = ["curl", "-sSN", "--max-time", str(timeout), *args]
    if data is not None:
        cmd += ["-d", data]
    for h in headers:
        cmd += ["-H", h]
    cmd.append(url)
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return subprocess.run(cmd, capture_output=True, timeout=timeout + 10)


def node(script, *args, timeout=60, env=None):
    """A node script (its text) with the npm packages of package.json on
    NODE_PATH: the CompletedProcess, which must exit 0."""
    mods = node_modules()
    path = os.path.join(tempfile.mkdtemp(prefix="tt-node-"), "script.js")
    with open(path, "w") as f:
        f.write(script)
    r = subprocess.run(["node", path, *args], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, NODE_PATH=mods, **(env or {})))
    assert r.returncode == 0, r.stderr[-3000:]
    return r
