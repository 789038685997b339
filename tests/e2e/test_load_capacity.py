# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of tokentap-load as a capacity-planning benchmark:
sweeps that stop at the knee, the largest concurrency and request rate
that meet an SLO, the input-length study, and tokentap's own figures beside
the client's. The backend is tokentap-mock with --slots, whose saturation
is known in closed form (docs/load-testing.md, "tokentap-mock"):

  a request takes one of S slots (or waits, first come first served), its
  first token is due ttft after the slot, each next token tpot after the
  one before; it frees its slot with its last token, so a request holds a
  slot s = ttft + (n - 1) tpot.

Closed loop, c users: past S, each round of S served requests has c - S
that waited a whole s, so TTFT p95 stays at ttft while (c - S) / S <= 5 %.
Open loop at a constant rate r: no request waits while r <= S / s; past it
the queue grows without end. The levels are short (ms-scale TTFT and TPOT);
each test bounds its answer on both sides.
Run alone with `python3 tests/e2e/test_load_capacity.py [name-filter]`.
"""
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from concurrent.futures import ThreadPoolExecutor

import capacity_matrix
from harness import CHAT, SAN_MARKS, Mock, Tokentap, binary, load, report, run

# Checked against the reference model (slots_model.py, a discrete-event
# simulation of the mock's README formulas): three searches at once, each
# a minute or two of sleeping on a mock's schedule. Under ASan+UBSan the
# generator's lateness is part of every TTFT, which the model has not: the
# plain pass alone judges the figures (tests/run.py: SANITIZER_SKIP).
# make check leaves it out too (a load of minutes; CHECK_SKIP). The
# searches and sweeps judged against a closed form are plain only too
# (68 s of make test's work under ASan, most of it the mock's schedule
# slept): a capacity search still runs under the sanitizers in
# test_disturbed_run_is_set_aside and test_load_report's reports.
CHECK_SKIP = {"test_capacity_against_the_model", "test_rate_capacity_at_one_slot",
              "test_rate_capacity_at_32_slots"}
SANITIZER_SKIP = CHECK_SKIP | {"test_capacity_matches_the_model",
                               "test_open_sweep_knee_is_carried",
                               "test_sweep_stops_at_the_knee"}
TIME_LIMITS = {"test_capacity_against_the_model": 400, "test_rate_capacity_at_one_slot": 300,
               "test_rate_capacity_at_32_slots": 300}


def test_sweep_stops_at_the_knee():
    """4 slots, users doubling: throughput doubles up to 4 users, then not
    at all while the latency doubles; the sweep stops at 8 and names 4 the
    knee. Its levels are in the JSON and the CSV."""
    # a request of 216 ms: a busy host's late timers (milliseconds) move
    # a level's throughput by a few per cent, not by the knee's 1.6x. At 4
    # users each slot idles while its user turns round (reads the end,
    # sends the next); at 8 none does: beside two CPU hogs that made 8
    # users' throughput 10 % over 4's, so the rule's share is 25 % here
    with Mock("--slots", "4", "--ttft", "40ms", "--tpot", "16ms") as m:
        csv = os.path.join(os.path.dirname(m.log), f"sweep-{m.port}.csv")
        doc = load("sweep", "--over", "concurrency", "--levels", "1..64",
                          "--saturation", "25%",
                          "-d", "2s", "--warmup", "300ms", "--max-tokens", "12",
                          "--csv", csv, m.url(CHAT), whole=True)
    with open(csv) as f:
        rows = f.read().splitlines()
    os.unlink(csv)
    assert doc["kind"] == "sweep"
    sw = doc["sweep"]
    values = [lv["value"] for lv in doc["levels"]]
    assert values == [1, 2, 4, 8], values
    assert sw["stop_reason"] == "saturation" and sw["knee_level"] == 2, sw
    assert sw["saturated_level"] == 3
    x = [lv["output_throughput"] for lv in doc["levels"]]
    assert x[1] > 1.6 * x[0] and x[2] > 1.6 * x[1], x
    assert abs(x[3] / x[2] - 1) < 0.25, x
    e2e = [lv["e2el_ms"]["p50"] for lv in doc["levels"]]
    assert e2e[3] > 1.6 * e2e[2], e2e
    for lv in doc["levels"]:
        assert lv["key"] == "concurrency" and lv["errors"] == 0
        assert lv["warmup_requests"] > 0 and len(lv["samples"]) > lv["requests"]
        assert lv["config"]["warmup_s"] == 0.3 and lv["config"]["cooldown"]
        # the load stayed on while the level's last requests ended (one
        # user's last request is the last: none to keep on)
        assert (lv["cooldown_requests"] > 0) == (lv["value"] > 1), lv["value"]
        counted = [s for s in lv["samples"] if not s["warmup"] and not s["cooldown"]]
        assert len(counted) == lv["requests"]
        last_end = max(s["start_ms"] + s["e2el_ms"] for s in counted)
        assert all(s["start_ms"] < last_end for s in lv["samples"] if s["cooldown"])
    # the CSV: a header and a line a level
    assert len(rows) == 5 and rows[0].startswith("index,label,key,value")
    assert rows[4].split(",")[3] == "8.0000"


def test_capacity_matches_the_model():
    """Two backends of 32 slots, two searches, each against the model's
    closed form; each lies in the interval reported, and its metric binds.

    Concurrency, where the decode slows with the batch: TTFT 20 ms, 12
    tokens at 1 ms + 4 ms per other sequence decoding, so TPOT = 4c - 3 ms
    up to 32 users; under tpot_p50 <= 79 ms the model's capacity is 20.5.
    (The median, and 2 ms either side: a busy machine's late timers move
    TPOT's median by a ms and its tail by more.)

    Rate, where the slots are the limit: TTFT 20 ms, 32 tokens at 10 ms, a
    slot held s = 330 ms; constant arrivals queue past 32 / s = 97/s; under
    ttft_p95 <= 100 ms that is the capacity: from 70.5/s at a 20 % resolution
    the search's levels land 9 % and more from it, where an overload has
    queued some 60 ms by the window's start and 200 ms by its end, while
    below it a busy machine's late timers (seen up to 60 ms at p95 on this
    2-CPU box under the ASan build) stay under the limit."""
    common = ["--repeats", "1", "--no-samples"]
    with Mock("--slots", "32", "--ttft", "20ms", "--tpot", "1ms",
              "--tpot-per-stream", "4ms", "--tokens", "12") as m:
        cdoc = load("capacity", "--slo", "tpot_p50<=79ms",
                           "--over", "concurrency", "--from", "16", "--warmup", "500ms",
                           "-d", "1.5s", "--max-tokens", "12", "--max-concurrency", "32",
                           *common, m.url(CHAT), whole=True)
    with Mock("--slots", "32", "--ttft", "20ms", "--tpot", "10ms", "--tokens", "32") as m:
        rdoc = load("capacity", "--slo", "ttft_p95<=100ms error_rate<=5%",
                           "--over", "rate", "--from", "70.5", "--resolution", "20%",
                           "--arrivals", "constant", "--warmup", "1s", "-d", "1.5s",
                           "--max-tokens", "32", *common, m.url(CHAT), whole=True)
    conc, = cdoc["capacity"]
    rate, = rdoc["capacity"]
    assert conc["key"] == "concurrency" and rate["key"] == "rate"
    want_c = (79 + 3) / 4
    assert conc["found"] and conc["binding"] == "tpot_p50", conc
    lo, hi = conc["interval"]
    assert lo <= want_c <= hi and hi - lo == 1, (conc, want_c)
    want_r = 32 / (0.020 + 31 * 0.010)
    assert rate["found"] and rate["binding"] == "ttft_p95", rate
    lo, hi = rate["interval"]
    assert lo <= want_r <= hi and hi / lo - 1 <= 0.2, (rate, want_r)
    for doc, cap in ((cdoc, conc), (rdoc, rate)):
        assert len(doc["levels"]) == cap["levels"] >= 4
        for lv in doc["levels"]:
            assert lv["search"] == cap["key"]
            assert lv["phase"] in ("bracket", "bisect", "close"), lv["phase"]
            # a level run to close the interval lies beyond the bracket
            if lv["phase"] == "close":
                assert not cap["interval"][0] < lv["value"] < cap["interval"][1], lv
            else:
                assert lv["slo"]["met"] == (lv["value"] <= cap["interval"][0]), lv["slo"]
            assert "samples" not in lv
    # TPOT of the model at each concurrency probed (a stall of the busy
    # machine late in a level moves it all: 15 %)
    for lv in cdoc["levels"]:
        want = 4 * lv["value"] - 3
        assert abs(lv["tpot_ms"]["p50"] - want) < 0.15 * want, lv["tpot_ms"]
    assert rdoc["levels"][0]["config"]["arrivals"] == "constant"
    # the knee among the levels tried, by a sweep's rule: the rate's
    # bracket doubles past the slots' 97/s (141/s carries under 0.9 of
    # it); the concurrency's TPOT grows as 4c - 3, so from 16 users on
    # throughput stays flat while latency rises
    assert rate["knee"] is not None and rate["knee"] < rate["knee_past"] <= 141.1, rate
    assert rate["knee_past"] > want_r * 0.9, rate
    assert conc["knee_past"] is not None and conc["knee_past"] <= 32, conc


def test_open_sweep_knee_is_carried():
    """An open-loop sweep names as its knee the last level carried at its
    offered rate. 4 slots holding a request 20 ms carry 200/s: at 25, 50
    and 100/s every request is carried (M/D/4 at 0.5 queues hardly at all,
    and keeps up on a host so busy that the mock and the generator lose
    their CPU for a while: at 160/s, 0.8, a make test-fresh beside a make
    test once saw it fall behind); at 400/s they carry 200, under 0.9 of
    400, and the queue grows. The old rule (tokens/s growth) took a level
    past the slots' 200/s for growth and named an overloaded level the
    knee. With --slo the sweep states its SLO capacity (the last level met
    before the first missed)."""
    with Mock("--slots", "4", "--ttft", "5ms", "--tpot", "1ms", "--tokens", "16") as m:
        doc, err = load("sweep", "--over", "rate", "--levels", "25,50,100,400,800", "-d", "2s",
                        "--warmup", "500ms", "--max-tokens", "16", "--no-samples",
                        "--slo", "ttft_p50<=100ms", m.url(CHAT), whole=True, stderr=True)
    sw = doc["sweep"]
    values = [lv["value"] for lv in doc["levels"]]
    assert values == [25, 50, 100, 400], values
    assert sw["stop_reason"] == "saturation", sw
    assert sw["knee_level"] == 2 and sw["saturated_level"] == 3, sw
    for lv in doc["levels"][:3]:
        offered = lv["requests"] / lv["window"]["length_s"]
        assert lv["request_throughput"] >= 0.9 * offered, lv["label"]
    over = doc["levels"][3]
    assert over["request_throughput"] < 0.9 * over["requests"] / over["window"]["length_s"]
    assert "the knee is level 2 (rate 100/s): the last carried at its offered rate" in err, err
    assert "SLO capacity level 2 (rate 100/s)" in err, err


def test_capacity_against_the_model():
    """capacity --over rate and --over concurrency against 4 and 32 slots,
    three seeds each, all six at once (the CASES of capacity_matrix.py,
    which runs the whole 1/4/32 matrix): each capacity within 10 % of the
    reference model's, and the model inside the reported interval at least
    2 times in 3 per case. The rate's model, M/D/4 under ttft_p95<=120ms
    with a slot held 100 ms: 28.98/s; the concurrency's, 32 slots under
    ttft_p95<=70ms: 33 users (one over the slots waits in 1 of 32 rounds,
    under the 5 % a p95 allows). The 32 slots' 9 tokens 10 ms apart hold
    a slot as long as the matrix's 17 tokens 5 ms apart (the same model)
    for half the events: 33 users' streams beside the 4 slots' mock
    starved it (a pass with test_rate_capacity_at_one_slot alongside
    read 22.5/s carried under 0.9 of its rate, with the generator on
    time)."""
    cases = [("rate", 4), ("concurrency", 32)]
    case = {("rate", 4): None,
            ("concurrency", 32): dict(capacity_matrix.CASES[32], tpot=10, tokens=9)}
    seeds = (1, 2, 3)
    want = {c: capacity_matrix.model(c[1], c[0], case[c]) for c in cases}
    assert abs(want[("rate", 4)] - 28.98) < 0.2, want
    assert want[("concurrency", 32)] == 33, want
    with ThreadPoolExecutor(len(cases) * len(seeds)) as pool:
        jobs = {(c, s): pool.submit(capacity_matrix.search, c[1], c[0], s, (), case[c])
                for c in cases for s in seeds}
        got = {k: j.result() for k, j in jobs.items()}
    for c in cases:
        said(f"{c[0]} at {c[1]} slots", want[c], {s: got[(c, s)] for s in seeds})
    for c in cases:
        inside = 0
        for s in seeds:
            cap, doc = got[(c, s)]
            est, (lo, hi) = cap["estimate"], cap["ci"]
            assert cap["found"] and cap["binding"] == "ttft_p95", (c, s, cap)
            assert abs(est / want[c] - 1) <= 0.10, (c, s, cap, want[c])
            # both ends bounded: where no level above the estimate was
            # decided missed (at 4 slots, seeds 1 and 2 once read 28.95
            # [28.13, none] and 27.75 [26.25, none]), levels above the
            # bracket ran until one was (phase "close"); and below it
            # until one was decided met
            for lv in doc["levels"]:
                if lv["phase"] == "close":
                    assert not cap["bracket"][0] <= lv["value"] <= cap["bracket"][1], \
                        (c, s, lv["value"], cap)
            inside += lo is not None and hi is not None and lo <= want[c] <= hi
            assert cap["confidence"] == 0.95
            assert cap["bracket"] == cap["interval"]
            # every run of a level had a seed of its own
            assert all(lv["runs"] >= 1 for lv in doc["levels"])
        assert inside >= 2, (c, [got[(c, s)][0] for s in seeds], want[c])


def searches(slots, case, extra=(), seeds=(1, 2, 3)):
    """The rate searches of case, one a seed, side by side: the model's
    capacity and each seed's (capacity entry, document)."""
    want = capacity_matrix.model(slots, "rate", case)
    with ThreadPoolExecutor(len(seeds)) as pool:
        jobs = {s: pool.submit(capacity_matrix.search, slots, "rate", s, extra, case)
                for s in seeds}
        return want, {s: j.result() for s, j in jobs.items()}


