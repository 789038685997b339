"""Stream health end to end: the first answer token of reasoning streams
(TTFO) in every dialect that has reasoning, and in a recorded stream;
stalls seen while they last behind heartbeats (StreamStalled fires while
the stream is open and resolves after it); timeouts.token_idle ending such
a stream; requests without a token counted by outcome; a buffering hop
flagged where nginx and a fast model are not; the proxy's own overhead,
scraped by a real Prometheus. Clients are curl and tokentap-load; the
backends tokentap-mock, a scripted backend replaying a real recording,
nginx and a flushing relay."""
import json
import os
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from backend import SSE_HEAD, Backend
from harness import ROOT, Mock, Proc, Tokentap, binary, free_port, wait_port
from relay import FlushingRelay
from test_alerts import Hook, wait_for

SANITIZER_SKIP = {"test_fast_model_at_100_streams_is_not_flagged",
                  "test_overhead_scraped_by_prometheus"}
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "streams")


def route(port, extra="", name="llm"):
    return f"  - name: {name}\n    upstream: http://127.0.0.1:{port}\n{extra}"


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def stats(t, **q):
    return json.loads(get(t.admin, "/stats?" + urllib.parse.urlencode(q)))["groups"]


def metric(t, prefix):
    """The sum of the /metrics samples whose line starts with prefix."""
    vals = [float(line.rsplit(" ", 1)[1]) for line in get(t.admin, "/metrics").splitlines()
            if line.startswith(prefix)]
    return sum(vals) if vals else None


def curl(url, path, headers=(), body='{"model":"m","stream":true}', timeout=60):
    args = ["curl", "-sN", "--max-time", str(timeout), "-d", body]
    for h in headers:
        args += ["-H", h]
    return subprocess.run(args + [url + path], capture_output=True, timeout=timeout + 10)


