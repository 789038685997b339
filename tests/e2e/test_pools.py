# SPDX-License-Identifier: Apache-2.0
"""Replica pools end to end: tokentap in front of several tokentap-mock
replicas (each its own process and port: one slow, one refusing or killed,
the others healthy), driven by tokentap-load, curl and raw sockets. Judged
by the access log, /stats and /alerts, and by the mocks' own request logs
(what each replica served, and whether a client closed on it).
"""
import re
import signal
import threading
import time
from collections import Counter

from harness import CHAT, Mock, Tokentap, completion, conf, load, metric, until
from peers import Backend, Nginx, curl, pki

TOKEN = re.compile(rb'"content":"[^"]')     # a delta with text: a token
# The slow replica's 9 s are the clock's (60 requests, a third at 700 ms),
# the same under ASan: poold.c's slow_route (each replica's TTFT p95, the
# pool's median) runs every 5 s for each pool of two replicas or more
# in the pool tests here under ASan (test_least_streams_spreads_300_
# streams_and_shifts_from_a_slow_replica: 100 requests a replica), and a
# slow replica's quarter share is tests/unit/test_pool.c's.
SANITIZER_SKIP = {"test_a_replica_over_ttft_factor_times_the_median_is_slow_not_ejected"}


def chat(port, headers=None):
    """One stream on its own connection: (status, body, seconds from
    sending to the first token event or None, whether it ended with
    [DONE])."""
    r = completion(port, headers=headers, timeout=15)
    return r.status, r.body, r.after(TOKEN), b"data: [DONE]" in r.body


def replica_state(admin, route="llm"):
    st = admin.stats()
    pool = next(p for p in st["pools"] if p["route"] == route)
    return {u["upstream"]: u for u in pool["upstreams"]}, pool


# ------------------------------------------------------------- least_streams

def test_least_streams_spreads_300_streams_and_shifts_from_a_slow_replica():
    """300 streams at once over three replicas: each gets 100 within 10 %
    (counted by the access log and by each mock's own log); one replica made
    slow (restarted with a 1.5 s TTFT) then gets clearly fewer of a closed
    loop's requests than each healthy one."""
    fast = ("--ttft", "100ms", "--tpot", "40ms")
    with Mock(*fast) as a, Mock(*fast) as b, Mock(*fast) as c:
        with Tokentap(conf([a, b, c], prefix="/v1/")) as t:
            res = load("-c", "300", "-n", "300", "--max-tokens", "25", t.url(CHAT))
            assert res["requests"] == 300 and res["errors"] == 0, res
            lines = t.wait_logged(300)
            counts = Counter(x["upstream"] for x in lines)
            # a mock logs a request once it has sent all of it: maybe after
            # the client had it
            until(lambda: sum(len(m.served()) for m in (a, b, c)) == 300, 5,
                     "the mocks' logs")
            for m in (a, b, c):
                n = counts.get(m.url(), 0)
                assert 90 <= n <= 110, counts
                assert 90 <= len(m.served()) <= 110, (m.url(), len(m.served()))
            assert all(x["attempts"] == [] for x in lines)
            # the same figures per replica in /stats?by=upstream
            groups = t.stats(by="route,upstream")["groups"]
            assert {g["upstream"]: g["requests"] for g in groups} == counts
            # b slows down: its streams stay open longer, so fewer go there
            b.stop()
            b.start("--ttft", "1500ms", "--tpot", "40ms")
            res = load("-c", "30", "-d", "6s", "--max-tokens", "10", t.url(CHAT))
            assert res["errors"] == 0, res
            later = Counter(x["upstream"] for x in t.wait_logged(300 + res["requests"])[300:])
            slow, healthy = later.get(b.url(), 0), min(later[a.url()], later[c.url()])
            assert slow * 2 < healthy, later


# ------------------------------------------------------------- failover