def said(name, want, got):
    """Each seed's estimate, interval and runs set aside, for the reader."""
    report(f"{name}: model {want:.2f}; " + "; ".join(
        f"seed {s} {cap['estimate']:.2f} [{cap['ci'][0]}, {cap['ci'][1]}] "
        f"set aside {sum(lv['disturbed_runs'] for lv in doc['levels'])}"
        for s, (cap, doc) in got.items()))


def close_to(want, got):
    """The issue's rule: each search's capacity within 10 % of the
    model's, and the model inside the reported interval (both ends
    bounded) in at least 2 of the 3 seeds. A generator stall no longer
    moves a search (load_disturb.h: its runs are set aside)."""
    inside = 0
    for s, (cap, _) in got.items():
        assert cap["found"] and cap["binding"] == "ttft_p95", (s, cap)
        assert abs(cap["estimate"] / want - 1) <= 0.10, (s, cap, want)
        lo, hi = cap["ci"]
        inside += lo is not None and hi is not None and lo <= want <= hi
    assert inside >= 2, ([cap for cap, _ in got.values()], want)


def test_rate_capacity_at_one_slot():
    """capacity --over rate against one slot (M/D/1), three seeds at once.
    The slot holds a request 30 ms (TTFT 10 ms, 11 tokens 2 ms apart);
    under ttft_p95<=100ms the model's answer is 20.6/s, 62 % of the slot's
    33.3/s, where a 10 % step in rate moves the p95 by 17 to 23 %: levels
    there are decided sooner than at capacity_matrix.py's 55 ms (40 %, a
    step of 9 %). Levels of 5 s from 16/s, run at most 3 times, bisected
    to 10 %: some 6 levels, a minute and a half."""
    case = dict(capacity_matrix.CASES[1], rate_limit=100, rate_from=16, d="5s")
    want, got = searches(1, case, ("--repeats", "2", "--resolution", "10%"))
    assert abs(want - 20.6) < 0.2, want
    said("1 slot", want, got)
    close_to(want, got)


