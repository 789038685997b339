# SPDX-License-Identifier: Apache-2.0
"""End-to-end test of make bench's smoke mode (tests/bench/bench.py --quick).

Checks that one quick run produces every figure, with values that can be
true (positive, finite, ordered quantiles, counts that match the load),
never against timing targets: the machine's speed is not under test. The
run is made once, by the first test that needs it; each section is a test
of its own.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

from harness import ROOT, Mock, load, run

# make check leaves out what needs the bench; valgrind and the proxies'
# CPU figures mean nothing under ASan
CHECK_SKIP = {"*"}
BENCH_TESTS = ("test_bench_latency", "test_bench_throughput", "test_bench_memory",
               "test_bench_instructions", "test_bench_stallfree", "test_bench_generator",
               "test_bench_timing", "test_bench_targets_and_tables")
SANITIZER_SKIP = set(BENCH_TESTS)
# the first of them runs the bench (about 4 minutes on 2 busy cores)
TIME_LIMITS = {name: 600 for name in BENCH_TESTS}

BENCH = os.path.join(ROOT, "tests", "bench", "bench.py")
_RUN = {}


def quick_run():
    """bench.py --quick, once: (its JSON, its Markdown, its stdout)."""
    if not _RUN:
        with tempfile.TemporaryDirectory(prefix="tt-bench-") as d:
            out = os.path.join(d, "bench.json")
            # every section a test below checks; the TLS rows (80 s even
            # quick) and the OpenTelemetry export's cost are make bench's
            only = "latency,stallfree,throughput,memory,instructions,generator,timing"
            r = subprocess.run([sys.executable, BENCH, "--quick", "--only", only, "--out", out],
                               capture_output=True, text=True, timeout=540)
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            with open(out) as f:
                _RUN["json"] = json.load(f)
            with open(os.path.join(d, "bench.md")) as f:
                _RUN["md"] = f.read()
            _RUN["stdout"] = r.stdout
    return _RUN["json"]


def figure(v, what, positive=False):
    """A number that can be true: finite, not negative (positive: above 0)."""
    assert isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and \
        (v > 0 if positive else v >= 0), f"{what}: {v!r}"


def test_bench_latency():
    lat = quick_run()["latency"]
    assert lat, "no latency levels"
    for k, level in lat.items():
        n = int(k)
        for name in ("direct", "floor", "tokentap", "nginx"):
            m = level[name]["median"]
            where = f"latency {k} {name}"
            for q in ("lag_p50_us", "lag_p99_us", "lag_max_us"):
                figure(m[q], f"{where} {q}")
            assert m["lag_p50_us"] <= m["lag_p99_us"] <= m["lag_max_us"], (where, m)
            # a trip over loopback takes some µs, and not a minute
            assert 0 < m["lag_max_us"] < 60e6, (where, m)
            # every token event of every stream carried a stamp
            assert m["lag_events"] == m["events"], (where, m)
            assert m["errors"] == 0, (where, m)
            assert m["requests"] >= n, (where, m)
            figure(m["events_per_s"], f"{where} events_per_s", True)
            # the mock's schedule: TTFT 50 ms, TPOT 20 ms, seen from the
            # client (a late first token shortens the TPOT it sees)
            assert 50 <= m["ttft_p50_ms"] < 5000, (where, m)
            assert 15 <= m["tpot_p50_ms"] < 1000, (where, m)
            if name == "direct":
                assert m["proxy_cpu_s"] is None
            else:
                figure(m["proxy_cpu_s"], f"{where} proxy_cpu_s", True)
                figure(m["cpu_s_per_M_events"], f"{where} cpu/event", True)
            for r in level[name]["runs"]:
                figure(r["other_cpu_s"], f"{where} other_cpu_s")
        for name in ("floor", "tokentap", "nginx"):
            added = level["added"][name]
            for key in ("lag_p50_us", "lag_p99_us", "lag_max_us", "ttft_p50_ms"):
                figure(abs(added[key]), f"{k} {name} added {key}")
            want = level[name]["median"]["lag_p50_us"] - level["direct"]["median"]["lag_p50_us"]
            assert abs(added["lag_p50_us"] - want) < 1e-6
        acc = level["accuracy"]
        # every request tokentap logged is found in the mock's log
        assert acc["matched"] == level["tokentap"]["median"]["requests"], acc
        for key in ("ttft_abs_err_ms", "tpot_abs_err_ms", "tpot_rel_err_pct"):
            figure(acc[key]["median"], f"accuracy {key}")
            assert acc[key]["median"] <= acc[key]["max"], (key, acc)
        # tokentap sees the first token after the mock sent it, but not a
        # whole TTFT (50 ms) later
        assert acc["ttft_abs_err_ms"]["median"] < 50, acc
        assert 0 <= acc["within_target"] <= 1, acc


def test_bench_throughput():
    res = quick_run()
    tp, proxy_cpus = res["throughput"], len(res["machine"]["pinning"]["proxy"])
    for name in ("direct", "floor", "tokentap", "nginx"):
        m = tp[name]["median"]
        figure(m["events_per_s"], f"throughput {name}", True)
        assert m["errors"] == 0, (name, m)
        assert m["events"] % tp["tokens_per_stream"] == 0, (name, m)
        if name != "direct":
            figure(m["cpu_s_per_M_events"], f"throughput {name} cpu/event", True)
            # a share of the CPUs the proxy is pinned to
            assert 0 < m["proxy_cpu_util"] <= 1.05 * proxy_cpus, (name, m)
            figure(m["ceiling_events_per_s"], f"throughput {name} ceiling", True)


def test_bench_memory():
    mem = quick_run()["memory"]
    assert mem, "no memory levels"
    for k, level in mem.items():
        for name in ("tokentap", "nginx"):
            m = level[name]["median"]
            figure(m["idle_rss_kib"], f"memory {k} {name} idle", True)
            assert m["rss_kib"] >= m["idle_rss_kib"], (k, name, m)
            # the load held every stream open while RSS was read
            assert m["open_streams"] >= 0.95 * int(k), (k, name, m)
            # a stream costs something, and less than a megabyte
            assert 0 < m["kib_per_stream"] < 1024, (k, name, m)


def test_bench_instructions():
    ins = quick_run()["instructions"]
    events = ins["streams"] * ins["tokens_per_stream"]
    for name in ("floor", "tokentap", "nginx"):
        m = ins[name]
        assert m["events"] == events, (name, m)
        # forwarding an event takes more than a few instructions, and less
        # than the ten million valgrind would take to start up
        assert 100 < m["per_event"] < 10_000_000, (name, m)
        assert abs(m["per_event"] * m["events"] - m["instructions"]) < 1, m
    for name in ("tokentap", "nginx"):
        for kind in ("self", "inclusive"):
            prof = ins[name][kind]
            assert all(0 < p["share"] <= 1 for p in prof), (name, kind, prof)
        assert ins[name]["self"], name
    # the hot path runs through tokentap's own code
    assert ins["tokentap"]["inclusive"], ins["tokentap"]


def test_bench_stallfree():
    sf, cap = quick_run()["stallfree"], 100
    for name in ("direct", "floor", "tokentap", "nginx"):
        m = sf[name]
        assert m["probes"], (name, m)
        # the answer is a level that passed, or 0 when the first failed
        passed = [p["streams"] for p in m["probes"] if p["passed"]]
        assert m["streams"] == max(passed, default=0), (name, m)
        assert m["capped"] == all(p["passed"] for p in m["probes"]), (name, m)
        for p in m["probes"]:
            assert p["streams"] <= cap and p["requests"] == p["streams"], (name, p)
            assert p["passed"] == (p["why"] == ""), (name, p)


def test_bench_generator():
    """The client's own accuracy against the mock's send times: every
    request matched, errors of a plausible size, the CPU per event and
    the one-core ceiling from the same run."""
    g = quick_run()["generator"]
    c = g["100"]
    assert c["matched"] == c["requests"] > 0, c
    for k in ("p50", "p99", "max"):
        # the read follows the send: a small positive delay
        assert -0.5 < c["ttft_err_ms"][k] < 1000, c
        assert 0 <= c["tpot_err_pct"][k] < 100, c
    assert c["ttft_err_ms"]["p50"] <= c["ttft_err_ms"]["p99"] <= c["ttft_err_ms"]["max"]
    assert 0 < c["cpu_us_per_event"] < 1000, c
    tp = g["throughput"]
    assert 200 * 2000 <= tp["events"] <= 200 * 2010, tp      # and a few non-token events
    assert abs(tp["events_per_cpu_s"] * tp["cpu_us_per_event"] - 1e6) < 1, tp


def test_bench_targets_and_tables():
    tg = quick_run()["targets"]
    names = " | ".join(t["name"] for t in tg)
    for word in ("added latency p50", "added latency p99", "CPU per event",
                 "memory per open stream", "TTFT error", "TPOT error",
                 "CPU per event vs the floor", "instructions per event vs nginx"):
        assert word in names, (word, names)
    for t in tg:
        assert t["met"] in (True, False), t
    m = quick_run()["machine"]
    assert m["nproc"] >= 1 and m["cpu_model"] and m["kernel"], m
    # the table people read says the same as the JSON
    md = _RUN["md"]
    assert "| streams | path | p50 |" in md, md[:2000]
    assert "Targets (docs/contract.md §7" in _RUN["stdout"], \
        _RUN["stdout"][-3000:]
    assert "Ratios to the floor" in md and "Stall-free streams" in md, md[:2000]
    # each CPU ratio's runs: the lowest and the highest of a run's proxy
    # over the same run's floor
    floor_table = md.split("Ratios to the floor", 1)[1]
    for k, level in quick_run()["latency"].items():
        r = [a["cpu_s_per_M_events"] / b["cpu_s_per_M_events"]
             for a, b in zip(level["tokentap"]["runs"], level["floor"]["runs"])]
        row = next(x for x in floor_table.splitlines() if x.startswith(f"| {k} |"))
        assert row.split("|")[6].strip() == f"{min(r):.2f}-{max(r):.2f}x", (row, r)
    assert "The client's own accuracy" in md and "client TTFT error p99" in md
    assert "Timing: the wall-clock figures make test leaves" in md, md[-3000:]


def test_run_range():
    """The runs beside a CPU ratio to the floor: a run's proxy over the
    same run's floor, the lowest and the highest (make bench --quick makes
    one run a level, where any order reads the same)."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
    import report
    def runs(*v):
        return {"runs": [{"cpu_s_per_M_events": x} for x in v]}
    level = {"floor": runs(10.0, 8.0, 9.0), "tokentap": runs(11.0, 10.0, 9.0)}
    # 1.10, 1.25, 1.00: not the lowest over the lowest, nor the highest
    # over the highest
    assert report.run_range(level, "tokentap") == "1.00-1.25x"
    assert report.run_range(level, "nginx") == "-"
    assert report.run_range({"floor": runs(0.0), "nginx": runs(1.0)}, "nginx") == "-"