def test_killed_replica_costs_no_request_and_comes_back_after_its_backoff():
    """One of three replicas is killed: every request still gets its whole
    answer (those that went to the dead one were retried on another before
    any byte, POST included: the access log's attempts say connect_error);
    the dead one is ejected, and once it runs again it is back after its
    backoff (a trial request, then its share)."""
    flags = ("--ttft", "20ms", "--tpot", "5ms", "--tokens", "5")
    with Mock(*flags) as a, Mock(*flags) as b, Mock(*flags) as c:
        yaml = conf([a, b, c], prefix="/v1/", extra="    health: {backoff: 2s, backoff_max: 2s}\n")
        with Tokentap(yaml) as t:
            res = load("-c", "6", "-n", "60", "--max-tokens", "5", t.url(CHAT))
            assert res["errors"] == 0, res
            assert len(b.served()) > 0
            t.wait_logged(60)                 # the first load's lines all come first
            b.p.send_signal(signal.SIGKILL)
            b.p.wait()
            res = load("-c", "6", "-n", "120", "--max-tokens", "5", t.url(CHAT))
            assert res["requests"] == 120 and res["errors"] == 0, res
            lines = t.wait_logged(180)[60:]
            assert all(x["status"] == 200 and x["outcome"] == "ok" for x in lines), \
                [x for x in lines if x["outcome"] != "ok"][:3]
            assert not any(x["upstream"] == b.url() for x in lines)
            left = [a for x in lines for a in x["attempts"]]
            assert left and all(a["upstream"] == b.url() and a["reason"] in
                                ("connect_error", "closed") for a in left), left
            state, pool = replica_state(t)
            assert state[b.url()]["ejections"] >= 1
            if state[b.url()]["state"] == "ejected":
                assert state[b.url()]["ejected_until"].endswith("Z"), state
            assert "ejected" in t.stderr()
            # back: after the backoff its trial succeeds and it serves again
            b.start(*flags)
            served_before = len(b.served())

            def back():
                load("-c", "2", "-n", "10", "--max-tokens", "3", t.url(CHAT))
                return replica_state(t)[0][b.url()]["state"] == "healthy" and \
                    len(b.served()) > served_before
            until(back, 20, "the restarted replica back in the pool")
            assert f"upstream {b.url()} is back" in t.stderr()


def test_first_token_deadline_retries_on_a_healthy_replica():
    """timeouts.first_token 400ms, the first replica's first token after
    2 s: its attempt is closed before any token (the mock logs the client
    gone), the request goes to the healthy one, and the client, which never
    sees the first replica's head or role event, has its first token at
    the deadline plus the healthy TTFT (both by its own clock and in the
    access log, TTFT from its t0)."""
    with Mock("--ttft", "2s", "--tokens", "5") as slow, \
            Mock("--ttft", "150ms", "--tokens", "5") as good:
        yaml = conf([slow, good], prefix="/v1/", extra="    balance: round_robin\n"
                         "    timeouts: {first_token: 400ms}\n")
        with Tokentap(yaml) as t:
            status, data, first, done = chat(t.port)     # ticket 0: the slow one
            assert status == 200 and done, data[-300:]
            assert b"HTTP/1.1 200" not in data             # one head: the healthy one's
            assert data.count(b'"role":"assistant"') <= 1
            (x,) = t.wait_logged(1)
            assert x["upstream"] == good.url() and x["outcome"] == "ok", x
            assert [(a["upstream"], a["reason"]) for a in x["attempts"]] == \
                [(slow.url(), "first_token_timeout")], x
            # the deadline (400 ms from the attempt's start, never early),
            # then the healthy TTFT (150 ms after its request, which left once
            # the first attempt ended); tokentap's TTFT within the client's
            assert x["attempts"][0]["ms"] >= 395, x
            assert x["attempts"][0]["ms"] + 150 <= x["ttft_ms"] <= first * 1000, (first, x)
            s = until(lambda: slow.served(), 10, "the slow mock's log")
            assert s[0]["outcome"] == "client_abort" and s[0]["tokens"] == 0, s
            until(lambda: len(good.served()) == 1, 10, "the healthy mock's log")
            # the slow replica was ejected for missing it: the next goes straight
            status, _, first, done = chat(t.port)
            assert status == 200 and done, first
            x = t.wait_logged(2)[1]
            assert x["attempts"] == [] and x["upstream"] == good.url(), x


