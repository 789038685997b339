# SPDX-License-Identifier: Apache-2.0
"""The error log under a flood (#38): a line that a client or a peer can
cause, one per request or connection, is written at most a burst per
interval of its kind; the others are counted
(tokentap_log_lines_suppressed_total{kind}, /stats' log_lines_suppressed)
and said by the kind's next line, by the once-a-second flush when the kind
fell silent, or at exit. Every request still gets its answer and its
access-log line."""
import os
import re
import time

from harness import ROOT, Tokentap, conf, free_port, metric, parallel, parse_response, \
    promtool_check, raw_request
from peers import Backend, answer, pki

# the kinds' burst and interval (src/proxy/wire/gauge.c, the README)
BURST, INTERVAL = 10, 10.0
N = 5000
# both Content-Length and Transfer-Encoding: a 400, and a line of the kind
SMUGGLED = (b"POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
MALFORMED = re.compile(r"^(?:<\d>)?client \S+: malformed request: ")
# what the kind's later lines and the flush say was suppressed
SAID = re.compile(r"\((\d+) more such line\(s\) suppressed before this\)$|"
                  r"^(?:<\d>)?(?:warning: )?(\d+) malformed_request line\(s\) suppressed")

TIME_LIMITS = {"test_a_flood_of_malformed_requests_writes_a_burst_an_interval": 300}


def test_a_flood_of_malformed_requests_writes_a_burst_an_interval():
    with Backend(answer()) as b, Tokentap(conf(b, prefix="/v1/")) as t:
        def smuggle(_):
            return parse_response(raw_request(t.port, SMUGGLED, timeout=30)).status

        start = time.monotonic()
        statuses = parallel(smuggle, range(N), threads=4)
        assert statuses == [400] * N, {s: statuses.count(s) for s in set(statuses)}
        # each line is written (or counted) before its 400 is sent
        text = t.get("/metrics").text
        elapsed = time.monotonic() - start
        promtool_check(text)
        lines = t.stderr().splitlines()
        written = [x for x in lines if MALFORMED.match(x)]
        # a burst in each interval the flood touched, and no more: the
        # bound is the test's duration's, whatever the count of requests
        windows = int(elapsed // INTERVAL) + 2
        assert len(written) <= BURST * windows, (len(written), elapsed)
        # the lines the kind's count adds: one an interval at most
        assert len(lines) <= (BURST + 1) * windows + 5, (len(lines), lines[:40])
        suppressed = metric(text, "tokentap_log_lines_suppressed_total",
                            kind="malformed_request")
        assert len(written) + suppressed == N, (len(written), suppressed)
        s = t.stats()
        assert s["log_lines_suppressed"]["malformed_request"] == suppressed, \
            s["log_lines_suppressed"]
        # every request in the access log, rejected with its 400
        logged = t.wait_logged(N, timeout=60)
        assert len(logged) == N
        assert all(x["status"] == 400 and x["outcome"] == "rejected" for x in logged)
        t.stop()
        # what the lines said was suppressed, the exit's flush included,
        # is what the metric counted
        said = sum(int(m.group(1) or m.group(2)) for x in t.stderr().splitlines()
                   if (m := SAID.search(x)))
        assert said == suppressed, (said, suppressed, t.stderr()[-2000:])


def test_failed_tls_handshakes_are_a_kind_of_their_own():
    """A client that speaks plain HTTP to a TLS listener: one line a
    failed handshake (there was none), within the kind's burst."""
    p = pki()
    listen = (f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: {p['server.crt']}, "
              f"key: {p['server.key']}}}\n")
    n = 3 * BURST
    with Backend(answer()) as b, Tokentap(listen + conf(b)) as t:
        start = time.monotonic()
        for _ in range(n):
            try:
                assert not raw_request(t.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                                       timeout=10).startswith(b"HTTP")
            except ConnectionResetError:
                pass
        # the line is written (or counted) before the connection closes
        text = t.get("/metrics").text
        elapsed = time.monotonic() - start
        written = [x for x in t.stderr().splitlines()
                   if re.match(r"(?:<\d>)?client 127\.0\.0\.1: TLS handshake failed: ", x)]
        assert 0 < len(written) <= BURST * (int(elapsed // INTERVAL) + 2), written
        suppressed = metric(text, "tokentap_log_lines_suppressed_total", kind="client_tls")
        assert len(written) + suppressed == n, (len(written), suppressed, t.stderr()[-2000:])
        assert metric(text, "tokentap_log_lines_suppressed_total",
                      kind="malformed_request") == 0


def test_a_backend_that_refuses_is_a_kind_apart():
    """A replica that refuses every connection: a 502 each, its lines
    within the upstream_error kind's burst, the client kinds untouched."""
    n = 3 * BURST
    with Tokentap(conf(free_port(), prefix="/v1/")) as t:
        start = time.monotonic()
        for _ in range(n):
            r = parse_response(raw_request(t.port, b"GET /v1/x HTTP/1.1\r\nHost: x\r\n\r\n"))
            assert r.status == 502, r
        text = t.get("/metrics").text
        elapsed = time.monotonic() - start
        written = [x for x in t.stderr().splitlines()
                   if re.match(r"(?:<\d>)?(?:warning: )?request \w+: upstream \S+: "
                               r"cannot connect: Connection refused", x)]
        assert 0 < len(written) <= BURST * (int(elapsed // INTERVAL) + 2), written
        suppressed = metric(text, "tokentap_log_lines_suppressed_total", kind="upstream_error")
        assert len(written) + suppressed == n, (len(written), suppressed, t.stderr()[-2000:])
        assert metric(text, "tokentap_log_lines_suppressed_total",
                      kind="malformed_request") == 0


# The call sites: a line of the workers' plane that names a request or a
# client is one per request or per connection, so it goes through a kind.
PER_REQUEST = re.compile(r'\blog_(?:info|warn|error|msg)\(\s*"(?:request|client) %s')


def test_no_per_request_line_goes_around_the_kinds():
    conn = os.path.join(ROOT, "src", "proxy", "conn")
    found = []
    for f in sorted(os.listdir(conn)):
        if f.endswith(".c"):
            with open(os.path.join(conn, f)) as fh:
                src = fh.read()
            found += [f"{f}: {m.group(0)}" for m in PER_REQUEST.finditer(src)]
    assert found == [], "\n".join(found)
