"""End-to-end test of make bench's smoke mode (tests/bench/bench.py --quick).

Checks that one quick run produces every figure, with values that can be
true (positive, finite, ordered quantiles, counts that match the load),
never against timing targets: the machine's speed is not under test.
Run alone with `python3 tests/e2e/test_bench.py`.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, Proc, binary, free_port, wait_port  # noqa: E402

# valgrind and the proxies' CPU figures mean nothing under ASan
# make check leaves out what needs the bench
CHECK_SKIP = {"*"}
SANITIZER_SKIP = {"test_bench_quick"}

BENCH = os.path.join(ROOT, "tests", "bench", "bench.py")


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def positive(v, what):
    assert finite(v) and v > 0, f"{what}: {v!r}"


def nonneg(v, what):
    assert finite(v) and v >= 0, f"{what}: {v!r}"


def check_latency(lat):
    assert lat, "no latency levels"
    for k, level in lat.items():
        n = int(k)
        for name in ("direct", "floor", "tokentap", "nginx"):
            m = level[name]["median"]
            where = f"latency {k} {name}"
            for q in ("lag_p50_us", "lag_p99_us", "lag_max_us"):
                nonneg(m[q], f"{where} {q}")
            assert m["lag_p50_us"] <= m["lag_p99_us"] <= m["lag_max_us"], (where, m)
            # a trip over loopback takes some µs, and not a minute
            assert 0 < m["lag_max_us"] < 60e6, (where, m)
            # every token event of every stream carried a stamp
            assert m["lag_events"] == m["events"], (where, m)
            assert m["errors"] == 0, (where, m)
            assert m["requests"] >= n, (where, m)
            positive(m["events_per_s"], f"{where} events_per_s")
            # the mock's schedule: TTFT 50 ms, TPOT 20 ms, seen from the
            # client (a late first token shortens the TPOT it sees)
            assert 50 <= m["ttft_p50_ms"] < 5000, (where, m)
            assert 15 <= m["tpot_p50_ms"] < 1000, (where, m)
            if name == "direct":
                assert m["proxy_cpu_s"] is None
            else:
                positive(m["proxy_cpu_s"], f"{where} proxy_cpu_s")
                positive(m["cpu_s_per_M_events"], f"{where} cpu/event")
            for r in level[name]["runs"]:
                nonneg(r["other_cpu_s"], f"{where} other_cpu_s")
        for name in ("floor", "tokentap", "nginx"):
            added = level["added"][name]
            for key in ("lag_p50_us", "lag_p99_us", "lag_max_us", "ttft_p50_ms"):
                assert finite(added[key]), (k, name, key, added)
            want = level[name]["median"]["lag_p50_us"] - level["direct"]["median"]["lag_p50_us"]
            assert abs(added["lag_p50_us"] - want) < 1e-6
        acc = level["accuracy"]
        # every request tokentap logged is found in the mock's log
        assert acc["matched"] == level["tokentap"]["median"]["requests"], acc
        for key in ("ttft_abs_err_ms", "tpot_abs_err_ms", "tpot_rel_err_pct"):
            nonneg(acc[key]["median"], f"accuracy {key}")
            assert acc[key]["median"] <= acc[key]["max"], (key, acc)
        # tokentap sees the first token after the mock sent it, but not a
        # whole TTFT (50 ms) later
        assert acc["ttft_abs_err_ms"]["median"] < 50, acc
        assert 0 <= acc["within_target"] <= 1, acc


def check_throughput(tp, proxy_cpus):
    for name in ("direct", "floor", "tokentap", "nginx"):
        m = tp[name]["median"]
        positive(m["events_per_s"], f"throughput {name}")
        assert m["errors"] == 0, (name, m)
        assert m["events"] % tp["tokens_per_stream"] == 0, (name, m)
        if name != "direct":
            positive(m["cpu_s_per_M_events"], f"throughput {name} cpu/event")
            # a share of the CPUs the proxy is pinned to
            assert 0 < m["proxy_cpu_util"] <= 1.05 * proxy_cpus, (name, m)
            positive(m["ceiling_events_per_s"], f"throughput {name} ceiling")


def check_memory(mem):
    assert mem, "no memory levels"
    for k, level in mem.items():
        for name in ("tokentap", "nginx"):
            m = level[name]["median"]
            positive(m["idle_rss_kib"], f"memory {k} {name} idle")
            assert m["rss_kib"] >= m["idle_rss_kib"], (k, name, m)
            # the load held every stream open while RSS was read
            assert m["open_streams"] >= 0.95 * int(k), (k, name, m)
            # a stream costs something, and less than a megabyte
            assert 0 < m["kib_per_stream"] < 1024, (k, name, m)


def check_instructions(ins):
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


def check_stallfree(sf, cap):
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


def check_generator(g):
    """The client's own accuracy against the mock's send times: every
    request matched, errors of a plausible size, the CPU per event and
    the one-core ceiling from the same run."""
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


def check_targets(tg):
    names = " | ".join(t["name"] for t in tg)
    for word in ("added latency p50", "added latency p99", "CPU per event",
                 "memory per open stream", "TTFT error", "TPOT error",
                 "CPU per event vs the floor", "instructions per event vs nginx"):
        assert word in names, (word, names)
    for t in tg:
        assert t["met"] in (True, False), t


def load_json(*args):
    r = subprocess.run([binary("tokentap-load"), *args, "--json", "-"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    for mark in ("ERROR: AddressSanitizer", "runtime error:"):
        assert mark not in r.stderr, r.stderr[-3000:]
    return json.loads(r.stdout)["levels"][0]


def test_stamp_lag_and_ramp():
    """The pieces bench.py stands on: tokentap-mock --stamp marks every
    token event (X-Mock-Stamp per request), tokentap-load --lag times each
    one, --ramp spreads the users' starts."""
    port = free_port()
    with Proc([binary("tokentap-mock"), "-l", f"127.0.0.1:{port}", "--stamp", "on",
               "--ttft", "10ms", "--tpot", "5ms"]) as mock:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        # streams of 410 ms outlast the ramp: the 10 requests are the 10 users'
        d = load_json("-c", "10", "-n", "10", "--ramp", "300ms", "--max-tokens", "80",
                      "--lag", "--samples", url)
        assert d["ok"] == 10 and d["output_tokens"] == 800, d
        lag = d["lag_ms"]
        assert lag["count"] == 800, lag
        assert 0 < lag["p50"] <= lag["max"] < 1000, lag
        # user i starts at i * 300 ms / 10
        starts = sorted(x["start_ms"] for x in d["samples"])
        for i, st in enumerate(starts):
            assert 30 * i - 1 <= st < 30 * i + 25, starts
        # per request off: no stamp, nothing timed, the stream unchanged
        d = load_json("-c", "2", "-n", "2", "--max-tokens", "5", "--lag",
                      "-H", "X-Mock-Stamp: off", url)
        assert d["ok"] == 2 and d["output_tokens"] == 10, d
        assert d["lag_ms"]["count"] == 0, d["lag_ms"]
        # without --lag the figures have no lag member
        d = load_json("-c", "1", "-n", "1", "--max-tokens", "3", url)
        assert "lag_ms" not in d and d["output_tokens"] == 3, d
        mock.stop()
    r = subprocess.run([binary("tokentap-load"), "-r", "5", "--ramp", "1s", url],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "--ramp" in r.stderr, r.stderr


def test_bench_quick():
    with tempfile.TemporaryDirectory(prefix="tt-bench-") as d:
        out = os.path.join(d, "bench.json")
        r = subprocess.run([sys.executable, BENCH, "--quick", "--out", out],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        with open(out) as f:
            res = json.load(f)
        with open(os.path.join(d, "bench.md")) as f:
            md = f.read()
    m = res["machine"]
    assert m["nproc"] >= 1 and m["cpu_model"] and m["kernel"], m
    check_latency(res["latency"])
    check_throughput(res["throughput"], len(m["pinning"]["proxy"]))
    check_memory(res["memory"])
    check_instructions(res["instructions"])
    check_stallfree(res["stallfree"], 100)
    check_generator(res["generator"])
    check_targets(res["targets"])
    # the table people read says the same as the JSON
    assert "| streams | path | p50 |" in md, md[:2000]
    assert "Targets (SPEC section 7" in r.stdout, r.stdout[-3000:]
    assert "Ratios to the floor" in md and "Stall-free streams" in md, md[:2000]
    assert "The client's own accuracy" in md and "client TTFT error p99" in md


if __name__ == "__main__":
    test_stamp_lag_and_ramp()
    test_bench_quick()
    print("ok")