def test_rate_capacity_at_32_slots():
    """capacity --over rate against 32 slots of 100 ms (320/s) under
    ttft_p95<=120ms: the model's 307.2/s, 96 % of the slots' rate, three
    seeds at once. Levels that started empty read a short queue there:
    1 s + 2 s levels put the capacity past 320/s, where no queue is
    stable. Now the level at 400/s falls behind and measures 320/s; every
    level at or over it is missed, not sustained, and a level below it
    gets the warm-up its queue needs (load_settle.h), or is missed when
    that is over twice its length. 9 tokens 10 ms apart hold a slot as
    long as capacity_matrix.py's 17 tokens 5 ms apart (the model's answer
    is the same) for half the events: three searches at some 300
    requests/s share two CPUs."""
    case = dict(capacity_matrix.CASES[32], tpot=10, tokens=9, rate_from=200)
    want, got = searches(32, case)
    assert abs(want - 307.2) < 0.5, want
    said("32 slots", want, got)
    # Beside a load average of 16 on two CPUs (dispatch lag to 210 ms)
    # one search in three once read levels of 290/s and 300/s at a p95
    # of 165 ms for the stationary 60 to 85 and put the capacity at
    # 245/s: such runs are disturbed now, set aside and run again. A
    # capacity may not reach the 320/s the slots serve (before the
    # settling rule all three did).
    close_to(want, got)
    for s, (cap, doc) in got.items():
        assert cap["estimate"] < 320, (s, cap)
        rate = [lv for lv in doc["levels"] if lv["search"] == "rate"]
        over = [lv for lv in rate if lv["value"] >= 400]
        assert over and all(lv["unsustained"] and not lv["slo"]["met"] for lv in over), s
        for lv in rate:
            # a level counted met had the warm-up its queue needs at 320/s
            # (the served rate the search measured: within 2 %)
            if lv["slo"]["met"] and not lv["unsustained"]:
                need = 2 * lv["value"] / (320 * 1.02 - lv["value"]) ** 2
                assert lv["config"]["warmup_s"] >= min(need, 6) - 0.01, (s, lv["value"])


