# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of tokentap-load against tokentap-mock.

The mock answers on a known schedule (TTFT, TPOT, token count, faults, set
by flags or X-Mock-* headers) and logs every request it served, so the
figures tokentap-load reports can be checked against what was scheduled and
the number of requests against what the server saw."""
import json
import os
import pty
import select
import signal
import statistics
import subprocess
import tempfile

from harness import CHAT, ROOT, Mock, Tokentap, binary, completion, conf, free_port, load, until
from peers import pki

# The prefix workload's 8 s are two runs' TTFTs (2,000-token prompts at
# 200 us a token, with and without the mock's cache), the clock's under
# ASan as without it. Its C paths run under ASan elsewhere: the client's
# prefixes and its first/repeat split in test_scenario_sets_the_shared_
# prefixes, the mock's cache in test_mock's test_prefix_cache_prefills_
# the_cached_blocks_at_their_cost, and both modules in tests/unit
# (test_load_prefix.c, test_mock_prefix.c).
SANITIZER_SKIP = {"test_prefix_workload_ttft_split_matches_the_mocks_prefix_cache"}


def within(value, want, abs_tol, rel_tol=0.0):
    return abs(value - want) <= max(abs_tol, rel_tol * want)


# ------------------------------------------------------------------ accuracy

def test_closed_loop_matches_schedule():
    """20 users against a mock scheduled at TTFT 150 ms, TPOT 20 ms: every
    request counted, on one connection per user; the client's TTFT never
    under the schedule, nor under the mock's own account of when it sent
    the first token (the client sent before the mock had the request and
    read after the mock sent). How close to 150 ms and 20 ms it comes is
    make bench's figure (the timing section)."""
    with Mock("--ttft", "150ms", "--tpot", "20ms") as m:
        j = load("-c", "20", "-d", "2.5s", "--max-tokens", "16", "--samples", m.url(CHAT))
        served = m.served(j["requests"])
    assert j["errors"] == 0, j["outcomes"]
    assert j["requests"] >= 20, j["requests"]       # each user finished one at least
    assert len(served) == j["requests"]
    assert j["output_tokens"] == 16 * j["requests"]
    assert j["ttft_ms"]["p50"] >= 150.0 - 0.5, j["ttft_ms"]   # never before the schedule
    # request by request, sorted alike: the client's TTFT against the mock's send
    mock_ttft = sorted(x["first_token_us"] / 1000 for x in served)
    load_ttft = sorted(x["ttft_ms"] for x in j["samples"])
    assert all(c >= s - 0.01 for c, s in zip(load_ttft, mock_ttft)), (load_ttft, mock_ttft)
    assert j["tpot_ms"]["p50"] >= 20.0 * 0.98, j["tpot_ms"]
    assert j["itl_ms"]["count"] == 15 * j["requests"]
    assert j["tpot_ms"]["count"] == j["requests"]
    # keep-alive: one connection per user for the whole run
    assert j["connections"] == 20, j["connections"]
    assert j["max_in_flight"] == 20


def test_open_loop_sends_the_scheduled_requests():
    """A fixed rate with -n sends exactly n requests, at their scheduled
    times; Poisson arrivals over a duration send about rate x duration."""
    with Mock("--ttft", "20ms", "--tpot", "5ms") as m:
        j = load("-r", "40", "-n", "50", "--arrivals", "uniform",
                 "--max-tokens", "4", "--samples", m.url(CHAT))
        assert j["config"]["mode"] == "open" and j["config"]["arrivals"] == "constant"
        assert j["requests"] == 50 and j["ok"] == 50
        assert len(m.served(50)) == 50
        starts = [s["start_ms"] for s in j["samples"]]
        assert sorted(starts) == sorted(25.0 * i for i in range(50)), starts[:5]
        # 40 requests/s of ~35 ms each: a few connections, reused (one a
        # request would be 50)
        assert j["connections"] <= 25, j["connections"]

        j = load("-r", "50", "-d", "2s", "--max-tokens", "4", m.url(CHAT))
        n = j["requests"]
        assert 60 <= n <= 140, n          # Poisson(100), beyond 4 sigma
        assert len(m.served(50 + n)) == 50 + n


def test_open_loop_counts_queueing():
    """With one connection and arrivals faster than the service, requests
    wait; timed from their scheduled start, that wait shows in TTFT (a
    closed loop, which waits for the server, would hide it)."""
    with Mock("--ttft", "50ms", "--tpot", "10ms") as m:
        j = load("-r", "20", "-n", "20", "-c", "1", "--arrivals", "uniform",
                 "--max-tokens", "2", m.url(CHAT))
        closed = load("-c", "1", "-n", "5", "--max-tokens", "2", m.url(CHAT))
    assert j["ok"] == 20 and j["connections"] == 1
    # each request takes ~60 ms, one arrives every 50 ms: the 20th waits
    # ~190 ms, the median ~100 ms; a busy host only adds to the wait
    assert j["ttft_ms"]["max"] > 180, j["ttft_ms"]
    assert j["ttft_ms"]["p50"] > 80, j["ttft_ms"]
    assert closed["ttft_ms"]["p50"] >= 50, closed["ttft_ms"]
    assert j["ttft_ms"]["p50"] > closed["ttft_ms"]["p50"] + 40, (j["ttft_ms"], closed["ttft_ms"])


