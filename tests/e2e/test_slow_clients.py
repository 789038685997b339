# SPDX-License-Identifier: Apache-2.0
"""A slow request is no slow model (issue #38): clients that trickle their
request to tokentap are felt in the TTFT the access log and /stats give
(ttft_ms, from the request's first byte), but what judges the route, the
TTFTHigh alerts and the SLOs, judges the server side's TTFT
(ttft_server_ms, from the request's last byte): no client's pace pages or
burns the error budget. A backend that is slow itself still does both."""
import json
import socket
import time

from harness import CHAT, Mock, Tokentap, metric, parallel, until

DUE = 15             # seconds to wait for what is due after an evaluation or two
PAUSE = 0.3          # between two pieces of a trickled request (client_body: 3s)
PIECES = 10          # pauses per request: a client phase of 3 s

# ttft_critical (1500 ms) is under what every slow client takes to send its
# request by causality (10 pauses of 300 ms after its first piece: 2.4 s
# at least after the arrival of its third), and 30 times what the
# mock takes to its first token; the slow backend's first token comes 2 s
# after the request, over both thresholds and the SLO's target.
CONFIG = """stats: {{windows: [1m]}}
timeouts: {{client_body: 3s, client_header: 10s}}
alerts:
  evaluate_every: 200ms
  window: 1m
  min_samples: 3
  thresholds: {{ttft_warning: 800ms, ttft_critical: 1500ms}}
  burn_min_requests: 3
  burn_rates:
    - {{severity: critical, long: 1m, short: 30s, rate: 5}}
    - {{severity: warning, long: 2m, short: 1m, rate: 5}}
  notify:
    - {{type: log}}
slos:
  - {{name: uploads, match: {{route: clients}}, ttft: 800ms, objective: 0.9}}
  - {{name: model, match: {{route: model}}, ttft: 800ms, objective: 0.9}}
routes:
  - name: model
    match: {{header: {{X-Lane: model}}}}
    upstream: http://127.0.0.1:{port}
  - name: clients
    upstream: http://127.0.0.1:{port}
"""


def head(body_len, extra=b""):
    return (b"POST " + CHAT.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nX-Mock-TTFT: 50ms\r\nX-Mock-TPOT: 5ms\r\n"
            b"X-Mock-Tokens: 3\r\n" + extra +
            b"Content-Length: " + str(body_len).encode() + b"\r\n\r\n")


def body(size):
    """A JSON request body of exactly size bytes."""
    b = b'{"model":"m","stream":true,"pad":"'
    return b + b"x" * (size - len(b) - 2) + b'"}'


