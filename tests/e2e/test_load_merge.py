# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of load from many machines: tokentap-load --shard I/N
and tokentap-load merge (docs/load-testing.md, "Many machines").

Three tokentap-load processes, each --shard i/3 of one open-loop plan,
against one tokentap-mock, merged, are the one-machine run of the plan:
the same requests (every seq once, each with the single run's prompt and
output sizes and intended send time), percentiles that are the exact
ones of the union of the three documents' samples (computed here, numpy's
linear rule), ITL from every gap, and the single run's count and
throughput (within 20 %: the two windows are not the same stretch of
time). Unlike plans are refused with exit 4 and the reason: another
workload, a shard missing, a shard twice; and what cannot be sharded
exactly is refused at the start (a capacity search, a sweep that stops on
its own figures).
Run alone with `python3 tests/e2e/test_load_merge.py [name-filter]`.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from harness import CHAT, Mock, binary, run

PLAN = ["-r", "60", "-n", "180", "--max-tokens", "4-12", "--prompt-tokens", "10-60",
        "--seed", "7"]


def shards(url, d, plan, n=3, name="s"):
    """The n shards of plan run side by side, as n machines would; their
    documents' paths."""
    paths = [os.path.join(d, f"{name}{i}.json") for i in range(n)]
    procs = [subprocess.Popen([binary("tokentap-load"), *plan, "--shard", f"{i}/{n}",
                               "--json", paths[i], url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(n)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
    return paths


def level(path):
    with open(path) as f:
        doc = json.load(f)
    assert len(doc["levels"]) == 1, path
    return doc, doc["levels"][0]


def quantile(v, q):
    """numpy's default ("linear"): the value at rank q/100 (n - 1)."""
    v = sorted(v)
    r = q / 100 * (len(v) - 1)
    lo = math.floor(r)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (r - lo)


def measured_ok(samples):
    return [s for s in samples if not s["warmup"] and not s["cooldown"] and
            s["outcome"] == "ok"]


def test_three_shards_merge_to_the_one_machine_run():
    d = tempfile.mkdtemp(prefix="tt-merge-")
    try:
        with Mock("--ttft", "10ms", "--tpot", "2ms") as m:
            url = m.url(CHAT)
            paths = shards(url, d, PLAN)
            one = os.path.join(d, "one.json")
            run("tokentap-load", *PLAN, "--json", one, url, expect=0)
        merged = os.path.join(d, "merged.json")
        r = run("tokentap-load", "merge", "-o", merged, *paths, expect=0)
        assert "requests     180 in a" in r.stdout, r.stdout

        _, single = level(one)
        doc, mlv = level(merged)
        assert doc["shard"] is None and doc["merged"]["shards"] == 3, doc["merged"]
        parts = [level(p) for p in paths]
        assert [p[0]["shard"]["index"] for p in parts] == [0, 1, 2]
        assert len({p[0]["shard"]["plan"] for p in parts}) == 1

        # the same plan: every seq once, each asking what the single run's asked
        by_seq = {s["seq"]: s for s in single["samples"]}
        shard_samples = [s for _, lv in parts for s in lv["samples"]]
        assert sorted(s["seq"] for s in shard_samples) == list(range(180))
        assert sorted(s["seq"] for s in mlv["samples"]) == list(range(180))
        assert sorted(by_seq) == list(range(180))
        for s in shard_samples:
            o = by_seq[s["seq"]]
            assert (s["prompt_tokens"], s["max_tokens"]) == \
                (o["prompt_tokens"], o["max_tokens"]), (s, o)
            assert abs(s["start_ms"] - o["start_ms"]) <= 0.005, (s["seq"], s, o)
        # each shard sent its own: seq i modulo 3
        for i, (_, lv) in enumerate(parts):
            assert {s["seq"] % 3 for s in lv["samples"]} == {i}
            assert lv["requests"] == 60

        # percentiles: exactly those of the union of the shards' samples
        ok = measured_ok(shard_samples)
        assert mlv["requests"] == single["requests"] == 180
        assert mlv["ok"] == len(ok) == 180
        for name in ("ttft_ms", "tpot_ms", "e2el_ms"):
            v = [s[name] for s in ok if s[name] is not None]
            assert mlv[name]["count"] == len(v) > 0, name
            for q in (50, 90, 95, 99):
                want = quantile(v, q)
                got = mlv[name][f"p{q}"]
                assert abs(got - want) <= 0.0015, (name, q, got, want)
            assert abs(mlv[name]["max"] - max(v)) <= 0.0015
        gaps = [g for s in ok for g in s["itl_ms"]]
        assert mlv["itl_ms"]["count"] == len(gaps) > 0
        assert abs(mlv["itl_ms"]["p95"] - quantile(gaps, 95)) <= 0.0015

        # throughput: the shards' sum over their common window, the rate
        # of the one-machine run (60/s offered)
        for key in ("request_throughput", "output_throughput"):
            assert abs(mlv[key] / single[key] - 1) <= 0.2, (key, mlv[key], single[key])
        assert 0 < mlv["window"]["length_s"] <= 3.5, mlv["window"]

        # the merged document reads back (report), its table the merge's
        r = run("tokentap-load", "report", merged, expect=0)
        assert "requests     180 in a" in r.stdout, r.stdout
    finally:
        shutil.rmtree(d, True)


def test_closed_loop_and_sweep_shards():
    """A closed loop's users dealt to the shards (-c 6 on 3: 2 each) send the
    single run's requests; a rate sweep's levels merge level by level, each
    from all its samples."""
    d = tempfile.mkdtemp(prefix="tt-merge-")
    closed = ["-c", "6", "-n", "60", "--max-tokens", "3-9", "--prompt-tokens", "5-50"]
    sweep = ["sweep", "--over", "rate", "--levels", "40,80", "--arrivals", "constant",
             "--no-stop", "-d", "1s",
             "--warmup", "200ms", "--max-tokens", "4"]
    try:
        with Mock("--ttft", "5ms", "--tpot", "1ms") as m:
            url = m.url(CHAT)
            c = shards(url, d, closed, name="c")
            one = os.path.join(d, "one.json")
            run("tokentap-load", *closed, "--json", one, url, expect=0)
            s = shards(url, d, sweep, n=2, name="w")
        merged = os.path.join(d, "closed.json")
        run("tokentap-load", "merge", "-o", merged, "--html", os.path.join(d, "c.html"),
            *c, expect=0)
        _, single = level(one)
        _, mlv = level(merged)
        want = {x["seq"]: (x["prompt_tokens"], x["max_tokens"]) for x in single["samples"]
                if not x["warmup"] and not x["cooldown"]}
        got = {x["seq"]: (x["prompt_tokens"], x["max_tokens"]) for x in mlv["samples"]
               if not x["warmup"] and not x["cooldown"]}
        assert sorted(got) == sorted(want) == list(range(60)) and got == want
        for p in c:
            _, lv = level(p)
            assert lv["max_in_flight"] <= 2 and lv["requests"] == 20, lv["max_in_flight"]

        wm = os.path.join(d, "sweep.json")
        run("tokentap-load", "merge", "-o", wm, *s, expect=0)
        with open(wm) as f:
            doc = json.load(f)
        parts = []
        for p in s:
            with open(p) as f:
                parts.append(json.load(f))
        assert doc["kind"] == "sweep" and len(doc["levels"]) == 2
        for j, lv in enumerate(doc["levels"]):
            assert lv["value"] == [40, 80][j]
            assert lv["requests"] == sum(x["levels"][j]["requests"] for x in parts)
            ttft = [x["ttft_ms"] for part in parts
                    for x in measured_ok(part["levels"][j]["samples"])]
            assert abs(lv["ttft_ms"]["p95"] - quantile(ttft, 95)) <= 0.0015
            assert abs(lv["request_throughput"] / lv["value"] - 1) <= 0.25, lv
    finally:
        shutil.rmtree(d, True)


def test_unlike_plans_are_refused():
    d = tempfile.mkdtemp(prefix="tt-merge-")
    plan = ["-r", "100", "-n", "30", "--max-tokens", "3"]
    try:
        with Mock("--ttft", "5ms", "--tpot", "1ms") as m:
            url = m.url(CHAT)
            a = shards(url, d, plan, name="a")
            other = shards(url, d, ["-r", "100", "-n", "30", "--max-tokens", "5"], name="b")
            seed = shards(url, d, plan + ["--seed", "2"], name="c")
            two = shards(url, d, plan, n=2, name="t")
            # what the digest would miss: how the prompts were sized, and
            # what the figures are judged by and reported as
            bpt = shards(url, d, plan + ["--bytes-per-token", "3"], name="p")
            slo = shards(url, d, plan + ["--slo", "ttft_p95<=100ms"], name="s")
            pct = shards(url, d, plan + ["--percentiles", "50,99.9"], name="q")
            single = os.path.join(d, "single.json")
            run("tokentap-load", *plan, "--json", single, url, expect=0)
        ok = run("tokentap-load", "merge", *a, expect=0)
        assert "requests     30 in a" in ok.stdout, ok.stdout
        cases = [
            # another workload (other output sizes, another seed)
            ([a[0], a[1], other[2]], "max tokens (min) 3 in the first, 5 in the second"),
            ([a[0], a[1]], "shard 2/3 missing"),
            ([a[0], a[1], a[1]], "shard 1/3 twice"),
            ([a[0], a[1], seed[2]], "seed 1 in the first, 2 in the second"),
            ([a[0], a[1], two[1]], "shard counts differ"),
            ([a[0], a[1], bpt[2]], "the prompts' bytes per token"),
            ([a[0], a[1], slo[2]], 'the SLO "none" in the first'),
            ([a[0], a[1], pct[2]], "the percentiles"),
        ]
        for docs, why in cases:
            r = run("tokentap-load", "merge", "-o", os.path.join(d, "x.json"), *docs,
                    expect=4)
            assert why in r.stderr, (why, r.stderr)
            assert r.stdout == "", r.stdout
        # a single run's document is no shard; a file that is not there no
        # document
        r = run("tokentap-load", "merge", a[0], a[1], single, expect=4)
        assert "single.json: not a shard's document" in r.stderr, r.stderr
        r = run("tokentap-load", "merge", a[0], a[1], os.path.join(d, "nope.json"),
                expect=2)
        assert "nope.json" in r.stderr
    finally:
        shutil.rmtree(d, True)


def test_what_cannot_be_split_exactly_is_refused():
    url = "http://127.0.0.1:9/v1/chat/completions"
    cases = [
        (["capacity", "--slo", "ttft_p95<=1s", "--shard", "0/2", "--json", "x", url],
         "a capacity search picks each level"),
        (["sweep", "--over", "rate", "--levels", "1,2", "--shard", "0/2", "--json", "x",
          url], "--no-stop"),
        (["sweep", "--over", "rate", "--levels", "1..", "--no-stop", "--shard", "0/2",
          "--json", "x", url], "--no-stop"),
        (["-c", "2", "--shard", "0/3", "--json", "x", url], "-c"),
        (["-r", "5", "-n", "2", "--shard", "0/3", "--json", "x", url], "-n at least N"),
        (["-r", "5", "--shard", "0/3", url], "--json FILE"),
        (["-r", "5", "--shard", "0/3", "--json", "x", "--no-samples", url], "--json FILE"),
        (["-r", "5", "--shard", "3/3", "--json", "x", url], "I from 0 to N - 1"),
    ]
    for args, why in cases:
        r = run("tokentap-load", *args, expect=2)
        assert why in r.stderr, (args, r.stderr)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    flt = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, fn in list(globals().items()):
        if name.startswith("test_") and flt in name:
            fn()
            print("ok", name)