def test_statuses_of_retry_on_go_to_another_replica():
    """A replica answering 503 (and one answering 429 with no Retry-After)
    is left for the next before anything reaches the client, POST
    included; a 429 with Retry-After: 5 is the client's to see; with
    retries: 0 the 503 is passed on."""
    with Mock("--fault", "status:503") as busy, Mock("--tokens", "3", "--ttft", "10ms") as good:
        yaml = conf([busy, good], prefix="/v1/", extra="    balance: round_robin\n")
        with Tokentap(yaml) as t:
            status, data, _, done = chat(t.port)
            assert status == 200 and done
            (x,) = t.wait_logged(1)
            assert x["attempts"][0]["reason"] == "status" and x["attempts"][0]["status"] == 503
            # nothing of the busy replica's answer: its error body names
            # the fault (a bare b"503" also matches ids and timestamps in
            # the healthy stream: it did once in CI)
            assert b"mock fault" not in data and data.startswith(b"data: "), data[:300]
    with Mock("--tokens", "3", "--ttft", "10ms") as good, Mock() as limited:
        yaml = conf([limited, good], prefix="/v1/", extra="    balance: round_robin\n"
                         "    health: {failures: 5}\n")
        with Tokentap(yaml) as t:
            status, data, _, _ = chat(t.port, ["X-Mock-Fault: status:429"])
            # the mock's 429 says nothing of Retry-After: retried (X-Mock
            # headers reach every replica, so the second answers 429 too)
            assert status == 429
            x = t.wait_logged(1)[0]
            assert [a["status"] for a in x["attempts"]] == [429], x
    with Mock("--fault", "status:503") as busy, Mock("--tokens", "3") as good:
        yaml = conf([busy, good], prefix="/v1/", extra="    balance: round_robin\n    retries: 0\n")
        with Tokentap(yaml) as t:
            status, _, _, _ = chat(t.port)
            assert status == 503
            assert t.wait_logged(1)[0]["attempts"] == []


def test_no_retry_after_the_first_forwarded_byte():
    """A replica that fails mid-stream (after 3 tokens): the client sees the
    abort, the access log says upstream_abort on that replica, and no other
    replica is asked, whatever retries and timeouts.first_token allow."""
    with Mock("--fault", "close-after:3", "--tokens", "10", "--ttft", "50ms") as bad, \
            Mock("--tokens", "10") as good:
        yaml = conf([bad, good], prefix="/v1/", extra="    balance: round_robin\n    retries: 2\n"
                         "    timeouts: {first_token: 2s}\n")
        with Tokentap(yaml) as t:
            status, data, first, done = chat(t.port)
            assert status == 200 and first is not None and not done, data[-200:]
            (x,) = t.wait_logged(1)
            assert x["upstream"] == bad.url() and x["outcome"] == "upstream_abort", x
            assert x["attempts"] == [] and x["output_tokens"] == 3, x
            time.sleep(0.3)
            assert good.served() == []


# ------------------------------------------------------------- hash, reload

def tenants_run(t, n):
    for i in range(n):
        status, _, _, done = chat(t.port, [f"X-Tenant-Id: tenant-{i}"])
        assert status == 200 and done


def test_hash_affinity_keeps_a_tenant_and_a_fourth_replica_takes_its_share():
    """balance: hash on the tenant: each tenant stays on one replica; a
    fourth replica added by SIGHUP takes about a quarter of the tenants
    (1/N, N = 4) from the three, and every tenant that moved, moved to it.
    Each tenant moves with chance 1/4 (rendezvous hashing, the replicas'
    ports random): of 200, 50 +- 6.1; the bounds are 4 sigma out (60
    tenants within 7..24 failed one run in 150 by chance alone)."""
    flags = ("--tokens", "2", "--ttft", "5ms", "--tpot", "1ms")
    with Mock(*flags) as a, Mock(*flags) as b, Mock(*flags) as c, Mock(*flags) as d:
        with Tokentap(conf([a, b, c], "    balance: hash\n", prefix="/v1/",
                           top="tenant: {header: X-Tenant-Id}\n")) as t:
            tenants_run(t, 200)
            tenants_run(t, 200)
            first = {}
            for x in t.wait_logged(400):
                first.setdefault(x["tenant"], set()).add(x["upstream"])
            assert all(len(v) == 1 for v in first.values()), first
            assert len({next(iter(v)) for v in first.values()}) == 3
            t.reload(f"      - {{url: {c.url()}}}\n",
                     f"      - {{url: {c.url()}}}\n      - {{url: {d.url()}}}\n")
            until(lambda: "reload: configuration" in t.stderr() and
                  len(replica_state(t)[1]["upstreams"]) == 4, 15, "the reload")
            tenants_run(t, 200)
            moved = [x for x in t.wait_logged(600)[400:]
                     if x["upstream"] != next(iter(first[x["tenant"]]))]
            assert all(x["upstream"] == d.url() for x in moved), moved
            assert 25 <= len(moved) <= 75, len(moved)    # 200 / 4 = 50


