# SPDX-License-Identifier: Apache-2.0
"""Expect: 100-continue on a route that streams the request body
(request_buffering: false): tokentap answers 100 Continue itself as it
starts reading the body, as nginx 1.22 does, and the backend gets no
Expect; on a held body (the default) it always did."""
import json
import os
import socket
import subprocess

from harness import Mock, Tokentap, read_response
from peers import STREAM_HI, Backend, Nginx


def routes(port, extra="", mock_port=None):
    """/s/ streamed (request_buffering false) to port, the rest held; with
    mock_port, /m/ streamed to tokentap-mock (which answers 100 itself) on
    one worker (one upstream pool)."""
    mock = "" if mock_port is None else f"""  - name: mock
    match: {{path_prefix: /m/}}
    strip_prefix: true
    request_buffering: false
    upstream: http://127.0.0.1:{mock_port}
"""
    return f"""{"workers: 1" + chr(10) if mock else ""}routes:
  - name: streamed
    match: {{path_prefix: /s/}}
    strip_prefix: true
    request_buffering: false
    upstream: http://127.0.0.1:{port}
{mock}  - name: llm
    upstream: http://127.0.0.1:{port}
{extra}"""


def expect_continue(port, path, body):
    """A raw client: the head with Expect: 100-continue, then the body once
    a 100 came (or after 3 s, as clients give up waiting). Returns (the
    interim response seen first, the final status line)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
    s.settimeout(3)
    try:
        first = s.recv(25)
    except socket.timeout:
        first = b""
    s.sendall(body)
    r = read_response(s)
    s.close()
    return first, r.status_line.encode()


def test_expect_continue_on_a_streaming_route_is_answered_at_once():
    """request_buffering false: tokentap answers 100 Continue itself and the
    backend gets no Expect, on a new upstream connection and a pooled one,
    to a raw client and to curl (which sends Expect above 1 MiB here).
    Before, the client waited for a 100 that never came: from a backend
    that sends none, or over a pooled connection (where the head waits for
    the first body bytes) from one that does (tokentap-mock): curl 1 s,
    raw clients 3 s. nginx answers 100 itself too."""
    body = json.dumps({"model": "m", "stream": True, "pad": "x" * 2000}).encode()
    with Backend(STREAM_HI) as b, Mock() as m, Tokentap(routes(b.port, mock_port=m.port)) as t:
        for path in (b"/s/v1/chat/completions", b"/m/v1/chat/completions"):
            for _ in range(2):                       # the second on a pooled connection
                assert expect_continue(t.port, path, body) == \
                    (b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 200 OK"), path
        big = os.path.join(t.dir, "big.json")
        with open(big, "wb") as f:
            f.write(json.dumps({"model": "m", "pad": "x" * (1100 << 10)}).encode())
        for path in ("/s/v1/chat/completions", "/m/v1/chat/completions") * 2:
            # curl gives up waiting after 1 s by default: 10 here, so a busy
            # host cannot pass for a 100 that never came
            r = subprocess.run(["curl", "-sS", "-v", "-o", "/dev/null", "--expect100-timeout",
                                "10", "--data-binary", "@" + big, t.url(path)],
                               capture_output=True, timeout=30)
            assert r.returncode == 0, r.stderr[-2000:]
            assert b"> Expect: 100-continue" in r.stderr, r.stderr[-2000:]
            assert b"< HTTP/1.1 100 Continue" in r.stderr, r.stderr[-2000:]
            assert b"Done waiting for 100-continue" not in r.stderr, r.stderr[-2000:]
        log = t.wait_logged(8)
        assert [(e["status"], e["outcome"]) for e in log] == [(200, "ok")] * 8, log
        # the backend got every body, no Expect, all on one connection
        seen = [(r.header("expect"), len(r.body), r.conn_id) for r in b.requests]
        assert seen == [(None, len(body), 0)] * 2 + [(None, os.path.getsize(big), 0)] * 2, seen

    with Backend(STREAM_HI) as b, Nginx(b.port, "proxy_request_buffering off;") as ng:
        assert expect_continue(ng.port, b"/v1/chat/completions", body) == \
            (b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 200 OK")
        assert b.requests[0].header("expect") is None