def split(data, k):
    """data in k pieces."""
    n = -(-len(data) // k)
    return [data[i:i + n] for i in range(0, len(data), n)]


def send_slowly(port, pieces):
    """Sends pieces with PAUSE between them, then reads the response to its
    end: the response, and the seconds from the first byte sent to the last
    (what the client took to send its request, at least)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    t0 = time.monotonic()
    for i, p in enumerate(pieces):
        if i:
            time.sleep(PAUSE)       # the client's pace, not a wait for tokentap
        s.sendall(p)
    sent = time.monotonic() - t0
    buf = b""
    while d := s.recv(65536):
        buf += d
    s.close()
    return buf, sent


def slow_body(port):
    """The head, then a 2 KiB body in ten pieces, a pause under client_body
    before each."""
    b = body(2048)
    return send_slowly(port, [head(len(b))] + split(b, PIECES))


def slow_head(port):
    """The head's first bytes one by one, then the rest of it and the body."""
    b = body(64)
    whole = head(len(b)) + b
    return send_slowly(port, [whole[i:i + 1] for i in range(PIECES)] + [whole[PIECES:]])


def gives_up(port):
    """Sends the head and 4 of a 2 KiB body's ten pieces, 300 ms apart, and
    closes: a user who gave up on their own upload (1.2 s, past the SLO's
    800 ms)."""
    b = body(2048)
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    for i, p in enumerate([head(len(b))] + split(b, PIECES)[:4]):
        if i:
            time.sleep(PAUSE)       # the client's pace
        s.sendall(p)
    s.close()


def fast_slow_model(port):
    """A request sent at once to a backend that takes 2 s to its first token."""
    b = body(64)
    return send_slowly(port, [head(len(b), b"X-Lane: model\r\n").replace(
        b"X-Mock-TTFT: 50ms", b"X-Mock-TTFT: 2s") + b])


def rules(t, **match):
    return [r for r in t.get("/alerts", json=True)["rules"]
            if all(r.get(k) == v for k, v in match.items())]


def slo(t, name):
    return next(s for s in t.get("/slo", json=True)["slos"] if s["name"] == name)


def test_slow_clients_page_nobody_and_a_slow_model_still_does():
    """12 clients trickle their requests (6 a 2 KiB body in ten pieces, 6
    their head byte by byte) at 300 ms a piece to a backend that answers in
    50 ms: each ttft_ms is about 3 s, each ttft_server_ms small; 2 more
    give up 1.2 s into their upload. No TTFTHigh fires for their route,
    their SLO counts 12 good and burns nothing (the 2 are not counted).
    Then 4 fast requests to a backend 2 s to its first token: TTFTHigh
    warning and critical and the SLO's burn-rate pairs fire for that
    route, which shows the evaluations ran over the slow clients' window
    too. Before: the slow clients fired TTFTHigh warning and critical and
    both SLOBurnRate pairs, their budget 14 bad of 14."""
    with Mock() as m, Tokentap(CONFIG.format(port=m.port)) as t:
        got = parallel(lambda f: f(t.port), [slow_body] * 6 + [slow_head] * 6, threads=12)
        for buf, sent in got:
            assert buf.startswith(b"HTTP/1.1 200") and b"[DONE]" in buf, buf[-300:]
            assert sent >= PIECES * PAUSE
        parallel(lambda f: f(t.port), [gives_up] * 2, threads=2)
        log = t.wait_logged(14)
        gave_up = [e for e in log if e["outcome"] != "ok"]
        log = [e for e in log if e["outcome"] == "ok"]
        assert len(gave_up) == 2 and len(log) == 12, gave_up
        for e in gave_up:
            assert (e["route"], e["outcome"]) == ("clients", "client_abort"), e
            assert e["ttft_server_ms"] is None and e["duration_ms"] >= 3 * PAUSE * 1000, e
        for e in log:
            assert (e["route"], e["outcome"]) == ("clients", "ok"), e
            # the user waited the upload: t0 is the arrival of the first
            # piece, or of a later one merged with it in a read tokentap
            # made late (the newest segment's stamp): over 300 ms late
            # takes the second piece, 600 ms the third
            assert e["ttft_ms"] >= (PIECES - 2) * PAUSE * 1000, e
            assert e["phases"]["client_ms"] >= (PIECES - 2) * PAUSE * 1000, e
            # the server side's: from the last byte, the client's phase out
            assert 0 <= e["ttft_server_ms"] <= e["ttft_ms"] - e["phases"]["client_ms"] + 0.01, e
            assert e["ttft_server_ms"] < 800, e
            assert "ttft_warning" not in e["exceeded"], e

        parallel(lambda f: f(t.port), [fast_slow_model] * 4, threads=4)
        model = t.wait_logged(18)[14:]
        assert all(e["route"] == "model" and e["ttft_server_ms"] >= 2000 for e in model), model
        # the control fires: every evaluation from now on saw both routes
        until(lambda: all(r["state"] == "firing" for r in
                          rules(t, alertname="TTFTHigh", route="model")), DUE,
              "TTFTHigh warning and critical for the slow model")
        until(lambda: [r["state"] for r in rules(t, alertname="SLOBurnRate", slo="model")]
              == ["firing", "firing"], DUE, "both burn-rate pairs for the slow model")

        js = t.get("/alerts", json=True)
        for r in js["rules"]:
            if r.get("route") == "clients" or r.get("slo") == "uploads":
                assert r["state"] == "ok", r
        assert all(x.get("route") != "clients" and x.get("slo") != "uploads"
                   for x in js["transitions"]), js["transitions"]
        up = until(lambda: (s := slo(t, "uploads"))["budget"]["eligible"] == 12 and s, DUE,
                   "the slow clients counted")
        assert (up["budget"]["good"], up["budget"]["bad"]) == (12, 0), up
        assert metric(t, "tokentap_slo_requests_total", slo="uploads", result="bad") in (0, None)
        assert "TTFTHigh severity=warning route=clients" not in t.stderr()

        # /stats keeps the user-felt TTFT, and has the server side's beside it
        g = next(x for x in t.stats(by="route")["groups"] if x["route"] == "clients")
        assert g["ttft_ms"]["count"] == 12 and g["ttft_ms"]["p50"] >= 2300, json.dumps(g)
        assert g["ttft_server_ms"]["count"] == 12 and g["ttft_server_ms"]["p95"] < 800, g
        # /metrics likewise: the server side's histogram is what the
        # generated TTFTHigh rules read (le 0.8: the warning's bound)
        ttft = "tokentap_time_to_first_token_seconds"
        assert metric(t, ttft + "_bucket", route="clients", le="0.800000") == 0
        assert metric(t, ttft + "_count", route="clients") == 12
        server = "tokentap_time_to_first_token_server_seconds"
        assert metric(t, server + "_bucket", route="clients", le="0.800000") == 12
        assert metric(t, server + "_bucket", route="model", le="1.500000") == 0