# ------------------------------------------------------------------- outputs

QUANT_KEYS = {"count", "mean", "std", "min", "max", "p50", "p90", "p95", "p99"}
DOC_KEYS = {
    "schema_version", "tool", "version", "kind", "run_id", "started_at", "clock",
    "command", "target", "dialect", "model", "percentiles", "slice_s", "slo",
    "interrupted", "shard", "merged", "sweep", "capacity", "levels", "prompt_sizing",
    "tokentap_pairing", "tokentap_pairing_reason",
}
LEVEL_KEYS = {
    "index", "label", "key", "value", "search", "phase", "unsustained", "disturbed", "disturbed_runs",
    "disturbed_late_ms", "runs", "started_s",
    "monotonic_start_us", "config",
    "elapsed_s", "window", "interrupted", "requests", "ok", "errors", "error_rate",
    "outcomes", "errors_by_status", "warmup_requests", "cooldown_requests", "completed", "output_tokens",
    "input_tokens", "prompt_tokens_reported",
    "request_throughput", "output_throughput", "input_throughput",
    "total_token_throughput", "requests_per_s", "output_tokens_per_s", "connections",
    "max_in_flight", "ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "itl_cdf_ms", "e2el_ms",
    "output_speed", "dispatch_lag_ms", "chunks", "goodput", "slo", "drift",
    "input_fit", "slices", "generator", "tokentap", "tokentap_paired", "prefix_ttft_ms",
    "conversations", "samples",
}
CONFIG_KEYS = {
    "mode", "concurrency", "rate", "arrivals", "burstiness", "duration_s", "count",
    "warmup_s", "warmup_requests", "cooldown", "prompt_tokens", "max_tokens", "prompts",
    "trace",
    "timeout_s", "seed", "continuous_usage", "ramp_s", "prefixes",
    "conversation",
}
SAMPLE_KEYS = {
    "seq", "start_ms", "warmup", "cooldown", "outcome", "status", "ttft_ms", "ttfo_ms",
    "tpot_ms",
    "itl_max_ms", "e2el_ms", "dispatch_lag_ms", "queued", "connect_ms", "first_token_ms",
    "last_token_ms", "output_tokens", "token_source", "input_tokens", "reasoning_tokens",
    "output_speed", "events", "token_chunks", "first_chunk_tokens", "prompt_tokens",
    "max_tokens",
}


def test_json_has_every_field():
    with Mock("--ttft", "10ms", "--tpot", "2ms") as m, \
            tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        out = load("-c", "3", "-n", "9", "--prompt-tokens", "20-40", "--max-tokens", "5-8",
                   "--model", "m-1", "--json", path, "--samples", m.url(CHAT),
                   report=False).stdout
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
    assert set(j["outcomes"]) == {"ok", "client_abort", "client_timeout", "upstream_abort",
                                  "upstream_error", "rejected", "timeout", "connect_error"}
    for k in ("ttft_ms", "ttfo_ms", "tpot_ms", "itl_ms", "output_speed", "e2el_ms"):
        assert set(j[k]) == QUANT_KEYS, (k, j[k])
        assert j[k]["min"] <= j[k]["p50"] <= j[k]["p90"] <= j[k]["p95"] <= j[k]["p99"] \
            <= j[k]["max"]
    # the ITL's quantile function: its ends and middle are the distribution's
    cdf = j["itl_cdf_ms"]
    assert len(cdf) == 101 and cdf == sorted(cdf), cdf
    assert (cdf[0], cdf[50], cdf[100]) == (j["itl_ms"]["min"], j["itl_ms"]["p50"],
                                          j["itl_ms"]["max"])
    assert (cdf[90], cdf[95], cdf[99]) == (j["itl_ms"]["p90"], j["itl_ms"]["p95"],
                                          j["itl_ms"]["p99"])
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


