# SPDX-License-Identifier: Apache-2.0
"""Runs one vector of vectors.py against a proxy in front of the recording
backend, and judges it. A vector's proxy is a fresh tokentap (or nginx, for
the differential report), so nothing one vector leaves in a connection pool
reaches the next."""
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

import peer                     # noqa: E402
import vectors                  # noqa: E402
from harness import Tokentap, conf    # noqa: E402

NEXT = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
RID = re.compile(rb"X-Request-Id: [0-9a-f]{32}\r\n")


def tokentap_conf(port, v):
    route = dict(path_prefix="/", strip_prefix="false", base="", request_buffering="true")
    route.update(getattr(v, "route", None) or {})
    return conf(f"http://127.0.0.1:{port}{route['base']}",
                f"    strip_prefix: {route['strip_prefix']}\n"
                f"    request_buffering: {route['request_buffering']}\n"
                "    preserve_host: true\n", "all", route["path_prefix"],
                f"workers: 1\n{getattr(v, 'conf', None) or ''}"
                "timeouts: {client_header: 2s, idle: 2s, first_byte: 2s}\n")


class TokentapProxy:
    name = "tokentap"

    def __init__(self, backend, v):
        self.tt = Tokentap(tokentap_conf(backend.port, v))
        self.port = self.tt.port

    def outcomes(self, n):
        return [e["outcome"] for e in self.tt.access(n, timeout=2.0)]

    def close(self):
        self.tt.__exit__(None, None, None)


def expected_upstream(v, backend):
    return v.upstream.replace(b"{uphost}", b"127.0.0.1:%d" % backend.port)


def settle(backend, want, timeout=1.0):
    """The backend's bytes, once they stop changing (or reach want)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        got = b"".join(backend.raw())
        if got == want or (got == last and time.monotonic() > deadline - timeout + 0.1):
            return got
        last = got
        time.sleep(0.02)
    return b"".join(backend.raw())


def run_request(v, backend, proxy_cls=TokentapProxy):
    """Returns (ok, detail, summary): summary is what the report shows."""
    backend.reset()
    proxy = proxy_cls(backend, v)
    try:
        head_req = v.send.startswith(b"HEAD") if isinstance(v.send, bytes) else False
        wait_close = bool(v.closed) and proxy_cls is TokentapProxy
        got, closed, extra = peer.exchange(proxy.port, v.send, len(v.status), head_req,
                                           wait_close=wait_close)
        statuses = [s for s, _, _ in got if s >= 200]
        want_up = expected_upstream(v, backend)
        raw = settle(backend, want_up if not v.partial else None)
        seen = RID.sub(b"X-Request-Id: *\r\n", raw)
        parsed, errors = backend.parsed(), backend.errors()
        summary = dict(status=statuses, parsed=parsed, errors=errors, closed=closed)
        problems = []
        if statuses != v.status:
            problems.append(f"statuses {statuses}, want {v.status}")
        if v.closed is not None and proxy_cls is TokentapProxy and closed != v.closed:
            problems.append(f"connection {'closed' if closed else 'kept open'}")
        if errors:
            problems.append(f"the backend could not parse what it got: {errors}")
        if v.partial:
            if parsed:
                problems.append(f"the backend saw complete requests {parsed}")
        elif proxy_cls is TokentapProxy and seen != want_up:
            problems.append(f"backend saw {seen!r}\n     want       {want_up!r}")
        return not problems, "; ".join(problems), summary
    finally:
        proxy.close()


def run_response(v, backend, proxy_cls=TokentapProxy):
    def respond(c, i):
        return v.response if (c.cid, i) == (0, 0) else NEXT
    backend.reset(respond)
    proxy = proxy_cls(backend, v)
    try:
        req = v.method + b" /r HTTP/1.1\r\nHost: h\r\n\r\n"
        got, closed, extra = peer.exchange(proxy.port, req, 1, v.method == b"HEAD")
        problems = []
        status = got[-1][0] if got else None
        client = b"".join(h + b"\r\n\r\n" + b for _, h, b in got) + extra
        if v.status is not None:
            if status != v.status:
                problems.append(f"status {status}, want {v.status}")
        elif client != v.client:
            problems.append(f"client got {client!r}\n     want       {v.client!r}")
        if v.gap:
            time.sleep(v.gap)
        got2, _, _ = peer.exchange(proxy.port, b"GET /next HTTP/1.1\r\nHost: h\r\n\r\n", 1)
        nxt = got2[0][2] if got2 else None
        if nxt != b"next":
            problems.append(f"the next client got {got2!r}")
        conns = backend.raw()
        reused = len(conns) > 0 and conns[0].count(b"GET /next") > 0
        if reused and not v.reuse:
            problems.append("the next request went on the same upstream connection")
        outcomes = []
        if proxy_cls is TokentapProxy:
            outcomes = proxy.outcomes(2)
            if not outcomes or outcomes[0] != v.outcome:
                problems.append(f"outcome {outcomes[:1]}, want {v.outcome}")
        summary = dict(status=status, client=client, next=nxt, reused=reused,
                       outcome=outcomes[:1])
        return not problems, "; ".join(problems), summary
    finally:
        proxy.close()
