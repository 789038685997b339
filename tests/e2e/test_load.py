"""End-to-end tests of tokentap-load against tokentap-mock.

The mock answers on a known schedule (TTFT, TPOT, token count, faults, set
by flags or X-Mock-* headers) and logs every request it served, so the
figures tokentap-load reports can be checked against what was scheduled and
the number of requests against what the server saw.
Run alone with `python3 tests/e2e/test_load.py [name-filter]`.
"""
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ROOT, binary, free_port  # noqa: E402

CHAT = "/v1/chat/completions"
SAN_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


class Mock(harness.Mock):
    def url(self, path=CHAT):
        return super().url(path)


def load(*args, expect=0, timeout=60):
    """Runs tokentap-load; returns (stdout, stderr) after checking the exit
    status and that no sanitizer spoke."""
    r = subprocess.run([binary("tokentap-load"), *args], capture_output=True,
                       text=True, timeout=timeout)
    for mark in SAN_MARKS:
        assert mark not in r.stderr, r.stderr[-6000:]
    assert r.returncode == expect, \
        f"exit {r.returncode}, wanted {expect}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout, r.stderr


def load_doc(*args, expect=0):
    """The whole JSON document (docs/load-schema.md) and stderr."""
    out, err = load(*args, "--json", "-", expect=expect)
    return json.loads(out), err


def load_json(*args, expect=0):
    """A single run's level and stderr."""
    doc, err = load_doc(*args, expect=expect)
    assert doc["schema_version"] == 1 and doc["kind"] == "run", doc.keys()
    assert len(doc["levels"]) == 1
    return doc["levels"][0], err


def within(value, want, abs_tol, rel_tol=0.0):
    return abs(value - want) <= max(abs_tol, rel_tol * want)


# ------------------------------------------------------------------ accuracy