def test_disturbed_run_is_set_aside():
    """A generator that stalls is no evidence about the target. One rate
    level of a search, 20/s against 4 slots holding a request 30 ms (a
    p95 of 10 ms, under the 100 ms limit by far); the generator is
    stopped (SIGSTOP) for 400 ms inside its first run's window: the
    requests due meanwhile leave up to 400 ms late and the run reads a
    p95 over the limit, by less than the generator was late. That run is
    set aside (in no figure), the level runs again and is met; one
    warning says so. Without the rule the level is missed and the search
    finds nothing."""
    with Mock("--slots", "4", "--ttft", "10ms", "--tpot", "2ms", "--tokens", "11") as m:
        p = subprocess.Popen([binary("tokentap-load"), "capacity", "--over", "rate",
                              "--slo", "ttft_p95<=100ms", "--from", "20", "--max-levels", "1",
                              "--repeats", "3", "--warmup", "500ms", "-d", "2s",
                              "--max-tokens", "11", "--no-samples", "--json", "-", m.url(CHAT)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the first run's window is 0.5 s to 2.5 s from its start,
            # a few ms after the program's
            time.sleep(1.2)
            p.send_signal(signal.SIGSTOP)
            time.sleep(0.4)
            p.send_signal(signal.SIGCONT)
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
    for mark in SAN_MARKS:
        assert mark not in err, err[-6000:]
    assert p.returncode == 0, err
    doc = json.loads(out)
    lv, = doc["levels"]
    assert lv["disturbed_runs"] >= 1 and not lv["disturbed"], lv
    assert lv["disturbed_late_ms"] > 10, lv
    assert lv["slo"]["met"] and lv["runs"] >= 1, lv["slo"]
    assert doc["capacity"][0]["found"], doc["capacity"]
    assert err.count("warning      the generator ran late") == 1, err
    assert "set aside and run again" in err, err
    # the page says it too, once
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "run.json"), "w") as f:
            f.write(out)
        load("report", os.path.join(d, "run.json"), "--html", os.path.join(d, "run.html"),
             report=False)
        with open(os.path.join(d, "run.html")) as f:
            page = f.read()
    assert page.count('data-warning="disturbed"') == 1, page[-3000:]
    assert 'data-disturbed-runs="%d"' % lv["disturbed_runs"] in page