def _prefix_run(cache):
    """tokentap-load -c 1 with 2 shared prefixes of 2,000 tokens (zipf)
    against a mock charging 200 us a prefill token, with its prefix cache
    (cached tokens at 0.1 of that) or without; the level and the mock's
    log lines by request seq."""
    flags = ["--ttft", "100ms", "--prefill-per-token", "200us"]
    if cache:
        flags += ["--prefix-cache", "60s"]
    with Mock(*flags) as m:
        doc = load("-c", "1", "-n", "10", "--max-tokens", "2", "--prompt-tokens", "40",
                   "--prefixes", "2", "--prefix-tokens", "2000", "--prefix-dist", "zipf:1.5",
                   "--samples", m.url(CHAT), whole=True)
        served = {int(x["request_id"].rsplit("-", 1)[1]): x for x in m.served(10)}
    # the saved document's report recomputes the same split
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        table = load("report", path, "--html", os.path.join(d, "run.html"),
                     report=False).stdout
        with open(os.path.join(d, "run.html")) as f:
            page = f.read()
        # another prefix workload is another workload to compare
        other = json.loads(json.dumps(doc))
        other["levels"][0]["config"]["prefixes"]["count"] = 3
        with open(os.path.join(d, "other.json"), "w") as f:
            json.dump(other, f)
        cmp = load("compare", path, os.path.join(d, "other.json"), report=False, expect=4)
        assert "workload differs at run: shared prefixes 2 x 2000 tokens, " \
            "zipf:1.5 in A, 3 x 2000 tokens, zipf:1.5 in B" in cmp.stdout, cmp.stdout
    j = doc["levels"][0]
    for row, k in ((" prefix first", "first"), (" prefix repeat", "repeat")):
        line = next(x for x in table.splitlines() if x.startswith(row))
        count, p50 = line[len(row):].split()[:2]
        # the same figure, recomputed from the samples' 3 decimals: to the
        # table's 2, within a rounding
        assert int(count) == j["prefix_ttft_ms"][k]["count"], (line, j["prefix_ttft_ms"])
        assert abs(float(p50) - j["prefix_ttft_ms"][k]["p50"]) <= 0.006, \
            (line, j["prefix_ttft_ms"])
        # the HTML report's distributions table has the same rows
        assert f'<tr data-metric="ttft_prefix_{k}"><td>' in page
        assert f'data-k="ttft_prefix_{k}_p50" data-value="' in page
    return j, served


def test_prefix_workload_ttft_split_matches_the_mocks_prefix_cache():
    """--prefixes against tokentap-mock --prefix-cache: each request's TTFT
    at the client is the model's ttft + 200 us x (input - cached + 0.1 x
    cached) within 5 %, the cached tokens the mock's; a prefix's first use
    is the request the mock found cold (only the JSON before the system
    message cached) and every repeat found the 2,000-token prefix. So
    first-use TTFT p50 minus repeat p50 is the modelled saving within 5 %.
    Without the cache the two are the same, within 5 %."""
    for cache in (True, False):
        j, served = _prefix_run(cache)
        assert j["errors"] == 0 and j["config"]["prefixes"] == {
            "count": 2, "tokens": 2000, "dist": "zipf:1.5"}, j["config"]
        firsts = [s for s in j["samples"] if s["prefix_first"]]
        assert {s["prefix"] for s in firsts} == {s["prefix"] for s in j["samples"]}
        assert len(firsts) == j["prefix_ttft_ms"]["prefixes_used"] == len(
            {s["prefix"] for s in j["samples"]})
        saved = []
        for s in j["samples"]:
            x = served[s["seq"]]
            tokens, cached = x["input_tokens"], x["cached_tokens"]
            assert s["prompt_tokens"] == 2040, s
            if not cache:
                assert cached == 0, x
            elif s["prefix_first"]:
                assert cached <= 16, (s, x)
            else:
                assert 2000 - 16 <= cached <= tokens, (s, x)
            want = 100 + 0.2 * (tokens - cached) + 0.02 * cached
            assert want <= s["ttft_ms"] <= want * 1.05, (s, x, want)
            if not s["prefix_first"]:
                saved.append(0.18 * cached)
        split = j["prefix_ttft_ms"]
        assert split["first"]["count"] == len(firsts), split
        assert split["repeat"]["count"] == 10 - len(firsts), split
        diff = split["first"]["p50"] - split["repeat"]["p50"]
        if cache:
            model = statistics.median(saved)
            assert abs(diff - model) <= 0.05 * model, (diff, model, split)
        else:
            assert abs(diff) <= 0.05 * split["repeat"]["p50"], split


def test_dialects_measured():
    """Each dialect's body makes the mock stream the asked-for tokens, and
    each dialect's stream is measured (tokens, TPOT, end marker)."""
    paths = ["/v1/completions", "/v1/responses", "/v1/messages",
             "/v1/chat-messages", "/v1beta/models/g:streamGenerateContent?alt=sse",
             "/generate_stream", "/api/chat", "/api/generate"]
    with Mock("--ttft", "5ms", "--tpot", "2ms") as m:
        for p in paths:
            j = load("-c", "2", "-n", "4", "--max-tokens", "6", m.url(p))
            assert j["ok"] == 4, (p, j["outcomes"])
            assert j["output_tokens"] == 24, (p, j["output_tokens"])
            assert j["tpot_ms"]["count"] == 4, (p, j["tpot_ms"])
            assert j["ttft_ms"]["p50"] >= 5, (p, j["ttft_ms"])