def test_closed_loop_matches_schedule():
    """20 users against a mock scheduled at TTFT 150 ms, TPOT 20 ms: the
    client-side P50s are that schedule within a few ms / 2 %."""
    with Mock("--ttft", "150ms", "--tpot", "20ms") as m:
        j, _ = load_json("-c", "20", "-d", "2.5s", "--max-tokens", "16", m.url())
        served = m.served(j["requests"])
    assert j["errors"] == 0, j["outcomes"]
    assert j["requests"] >= 60, j["requests"]       # 20 users x >= 3 rounds of 0.45 s
    assert len(served) == j["requests"]
    assert j["output_tokens"] == 16 * j["requests"]
    assert within(j["ttft_ms"]["p50"], 150.0, 4.0), j["ttft_ms"]
    assert j["ttft_ms"]["p50"] >= 150.0 - 0.5, j["ttft_ms"]   # never before the schedule
    assert within(j["tpot_ms"]["p50"], 20.0, 0, 0.02), j["tpot_ms"]
    assert within(j["itl_ms"]["p50"], 20.0, 0, 0.03), j["itl_ms"]
    assert j["itl_ms"]["count"] == 15 * j["requests"]
    assert j["tpot_ms"]["count"] == j["requests"]
    # keep-alive: one connection per user for the whole run
    assert j["connections"] == 20, j["connections"]
    assert j["max_in_flight"] == 20
    # the mock's own account of when it sent the first token agrees
    mock_ttft = sorted(x["first_token_us"] / 1000 for x in served)
    assert within(j["ttft_ms"]["p50"], mock_ttft[len(mock_ttft) // 2], 4.0)


def test_open_loop_sends_the_scheduled_requests():
    """A fixed rate with -n sends exactly n requests, at their scheduled
    times; Poisson arrivals over a duration send about rate x duration."""
    with Mock("--ttft", "20ms", "--tpot", "5ms") as m:
        j, _ = load_json("-r", "40", "-n", "50", "--arrivals", "uniform",
                         "--max-tokens", "4", "--samples", m.url())
        assert j["config"]["mode"] == "open" and j["config"]["arrivals"] == "constant"
        assert j["requests"] == 50 and j["ok"] == 50
        assert len(m.served(50)) == 50
        starts = [s["start_ms"] for s in j["samples"]]
        assert sorted(starts) == sorted(25.0 * i for i in range(50)), starts[:5]
        # 40 requests/s of ~35 ms each: a handful of connections, reused
        assert j["connections"] <= 10, j["connections"]

        j, _ = load_json("-r", "50", "-d", "2s", "--max-tokens", "4", m.url())
        n = j["requests"]
        assert 60 <= n <= 140, n          # Poisson(100), beyond 4 sigma
        assert len(m.served(50 + n)) == 50 + n


def test_open_loop_counts_queueing():
    """With one connection and arrivals faster than the service, requests
    wait; timed from their scheduled start, that wait shows in TTFT (a
    closed loop, which waits for the server, would hide it)."""
    with Mock("--ttft", "50ms", "--tpot", "10ms") as m:
        j, _ = load_json("-r", "20", "-n", "20", "-c", "1", "--arrivals", "uniform",
                         "--max-tokens", "2", m.url())
        closed, _ = load_json("-c", "1", "-n", "5", "--max-tokens", "2", m.url())
    assert j["ok"] == 20 and j["connections"] == 1
    # each request takes ~60 ms, one arrives every 50 ms: the 20th waits ~190 ms
    assert j["ttft_ms"]["max"] > 180, j["ttft_ms"]
    assert j["ttft_ms"]["p50"] > 80, j["ttft_ms"]
    assert closed["ttft_ms"]["max"] < 70, closed["ttft_ms"]


# ------------------------------------------------------------------- outputs

QUANT_KEYS = {"count", "mean", "std", "min", "max", "p50", "p90", "p95", "p99"}
DOC_KEYS = {
    "schema_version", "tool", "version", "kind", "run_id", "started_at", "clock",
    "command", "target", "dialect", "model", "percentiles", "slice_s", "slo",
    "interrupted", "sweep", "capacity", "levels",
}
LEVEL_KEYS = {
    "index", "label", "key", "value", "search", "phase", "runs", "started_s", "config",
    "elapsed_s", "window", "interrupted", "requests", "ok", "errors", "error_rate",
    "outcomes", "warmup_requests", "completed", "output_tokens", "input_tokens",
    "request_throughput", "output_throughput", "input_throughput",
    "total_token_throughput", "requests_per_s", "output_tokens_per_s", "connections",
    "max_in_flight", "ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "e2el_ms",
    "output_speed", "dispatch_lag_ms", "chunks", "goodput", "slo", "drift",
    "input_fit", "slices", "generator", "tokentap", "samples",
}
CONFIG_KEYS = {
    "mode", "concurrency", "rate", "arrivals", "burstiness", "duration_s", "count",
    "warmup_s", "warmup_requests", "prompt_tokens", "max_tokens", "prompts", "trace",
    "timeout_s", "seed", "continuous_usage", "ramp_s",
}
SAMPLE_KEYS = {
    "seq", "start_ms", "warmup", "outcome", "status", "ttft_ms", "ttfo_ms", "tpot_ms",
    "itl_max_ms", "e2el_ms", "dispatch_lag_ms", "queued", "first_token_ms",
    "last_token_ms", "output_tokens", "token_source", "input_tokens", "reasoning_tokens",
    "output_speed", "events", "token_chunks", "first_chunk_tokens", "prompt_tokens",
    "max_tokens",
}


def test_json_has_every_field():
    with Mock("--ttft", "10ms", "--tpot", "2ms") as m, \
            tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        out, _ = load("-c", "3", "-n", "9", "--prompt-tokens", "20-40",
                      "--max-tokens", "5-8", "--model", "m-1", "--json", path,
                      "--samples", m.url())
        with open(path) as f:
            doc = json.load(f)
    assert set(doc) == DOC_KEYS, set(doc) ^ DOC_KEYS
    j = doc["levels"][0]
    assert set(j) == LEVEL_KEYS, set(j) ^ LEVEL_KEYS
    assert set(j["config"]) == CONFIG_KEYS, set(j["config"]) ^ CONFIG_KEYS
    assert "TTFT ms" in out and "p95" in out       # the table still went to stdout
    assert doc["tool"] == "tokentap-load" and doc["model"] == "m-1"
    assert doc["dialect"] == "openai" and j["config"]["mode"] == "closed"
    assert doc["percentiles"] == [50, 90, 95, 99]
    assert j["config"]["prompt_tokens"] == [20, 40] and j["config"]["max_tokens"] == [5, 8]
    assert set(j["outcomes"]) == {"ok", "client_abort", "upstream_abort", "upstream_error",
                                  "rejected",
                                  "timeout", "connect_error"}
    for k in ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "output_speed", "e2el_ms"):
        assert set(j[k]) == QUANT_KEYS, (k, j[k])
        assert j[k]["min"] <= j[k]["p50"] <= j[k]["p90"] <= j[k]["p95"] <= j[k]["p99"] \
            <= j[k]["max"]
    assert j["request_throughput"] == j["requests_per_s"] > 0
    assert j["output_throughput"] == j["output_tokens_per_s"] > 0
    assert j["total_token_throughput"] > j["output_throughput"]
    assert len(j["samples"]) == j["requests"] == 9
    total = 0
    for s in j["samples"]:
        assert set(s) == SAMPLE_KEYS, set(s) ^ SAMPLE_KEYS
        assert s["outcome"] == "ok" and s["status"] == 200 and not s["warmup"]
        assert 20 <= s["prompt_tokens"] <= 40 and 5 <= s["max_tokens"] <= 8
        # the mock streams the max tokens asked for, and reports them
        assert s["output_tokens"] == s["max_tokens"] and s["token_source"] == "usage"
        assert s["tpot_ms"] is not None and s["ttft_ms"] >= 10
        total += s["output_tokens"]
    assert j["output_tokens"] == total


def test_dialects_measured():
    """Each dialect's body makes the mock stream the asked-for tokens, and
    each dialect's stream is measured (tokens, TPOT, end marker)."""
    paths = ["/v1/completions", "/v1/responses", "/v1/messages",
             "/v1/chat-messages", "/v1beta/models/g:streamGenerateContent?alt=sse",
             "/generate_stream", "/api/chat", "/api/generate"]
    with Mock("--ttft", "5ms", "--tpot", "2ms") as m:
        for p in paths:
            j, _ = load_json("-c", "2", "-n", "4", "--max-tokens", "6", m.url(p))
            assert j["ok"] == 4, (p, j["outcomes"])
            assert j["output_tokens"] == 24, (p, j["output_tokens"])
            assert j["tpot_ms"]["count"] == 4, (p, j["tpot_ms"])
            assert j["ttft_ms"]["p50"] >= 5, (p, j["ttft_ms"])


def test_progress_line_on_a_terminal():
    with Mock("--ttft", "20ms", "--tpot", "5ms") as m:
        master, slave = pty.openpty()
        p = subprocess.Popen([binary("tokentap-load"), "-c", "2", "-d", "2.3s",
                              "--max-tokens", "4", m.url()],
                             stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            r, _, _ = select.select([master], [], [], 10)
            if not r:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        out, _ = p.communicate(timeout=10)
        os.close(master)
    assert p.returncode == 0
    text = seen.decode(errors="replace")
    assert text.count("\r") >= 2 and "done " in text and "p95 TTFT" in text, text
    assert "in flight" in text
    assert "\r" not in out.decode(), "progress must not go to stdout"


# ------------------------------------------------------------------- errors

def test_faults_counted():
    with Mock("--ttft", "5ms", "--tpot", "2ms") as m:
        cases = [("status:500", "upstream_error"), ("error-after:2", "upstream_error"),
                 ("close-after:2", "upstream_abort")]
        for fault, outcome in cases:
            j, _ = load_json("-c", "2", "-n", "6", "--max-tokens", "5",
                             "-H", f"X-Mock-Fault: {fault}", m.url())
            assert j["requests"] == 6, (fault, j)
            assert j["outcomes"][outcome] == 6, (fault, j["outcomes"])
            assert j["errors"] == 6 and j["error_rate"] == 1.0
            assert j["ttft_ms"]["count"] == 0        # latency only of ok requests
        # a stall beyond --timeout
        j, _ = load_json("-c", "2", "-n", "2", "--timeout", "300ms",
                         "-H", "X-Mock-Fault: stall-after:1", m.url())
        assert j["outcomes"]["timeout"] == 2, j["outcomes"]
        assert j["elapsed_s"] < 2.0


def test_proxy_and_load_agree_on_a_stream_cut_before_its_end_marker():
    """One outcome rule (SPEC §4), decided in the shared meter: a
    close-delimited OpenAI stream that ends without [DONE] is
    upstream_abort in tokentap's access log and in tokentap-load alike; the
    same stream with its end marker is ok in both."""
    from harness import Tokentap
    for fault, outcome in (("close-after:3", "upstream_abort"), (None, "ok")):
        flags = ["--framing", "close", "--ttft", "5ms", "--tpot", "2ms"]
        with Mock(*flags) as m, Tokentap(
                "routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                f"    upstream: http://127.0.0.1:{m.port}\n") as t:
            args = ["-c", "1", "-n", "3", "--max-tokens", "6"]
            if fault:
                args += ["-H", f"X-Mock-Fault: {fault}"]
            j, _ = load_json(*args, t.url(CHAT))
            assert j["outcomes"][outcome] == 3, j["outcomes"]
            logged = [e["outcome"] for e in t.access(3)]
            assert logged == [outcome] * 3, logged


def test_connect_error_and_usage():
    port = free_port()     # nothing listens there
    j, _ = load_json("-c", "2", "-d", "300ms", f"http://127.0.0.1:{port}{CHAT}")
    assert j["requests"] > 0 and j["outcomes"]["connect_error"] == j["requests"]
    assert j["error_rate"] == 1.0
    _, err = load("--cacert", "/x", f"http://127.0.0.1:{port}/", expect=2)
    assert "https" in err
    _, err = load("-c", "0", f"http://127.0.0.1:{port}/", expect=2)
    assert "--concurrency" in err
    load("--no-such-flag", expect=2)
    load(expect=2)                                   # no URL
    load("--dialect", "klingon", f"http://127.0.0.1:{port}/", expect=2)
    out, _ = load("-V")
    assert out.startswith("tokentap-load ")
    out, _ = load("-h")
    assert "--scenarios" in out and "--rate" in out and "sweep" in out


# ---------------------------------------------------------------- scenarios

SCENARIOS = """\
target: {url}
max_tokens: 8
scenarios:
  - name: short
    concurrency: 4
    duration: 1s
    headers: {{X-Mock-TTFT: 40ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: {ttft}, tpot_p50: 10ms, error_rate: 0}}
  - name: busy
    baseline: short
    concurrency: 12
    requests: 24
    headers: {{X-Mock-TTFT: 40ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 500ms, tpot_degradation: 0.2}}
"""


def test_scenarios_pass_and_fail():
    with Mock() as m, tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.yaml")
        with open(good, "w") as f:
            f.write(SCENARIOS.format(url=m.url(), ttft="200ms"))
        js = os.path.join(d, "s.json")
        out, _ = load("--scenarios", good, "--json", js)
        assert "scenario short: PASS" in out and "scenario busy: PASS" in out, out
        with open(js) as f:
            j = json.load(f)
        assert j["passed"] is True
        assert [s["name"] for s in j["scenarios"]] == ["short", "busy"]
        busy = j["scenarios"][1]
        assert busy["baseline"] == "short" and busy["requests"] == 24
        assert [t["name"] for t in busy["targets"]] == ["ttft_p95", "tpot_degradation"]
        assert all(t["passed"] for t in busy["targets"])
        ttft = j["scenarios"][0]["targets"][0]
        assert ttft["unit"] == "ms" and ttft["limit"] == 200
        assert 40 <= ttft["value"] < 200

        bad = os.path.join(d, "impossible.yaml")
        with open(bad, "w") as f:
            f.write(SCENARIOS.format(url=m.url(), ttft="1ms"))
        out, _ = load("--scenarios", bad, expect=1)
        assert "scenario short: FAIL" in out, out
        assert "ttft_p95" in out and "FAIL" in out

        # --only runs the scenario and the baseline it needs
        out, _ = load("--scenarios", bad, "--only", "busy", expect=0)
        assert "== scenario short (baseline)" in out and "scenario busy: PASS" in out
        load("--scenarios", bad, "--only", "nope", expect=2)


def test_scenario_file_errors():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "broken.yaml")
        with open(path, "w") as f:
            f.write("target: http://127.0.0.1:9/v1/chat/completions\n"
                    "scenarios:\n"
                    "  - name: a\n"
                    "    concurency: 5\n"
                    "    targets: {ttft_p95: fast}\n")
        _, err = load("--scenarios", path, expect=2)
        # the messages of tokentap's config: the key's path, the did-you-mean
        assert f"{path}:4:5: unknown key 'concurency' in scenarios[0]; " \
            "did you mean 'concurrency'?" in err, err
        assert f"{path}:5:25: scenarios[0].targets.ttft_p95: expected a duration" in err, err
    # the shipped matrix is valid
    out, _ = load("--scenarios", os.path.join(ROOT, "conf", "scenarios.yaml"), "-t")
    assert out.strip() == "scenarios OK (4)"


if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name in sorted(n for n in dir() if n.startswith("test_") and only in n):
        t = time.monotonic()
        globals()[name]()
        print(f"ok   {name} ({time.monotonic() - t:.1f}s)")
