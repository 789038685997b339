"""timeouts.idle is the longest silence, however many times it re-arms: a
stream (or a WebSocket tunnel) whose bytes never stop for that long is
never cut. Each case runs through tokentap and, on the same backend at the
same time, through nginx 1.22 with proxy_read_timeout set to the same
length: the reference completes them all.

The idle timer is lazy (it re-arms for the rest of its length when it
fires early); re-armed with the rest as its new length, it shrank each
time and cut such streams after a few rounds."""
import os
import shutil
import socket
import tempfile
import threading
import time

from backend import SSE_HEAD, Backend, sse_handler
from harness import Proc, Tokentap, free_port, wait_port
from test_websocket import echo_server, frame, handshake, read_frame

TOKEN = b'data: {"choices":[{"delta":{"content":"t%d"}}]}\n\n'
DONE = b"data: [DONE]\n\n"


def nginx(upstream_port, location):
    """nginx 1.22 in front of upstream_port, streaming (proxy_buffering
    off), with the directives of `location` added. Returns (Proc, port,
    dir)."""
    d = tempfile.mkdtemp(prefix="tt-nginx-")
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
    uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream_port}; proxy_http_version 1.1;
            proxy_buffering off;
            {location}
        }}
    }}
}}
""")
    p = Proc(["nginx", "-p", d + "/", "-c", os.path.join(d, "nginx.conf"), "-e", "stderr"])
    wait_port(port, proc=p.p)
    return p, port, d


def stream(port, out, key):
    """One streamed completion through port; out[key] = (status line, token
    events received, [DONE] seen, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
              b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    buf = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except OSError:
        pass
    s.close()
    out[key] = (buf.split(b"\r\n", 1)[0], buf.count(b'"content":"t'), DONE in buf,
                time.monotonic() - t0)


def both(tokentap_port, nginx_port):
    """The same request through tokentap and nginx at once."""
    out = {}
    threads = [threading.Thread(target=stream, args=(p, out, k))
               for k, p in (("tokentap", tokentap_port), ("nginx", nginx_port))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    return out


def conf(port, idle):
    return f"""timeouts: {{idle: {idle}}}
routes:
  - name: llm
    upstream: http://127.0.0.1:{port}
"""


def test_tokens_closer_than_idle_never_time_out():
    """idle: 1s, a token every 700 ms, 30 of them (21 s): all arrive, the
    stream is ok with 30 tokens (the shrinking timer cut it after 4)."""
    with Backend(sse_handler([TOKEN % i for i in range(30)] + [DONE], gap=0.7)) as b, \
            Tokentap(conf(b.port, "1s")) as t:
        ng, nport, d = nginx(b.port, "proxy_read_timeout 1s;")
        try:
            out = both(t.port, nport)
        finally:
            ng.stop()
            shutil.rmtree(d, ignore_errors=True)
        assert out["nginx"][:3] == (b"HTTP/1.1 200 OK", 30, True), out
        assert out["tokentap"][:3] == (b"HTTP/1.1 200 OK", 30, True), out
        e = t.access(1)[0]
        assert (e["outcome"], e["output_tokens"], e["status"]) == ("ok", 30, 200), e
        assert e["duration_ms"] > 20000, e
        assert "idle" not in t.stderr(), t.stderr()


def heartbeats(every, seconds):
    """One token, then an SSE comment every `every` s for `seconds`, then a
    token and [DONE]: a model that thinks long behind heartbeats."""
    def handle(req, c):
        c.send(SSE_HEAD)
        c.chunk(TOKEN % 0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(every)
            c.chunk(b": keep-alive\n\n")
        c.chunk(TOKEN % 1)
        c.chunk(DONE)
        c.end_chunks()
        return "keep"
    return handle


def test_heartbeats_closer_than_idle_keep_a_stream_open():
    """The issue's stream with a heartbeat every 15 s at the defaults (idle
    60s), cut at 285 s, shortened: idle 2s, a heartbeat every 1.5 s for
    21 s. It completes, as through nginx (proxy_read_timeout 2s)."""
    with Backend(heartbeats(1.5, 21)) as b, Tokentap(conf(b.port, "2s")) as t:
        ng, nport, d = nginx(b.port, "proxy_read_timeout 2s;")
        try:
            out = both(t.port, nport)
        finally:
            ng.stop()
            shutil.rmtree(d, ignore_errors=True)
        assert out["nginx"][:3] == (b"HTTP/1.1 200 OK", 2, True), out
        assert out["tokentap"][:3] == (b"HTTP/1.1 200 OK", 2, True), out
        e = t.access(1)[0]
        assert (e["outcome"], e["output_tokens"]) == ("ok", 2), e
        assert e["duration_ms"] > 21000 and e["gap_max_ms"] > 21000, e


def ping(port, seconds, every, out, key, path=b"/chat"):
    """A WebSocket through port, a frame every `every` s for `seconds`, each
    echoed; out[key] = (echoes received, frames sent, clean close)."""
    s, head = handshake(port)
    got = sent = 0
    closed = False
    try:
        assert head.startswith(b"HTTP/1.1 101"), head
        s.settimeout(5)
        assert read_frame(s) == (1, b"hello")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(every)
            s.sendall(frame(b"ping %d" % sent))
            sent += 1
            if read_frame(s) == (1, b"PING %d" % (sent - 1)):
                got += 1
        s.sendall(frame(b"\x03\xe8", opcode=8))
        closed = read_frame(s) == (8, b"\x03\xe8")
    except (OSError, EOFError, AssertionError):
        pass
    s.close()
    out[key] = (got, sent, closed)


def test_websocket_pinging_closer_than_idle_stays_open():
    """idle: 1s, a frame each way every 700 ms for 10 s: the tunnel stays
    open and closes cleanly, through tokentap as through nginx."""
    with Backend(echo_server([])) as b, Tokentap(conf(b.port, "1s")) as t:
        ng, nport, d = nginx(b.port, 'proxy_read_timeout 1s; proxy_send_timeout 1s; '
                             'proxy_set_header Upgrade $http_upgrade; '
                             'proxy_set_header Connection "upgrade";')
        out = {}
        try:
            threads = [threading.Thread(target=ping, args=(p, 10, 0.7, out, k))
                       for k, p in (("tokentap", t.port), ("nginx", nport))]
            for th in threads:
                th.start()
            for th in threads:
                th.join(30)
        finally:
            ng.stop()
            shutil.rmtree(d, ignore_errors=True)
        assert out["nginx"][2] and out["nginx"][0] == out["nginx"][1] >= 13, out
        assert out["tokentap"][2] and out["tokentap"][0] == out["tokentap"][1] >= 13, out
        e = t.access(1)[0]
        assert (e["status"], e["outcome"]) == (101, "ok"), e
        assert e["duration_ms"] > 9500, e
