"""Replica pools end to end: tokentap in front of several tokentap-mock
replicas (each its own process and port: one slow, one refusing or killed,
the others healthy), driven by tokentap-load, curl and raw sockets. Judged
by the access log, /stats and /alerts, and by the mocks' own request logs
(what each replica served, and whether a client closed on it).

Run alone with `python3 tests/e2e/test_pools.py [name-filter]`.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Mock, Tokentap, binary  # noqa: E402

CHAT = "/v1/chat/completions"
TOKEN = re.compile(rb'"content":"[^"]')     # a delta with text: a token
SAN_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def pool_yaml(mocks, extra="", route_extra=""):
    ups = "".join(f"      - {{url: {m.url()}}}\n" for m in mocks)
    return (f"{extra}routes:\n  - name: llm\n    match: {{path_prefix: /v1/}}\n"
            f"    upstreams:\n{ups}{route_extra}")


def load(port, *args, timeout=120):
    r = subprocess.run([binary("tokentap-load"), *args, "--json", "-",
                        f"http://127.0.0.1:{port}{CHAT}"],
                       capture_output=True, text=True, timeout=timeout)
    for mark in SAN_MARKS:
        assert mark not in r.stderr, r.stderr[-6000:]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(r.stdout)["levels"][0]


def get_json(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def per_upstream(lines):
    out = {}
    for x in lines:
        out[x["upstream"]] = out.get(x["upstream"], 0) + 1
    return out


def chat(port, headers=(), timeout=15):
    """One streaming request on its own connection. Returns (status,
    body, seconds from sending to the first token event, whether the
    stream ended with [DONE])."""
    body = b'{"model":"m","stream":true}'
    head = (f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n")
    for h in headers:
        head += h + "\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    t0 = time.monotonic()
    s.sendall(head.encode() + b"\r\n" + body)
    data, first = b"", None
    while True:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not b:
            break
        data += b
        if first is None and TOKEN.search(data.split(b"\r\n\r\n", 1)[-1]):
            first = time.monotonic() - t0
    s.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, data, first, b"data: [DONE]" in data


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def replica_state(admin, route="llm"):
    st = get_json(admin, "/stats")
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
        with Tokentap(pool_yaml([a, b, c])) as t:
            res = load(t.port, "-c", "300", "-n", "300", "--max-tokens", "25")
            assert res["requests"] == 300 and res["errors"] == 0, res
            lines = t.access(300)
            counts = per_upstream(lines)
            # a mock logs a request once it has sent all of it: maybe after
            # the client had it
            wait_for(lambda: sum(len(m.served()) for m in (a, b, c)) == 300, 5,
                     "the mocks' logs")
            for m in (a, b, c):
                n = counts.get(m.url(), 0)
                assert 90 <= n <= 110, counts
                assert 90 <= len(m.served()) <= 110, (m.url(), len(m.served()))
            assert all(x["attempts"] == [] for x in lines)
            # the same figures per replica in /stats?by=upstream
            groups = get_json(t.admin, "/stats?by=route,upstream")["groups"]
            assert {g["upstream"]: g["requests"] for g in groups} == counts
            # b slows down: its streams stay open longer, so fewer go there
            b.stop()
            b.start("--ttft", "1500ms", "--tpot", "40ms")
            res = load(t.port, "-c", "30", "-d", "6s", "--max-tokens", "10")
            assert res["errors"] == 0, res
            later = per_upstream(t.access()[300:])
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
        yaml = pool_yaml([a, b, c], route_extra="    health: {backoff: 2s, backoff_max: 2s}\n")
        with Tokentap(yaml) as t:
            res = load(t.port, "-c", "6", "-n", "60", "--max-tokens", "5")
            assert res["errors"] == 0, res
            assert len(b.served()) > 0
            b.p.send_signal(signal.SIGKILL)
            b.p.wait()
            res = load(t.port, "-c", "6", "-n", "120", "--max-tokens", "5")
            assert res["requests"] == 120 and res["errors"] == 0, res
            lines = t.access(180)[60:]
            assert all(x["status"] == 200 and x["outcome"] == "ok" for x in lines), \
                [x for x in lines if x["outcome"] != "ok"][:3]
            assert not any(x["upstream"] == b.url() for x in lines)
            left = [a for x in lines for a in x["attempts"]]
            assert left and all(a["upstream"] == b.url() and a["reason"] in
                                ("connect_error", "closed") for a in left), left
            state, pool = replica_state(t.admin)
            assert state[b.url()]["ejections"] >= 1
            if state[b.url()]["state"] == "ejected":
                assert state[b.url()]["ejected_until"].endswith("Z"), state
            assert "ejected" in t.stderr()
            # back: after the backoff its trial succeeds and it serves again
            b.start(*flags)
            served_before = len(b.served())

            def back():
                load(t.port, "-c", "2", "-n", "10", "--max-tokens", "3")
                return replica_state(t.admin)[0][b.url()]["state"] == "healthy" and \
                    len(b.served()) > served_before
            wait_for(back, 20, "the restarted replica back in the pool")
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
        yaml = pool_yaml([slow, good], route_extra="    balance: round_robin\n"
                         "    timeouts: {first_token: 400ms}\n")
        with Tokentap(yaml) as t:
            status, data, first, done = chat(t.port)     # ticket 0: the slow one
            assert status == 200 and done, data[-300:]
            assert data.count(b"HTTP/1.1 200") == 1
            assert data.count(b'"role":"assistant"') <= 1
            assert 0.50 <= first <= 0.90, first
            (x,) = t.access(1)
            assert x["upstream"] == good.url() and x["outcome"] == "ok", x
            assert [(a["upstream"], a["reason"]) for a in x["attempts"]] == \
                [(slow.url(), "first_token_timeout")], x
            assert 395 <= x["attempts"][0]["ms"] <= 600, x
            assert 530 <= x["ttft_ms"] <= 850, x
            s = wait_for(lambda: slow.served(), 5, "the slow mock's log")
            assert s[0]["outcome"] == "client_abort" and s[0]["tokens"] == 0, s
            wait_for(lambda: len(good.served()) == 1, 5, "the healthy mock's log")
            # the slow replica was ejected for missing it: the next goes straight
            status, _, first, done = chat(t.port)
            assert status == 200 and done and first < 0.4, first
            assert t.access(2)[1]["attempts"] == []


def test_statuses_of_retry_on_go_to_another_replica():
    """A replica answering 503 (and one answering 429 with no Retry-After)
    is left for the next before anything reaches the client, POST
    included; a 429 with Retry-After: 5 is the client's to see; with
    retries: 0 the 503 is passed on."""
    with Mock("--fault", "status:503") as busy, Mock("--tokens", "3", "--ttft", "10ms") as good:
        yaml = pool_yaml([busy, good], route_extra="    balance: round_robin\n")
        with Tokentap(yaml) as t:
            status, data, _, done = chat(t.port)
            assert status == 200 and done
            (x,) = t.access(1)
            assert x["attempts"][0]["reason"] == "status" and x["attempts"][0]["status"] == 503
            assert b"503" not in data
    with Mock("--tokens", "3", "--ttft", "10ms") as good, Mock() as limited:
        yaml = pool_yaml([limited, good], route_extra="    balance: round_robin\n"
                         "    health: {failures: 5}\n")
        with Tokentap(yaml) as t:
            status, data, _, _ = chat(t.port, ["X-Mock-Fault: status:429"])
            # the mock's 429 says nothing of Retry-After: retried (X-Mock
            # headers reach every replica, so the second answers 429 too)
            assert status == 429
            x = t.access(1)[0]
            assert [a["status"] for a in x["attempts"]] == [429], x
    with Mock("--fault", "status:503") as busy, Mock("--tokens", "3") as good:
        yaml = pool_yaml([busy, good], route_extra="    balance: round_robin\n    retries: 0\n")
        with Tokentap(yaml) as t:
            status, _, _, _ = chat(t.port)
            assert status == 503
            assert t.access(1)[0]["attempts"] == []


def test_no_retry_after_the_first_forwarded_byte():
    """A replica that fails mid-stream (after 3 tokens): the client sees the
    abort, the access log says upstream_abort on that replica, and no other
    replica is asked, whatever retries and timeouts.first_token allow."""
    with Mock("--fault", "close-after:3", "--tokens", "10", "--ttft", "50ms") as bad, \
            Mock("--tokens", "10") as good:
        yaml = pool_yaml([bad, good], route_extra="    balance: round_robin\n    retries: 2\n"
                         "    timeouts: {first_token: 2s}\n")
        with Tokentap(yaml) as t:
            status, data, first, done = chat(t.port)
            assert status == 200 and first is not None and not done, data[-200:]
            (x,) = t.access(1)
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
        extra = "tenant: {header: X-Tenant-Id}\n"
        yaml = pool_yaml([a, b, c], extra, "    balance: hash\n")
        with Tokentap(yaml) as t:
            tenants_run(t, 200)
            tenants_run(t, 200)
            first = {}
            for x in t.access(400):
                first.setdefault(x["tenant"], set()).add(x["upstream"])
            assert all(len(v) == 1 for v in first.values()), first
            assert len({next(iter(v)) for v in first.values()}) == 3
            t.write_conf(open(t.conf).read().replace(
                f"      - {{url: {c.url()}}}\n",
                f"      - {{url: {c.url()}}}\n      - {{url: {d.url()}}}\n"))
            t.p.send_signal(signal.SIGHUP)
            wait_for(lambda: "configuration" in t.stderr() and
                     len(replica_state(t.admin)[1]["upstreams"]) == 4, 5, "the reload")
            tenants_run(t, 200)
            moved = [x for x in t.access(600)[400:]
                     if x["upstream"] != next(iter(first[x["tenant"]]))]
            assert all(x["upstream"] == d.url() for x in moved), moved
            assert 25 <= len(moved) <= 75, len(moved)    # 200 / 4 = 50


def test_reload_keeps_a_stream_on_its_replica():
    """A stream in flight on a replica that a SIGHUP removes ends there, ok;
    the requests after the reload go to the replicas that remain."""
    with Mock("--tokens", "30", "--tpot", "50ms", "--ttft", "10ms") as a, \
            Mock("--tokens", "3", "--ttft", "10ms") as b:
        with Tokentap(pool_yaml([a, b], route_extra="    balance: round_robin\n")) as t:
            import threading
            out = {}
            th = threading.Thread(target=lambda: out.setdefault("r", chat(t.port)))
            th.start()
            wait_for(lambda: replica_state(t.admin)[0][a.url()]["open_streams"] == 1, 5,
                     "the stream on a")
            t.write_conf(pool_yaml([b], route_extra="    balance: round_robin\n").replace(
                "routes:", f"listen:\n  - address: 127.0.0.1:{t.port}\nadmin:\n"
                f"  address: 127.0.0.1:{t.admin}\naccess_log: {t.log}\nroutes:"))
            t.p.send_signal(signal.SIGHUP)
            wait_for(lambda: len(replica_state(t.admin)[1]["upstreams"]) == 1, 5, "the reload")
            for _ in range(3):
                assert chat(t.port)[0] == 200
            th.join(10)
            status, _, _, done = out["r"]
            assert status == 200 and done
            lines = t.access(4)
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
        yaml = pool_yaml([a, b], "alerts: {evaluate_every: 200ms}\n",
                         "    min_healthy: 2\n    health: {path: /health, interval: 200ms,"
                         " timeout: 1s, backoff: 30s, backoff_max: 30s}\n")
        with Tokentap(yaml) as t:
            wait_for(lambda: replica_state(t.admin)[0][b.url()]["state"] == "ejected", 5,
                     "b ejected by its check")
            assert replica_state(t.admin)[0][a.url()]["state"] == "healthy"

            def firing():
                rules = get_json(t.admin, "/alerts")["rules"]
                return [r for r in rules if r["alertname"] == "PoolUnhealthy" and
                        r["state"] == "firing"]
            (rule,) = wait_for(firing, 5, "PoolUnhealthy firing")
            assert rule["route"] == "llm" and rule["severity"] == "critical"
            assert rule["value"] == 1 and rule["threshold"] == 2, rule
            with urllib.request.urlopen(f"http://127.0.0.1:{t.admin}/metrics", timeout=10) as r:
                metrics = r.read().decode()
            assert f'tokentap_upstream_up{{route="llm",upstream="{b.url()}"}} 0' in metrics
            assert f'tokentap_upstream_up{{route="llm",upstream="{a.url()}"}} 1' in metrics
            assert "alert firing: PoolUnhealthy severity=critical route=llm" in t.stderr()
            b.stop()
            b.start()
            wait_for(lambda: replica_state(t.admin)[0][b.url()]["state"] == "healthy", 5,
                     "b back by its check")
            wait_for(lambda: not firing(), 5, "PoolUnhealthy resolved")
            assert "alert resolved: PoolUnhealthy" in t.stderr()
            # the checks were GETs of the path, with the replica's Host
            paths = {x["path"] for x in b.served()}
            assert paths == {"/health"}, paths


def test_a_name_is_resolved_to_its_address_and_curl_goes_through():
    """A replica written with a DNS name: poold resolves it (evdns, the
    hosts file here) and the pool connects to the address; curl, as the
    client, gets the stream."""
    with Mock("--tokens", "3", "--ttft", "10ms") as a:
        yaml = (f"routes:\n  - name: llm\n    upstreams:\n"
                f"      - {{url: http://localhost:{a.port}}}\n      - {{url: {a.url()}/v2}}\n")
        with Tokentap(yaml) as t:
            state = wait_for(lambda: (lambda s: s if s[f"http://localhost:{a.port}"]["address"]
                                      else None)(replica_state(t.admin)[0]), 5, "the name resolved")
            assert state[f"http://localhost:{a.port}"]["address"] == f"127.0.0.1:{a.port}"
            # least_streams between two idle replicas draws at random: of
            # 6 requests all went to one about one run in 32; of 20, 1 in 500,000
            for _ in range(20):
                r = subprocess.run(["curl", "-sN", "--max-time", "10", t.url(CHAT), "-d",
                                    '{"model":"m","stream":true}'], capture_output=True,
                                   text=True, timeout=20)
                assert r.returncode == 0 and "data: [DONE]" in r.stdout, r.stdout[-300:]
            # each replica its own base path and Host
            paths = {x["path"] for x in a.served()}
            assert paths <= {CHAT, "/v2" + CHAT} and len(paths) == 2, paths


def test_a_tls_replica_behind_nginx_beside_a_plain_one():
    """Replicas of both schemes in one pool: nginx terminating TLS (verified
    against the test CA, by the replica's own host name) in front of one
    mock, a plain mock beside it. Both serve; when nginx goes, its requests
    go to the plain one before any byte."""
    from test_tls import Nginx, pki
    with Mock("--tokens", "3", "--ttft", "10ms") as a, Mock("--tokens", "3", "--ttft", "10ms") as b:
        with Nginx(a.port) as ng:
            yaml = (f"routes:\n  - name: llm\n    balance: round_robin\n"
                    f"    tls: {{ca_file: {pki()['ca.crt']}}}\n    upstreams:\n"
                    f"      - {{url: https://localhost:{ng.port}}}\n      - {{url: {b.url()}}}\n")
            with Tokentap(yaml) as t:
                for _ in range(4):
                    status, _, _, done = chat(t.port)
                    assert status == 200 and done
                counts = per_upstream(t.access(4))
                assert counts == {f"https://localhost:{ng.port}": 2, b.url(): 2}, counts
                assert len(a.served()) == 2
                ng.proc.stop()
                for _ in range(4):
                    status, _, _, done = chat(t.port)
                    assert status == 200 and done
                lines = t.access(8)[4:]
                assert all(x["upstream"] == b.url() for x in lines), lines
                assert any(x["attempts"] for x in lines), lines


def test_a_replica_over_ttft_factor_times_the_median_is_slow_not_ejected():
    """health.ttft_factor: a replica whose TTFT p95 over the last minute is
    over 3x the pool's median is marked slow in /stats (and on /ui), keeps
    serving, and gets a smaller share under round_robin (a quarter of its
    weight: 1 of 9)."""
    with Mock("--ttft", "400ms", "--tokens", "2") as slow, \
            Mock("--ttft", "20ms", "--tokens", "2") as a, Mock("--ttft", "20ms", "--tokens", "2") as b:
        yaml = pool_yaml([slow, a, b], route_extra="    balance: round_robin\n")
        with Tokentap(yaml) as t:
            load(t.port, "-c", "3", "-n", "60", "--max-tokens", "2")

            def marked():
                st = replica_state(t.admin)[0]
                return st if st[slow.url()]["state"] == "slow" else None
            st = wait_for(marked, 8, "the slow replica marked")
            assert st[a.url()]["state"] == "healthy" and st[b.url()]["state"] == "healthy"
            assert st[slow.url()]["ttft_p95_ms"] > 3 * st[a.url()]["ttft_p95_ms"], st
            assert "is slow: a quarter of its share" in t.stderr()
            n = len(t.access())
            for _ in range(27):
                assert chat(t.port)[0] == 200
            later = per_upstream(t.access(n + 27)[n:])
            assert later.get(slow.url(), 0) == 3, later


if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, fn in list(globals().items()):
        if name.startswith("test_") and only in name:
            fn()
            print("ok", name)