def test_stamp_lag_and_ramp():
    """The pieces bench.py stands on: tokentap-mock --stamp marks every
    token event (X-Mock-Stamp per request), tokentap-load --lag times each
    one, --ramp spreads the users' starts."""
    with Mock("--stamp", "on", "--ttft", "10ms", "--tpot", "5ms") as mock:
        url = mock.url("/v1/chat/completions")
        # streams of 410 ms outlast the ramp: the 10 requests are the 10 users'
        d = load("-c", "10", "-n", "10", "--ramp", "300ms", "--max-tokens", "80",
                 "--lag", "--samples", url)
        assert d["ok"] == 10 and d["output_tokens"] == 800, d
        lag = d["lag_ms"]
        assert lag["count"] == 800, lag
        assert 0 < lag["p50"] <= lag["max"] < 1000, lag
        # user i starts at i * 300 ms / 10, not before (a busy host may
        # start one later)
        starts = sorted(x["start_ms"] for x in d["samples"])
        assert all(st >= 30 * i - 1 for i, st in enumerate(starts)), starts
        # per request off: no stamp, nothing timed, the stream unchanged
        d = load("-c", "2", "-n", "2", "--max-tokens", "5", "--lag",
                 "-H", "X-Mock-Stamp: off", url)
        assert d["ok"] == 2 and d["output_tokens"] == 10, d
        assert d["lag_ms"]["count"] == 0, d["lag_ms"]
        # without --lag the figures have no lag member
        d = load("-c", "1", "-n", "1", "--max-tokens", "3", url)
        assert "lag_ms" not in d and d["output_tokens"] == 3, d
    r = run("tokentap-load", "-r", "5", "--ramp", "1s", url, expect=2, timeout=10)
    assert "--ramp" in r.stderr, r.stderr


def test_bench_timing():
    """The wall-clock figures make test left to the bench: every probe ran
    and gave a figure or said why not."""
    rows = quick_run()["timing"]["probes"]
    names = " | ".join(r["name"] for r in rows)
    for word in ("mock, TTFT 300 ms", "mock at 100 streams", "streams at once",
                 "an event through tokentap", "tokentap-load, TTFT p50",
                 "1 ms a token at 100 streams"):
        assert word in names, (word, names)
    for r in rows:
        assert r["met"] in (True, False), r
        figure(abs(r["value"]), r["name"])