def test_input_length_study():
    """A sweep over prompt sizes at 2 users against a prefill of 40 us per
    input token: TTFT = 10 ms + 40 ms per 1k input tokens, fitted back
    (slope per 1k tokens, intercept, R²); the sweep never stops for
    saturation (more prompt is not more load)."""
    with Mock("--ttft", "10ms", "--tpot", "2ms", "--prefill-per-token", "40us") as m:
        doc = load("sweep", "--over", "prompt-tokens", "--levels",
                          "250,1000,2500", "-c", "2", "-n", "10", "--warmup", "0",
                          "--max-tokens", "3", m.url(CHAT), whole=True)
    fit = doc["sweep"]["input_fit"]
    assert doc["sweep"]["stop_reason"] == "levels" and len(doc["levels"]) == 3
    assert abs(fit["slope_ms_per_1k_tokens"] - 40) < 2, fit
    # the TTFT of no input, and what the first requests' overheads add
    assert 8 < fit["intercept_ms"] < 20, fit
    assert fit["r2"] > 0.9 and fit["n"] == 30, fit
    for lv, want in zip(doc["levels"], (250, 1000, 2500)):
        assert lv["config"]["prompt_tokens"] == [want, want]
        assert lv["input_tokens"] >= 10 * want


def test_bad_sweeps_and_targets():
    """Usage errors say what is wrong and exit 2, before anything runs."""
    url = "http://127.0.0.1:9/v1/chat/completions"
    err = load("sweep", "--over", "concurency", "--levels", "1,2", url, expect=2, report=False).stderr
    assert "unknown sweep key 'concurency'" in err and "did you mean 'concurrency'" in err
    err = load("sweep", "--over", "rate", "--levels", "8,4", url, expect=2, report=False).stderr
    assert "--levels" in err and "ascending" in err
    err = load("sweep", "--levels", "1,2", url, expect=2, report=False).stderr
    assert "--over" in err
    err = load("capacity", "--slo", "ttft_p95<=0ms", url, expect=2, report=False).stderr
    assert "'ttft_p95<=0ms'" in err and "above 0" in err
    err = load("capacity", "--slo", "ttft_p95<=1s error_rate<=100%", url, expect=2, report=False).stderr
    assert "error_rate" in err
    err = load("capacity", "--slo", "tpot_p99<=20", url, expect=2, report=False).stderr
    assert "unit" in err
    err = load("capacity", url, expect=2, report=False).stderr
    assert "--slo" in err
    err = load("capacity", "--slo", "ttft_p95<=1s", "--over", "tokens", url, expect=2, report=False).stderr
    assert "unknown capacity key 'tokens'" in err