def test_progress_line_on_a_terminal():
    with Mock("--ttft", "20ms", "--tpot", "5ms") as m:
        master, slave = pty.openpty()
        p = subprocess.Popen([binary("tokentap-load"), "-c", "2", "-d", "2.3s",
                              "--max-tokens", "4", m.url(CHAT)],
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
            # every request fails: without the pre-flight, which would stop
            # at the first 500, and exit 3 (no request succeeded)
            j = load("-c", "2", "-n", "6", "--max-tokens", "5", "--no-preflight",
                     "-H", f"X-Mock-Fault: {fault}", m.url(CHAT), expect=3)
            assert j["requests"] == 6, (fault, j)
            assert j["outcomes"][outcome] == 6, (fault, j["outcomes"])
            assert j["errors"] == 6 and j["error_rate"] == 1.0
            assert j["ttft_ms"]["count"] == 0        # latency only of ok requests
        # a stall beyond --timeout
        j = load("-c", "2", "-n", "2", "--timeout", "300ms",
                 "-H", "X-Mock-Fault: stall-after:1", m.url(CHAT), expect=3)
        assert j["outcomes"]["timeout"] == 2, j["outcomes"]
        # 300 ms, not the default 60 s
        assert j["elapsed_s"] < 10.0


def test_proxy_and_load_agree_on_a_stream_cut_before_its_end_marker():
    """One outcome rule (docs/contract.md §4), decided in the shared meter: a
    close-delimited OpenAI stream that ends without [DONE] is
    upstream_abort in tokentap's access log and in tokentap-load alike; the
    same stream with its end marker is ok in both."""
    for fault, outcome in (("close-after:3", "upstream_abort"), (None, "ok")):
        flags = ["--framing", "close", "--ttft", "5ms", "--tpot", "2ms"]
        with Mock(*flags) as m, Tokentap(conf(m, name="chat", prefix="/v1/")) as t:
            args = ["-c", "1", "-n", "3", "--max-tokens", "6"]
            if fault:
                args += ["-H", f"X-Mock-Fault: {fault}"]
            # no request ok: exit 3
            j = load(*args, t.url(CHAT), expect=3 if fault else 0)
            assert j["outcomes"][outcome] == 3, j["outcomes"]
            logged = [e["outcome"] for e in t.wait_logged(3)]
            assert logged == [outcome] * 3, logged


def test_connect_error_and_usage():
    port = free_port()     # nothing listens there
    j = load("-c", "2", "-d", "300ms", "--no-preflight", f"http://127.0.0.1:{port}{CHAT}",
             expect=3)
    assert j["requests"] > 0 and j["outcomes"]["connect_error"] == j["requests"]
    assert j["error_rate"] == 1.0
    err = load("--cacert", "/x", f"http://127.0.0.1:{port}/", expect=2, report=False).stderr
    assert "https" in err
    err = load("-c", "0", f"http://127.0.0.1:{port}/", expect=2, report=False).stderr
    assert "--concurrency" in err
    load("--no-such-flag", expect=2, report=False)
    load(expect=2, report=False)                                   # no URL
    load("--dialect", "klingon", f"http://127.0.0.1:{port}/", expect=2, report=False)
    out = load("-V", report=False).stdout
    assert out.startswith("tokentap-load ")
    out = load("-h", report=False).stdout
    assert "--scenarios" in out and "--rate" in out and "sweep" in out


# ------------------------------------------------------ a benchmark's basics

def test_warmup_slices_and_exact_figures():
    """A warm-up of 1 s is sent but not counted; the window after it is
    sliced every 0.5 s; the figures are the exact ones of the samples."""
    with Mock("--ttft", "20ms", "--tpot", "4ms") as m:
        j = load("-c", "3", "--warmup", "1s", "-d", "1.5s", "--slice", "500ms",
                         "--max-tokens", "6", "--percentiles", "50,99.9", m.url(CHAT))
    assert j["config"]["warmup_s"] == 1.0
    samples = j["samples"]
    warm = [s for s in samples if s["warmup"]]
    counted = [s for s in samples if not s["warmup"]]
    assert warm and all(s["start_ms"] < 1000 for s in warm)
    assert all(s["start_ms"] >= 1000 for s in counted)
    assert j["requests"] == len(counted) and j["warmup_requests"] == len(warm)
    assert j["window"]["start_s"] == 1.0 and abs(j["window"]["length_s"] - 1.5) < 0.01
    ttft = sorted(s["ttft_ms"] for s in counted)
    h = (len(ttft) - 1) * 0.999
    lo = int(h)
    assert abs(j["ttft_ms"]["p99.9"] - (ttft[lo] + (h - lo) * (ttft[lo + 1] - ttft[lo]))) < 0.002
    assert abs(j["ttft_ms"]["mean"] - sum(ttft) / len(ttft)) < 0.002
    assert set(j["ttft_ms"]) == {"count", "mean", "std", "min", "max", "p50", "p99.9"}
    sl = j["slices"]
    assert len(sl) == 3 and [x["start_s"] for x in sl] == [1.0, 1.5, 2.0], sl
    assert sum(x["requests"] for x in sl) == j["requests"]
    for x in sl:
        # the schedule's, give or take a busy machine's late timers (two
        # CPU hogs beside it stretch a 4 ms gap by a millisecond or more)
        assert 19.5 < x["ttft_p50_ms"] < 60 and 3.9 < x["tpot_p50_ms"] < 8, x
        # 3 users, 40 ms a request of 6 tokens: 450 tokens/s at most
        assert 200 < x["output_tokens_per_s"] < 500, x
    # no drift: over the 1.5 s window the fitted TTFT moves by under 10 ms
    assert abs(j["drift"]["ttft_slope_ms_per_min"]) * 1.5 / 60 < 10, j["drift"]


def test_first_chunk_of_8_tokens_leaves_tpot_right():
    """A first chunk of 8 tokens, then one a chunk at 5 ms: with a usage on
    every chunk TPOT is 5 ms, the chunks and their tokens reported; without
    one the first chunk's tokens are unknown and (N - 1) makes it look
    faster, which the samples show."""
    with Mock("--ttft", "10ms", "--tpot", "5ms", "--first-chunk-tokens", "8") as m:
        j = load("-c", "2", "-n", "10", "--max-tokens", "20",
                         "--continuous-usage", m.url(CHAT))
        served = m.served(10)[:10]          # j's, all ended before plain's began
        plain = load("-c", "2", "-n", "4", "--max-tokens", "20", m.url(CHAT))
    # against the mock's own sends (5 ms a chunk, later on a busy host): its
    # first to last token over the 12 after the first chunk's 8
    gaps = sorted((x["last_token_us"] - x["first_token_us"]) / 1000 / 12 for x in served)
    mock_tpot = statistics.median(gaps)
    assert abs(j["tpot_ms"]["p50"] - mock_tpot) < 0.25, (j["tpot_ms"], gaps)
    assert abs(j["output_speed"]["p50"] - 1000 / mock_tpot) < 0.05 * 1000 / mock_tpot, \
        (j["output_speed"], gaps)
    ch = j["chunks"]
    assert ch["first_chunk_tokens"]["min"] == ch["first_chunk_tokens"]["max"] == 8, ch
    assert ch["token_chunks"]["p50"] == 13 and abs(ch["tokens_per_chunk"]["p50"] - 20 / 13) < 1e-3
    assert all(s["first_chunk_tokens"] == 8 and s["output_tokens"] == 20
               for s in j["samples"])
    # itl per chunk: the 12 gaps of each request, whose mean is the mock's
    # (a late send and the next one on schedule make one long gap and one
    # short: the median moves under a busy host, the mean does not)
    assert j["itl_ms"]["count"] == 120, j["itl_ms"]
    assert abs(j["itl_ms"]["mean"] - statistics.mean(gaps)) < 0.25, (j["itl_ms"], gaps)
    assert plain["chunks"]["first_chunk_tokens"]["count"] == 0
    # 12 gaps over 19: 0.63 of it
    assert plain["tpot_ms"]["p50"] < 0.75 * j["tpot_ms"]["p50"], plain["tpot_ms"]


def test_gamma_arrivals_have_their_mean_and_cv():
    """1000 requests at 400/s with a burstiness of 0.5, measured where they
    arrive (the mock's log of each request read, matched by X-Request-Id):
    gaps of mean 2.5 ms and a coefficient of variation of 1/sqrt(0.5) =
    1.41, within bounds some 4.5 standard errors wide (Poisson's 1.0 and
    k = 0.25's 2.0 fall outside). A busy machine's stalls, which bunch the
    sends, are each request's reported dispatch lag: taken out, the
    arrivals are the schedule's."""
    with Mock("--ttft", "1ms", "--tpot", "1ms", "--tokens", "1") as m:
        doc = load("-r", "400", "--arrivals", "gamma", "--burstiness", "0.5",
                   "-n", "1000", m.url(CHAT), whole=True)
        served = {x["request_id"]: x for x in m.served(1000)}
    j, prefix = doc["levels"][0], f"{doc['run_id']}-0-"
    assert j["config"]["arrivals"] == "gamma" and j["config"]["burstiness"] == 0.5
    assert j["requests"] == 1000 and j["ok"] == 1000, j["outcomes"]

    def moments(times):
        times = sorted(times)
        gaps = [b - a for a, b in zip(times, times[1:])]
        mean = sum(gaps) / len(gaps)
        return mean, (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean
    at_mock = [served[prefix + str(s["seq"])]["t_req_mono_us"] / 1000 -
               s["dispatch_lag_ms"] - (s["connect_ms"] or 0) for s in j["samples"]]
    mean, cv = moments(at_mock)
    assert 2.5 * 0.83 < mean < 2.5 * 1.17, mean
    # the schedule's CV is 1.40; the mock's own stalls (not taken out, seen
    # up to 2 s on this busy 2-CPU machine) bunch arrivals: room above
    assert 1.20 < cv < 1.95, cv
    mean_s, cv_s = moments([s["start_ms"] for s in j["samples"]])
    assert 1.20 < cv_s < 1.65 and abs(mean - mean_s) < 0.1, (cv_s, mean, mean_s)


def test_replayed_access_log_keeps_offsets_and_tokens():
    """tokentap's access log of 15 requests (Poisson, varied sizes) replayed
    to another mock: the requests arrive at their logged offsets (ts -
    duration_ms), on one timeline (the median shift between the two
    clocks' origins taken out, and a request that opened a connection
    given its connect time, which it reports): 12 of the 15 within 5 ms,
    and none beyond 30 ms (what a loaded machine's stall of the mock or
    the generator can add; offsets taken from ts alone would miss by the
    durations, 24 to 105 ms), each asking the logged output tokens and a
    prompt the logged input tokens long."""
    with Mock("--ttft", "15ms", "--tpot", "3ms") as m, \
            Tokentap("routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        load("-r", "12", "-n", "15", "--prompt-tokens", "20-400",
                  "--max-tokens", "3-30", "--seed", "5", t.url(CHAT))
        logged = t.access(15)
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m2:
        # a request before the replay: the mock's first one, cold (under
        # ASan on a busy machine 6 to 8 ms late in each of 4 runs of 15),
        # is not the replay's
        completion(m2.port, headers={"X-Request-Id": "warm-0"})
        j = load("--replay-log", t.log, m2.url(CHAT))
        # X-Request-Id ends with the request's number: the trace's order
        served = sorted([x for x in m2.served(16) if x["request_id"] != "warm-0"], key=lambda x: int(x["request_id"].rsplit("-", 1)[1]))
    import datetime

    def t0(x):
        ts = datetime.datetime.strptime(x["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
        return ts.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 - x["duration_ms"]
    logged.sort(key=t0)
    assert j["requests"] == 15 and j["config"]["trace"]["format"] == "access_log"
    mine = sorted(j["samples"], key=lambda x: x["seq"])
    # intended at the logged offsets; a busy machine's timer lateness is
    # each request's dispatch lag, reported, and its connect its own
    slack = [(x["connect_ms"] or 0) + x["dispatch_lag_ms"] for x in mine]
    for x, lg in zip(mine, logged):
        assert abs(x["start_ms"] - (t0(lg) - t0(logged[0]))) < 0.01, (x, lg)
    base_l, base_s = t0(logged[0]), served[0]["t_req_mono_us"]
    overhead = served[0]["input_tokens"] - logged[0]["input_tokens"]
    shifts = sorted((sv["t_req_mono_us"] - base_s) / 1000 - sl - (t0(lg) - base_l)
                    for lg, sv, sl in zip(logged, served, slack))
    shift = shifts[len(shifts) // 2]
    assert t0(logged[-1]) - base_l > 500             # the offsets spread
    misses = []
    for lg, sv, sl in zip(logged, served, slack):
        want = t0(lg) - base_l
        miss = abs((sv["t_req_mono_us"] - base_s) / 1000 - sl - shift - want)
        misses.append(round(miss, 3))
        assert sv["tokens"] == lg["output_tokens"], (sv, lg)
        # the same prompt size: the mock counts the body, the same overhead
        assert abs(sv["input_tokens"] - lg["input_tokens"] - overhead) <= 1
    assert sum(m <= 5 for m in misses) >= 12 and max(misses) <= 30, (misses, shifts)


def test_trace_prompts_and_bad_files():
    """A JSONL trace sends at its offsets with its tokens and headers;
    prompts of a file go as they are; a malformed line is an error at its
    FILE:LINE:COL, exit 2, before anything is sent."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        with open(trace, "w") as f:
            for i in range(6):
                f.write(json.dumps({"offset_ms": 100 * i, "prompt_tokens": 10 + i,
                                    "output_tokens": 2 + i,
                                    "headers": {"X-Mock-TTFT": f"{5 + i}ms"}}) + "\n")
        j = load("--trace", trace, m.url(CHAT))
        served = sorted(m.served(6), key=lambda x: x["t_req_mono_us"])
        assert [x["tokens"] for x in served] == [2, 3, 4, 5, 6, 7]
        assert [x["sched_first_token_us"] for x in served] == [5000 + 1000 * i
                                                                 for i in range(6)]
        starts = sorted(s["start_ms"] for s in j["samples"])
        assert all(abs(a - 100 * i) < 5 for i, a in enumerate(starts)), starts
        prompts = os.path.join(d, "p.jsonl")
        with open(prompts, "w") as f:
            f.write('{"messages": [{"role": "user", "content": "' + "x" * 400 + '"}], '
                    '"max_tokens": 4}\n')
        j = load("--prompts", prompts, "-n", "3", "-c", "1", m.url(CHAT))
        assert j["output_tokens"] == 12 and j["samples"][0]["prompt_tokens"] == 100
        assert all(x["input_tokens"] > 100 for x in m.served(9)[6:])
        bad = os.path.join(d, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"offset_ms": 0}\n{"offset_ms": 5, "output_tokens": "many"}\n')
        err = load("--trace", bad, m.url(CHAT), expect=2, report=False).stderr
        assert f"{bad}:2:35: output_tokens: expected a whole number" in err, err
        with open(bad, "w") as f:
            f.write('{"offset_ms": 0}\n\n{"offset_ms": 1,}\n')
        err = load("--trace", bad, m.url(CHAT), expect=2, report=False).stderr
        assert f"{bad}:3:17: a member name" in err, err
        err = load("--prompts", os.path.join(d, "none.jsonl"), m.url(CHAT), expect=2, report=False).stderr
        assert "none.jsonl" in err
        assert len(m.served(9, timeout=0.2)) == 9          # nothing more sent


def test_replays_no_run_can_mean_are_refused():
    """What a replay cannot mean is refused at its FILE:LINE:COL, exit 2,
    before anything is sent: an access-log line a duration of 1e300 ms
    long, a ts in year 1 and in 9999, a trace offset of 31 years, a log
    spanning 31 days, a day replayed at --trace-speed 0.01, and a file
    without newlines (/dev/zero was read 2
    GiB deep before it said "no requests")."""
    with Mock("--ttft", "1ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        def write(name, *lines):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write("".join(json.dumps(x) + "\n" for x in lines))
            return p

        log = write("dur.jsonl", {"ts": "2026-11-29T16:04:31Z", "duration_ms": 1e300})
        err = load("--replay-log", log, m.url(CHAT), expect=2, report=False).stderr
        assert f"{log}:1:47: duration_ms: expected at most 86400000 (a day)" in err, err
        log = write("years.jsonl", {"ts": "0001-01-01T00:00:00Z"},
                    {"ts": "9999-12-31T23:59:59Z"}, {"ts": "2026-11-29T16:04:31Z"})
        err = load("--replay-log", log, m.url(CHAT), expect=2, report=False).stderr
        assert f"{log}:1:8: ts: expected a time from 1970 to 2099" in err, err
        assert f"{log}:2:8: ts: expected a time from 1970 to 2099" in err, err
        log = write("month.jsonl", {"ts": "2026-01-01T00:00:00Z"},
                    {"ts": "2026-02-01T00:00:00Z"})
        err = load("--replay-log", log, m.url(CHAT), expect=2, report=False).stderr
        assert f"{log}:2:1: the requests span 31.0 days, from line 1" in err, err
        trace = write("years.jsonl", {"offset_ms": 0}, {"offset_ms": 1e12})
        err = load("--trace", trace, m.url(CHAT), expect=2, report=False).stderr
        assert f"{trace}:2:15: offset_ms: expected a time in ms from 0 to 2592000000" in err
        # a day at a hundredth of its speed: 100 days
        trace = write("day.jsonl", {"offset_ms": 0}, {"offset_ms": 86400000})
        err = load("--trace", trace, "--trace-speed", "0.01", m.url(CHAT), expect=2,
                   report=False, timeout=60).stderr
        assert f"{trace}: at --trace-speed 0.01 the requests span 100.0 days" in err, err
        err = load("--trace", "/dev/zero", m.url(CHAT), expect=2, report=False).stderr
        assert "/dev/zero:1:1: a line longer than 64 MiB" in err, err
        assert m.served(1, timeout=0.2) == []


def test_gaps_bounded_per_request():
    """A stream of more token chunks than a request keeps gaps for
    (65,536: 16 M one-token events took 96 MB) keeps a sample of that many,
    each one of the stream's gaps; its tokens and its longest gap are the
    stream's whole."""
    with Mock("--ttft", "1ms", "--tpot", "0", "--tokens", "70000") as m:
        j = load("-c", "1", "-n", "1", "--itl-samples", "--max-tokens", "70000", m.url(CHAT))
    s = j["samples"][0]
    assert s["outcome"] == "ok" and s["output_tokens"] == 70000, s["outcome"]
    assert s["token_chunks"] == 70000
    assert len(s["itl_ms"]) == 65536 and j["itl_ms"]["count"] == 65536
    assert max(s["itl_ms"]) <= s["itl_max_ms"]


def test_sigint_writes_the_levels_done():
    """SIGINT in a sweep's second level: it drains, stops, and the JSON
    holds the level that ran and the one cut short, exit 130."""
    with Mock("--ttft", "5ms", "--tpot", "2ms") as m, tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "s.json")
        p = subprocess.Popen([binary("tokentap-load"), "sweep", "--over", "concurrency",
                              "--levels", "1,2,4", "-d", "1s", "--warmup", "0",
                              "--max-tokens", "4", "--json", out, m.url(CHAT)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the second level has begun: its requests' ids end "-1-<seq>"
        until(lambda: p.poll() is not None or any("-1-" in (x["request_id"] or "")
                                                  for x in m.served(timeout=0)),
              20, "the second level")
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        stdout, stderr = p.communicate(timeout=20)
        assert p.returncode == 130, (p.returncode, stderr)
        with open(out) as f:
            doc = json.load(f)
    assert doc["interrupted"] and doc["sweep"]["stop_reason"] == "interrupted"
    assert [lv["value"] for lv in doc["levels"]] == [1, 2], doc["levels"]
    assert not doc["levels"][0]["interrupted"] and doc["levels"][1]["interrupted"]
    assert doc["levels"][1]["requests"] > 0
    assert "interrupted" in stdout


def test_https_target_with_verification():
    """tokentap with a TLS listener in front of the mock: verified against
    the test CA (--cacert), by name and by IP; refused against the system
    store and a CA that did not sign it (one clear error, connect_error
    counted); --insecure skips the check; a wrong --sni fails it."""
    p = pki()
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, \
            Tokentap(f"listen:\n  - address: 127.0.0.1:{{port}}\n    tls: {{cert: "
                     f"{p['server.crt']}, key: {p['server.key']}}}\n"
                     "routes:\n  - name: r\n    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        name = f"https://localhost:{t.port}{CHAT}"
        ip = f"https://127.0.0.1:{t.port}{CHAT}"
        for url in (name, ip):
            j = load("-c", "2", "-n", "6", "--max-tokens", "3", "--cacert", p["ca.crt"], url)
            assert j["ok"] == 6 and j["output_tokens"] == 18, j["outcomes"]
            assert j["connections"] == 2           # kept alive over TLS
        for args in ((), ("--cacert", p["evil.crt"]), ("--cacert", p["ca.crt"],
                                                       "--sni", "other.example")):
            j, err = load("-c", "1", "-n", "2", "--max-tokens", "3", "--no-preflight", *args,
                          name, stderr=True, expect=3)
            assert j["outcomes"]["connect_error"] == 2, (args, j["outcomes"])
            assert err.count("certificate verification failed") == 1, err
        j, err = load("-c", "1", "-n", "2", "--max-tokens", "3", "--insecure", name,
                      stderr=True)
        assert j["ok"] == 2 and "not checked" in err
        err = load("--cacert", os.path.join(p["dir"], "nope.crt"), name, expect=2,
                   report=False).stderr
        assert "nope.crt" in err
        assert all(x["outcome"] == "ok" for x in t.access())


# ---------------------------------------------------------------- scenarios

SCENARIOS = """\
target: {url}
max_tokens: 8
scenarios:
  - name: short
    concurrency: 4
    duration: 1s
    headers: {{X-Mock-TTFT: 40ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: {ttft}, tpot_p50: 100ms, error_rate: 0}}
  - name: busy
    baseline: short
    concurrency: 12
    requests: 24
    headers: {{X-Mock-TTFT: 40ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 2s, tpot_degradation: 3.0}}
"""


def test_scenario_sets_the_shared_prefixes():
    """A scenario's prefixes, prefix_tokens and prefix_dist are the flags';
    a value the flag refuses is FILE:LINE:COL, exit 2."""
    with Mock("--ttft", "10ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.yaml")
        with open(path, "w") as f:
            f.write(f"target: {m.url(CHAT)}\nmax_tokens: 2\nscenarios:\n"
                    "  - name: shared\n    concurrency: 2\n    requests: 6\n"
                    "    prefixes: 3\n    prefix_tokens: 64\n    prefix_dist: zipf:1\n"
                    "    targets: {error_rate: 0}\n")
        js = os.path.join(d, "s.json")
        load("--scenarios", path, "--json", js, report=False)
        with open(js) as f:
            sc = json.load(f)["scenarios"][0]
        assert sc["config"]["prefixes"] == {"count": 3, "tokens": 64, "dist": "zipf:1"}, sc
        assert sc["prefix_ttft_ms"]["first"]["count"] + \
            sc["prefix_ttft_ms"]["repeat"]["count"] == 6, sc["prefix_ttft_ms"]
        with open(path, "w") as f:
            f.write(f"target: {m.url(CHAT)}\nscenarios:\n  - name: x\n"
                    "    prefix_dist: zipf:0\n")
        r = load("--scenarios", path, report=False, expect=2)
        assert "s.yaml:4:18: scenarios[0].prefix_dist: zipf:S wants S above 0" in r.stderr, \
            r.stderr


def test_scenarios_pass_and_fail():
    with Mock() as m, tempfile.TemporaryDirectory() as d:
        good = os.path.join(d, "good.yaml")
        with open(good, "w") as f:
            f.write(SCENARIOS.format(url=m.url(CHAT), ttft="1s"))
        js = os.path.join(d, "s.json")
        out = load("--scenarios", good, "--json", js, report=False).stdout
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
        assert ttft["unit"] == "ms" and ttft["limit"] == 1000
        assert 40 <= ttft["value"] < 1000

        bad = os.path.join(d, "impossible.yaml")
        with open(bad, "w") as f:
            f.write(SCENARIOS.format(url=m.url(CHAT), ttft="1ms"))
        out = load("--scenarios", bad, expect=1, report=False).stdout
        assert "scenario short: FAIL" in out, out
        assert "ttft_p95" in out and "FAIL" in out

        # --only runs the scenario and the baseline it needs
        out = load("--scenarios", bad, "--only", "busy", expect=0, report=False).stdout
        assert "== scenario short (baseline)" in out and "scenario busy: PASS" in out
        load("--scenarios", bad, "--only", "nope", expect=2, report=False)


def test_scenario_file_errors():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "broken.yaml")
        with open(path, "w") as f:
            f.write("target: http://127.0.0.1:9/v1/chat/completions\n"
                    "scenarios:\n"
                    "  - name: a\n"
                    "    concurency: 5\n"
                    "    targets: {ttft_p95: fast}\n")
        err = load("--scenarios", path, expect=2, report=False).stderr
        # the messages of tokentap's config: the key's path, the did-you-mean
        assert f"{path}:4:5: unknown key 'concurency' in scenarios[0]; " \
            "did you mean 'concurrency'?" in err, err
        assert f"{path}:5:25: scenarios[0].targets.ttft_p95: expected a duration" in err, err
    # the shipped matrix is valid
    out = load("--scenarios", os.path.join(ROOT, "conf", "scenarios.yaml"), "-t",
               report=False).stdout
    assert out.strip() == "scenarios OK (4)"