def test_reload_keeps_a_stream_on_its_replica():
    """A stream in flight on a replica that a SIGHUP removes ends there, ok;
    the requests after the reload go to the replicas that remain."""
    with Mock("--tokens", "30", "--tpot", "50ms", "--ttft", "10ms") as a, \
            Mock("--tokens", "3", "--ttft", "10ms") as b:
        with Tokentap(conf([a, b], prefix="/v1/", extra="    balance: round_robin\n")) as t:
            out = {}
            th = threading.Thread(target=lambda: out.setdefault("r", chat(t.port)))
            th.start()
            until(lambda: replica_state(t)[0][a.url()]["open_streams"] == 1, 15,
                  "the stream on a")
            t.reload(text=conf([b], prefix="/v1/", extra="    balance: round_robin\n"))
            until(lambda: len(replica_state(t)[1]["upstreams"]) == 1, 15, "the reload")
            for _ in range(3):
                assert chat(t.port)[0] == 200
            th.join(10)
            status, _, _, done = out["r"]
            assert status == 200 and done
            lines = t.wait_logged(4)
            streamed = [x for x in lines if x["output_tokens"] == 30]
            assert len(streamed) == 1 and streamed[0]["upstream"] == a.url(), lines
            assert streamed[0]["outcome"] == "ok"
            assert all(x["upstream"] == b.url() for x in lines if x is not streamed[0])


# ------------------------------------------------------------- health, alerts

def test_active_checks_eject_and_pool_unhealthy_fires_and_resolves():
    """health.path: a replica whose check fails (a 503) is ejected without
    any client request; with min_healthy 2 of 2, PoolUnhealthy fires in
    /alerts and in the log, tokentap_upstream_up says 0; once the replica
    answers again, its check brings it back and the alert resolves."""
    with Mock() as a, Mock("--fault", "status:503") as b:
        yaml = conf([a, b], "    min_healthy: 2\n    health: {path: /health, interval: 200ms,"
                    " timeout: 1s, backoff: 30s, backoff_max: 30s}\n", prefix="/v1/",
                    top="alerts: {evaluate_every: 200ms}\n")
        with Tokentap(yaml) as t:
            until(lambda: replica_state(t)[0][b.url()]["state"] == "ejected", 15,
                  "b ejected by its check")
            assert replica_state(t)[0][a.url()]["state"] == "healthy"

            def firing():
                rules = t.get("/alerts", json=True)["rules"]
                return [r for r in rules if r["alertname"] == "PoolUnhealthy" and
                        r["state"] == "firing"]
            (rule,) = until(firing, 15, "PoolUnhealthy firing")
            assert rule["route"] == "llm" and rule["severity"] == "critical"
            assert rule["value"] == 1 and rule["threshold"] == 2, rule
            assert metric(t, "tokentap_upstream_up", route="llm", upstream=b.url()) == 0
            assert metric(t, "tokentap_upstream_up", route="llm", upstream=a.url()) == 1
            assert "alert firing: PoolUnhealthy severity=critical route=llm" in t.stderr()
            b.stop()
            b.start()
            until(lambda: replica_state(t)[0][b.url()]["state"] == "healthy", 15,
                  "b back by its check")
            until(lambda: not firing(), 15, "PoolUnhealthy resolved")
            assert "alert resolved: PoolUnhealthy" in t.stderr()
            # the checks were GETs of the path, with the replica's Host
            paths = {x["path"] for x in b.served()}
            assert paths == {"/health"}, paths


def test_a_check_answered_a_byte_at_a_time_times_out():
    """health.timeout is the whole check's: a replica that sends its
    status line a byte every 0.3 s (never idle for the timeout's 1 s) is
    ejected as timed out, where before its check waited the 3.6 s the
    line took and found it healthy."""
    def trickle(req, c):
        try:
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                c.sock.sendall(bytes([b]))
                time.sleep(0.3)
        except OSError:
            pass                    # tokentap gave up: what is tested
        return "close"
    with Mock() as a, Backend(trickle) as b:
        yaml = conf([a, b], "    health: {path: /health, interval: 200ms, timeout: 1s,"
                    " failures: 1, backoff: 30s, backoff_max: 30s}\n", prefix="/v1/")
        with Tokentap(yaml) as t:
            url = f"http://127.0.0.1:{b.port}"
            until(lambda: replica_state(t)[0][url]["state"] == "ejected", 15,
                  "the trickling replica ejected by its check")
            assert re.search(rf"upstream {re.escape(url)} ejected for \d+ ms "
                             r"\(health check: timed out\)", t.stderr()), t.stderr()
            assert replica_state(t)[0][a.url()]["state"] == "healthy"