def curl_bg(url, path, headers=(), body='{"model":"m","stream":true}'):
    args = ["curl", "-sN", "--max-time", "60", "-d", body]
    for h in headers:
        args += ["-H", h]
    return subprocess.Popen(args + [url + path], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


# ---- TTFO ------------------------------------------------------------------

REASONING_PATHS = {
    "openai": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/g-1:streamGenerateContent?alt=sse",
    "ollama": "/api/chat",
}


def test_ttfo_waits_for_the_answer_in_each_dialect():
    """tokentap-mock's reasoning phases in each API's shape, through
    tokentap to curl: TTFT is the first reasoning token, TTFO the first
    answer token 6 gaps later; the reasoning count where the usage has
    one; /stats, /metrics and TTFOHigh follow TTFO."""
    hdrs = ["X-Mock-Reasoning: 6", "X-Mock-Tokens: 10", "X-Mock-TTFT: 50ms",
            "X-Mock-TPOT: 40ms"]
    extra = ("stats: {windows: [10s]}\nalerts:\n  evaluate_every: 300ms\n  window: 10s\n"
             "  min_samples: 3\n  thresholds: {ttfo_warning: 200ms, ttfo_critical: 10s}\n")
    with Mock() as m, Tokentap("routes:\n" + route(m.port) + extra) as t:
        for d, path in REASONING_PATHS.items():
            r = curl(t.url(""), path, hdrs)
            assert r.returncode == 0, (d, r.stderr)
        log = t.access(len(REASONING_PATHS))
        assert [e["dialect"] for e in log] == list(REASONING_PATHS), log
        for e in log:
            assert e["outcome"] == "ok" and e["output_tokens"] in (4, 10), e
            gap = e["ttfo_ms"] - e["ttft_ms"]
            assert 6 * 40 - 30 < gap < 6 * 40 + 150, e
            assert e["ttft_ms"] < 200 < e["ttfo_ms"], e
            assert e["exceeded"] == ["ttfo_warning"], e
        reported = {e["dialect"]: e["reasoning_tokens"] for e in log}
        assert reported == {"openai": 6, "openai-responses": 6, "anthropic": None,
                            "gemini": 6, "ollama": None}, reported
        g = stats(t)[0]
        assert g["ttfo_ms"]["count"] == 5 and g["ttfo_ms"]["p50"] > 280, g["ttfo_ms"]
        assert g["ttft_ms"]["p50"] < 200, g["ttft_ms"]
        assert metric(t, "tokentap_time_to_first_output_token_seconds_count{") == 5
        assert metric(t, 'tokentap_time_to_first_output_token_seconds_bucket{route="llm",'
                      'tenant="-",model="m",upstream="' + m.url() + '",le="0.200000"}') == 0   # the threshold is a bound
        firing = wait_for(lambda: [r for r in json.loads(get(t.admin, "/alerts"))["rules"]
                                   if r["alertname"] == "TTFOHigh" and r["state"] == "firing"],
                          10, "TTFOHigh firing")
        assert firing[0]["severity"] == "warning" and firing[0]["metric"] == "ttfo"
        assert "alert firing: TTFOHigh severity=warning route=llm" in t.stderr()


def replay_backend(path, gap):
    """Serves a recorded stream, one event each `gap` seconds."""
    with open(path, "rb") as f:
        events = [e + b"\n\n" for e in f.read().replace(b"\r\n", b"\n").split(b"\n\n")
                  if e.strip()]

    def handle(req, c):
        c.send(SSE_HEAD)
        for e in events:
            time.sleep(gap)
            c.chunk(e)
        c.end_chunks()
        return "close"
    return Backend(handle)


def test_ttfo_of_a_recorded_thinking_stream():
    """Anthropic's extended thinking, as recorded: 23 thinking deltas, then
    the text. TTFO comes 23 token events after TTFT."""
    rec = os.path.join(FIXTURES, "prism-php", "anthropic_stream-with-extended-thinking-1.sse")
    with replay_backend(rec, 0.02) as b, Tokentap("routes:\n" + route(b.port)) as t:
        r = curl(t.url(""), "/v1/messages")
        assert r.returncode == 0 and b"thinking_delta" in r.stdout
        e = t.access(1)[0]
        assert e["dialect"] == "anthropic" and e["outcome"] == "ok", e
        # 23 thinking deltas and a signature_delta lie between the two
        assert 24 * 20 - 10 < e["ttfo_ms"] - e["ttft_ms"] < 24 * 20 + 200, e
        assert e["reasoning_tokens"] is None and e["output_tokens"] == 452, e


# ---- stalls ----------------------------------------------------------------

def test_stall_behind_heartbeats_fires_while_open_and_resolves():
    """Tokens stop for 6 s while empty deltas (OpenAI) and pings
    (Anthropic) keep both streams busy: with stall 2s, StreamStalled
    (min_stalled 2) fires within stall + 2 s while they are still open,
    the gauges say 2, and it resolves once they ended; alerts.evaluate_every
    stays at its default 10 s."""
    hdrs = ["X-Mock-TTFT: 50ms", "X-Mock-TPOT: 50ms", "X-Mock-Tokens: 6",
            "X-Mock-Stall: 3:6s", "X-Mock-Heartbeat: 300ms"]
    with Mock() as m, Hook() as h:
        notify = f"  notify:\n    - {{type: log}}\n    - {{type: webhook, url: 'http://127.0.0.1:{h.port}/h'}}\n"
        conf = ("routes:\n" + route(m.port, "    thresholds: {stall: 2s}\n") +
                "alerts:\n  thresholds: {min_stalled: 2}\n" + notify)
        with Tokentap(conf) as t:
            t0 = time.monotonic()
            a = curl_bg(t.url(""), "/v1/chat/completions", hdrs)
            b = curl_bg(t.url(""), "/v1/messages", hdrs)
            # the third token leaves at 0.15 s: stalled from 2.15 s, firing by 4.15 s
            fired = h.wait(lambda j: j["alertname"] == "StreamStalled" and
                           j["status"] == "firing", 6)
            assert fired[0] - t0 < 0.15 + 2 + 2, fired[0] - t0
            assert a.poll() is None and b.poll() is None        # still open
            assert fired[3]["value"] == 2 and fired[3]["threshold"] == 1 * 2, fired[3]
            assert fired[3]["metric"] == "stalled" and fired[3]["route"] == "llm"
            g = stats(t)[0]
            assert g["stalled"] == 2 and g["stalls"] == 2 and g["active"] == 2, g
            assert metric(t, "tokentap_stalled_streams{") == 2
            assert metric(t, "tokentap_stalls_total{") == 2
            out_a, _ = a.communicate(timeout=30)
            out_b, _ = b.communicate(timeout=30)
            assert out_a.count(b'"content":""') >= 10, out_a   # the heartbeats came
            assert out_b.count(b"event: ping") >= 10, out_b
            resolved = h.wait(lambda j: j["alertname"] == "StreamStalled" and
                              j["status"] == "resolved", 5)
            assert resolved[0] > time.monotonic() - 5 and resolved[3]["value"] == 0
            log = t.access(2)
            for e in log:
                assert e["outcome"] == "ok" and e["stalls"] == 1, e
                assert 5900 < e["gap_max_ms"] < 6400, e
                assert e["itl_max_ms"] == e["gap_max_ms"], e
            assert stats(t)[0]["stalled"] == 0
            assert metric(t, "tokentap_stalled_streams{") == 0
            assert "alert firing: StreamStalled severity=warning route=llm stalled=2" in t.stderr()


def test_token_idle_ends_a_stream_whose_tokens_stopped():
    """timeouts.token_idle 1500ms: heartbeats every 200 ms keep the bytes
    flowing (timeouts.idle never fires), the tokens stopped; tokentap ends
    the stream (outcome timeout) and closes the upstream, which the mock
    sees as its client going away."""
    hdrs = ["X-Mock-TTFT: 50ms", "X-Mock-TPOT: 50ms", "X-Mock-Tokens: 10",
            "X-Mock-Stall: 2:30s", "X-Mock-Heartbeat: 200ms"]
    with Mock() as m:
        conf = "routes:\n" + route(m.port, "    timeouts: {token_idle: 1500ms, idle: 5s}\n")
        with Tokentap(conf) as t:
            t0 = time.monotonic()
            r = curl(t.url(""), "/v1/chat/completions", hdrs)
            took = time.monotonic() - t0
            assert 1.5 < took < 1.5 + 1.5, took         # 0.1 s + 1.5 s + the sweep
            assert r.stdout.count(b"data: {") >= 4 and b"[DONE]" not in r.stdout
            e = t.access(1)[0]
            assert e["outcome"] == "timeout" and e["output_tokens"] == 2, e
            assert e["stalls"] == 0 and e["gap_max_ms"] > 1400, e
            wait_for(lambda: m.served(), 5, "the mock's log line")
            assert m.served()[0]["outcome"] == "client_abort", m.served()
            assert "no token for 1500 ms" in t.stderr()


# ---- no token --------------------------------------------------------------

def test_requests_without_a_token_by_outcome():
    """An empty answer (ok), a client that gives up before the first token,
    a backend error, an upstream that closes before a token, a first-byte
    timeout: counted by outcome in /metrics and /stats; a stream with
    tokens and a JSON answer are not."""
    with Mock() as m:
        conf = "routes:\n" + route(m.port, "    timeouts: {first_byte: 300ms}\n")
        with Tokentap(conf) as t:
            u = t.url("")
            curl(u, "/v1/chat/completions", ["X-Mock-Tokens: 0", "X-Mock-TTFT: 10ms"])
            curl(u, "/v1/chat/completions", ["X-Mock-TTFT: 3s"], timeout=0.5)
            curl(u, "/v1/chat/completions", ["X-Mock-Fault: status:500"])
            curl(u, "/v1/chat/completions", ["X-Mock-Fault: close-after:0", "X-Mock-TTFT: 10ms"])
            curl(u, "/v1/chat/completions", ["X-Mock-Role-Delay: 1s", "X-Mock-TTFT: 1s"])
            curl(u, "/v1/chat/completions", ["X-Mock-Tokens: 3", "X-Mock-TTFT: 10ms"])
            curl(u, "/v1/chat/completions", ["X-Mock-Tokens: 3", "X-Mock-TTFT: 10ms"],
                 body='{"model":"m","stream":false}')
            log = t.access(7)
            assert [e["outcome"] for e in log] == ["ok", "client_abort", "upstream_error",
                                                   "upstream_abort", "timeout", "ok", "ok"], log
            want = {"ok": 1, "client_abort": 1, "upstream_error": 1, "upstream_abort": 1,
                    "timeout": 1}
            assert stats(t)[0]["no_token"] == want, stats(t)[0]
            for o, n in want.items():
                got = metric(t, f'tokentap_no_token_requests_total{{route="llm",tenant="-",'
                             f'model="m",upstream="{m.url()}",outcome="{o}"}}')
                assert got == n, (o, got)


# ---- clumping --------------------------------------------------------------

def nginx(upstream_port):
    """nginx 1.22 in front of the mock, proxy_buffering off."""
    d = tempfile.mkdtemp(prefix="tt-nginx-")
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/cb; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
    uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;
    upstream m {{ server 127.0.0.1:{upstream_port}; keepalive 100; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://m; proxy_http_version 1.1; proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
""")
    p = Proc(["nginx", "-p", d + "/", "-c", os.path.join(d, "nginx.conf"), "-e", "stderr"])
    wait_port(port)
    return p, port


def load(url, *args):
    r = subprocess.run([binary("tokentap-load"), *args, url], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


STREAMS = ["-c", "10", "-n", "10", "--max-tokens", "40", "-H", "X-Mock-TPOT: 20ms",
           "-H", "X-Mock-TTFT: 20ms"]


def test_buffering_hop_is_flagged_and_nginx_is_not():
    """The same streams (a token each 20 ms) through a relay that flushes
    what it holds every 200 ms, and through nginx with proxy_buffering off:
    the first come in clumps 200 ms apart and look buffered, the others
    arrive a token per read and do not."""
    with Mock() as m, FlushingRelay(m.port, 0.2) as relay:
        ng, nport = nginx(m.port)
        with ng:
            conf = ("routes:\n" +
                    route(relay.port, "    match: {path_prefix: /hop/}\n    strip_prefix: true\n",
                          name="hop") +
                    route(nport, "    match: {path_prefix: /nginx/}\n    strip_prefix: true\n",
                          name="nginx"))
            with Tokentap(conf) as t:
                load(t.url("/hop/v1/chat/completions"), *STREAMS)
                load(t.url("/nginx/v1/chat/completions"), *STREAMS)
                log = t.access(20)
                hop = [e for e in log if e["route"] == "hop"]
                direct = [e for e in log if e["route"] == "nginx"]
                assert len(hop) == len(direct) == 10
                for e in hop:
                    assert e["buffered"] is True and e["clumped"] > 0.8, e
                    assert 170 < e["clump_gap_ms"] < 240, e
                    assert e["ttft_ms"] > 150, e             # the hop holds the first token
                for e in direct:
                    assert e["buffered"] is False and e["clumped"] < 0.1, e
                    assert 15 < e["clump_gap_ms"] < 25, e
                by = {g["route"]: g for g in stats(t)}
                assert by["hop"]["buffered_share"] == 1 and by["hop"]["buffered"] == 10
                assert by["nginx"]["buffered_share"] == 0
                # ITL falls through the hop while TTFT rises: the symptom
                assert by["hop"]["itl_ms"]["p50"] < 1 < by["nginx"]["itl_ms"]["p50"]
                assert metric(t, 'tokentap_buffered_streams_total{route="hop"') == 10
                assert metric(t, 'tokentap_buffered_streams_total{route="nginx"') == 0


def test_fast_model_at_100_streams_is_not_flagged():
    """A token a millisecond at 100 streams: the proxy reads several at once
    when it falls behind, but the reads are milliseconds apart, not the
    tenths of a second of a buffering hop."""
    with Mock("--workers", "1") as m, Tokentap("workers: 1\nroutes:\n" + route(m.port)) as t:
        load(t.url("/v1/chat/completions"), "-c", "100", "-n", "100", "--max-tokens", "300",
             "-H", "X-Mock-TPOT: 1ms", "-H", "X-Mock-TTFT: 20ms")
        log = t.access(100)
        assert len(log) == 100 and all(e["outcome"] == "ok" for e in log)
        assert [e for e in log if e["buffered"] is not False] == []
        assert all(e["clump_gap_ms"] < 10 for e in log), [e["clump_gap_ms"] for e in log]
        assert stats(t)[0]["buffered_share"] == 0


def test_batching_backend_is_flagged():
    """tokentap-mock --clump: 5 events in one write every 5 gaps of 30 ms
    (a backend that flushes per batch): the same verdict as a hop."""
    with Mock() as m, Tokentap("routes:\n" + route(m.port)) as t:
        load(t.url("/v1/chat/completions"), "-c", "4", "-n", "4", "--max-tokens", "40",
             "-H", "X-Mock-TPOT: 30ms", "-H", "X-Mock-Clump: 5")
        for e in t.access(4):
            assert e["buffered"] is True and 0.75 < e["clumped"] < 0.85, e
            assert 130 < e["clump_gap_ms"] < 170, e
            # 8 clumps: the 39 gaps of 40 tokens span 7 clumps of 150 ms
            assert 25 < e["tpot_ms"] < 29, e


# ---- the proxy's own overhead ---------------------------------------------

def test_overhead_in_log_stats_and_metrics():
    """Every request has its request stage; every read forwarded its read
    stage; the access log's sum lies below the request's duration."""
    with Mock() as m, Tokentap("routes:\n" + route(m.port)) as t:
        load(t.url("/v1/chat/completions"), "-c", "5", "-n", "20", "--max-tokens", "30",
             "-H", "X-Mock-TPOT: 5ms", "-H", "X-Mock-TTFT: 10ms")
        log = t.access(20)
        # the proxy's own time, from the kernel's receipt of a read to the
        # client's send (its queue too: on a busy host most of it), lies
        # within the request's duration; how small it is is make bench's
        for e in log:
            assert 0 < e["overhead_ms"] < e["duration_ms"], e
        g = stats(t)[0]["overhead_us"]
        assert g["request"]["count"] == 20 and g["request"]["p50"] > 0, g
        assert g["read"]["count"] >= 20 * 30 * 0.5, g        # about a read a token
        longest = max(e["duration_ms"] for e in log) * 1000
        assert g["read"]["p50"] > 0 and g["read"]["max"] < longest, g
        # per route: the proxy's time does not depend on the tenant or model
        req = metric(t, 'tokentap_proxy_overhead_seconds_count{route="llm",stage="request"}')
        read = metric(t, 'tokentap_proxy_overhead_seconds_count{route="llm",stage="read"}')
        assert req == 20 and read == g["read"]["count"], (req, read, g)
        total = metric(t, "tokentap_proxy_overhead_seconds_sum{") * 1000
        assert abs(total - sum(e["overhead_ms"] for e in log)) < 1, total
        text = get(t.admin, "/metrics")
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr


def test_overhead_scraped_by_prometheus():
    """A real Prometheus scrapes the overhead histogram and answers a
    quantile per stage from its buckets."""
    prom = free_port()
    d = tempfile.mkdtemp(prefix="tt-prom-")
    with Mock() as m, Tokentap("routes:\n" + route(m.port)) as t:
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: tt\n"
                    f"    static_configs: [{{targets: ['127.0.0.1:{t.admin}']}}]\n")
        with Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                   f"--storage.tsdb.path={d}/data", f"--web.listen-address=127.0.0.1:{prom}"]):
            wait_port(prom, 20)
            stop = threading.Event()

            def traffic():
                while not stop.is_set():
                    load(t.url("/v1/chat/completions"), "-c", "4", "-n", "8",
                         "--max-tokens", "20", "-H", "X-Mock-TPOT: 5ms", "-H", "X-Mock-TTFT: 5ms")
            th = threading.Thread(target=traffic)
            th.start()
            try:
                q = ('histogram_quantile(0.5, sum by (le, stage) '
                     '(rate(tokentap_proxy_overhead_seconds_bucket[30s])))')

                def answer():
                    try:
                        res = json.loads(get(prom, "/api/v1/query?query=" +
                                             urllib.parse.quote(q)))
                    except urllib.error.HTTPError as e:
                        if e.code == 503:       # listening, not ready yet
                            return None
                        raise
                    got = {r["metric"]["stage"]: float(r["value"][1])
                           for r in res["data"]["result"] if r["value"][1] != "NaN"}
                    return got if set(got) == {"request", "read"} else None
                got = wait_for(answer, 30, "Prometheus quantiles per stage")
                assert all(0 < v < 0.1 for v in got.values()), got
            finally:
                stop.set()
                th.join()