def nearest_rank(xs, q):
    """The value of rank ceil(q n): /stats' rule (hist.h), not numpy's."""
    xs = sorted(xs)
    return xs[max(1, math.ceil(q / 100 * len(xs))) - 1]


def test_tokentap_beside_the_client():
    """A sweep through tokentap with --tokentap: each level reads /stats for
    its window (a 3 s one, 1 s levels, tokentap-load waiting the window out
    between them); tokentap's count, TTFT and TPOT agree with its own
    access log for exactly that level's requests (their X-Request-Id), and
    the client's TTFT is tokentap's plus what the hop adds."""
    with Mock("--ttft", "30ms", "--tpot", "4ms") as m, \
            Tokentap("stats: {windows: [3s]}\nroutes:\n  - name: chat\n"
                     "    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        # the log tokentap names is not where it was (as in another
        # container): the windows, and why
        moved = t.log + ".moved"
        os.rename(t.log, moved)
        doc, err = load("sweep", "--over", "concurrency", "--levels", "2,6",
                        "-d", "1s", "--warmup", "0", "--max-tokens", "40",
                        "--tokentap", f"http://127.0.0.1:{t.admin}",
                        t.url(CHAT), whole=True, stderr=True)
        # tokentap-load waited for /stats; each line is written just after
        t.log = moved
        logged = t.wait_logged(sum(lv["requests"] for lv in doc["levels"]))
    run = doc["run_id"]
    assert doc["tokentap_pairing"] == "stats_window", doc["tokentap_pairing"]
    why = doc["tokentap_pairing_reason"]
    assert f"{t.log[:-6]}: No such file or directory here" in why and "--tokentap-log" in why, why
    assert err.count("not pairing by request id") == 1, err
    assert len(doc["levels"]) == 2
    for lv in doc["levels"]:
        tt = lv["tokentap"]
        assert tt["ok"] and tt["route"] == "chat" and tt["window"] == "3s", tt
        assert not tt["window_short"]
        mine = [x for x in logged if x["request_id"].startswith(f"{run}-{lv['index']}-")]
        assert tt["requests"] == len(mine) == lv["requests"], (tt, len(mine))
        for field, key in (("ttft_ms", "ttft_ms"), ("tpot_ms", "tpot_ms")):
            values = [x[key] for x in mine if x[key] is not None]
            for q in (50, 95):
                want = nearest_rank(values, q)
                got = tt[field][f"p{q}"]
                # /stats is within 1 % of the exact figure of its rule
                assert abs(got - want) <= 0.012 * want + 0.05, (field, q, got, want)
        # the client reads its first and last token a little late, more
        # so beside CPU hogs (39 gaps: 0.5 ms a token is 20 ms of it)
        diff = tt["client_minus_tokentap_ms"]
        assert 0 <= diff["ttft_p50"] < 5, diff
        assert abs(diff["tpot_p50"]) < 0.5, diff


def test_tokentap_log_beside_tokentap_waits_no_window():
    """--tokentap and --tokentap-log together: the pairs by request id
    are the comparison, so no level waits for tokentap's 3 s window to
    clear (three levels of 1.1 s waited 3.6 s each before) and /stats is
    not read per level; each request is paired."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("stats: {windows: [3s]}\nroutes:\n  - name: chat\n"
                     "    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        began = time.monotonic()
        doc = load("sweep", "--over", "concurrency", "--levels", "1,2,4", "--no-stop",
                   "-d", "1s", "--warmup", "100ms", "--max-tokens", "10", "--no-samples",
                   "--tokentap", f"http://127.0.0.1:{t.admin}", "--tokentap-log", t.log,
                   t.url(CHAT), whole=True)
        took = time.monotonic() - began
    assert len(doc["levels"]) == 3
    assert doc["tokentap_pairing"] == "access_log" and doc["tokentap_pairing_reason"] is None
    for lv in doc["levels"]:
        p = lv["tokentap_paired"]
        assert p["requests"] == lv["requests"] and p["missing"] == 0, p
    # two waits of a window would be 7 s over the levels' own time
    assert took < sum(lv["elapsed_s"] for lv in doc["levels"]) + 5, took


def test_tokentap_alone_pairs_by_id_and_waits_no_window():
    """--tokentap alone: tokentap's /ui/config.json names its access log,
    readable here, so tokentap-load pairs each request by id as with
    --tokentap-log and no level waits for the 10 s window to clear (a
    wait is 11.8 s: the margin, half of one, fails on any); /stats is
    not read per level."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("stats: {windows: [10s]}\nroutes:\n  - name: chat\n"
                     "    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        began = time.monotonic()
        doc, err = load("sweep", "--over", "concurrency", "--levels", "1,2,4", "--no-stop",
                        "-d", "1s", "--warmup", "100ms", "--max-tokens", "10",
                        "--no-samples", "--tokentap", f"http://127.0.0.1:{t.admin}",
                        t.url(CHAT), whole=True, stderr=True)
        took = time.monotonic() - began
    assert doc["tokentap_pairing"] == "access_log", (doc["tokentap_pairing"], err)
    assert doc["tokentap_pairing_reason"] is None and "pairing" not in err, err
    assert len(doc["levels"]) == 3
    for lv in doc["levels"]:
        assert lv["tokentap"] is None, lv["tokentap"]
        p = lv["tokentap_paired"]
        assert p["requests"] == lv["requests"] > 0 and p["missing"] == 0, p
        assert p["client_minus_tokentap_ttft_ms"]["count"] == lv["ok"], p
    assert took < sum(lv["elapsed_s"] for lv in doc["levels"]) + 11.8 / 2, took


def test_tokentap_alone_without_a_log_file_waits_windows():
    """--tokentap alone, tokentap's access log on stdout: no file to pair
    by, so tokentap-load reads a /stats window a level, waits one out
    between levels (3 s: at least 3 s more than the levels' own), and
    says why and the fix once, on stderr, and in the JSON, the table and
    the HTML report's warnings."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap('access_log: "-"\nstats: {windows: [3s]}\nroutes:\n  - name: chat\n'
                     "    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        began = time.monotonic()
        html = os.path.join(os.path.dirname(t.log), "windows.html")
        doc, err = load("sweep", "--over", "concurrency", "--levels", "1,2", "--no-stop",
                        "-d", "500ms", "--warmup", "0", "--max-tokens", "10",
                        "--no-samples", "--tokentap", f"http://127.0.0.1:{t.admin}",
                        "--report", html, t.url(CHAT), whole=True, stderr=True)
        took = time.monotonic() - began
        with open(html) as f:
            page = f.read()
    assert doc["tokentap_pairing"] == "stats_window", doc["tokentap_pairing"]
    why = doc["tokentap_pairing_reason"]
    assert "access log to no file" in why and "set its access_log" in why, why
    assert err.count("not pairing by request id") == 1 and why in err, err
    # and in the report's table (on stderr too, as --json - has stdout)
    assert err.count("warning      from /stats windows, not paired by request id: " + why) == 1
    assert 'data-warning="tokentap_pairing"' in page and why in page, why
    assert len(doc["levels"]) == 2
    for lv in doc["levels"]:
        assert lv["tokentap_paired"] is None and lv["tokentap"]["ok"], lv["tokentap"]
        assert lv["tokentap"]["requests"] > 0, lv["tokentap"]
    assert took > sum(lv["elapsed_s"] for lv in doc["levels"]) + 3, took



CHAT_ROUTE = "routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n    upstream: "


def test_tokentap_alone_asks_with_the_admin_token():
    """An admin behind a token: tokentap-load asks /stats and
    /ui/config.json with $TOKENTAP_ADMIN_TOKEN, and pairs by id."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("admin:\n  address: 127.0.0.1:{admin}\n  token: s3cret\n" +
                     CHAT_ROUTE + f"http://127.0.0.1:{m.port}\n") as t:
        r = run("tokentap-load", "-c", "2", "-d", "500ms", "--warmup", "0",
                "--max-tokens", "5", "--tokentap", f"http://127.0.0.1:{t.admin}",
                "--json", "-", t.url(CHAT), env={"TOKENTAP_ADMIN_TOKEN": "s3cret"},
                expect=0)
    doc = json.loads(r.stdout)
    assert doc["tokentap_pairing"] == "access_log", (doc["tokentap_pairing"], r.stderr)
    p = doc["levels"][0]["tokentap_paired"]
    assert p["requests"] == doc["levels"][0]["requests"] > 0 and p["missing"] == 0, p