def test_a_name_is_resolved_to_its_address_and_curl_goes_through():
    """A replica written with a DNS name: poold resolves it (evdns, the
    hosts file here) and the pool connects to the address; curl, as the
    client, gets the stream."""
    with Mock("--tokens", "3", "--ttft", "10ms") as a:
        yaml = (f"routes:\n  - name: llm\n    upstreams:\n"
                f"      - {{url: http://localhost:{a.port}}}\n      - {{url: {a.url()}/v2}}\n")
        with Tokentap(yaml) as t:
            state = until(lambda: (s := replica_state(t)[0])[f"http://localhost:{a.port}"]
                          ["address"] and s, 15, "the name resolved")
            assert state[f"http://localhost:{a.port}"]["address"] == f"127.0.0.1:{a.port}"
            # least_streams between two idle replicas draws at random: of
            # 6 requests all went to one about one run in 32; of 20, 1 in 500,000
            for _ in range(20):
                r = curl(t.url(CHAT), timeout=10)
                assert r.returncode == 0 and b"data: [DONE]" in r.stdout, r.stdout[-300:]
            # each replica its own base path and Host
            paths = {x["path"] for x in a.served()}
            assert paths <= {CHAT, "/v2" + CHAT} and len(paths) == 2, paths


def test_a_tls_replica_behind_nginx_beside_a_plain_one():
    """Replicas of both schemes in one pool: nginx terminating TLS (verified
    against the test CA, by the replica's own host name) in front of one
    mock, a plain mock beside it. Both serve; when nginx goes, its requests
    go to the plain one before any byte."""
    with Mock("--tokens", "3", "--ttft", "10ms") as a, Mock("--tokens", "3", "--ttft", "10ms") as b:
        with Nginx(a.port, tls=True) as ng:
            yaml = (f"routes:\n  - name: llm\n    balance: round_robin\n"
                    f"    tls: {{ca_file: {pki()['ca.crt']}}}\n    upstreams:\n"
                    f"      - {{url: https://localhost:{ng.port}}}\n      - {{url: {b.url()}}}\n")
            with Tokentap(yaml) as t:
                for _ in range(4):
                    status, _, _, done = chat(t.port)
                    assert status == 200 and done
                counts = Counter(x["upstream"] for x in t.wait_logged(4))
                assert counts == {f"https://localhost:{ng.port}": 2, b.url(): 2}, counts
                assert len(a.served()) == 2
                ng.stop()
                for _ in range(4):
                    status, _, _, done = chat(t.port)
                    assert status == 200 and done
                lines = t.wait_logged(8)[4:]
                assert all(x["upstream"] == b.url() for x in lines), lines
                assert any(x["attempts"] for x in lines), lines


def test_a_replica_over_ttft_factor_times_the_median_is_slow_not_ejected():
    """health.ttft_factor: a replica whose TTFT p95 over the last minute is
    over 3x the pool's median is marked slow in /stats (and on /ui), keeps
    serving, and gets a smaller share under round_robin (a quarter of its
    weight: 1 of 9). The slow one's TTFT is 700 ms against 20 ms: 35 x, so
    a busy host cannot bring the healthy ones within 3 x of it."""
    with Mock("--ttft", "700ms", "--tokens", "2") as slow, \
            Mock("--ttft", "20ms", "--tokens", "2") as a, Mock("--ttft", "20ms", "--tokens", "2") as b:
        yaml = conf([slow, a, b], prefix="/v1/", extra="    balance: round_robin\n")
        with Tokentap(yaml) as t:
            load("-c", "6", "-n", "60", "--max-tokens", "2", t.url(CHAT))

            def marked():
                st = replica_state(t)[0]
                return st if st[slow.url()]["state"] == "slow" else None
            st = until(marked, 15, "the slow replica marked")
            assert st[a.url()]["state"] == "healthy" and st[b.url()]["state"] == "healthy"
            assert st[slow.url()]["ttft_p95_ms"] > 3 * st[a.url()]["ttft_p95_ms"], st
            assert "is slow: a quarter of its share" in t.stderr()
            n = len(t.wait_logged(60))        # the load's lines, each written after its bytes
            for _ in range(27):
                assert chat(t.port)[0] == 200
            later = Counter(x["upstream"] for x in t.wait_logged(n + 27)[n:])
            assert later.get(slow.url(), 0) == 3, later