class OlderAdmin(BaseHTTPRequestHandler):
    """tokentap's admin as a tokentap before /ui/config.json's access_log
    answered it: the real one's answers, that member taken out (or, with
    named set, naming that instead)."""
    real = None
    named = None

    def do_GET(self):
        with urllib.request.urlopen(self.real + self.path, timeout=10) as a:
            body = a.read()
        if self.path == "/ui/config.json":
            doc = json.loads(body)
            del doc["access_log"]
            if self.named is not None:
                doc["access_log"] = self.named
            body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def through_older_admin(t, d):
    """A run with --tokentap pointed at OlderAdmin in front of t's admin:
    the document and stderr."""
    OlderAdmin.real = f"http://127.0.0.1:{t.admin}"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), OlderAdmin)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        return load("-c", "1", "-d", d, "--warmup", "0", "--max-tokens", "5",
                    "--tokentap", f"http://127.0.0.1:{srv.server_address[1]}",
                    t.url(CHAT), stderr=True, whole=True)
    finally:
        srv.shutdown()
        srv.server_close()


def test_tokentap_alone_older_tokentap_falls_back():
    """A tokentap whose /ui/config.json does not name its access log: the
    /stats windows, and why (an older tokentap) and the fix, once."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("stats: {windows: [3s]}\n" + CHAT_ROUTE +
                     f"http://127.0.0.1:{m.port}\n") as t:
        doc, err = through_older_admin(t, "500ms")
    assert doc["tokentap_pairing"] == "stats_window", doc["tokentap_pairing"]
    why = doc["tokentap_pairing_reason"]
    assert "does not say where its access log is" in why and "--tokentap-log FILE" in why, why
    assert err.count("not pairing by request id") == 1, err
    assert doc["levels"][0]["tokentap"]["ok"], doc["levels"][0]["tokentap"]


def test_tokentap_alone_admins_path_is_printed_harmless():
    """The path the admin names is its bytes: a terminal escape and a line
    break in it reach neither stderr nor the table nor the JSON."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("stats: {windows: [3s]}\n" + CHAT_ROUTE +
                     f"http://127.0.0.1:{m.port}\n") as t:
        OlderAdmin.named = "/nowhere/\x1b[31mred\nwarning: forged"
        try:
            doc, err = through_older_admin(t, "300ms")
        finally:
            OlderAdmin.named = None
    why = doc["tokentap_pairing_reason"]
    assert "/nowhere/?[31mred?warning: forged: No such file" in why, why
    assert "\x1b" not in err and "\nwarning: forged" not in err, err

if __name__ == "__main__":
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name in sorted(n for n in dir() if n.startswith("test_") and only in n):
        t = time.monotonic()
        globals()[name]()
        print(f"ok   {name} ({time.monotonic() - t:.1f}s)")
