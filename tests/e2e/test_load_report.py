# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of tokentap-load's reports and A/B comparison.

The HTML report (--report, and `tokentap-load report RUN.json --html`) is
opened in headless Chromium (tests/e2e/report_check.mjs reads every panel,
chart point, mark, bar and table cell back from the page's data
attributes): every panel is there, nothing is requested but the file, no
console error, and the figures on the page are the JSON document's. Text
from the command line, the target or a saved document is escaped.

`tokentap-load compare` flags a 20 % TPOT regression between two runs
against tokentap-mock at --tpot 20ms and 24ms, passes an A/A pair (the
same mock twice), and exits 2 on bad rules and bad documents.
Run alone with `python3 tests/e2e/test_load_report.py [name-filter]`.
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from harness import CHAT, ROOT, Mock, binary, load, node_modules

CHROMIUM = "/usr/bin/chromium"
CHECK = os.path.join(ROOT, "tests", "e2e", "report_check.mjs")
SWEEP_PANELS = ["verdict", "levels", "latency", "tpot", "throughput", "knee", "errors",
                "itl_cdf", "input", "slices", "timeline"]
RUN_PANELS = ["verdict", "levels", "dists", "errors", "itl_cdf", "input", "slices",
              "timeline"]
# make check leaves out what needs Chromium
CHECK_SKIP = {"test_sweep_report_in_browser", "test_capacity_report_marks_the_capacity",
              "test_run_report_escapes_what_it_shows", "test_knee_labels_do_not_overlap"}
# and the sanitizer pass: the pages (pages(), made once for the four) are
# 18 s of a sweep, a search and a browser, the clock's under ASan as
# without it. The C that writes and reads them runs under ASan elsewhere:
# a sweep's page and `report --html` of an edited document in
# test_verdict_warns_once_and_names_knee_and_capacity, a search's page in
# test_repeated_level_slices_and_drift_per_run, a rate search read back in
# test_report_reads_back_a_rate_interval, hostile and ill-formed text in
# tests/unit/test_load_html.c, and the charts in tests/unit/test_load_svg.c.
SANITIZER_SKIP = set(CHECK_SKIP)


def browse(*pages):
    """What report_check.mjs read from each page: (path, screenshot[, width])
    tuples, in one browser."""
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} missing: run sh tests/deps.sh"
    plan = {"pages": [{"file": p[0], "screenshot": p[1], "width": p[2] if len(p) > 2 else None}
                      for p in pages],
            "modules": node_modules(), "chromium": CHROMIUM}
    r = subprocess.run(["node", CHECK, json.dumps(plan)], capture_output=True, text=True,
                       timeout=100)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"report_check.mjs exit {r.returncode}:\n{r.stdout[-2000:]}\n"
                             f"{r.stderr[-3000:]}")
    assert out.get("error") is None, out["error"]
    return out["pages"]


HOSTILE_MODEL = "</title><script>alert(1)</script>&amp;"
HOSTILE_HEADER = "X-Evil: \"><img src=x onerror=alert(2)>"
_pages = {}


def pages():
    """The reports the browser tests read, made once per build: a sweep to
    the knee against 4 slots with prompts of 100 to 3000 tokens (its page,
    and `report`'s page of its JSON); a concurrency search under
    ttft_p95<=30ms; a single run whose model and headers are markup (and
    its document with a label of ill-formed UTF-8 and markup). One browser
    reads them all (its start is most of the time)."""
    build = binary("tokentap-load")
    if build in _pages:
        return _pages[build]
    d = tempfile.mkdtemp(prefix="tt-report-")
    atexit.register(shutil.rmtree, d, True)
    f = {n: os.path.join(d, n) for n in ("sweep.json", "sweep.html", "again.html", "cap.html",
                                          "cap.json", "run.json", "run.html", "bad.json",
                                          "bad.html")}
    with Mock("--slots", "4", "--ttft", "10ms", "--tpot", "4ms",
              "--prefill-per-token", "20us") as m:
        load("sweep", "--over", "concurrency", "--levels", "1..16", "-d", "1s",
             "--warmup", "300ms", "--max-tokens", "12", "--prompt-tokens", "100-3000",
             "--slice", "250ms", "--slo", "ttft_p95<=200ms tpot_p95<=30ms",
             "--json", f["sweep.json"], "--report", f["sweep.html"], m.url(CHAT), report=False)
        table = load("report", f["sweep.json"], "--html", f["again.html"], report=False).stdout
    with Mock("--slots", "4", "--ttft", "10ms", "--tpot", "4ms") as m:
        load("capacity", "--slo", "ttft_p95<=30ms", "--over", "concurrency", "--from", "2",
             "--max-concurrency", "8", "--repeats", "0", "-d", "800ms", "--warmup", "200ms",
             "--slice", "200ms", "--max-tokens", "12", "--json", f["cap.json"], "--report",
             f["cap.html"], m.url(CHAT), report=False)
    with Mock("--ttft", "10ms", "--tpot", "2ms") as m:
        load("-c", "2", "-n", "12", "--max-tokens", "5", "--model", HOSTILE_MODEL,
             "-H", HOSTILE_HEADER, "--slice", "50ms", "--json", f["run.json"], "--report",
             f["run.html"], m.url(CHAT), report=False)
    docs = {}
    for n in ("sweep.json", "cap.json", "run.json"):
        with open(f[n]) as fh:
            docs[n] = json.load(fh)
    # a saved document's label: bytes that are not UTF-8, and markup
    raw = json.dumps(dict(docs["run.json"], levels=[dict(docs["run.json"]["levels"][0],
                                                         label="@@")]))
    with open(f["bad.json"], "wb") as fh:
        fh.write(raw.encode().replace(b"@@", b"\xff<b>x</b>"))
    load("report", f["bad.json"], "--html", f["bad.html"], report=False)
    # a crowd: every level at one throughput and latency within a few ms
    # (levels past saturation), so each point's label lands on the next
    crowd = json.loads(json.dumps(docs["sweep.json"]))
    for i, lv in enumerate(crowd["levels"]):
        lv["output_throughput"] = 600 + 0.5 * i
        lv["e2el_ms"]["p50"] = 100 + i
        lv["ttft_ms"]["p95"] = 10 + i
    f["crowd.json"], f["crowd.html"] = (os.path.join(d, n) for n in ("crowd.json", "crowd.html"))
    with open(f["crowd.json"], "w") as fh:
        json.dump(crowd, fh)
    load("report", f["crowd.json"], "--html", f["crowd.html"], report=False)
    shot = os.path.join(ROOT, "build", "load-report")
    got = browse((f["sweep.html"], shot + ".png"), (f["again.html"], None),
                 (f["cap.html"], None), (f["run.html"], None), (f["bad.html"], None),
                 (f["crowd.html"], None), (f["sweep.html"], shot + "-narrow.png", 390),
                 (f["cap.html"], None, 390))
    _pages[build] = dict(zip(("sweep", "again", "cap", "run", "bad", "crowd", "sweep_narrow",
                              "cap_narrow"), got), docs=docs, table=table)
    return _pages[build]


def near(got, want, tol=0.0006):
    """A page's figure against the document's 3 decimals (the live page has
    every digit)."""
    return want is None and got is None or \
        got is not None and want is not None and abs(got - want) <= tol + 1e-7 * abs(want)


def counted_ok(level):
    return [s for s in level["samples"] if not s["warmup"] and not s["cooldown"]
            and s["outcome"] == "ok"]


def check_page(out, doc, panels):
    """What every page must be: alone, quiet, whole, and the document's."""
    assert out["requests"] == [out["url"]], out["requests"]
    assert out["console"] == [], out["console"]
    assert out["scripts"] == 0
    assert [p["id"] for p in out["panels"]] == panels, out["panels"]
    for c in out["charts"].values():
        assert c["outside"] == 0, c
    assert len(out["levels"]) == len(doc["levels"])
    for row, lv in zip(out["levels"], doc["levels"]):
        c = row["cells"]
        assert c["label"] == lv["label"] and c["requests"] == lv["requests"]
        for k, want in (("ttft_p50", lv["ttft_ms"]["p50"]), ("ttft_p95", lv["ttft_ms"]["p95"]),
                        ("tpot_p50", lv["tpot_ms"]["p50"]), ("tpot_p95", lv["tpot_ms"]["p95"]),
                        ("itl_p95", lv["itl_ms"]["p95"]), ("e2e_p50", lv["e2el_ms"]["p50"]),
                        ("e2e_p95", lv["e2el_ms"]["p95"]),
                        ("output_tokens_per_s", lv["output_throughput"]),
                        ("requests_per_s", lv["request_throughput"])):
            assert near(c[k], want), (lv["label"], k, c[k], want)
        assert near(c["error_rate"], lv["error_rate"], 1e-6)
    # the ITL's CDF: each level drawn is its document's quantile function
    assert out["cdf"], out["cdf"]
    for g in out["cdf"]:
        lv = doc["levels"][g["level"]]
        assert g["points"] == 101
        assert near(g["q50"], lv["itl_ms"]["p50"]) and near(g["q99"], lv["itl_ms"]["p99"])
        assert near(g["q90"], lv["itl_cdf_ms"][90])
    # the longest level (of equal ones the last) in slices and as a timeline
    longest = max(range(len(doc["levels"])),
                  key=lambda i: (doc["levels"][i]["window"]["length_s"], i))
    lv = doc["levels"][longest]
    ttft50 = out["charts"]["slices-latency"]["series"]["slice_ttft_p50"]
    want = [x["ttft_p50_ms"] for x in lv["slices"] if x["ttft_p50_ms"] is not None]
    assert len(ttft50) == len(want) >= 2 and all(near(p["y"], w) for p, w in zip(ttft50, want))
    tl, = out["timeline"]
    assert tl["requests"] == len(lv["samples"]) and tl["shown"] == len(tl["rows"])
    by_seq = {(s["seq"], s["start_ms"]): s for s in lv["samples"]}
    for row in tl["rows"]:
        s = by_seq[(row["seq"], row["start"])]
        assert near(row["ttft"], s["ttft_ms"]) and near(row["e2e"], s["e2el_ms"]), (row, s)
        assert row["off"] == (s["warmup"] or s["cooldown"])
        assert row["bars"] == (2 if s["outcome"] == "ok" else 1)
    assert [w["which"] for w in out["window"]] == ["start", "end"]
    assert near(out["window"][0]["t"], lv["window"]["start_s"])
    assert near(out["window"][1]["t"], lv["window"]["end_s"])
    return lv


def check_same_figures(a, b):
    """The page of a saved document shows the live page's figures."""
    for ra, rb in zip(a["levels"], b["levels"]):
        for k, v in ra["cells"].items():
            w = rb["cells"][k]
            assert w == v if isinstance(v, str) else near(v, w, 0.0011), (k, v, w)
    for cid, c in a["charts"].items():
        for name, pts in c["series"].items():
            other = b["charts"][cid]["series"][name]
            assert len(pts) == len(other), (cid, name)
            for p, q in zip(pts, other):
                assert p["level"] == q["level"] and near(p["y"], q["y"], 0.0011), (cid, name)


def test_sweep_report_in_browser():
    """A sweep's page has every panel, its figures are the document's, the
    knee is marked where the sweep put it, the SLO's limits are drawn, the
    fit is the longest level's; `report` draws the same page from the
    JSON."""
    p = pages()
    a, b, doc = p["sweep"], p["again"], p["docs"]["sweep.json"]
    assert "the knee is level" in p["table"]
    assert a["kind"] == "sweep" and a["h1"] == f"tokentap-load: sweep of {doc['target']}"
    for page in (a, b):
        check_page(page, doc, SWEEP_PANELS)
    check_same_figures(a, b)
    sw = doc["sweep"]
    assert a["sweep"] == [{"knee": sw["knee_level"], "saturated": sw["saturated_level"],
                           "stop": sw["stop_reason"]}]
    assert sw["knee_level"] is not None
    # TTFT, E2E, TPOT and throughput against concurrency, each point its level's
    charts = a["charts"]
    for cid, series, pick in (
            ("ttft-concurrency", "ttft_p95", lambda lv: lv["ttft_ms"]["p95"]),
            ("e2e-concurrency", "e2e_p50", lambda lv: lv["e2el_ms"]["p50"]),
            ("tpot-concurrency", "tpot_p95", lambda lv: lv["tpot_ms"]["p95"]),
            ("itl-concurrency", "itl_p50", lambda lv: lv["itl_ms"]["p50"]),
            ("throughput-concurrency", "output_tokens_per_s",
             lambda lv: lv["output_throughput"])):
        pts = charts[cid]["series"][series]
        assert [p["level"] for p in pts] == list(range(len(doc["levels"]))), (cid, pts)
        for p in pts:
            lv = doc["levels"][p["level"]]
            assert p["x"] == lv["value"] and near(p["y"], pick(lv)), (cid, p)
    assert charts["ttft-concurrency"]["limits"] == [{"target": "ttft_p95", "limit": 200}]
    assert charts["tpot-concurrency"]["limits"] == [{"target": "tpot_p95", "limit": 30}]
    knee = charts["knee-concurrency"]
    cap = -1
    for i, lv in enumerate(doc["levels"]):
        if not lv["slo"]["met"]:
            break
        cap = i
    want = [{"mark": "knee", "level": sw["knee_level"],
             "value": doc["levels"][sw["knee_level"]]["value"]}]
    if cap >= 0:
        want.append({"mark": "capacity", "level": cap, "value": doc["levels"][cap]["value"]})
    assert sorted(knee["marks"], key=lambda m: (m["level"], m["mark"])) == \
        sorted(want, key=lambda m: (m["level"], m["mark"])), knee["marks"]
    # the verdict names the knee and the SLO capacity
    assert a["verdict_text"].count("the knee is") == 1, a["verdict_text"]
    assert "SLO capacity: " + (doc["levels"][cap]["label"] if cap >= 0 else "none") in \
        a["verdict_text"], a["verdict_text"]
    for p in knee["series"]["knee_e2e_p50"]:
        lv = doc["levels"][p["level"]]
        assert near(p["x"], lv["output_throughput"]) and near(p["y"], lv["e2el_ms"]["p50"])
    # TTFT against input length: the ok requests of the levels up to the
    # knee, not the saturated longest level's queue; fitted over them all
    knee_value = doc["levels"][sw["knee_level"]]["value"]
    below = [lv for lv in doc["levels"] if lv["value"] <= knee_value]
    assert len(below) < len(doc["levels"])
    pts = [(s["input_tokens"] if s["input_tokens"] is not None else s["prompt_tokens"],
            s["ttft_ms"]) for lv in below for s in counted_ok(lv)]
    total = len(pts)
    assert a["scatter"] == [{"points": total, "total": total, "drawn": total}], a["scatter"]
    fit, = a["fit"]
    assert fit["n"] == total
    mx, my = (sum(p[k] for p in pts) / total for k in (0, 1))
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    assert abs(fit["slope"] - 1e3 * slope) < 1e-3 * max(1, abs(1e3 * slope)), (fit, slope)
    assert abs(fit["intercept"] - (my - slope * mx)) < 1e-2, fit
    # no error at any level: a line says so, no empty chart
    assert all(lv["errors"] == 0 for lv in doc["levels"])
    errs, = [x for x in a["panels"] if x["id"] == "errors"]
    assert errs["charts"] == 0 and a["bars"] == [] and a["error_labels"] == [], errs
    assert errs["empty"] == ["No errors: every measured request of every level was ok."]
    assert a["slo"] == [{"target": "ttft_p95", "limit": 200}, {"target": "tpot_p95", "limit": 30}]


def test_knee_labels_do_not_overlap():
    """On the knee chart no two labels (a point's load, the knee, the SLO
    capacity) intersect on the screen, at 1280 and at 390 px: where levels
    crowd one spot (a document whose levels share one throughput and
    latencies 1 ms apart) labels are placed around their points or left
    out, the first and last levels' kept."""
    p = pages()
    for name in ("sweep", "cap", "crowd", "sweep_narrow", "cap_narrow"):
        for cid, c in p[name]["charts"].items():
            if cid.startswith("knee-"):
                assert c["overlaps"] == [], (name, cid, c["overlaps"])
    crowd = p["crowd"]["charts"]["knee-concurrency"]
    doc = p["docs"]["sweep.json"]
    values = [str(lv["value"]).removesuffix(".0") for lv in doc["levels"]]
    assert "knee" in crowd["labels"], crowd["labels"]
    assert values[0] in crowd["labels"] and values[-1] in crowd["labels"], crowd["labels"]
    # the page is no wider than a phone's window
    for name in ("sweep_narrow", "cap_narrow"):
        assert p[name]["scroll_width"] <= 390, (name, p[name]["scroll_width"])


def test_capacity_report_marks_the_capacity():
    """A concurrency search against 4 slots under ttft_p95<=30ms: the page
    marks the capacity at the interval's lower end, its verdict is the
    document's, and the levels table flags that level."""
    p = pages()
    out, doc = p["cap"], p["docs"]["cap.json"]
    cap, = doc["capacity"]
    assert cap["found"] and cap["binding"] == "ttft_p95", cap
    check_page(out, doc, SWEEP_PANELS)
    assert out["capacity"] == [{"key": "concurrency", "found": True, "value": cap["capacity"],
                                "lo": cap["interval"][0], "hi": cap["interval"][1],
                                "binding": "ttft_p95"}]
    at = [i for i, lv in enumerate(doc["levels"]) if lv["value"] == cap["interval"][0]]
    assert out["charts"]["knee-concurrency"]["marks"] == \
        [{"mark": "capacity", "level": at[0], "value": cap["interval"][0]}]
    assert [r["level"] for r in out["levels"] if "cap" in r["cls"]] == at
    # the search's levels, in the order of their load on the charts
    pts = out["charts"]["ttft-concurrency"]["series"]["ttft_p95"]
    assert [p["x"] for p in pts] == sorted(lv["value"] for lv in doc["levels"])
    assert out["charts"]["ttft-concurrency"]["limits"] == [{"target": "ttft_p95", "limit": 30}]


def test_run_report_escapes_what_it_shows():
    """A single run whose model and headers are markup: the page shows them
    as text, runs nothing, loads nothing, and has the run's panels only (no
    load axis); a label a saved document holds as ill-formed UTF-8 and
    markup is shown as U+FFFD and text."""
    p = pages()
    out, out2, doc = p["run"], p["bad"], p["docs"]["run.json"]
    assert out["title"] == f"tokentap-load report: {doc['target']}"
    assert out["model"] == HOSTILE_MODEL and doc["model"] == HOSTILE_MODEL
    assert HOSTILE_HEADER in out["command"]
    lv = check_page(out, doc, RUN_PANELS)
    assert out["dists"]["tpot"]["tpot_p50"] is not None
    assert near(out["dists"]["ttft"]["ttft_p95"], lv["ttft_ms"]["p95"])
    assert near(out["dists"]["itl"]["itl_p99"], lv["itl_ms"]["p99"])
    assert out["dists"]["e2e"]["count"] == lv["e2el_ms"]["count"] == 12
    assert out["capacity"] == [] and out["sweep"] == []
    # every prompt the same size: no line through one x (the old page drew
    # one, R² 1e-31), and no chart
    ins = {s["input_tokens"] if s["input_tokens"] is not None else s["prompt_tokens"]
           for s in counted_ok(lv)}
    assert len(ins) == 1, ins
    assert out["fit"] == [] and out["input_charts"] == 0, out["fit"]
    assert out["input_constant"] == [{"tokens": ins.pop(), "requests": len(counted_ok(lv))}]
    assert out2["requests"] == [out2["url"]] and out2["console"] == []
    assert out2["levels"][0]["cells"]["label"] == "\ufffd<b>x</b>"


def test_verdict_warns_once_and_names_knee_and_capacity():
    """The generator's dispatch-lag warning is one line for the whole
    invocation, and only when its p99 is a share (5 %) of the tightest TTFT
    or end-to-end target, else of the TTFT p50: 2 ms at every level of a
    sweep under ttft_p95<=200ms is none (it was a line a level at a fixed
    1 ms); 30 ms at one is one line naming that level and its share. The
    verdict names the knee (or that there is none) and the SLO capacity,
    in the table and on the page; a run's page says whether the SLO was
    met. Documents edited where the lag and the knee are set, so that
    nothing depends on the machine's speed."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        path = {n: os.path.join(d, n) for n in ("sweep.json", "edit.json", "edit.html",
                                                 "run.json", "run.html")}
        load("sweep", "--over", "concurrency", "--levels", "1,2,4", "-n", "20", "--warmup", "0",
             "--max-tokens", "5", "--slo", "ttft_p95<=200ms", "--json", path["sweep.json"],
             m.url(CHAT), report=False)
        load("-c", "1", "-n", "10", "--max-tokens", "5", "--slo", "ttft_p95<=200ms",
             "--json", path["run.json"], "--report", path["run.html"], m.url(CHAT), report=False)
        with open(path["sweep.json"]) as f:
            doc = json.load(f)

        def report(lags, ttft_p50=None, slo=True):
            e = json.loads(json.dumps(doc))
            for lv, lag in zip(e["levels"], lags):
                lv["generator"]["warnings"] = ["dispatch_lag"]
                lv["dispatch_lag_ms"].update(p99=lag, max=lag * 1.5)
                if ttft_p50 is not None:
                    lv["ttft_ms"]["p50"] = ttft_p50
            if not slo:
                e["slo"] = None
                for lv in e["levels"]:
                    lv["slo"] = None
            # no knee: throughput grew up to the last level
            e["sweep"].update(knee_level=None, saturated_level=None, stop_reason="levels")
            with open(path["edit.json"], "w") as f:
                json.dump(e, f)
            table = load("report", path["edit.json"], "--html", path["edit.html"],
                         report=False).stdout
            with open(path["edit.html"]) as f:
                page = f.read()
            verdict = page[page.index('id="p-verdict"'):page.index('id="p-levels"')]
            return table, verdict

        table, verdict = report([2, 2, 2])
        assert "dispatch lag" not in table and "dispatch lag" not in verdict, (table, verdict)
        assert "no knee: throughput grew up to the last level" in table, table
        assert "<b>no knee</b>: throughput grew up to the last level" in verdict, verdict
        cap = -1
        for i, lv in enumerate(doc["levels"]):
            if not lv["slo"]["met"]:
                break
            cap = i
        assert f"SLO capacity level {cap}" in table if cap >= 0 else \
            "SLO capacity none" in table, table
        assert re.search(r'id="sweep-capacity" data-level="%d">SLO capacity: <b' % cap, verdict)
        table, verdict = report([2, 30, 2])
        lines = [x for x in table.splitlines() if "dispatch lag" in x]
        assert len(lines) == 1, table
        label = doc["levels"][1]["label"]
        assert f"30.00 ms at p99" in lines[0] and label in lines[0] and \
            "15 % of the target ttft_p95 <= 200 ms" in lines[0], lines
        assert verdict.count("dispatch lag") == 1 and f"({label}), 15 % of the target " \
            "ttft_p95" in verdict, verdict
        # without targets: against the level's own TTFT p50 (100 ms: 5 ms)
        table, verdict = report([2, 4, 2], ttft_p50=100, slo=False)
        assert "dispatch lag" not in table and "dispatch lag" not in verdict, (table, verdict)
        table, verdict = report([2, 8, 2], ttft_p50=100, slo=False)
        assert verdict.count("dispatch lag") == 1 and "8 % of its TTFT p50" in verdict, verdict
        with open(path["run.html"]) as f:
            page = f.read()
        assert re.search(r'<li id="slo-met" data-met="1">the SLO was <b>met</b> at this load',
                         page), page[page.index('id="p-verdict"'):page.index('id="p-levels"')]


def test_repeated_level_slices_and_drift_per_run():
    """A capacity level run again while undecided (ttft_p99 needs 368
    requests, 2 users of a 9 ms request send at most 222 a second) is
    independent replications one after the other: its slices are each
    run's (tagged "run"), none spanning the seam or the gap between two,
    and its drift is the slope within the runs (each run's own intercept),
    not the jumps between them; the page breaks its lines at the seams and
    marks them."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        js, html = os.path.join(d, "rep.json"), os.path.join(d, "rep.html")
        load("capacity", "--slo", "ttft_p99<=1000ms", "--over", "concurrency",
                     "--from", "2", "--max-concurrency", "2", "-d", "1s", "--warmup", "100ms",
                     "--slice", "300ms", "--repeats", "2", "--max-tokens", "5", "--json", js,
                     "--report", html, m.url(CHAT), report=False)
        with open(js) as f:
            lv, = json.load(f)["levels"]
        with open(html) as f:
            page = f.read()
    runs = lv["runs"]
    assert runs >= 2, runs
    sl = lv["slices"]
    assert sorted({x["run"] for x in sl}) == list(range(runs)), sl
    spans = {r: (min(x["start_s"] for x in sl if x["run"] == r),
                 max(x["end_s"] for x in sl if x["run"] == r)) for r in range(runs)}
    for a, b in zip(sl, sl[1:]):
        assert a["run"] <= b["run"] and a["end_s"] <= b["start_s"] + 1e-9, (a, b)
    # each run's requests are in its own slices (the gap between has none);
    # the document's seconds are rounded to the ms, its starts are not
    ok = [s for s in counted_ok(lv)]
    by_run = {r: [s for s in ok
                  if spans[r][0] - 5e-4 <= s["start_ms"] / 1e3 < spans[r][1] + 5e-4]
              for r in range(runs)}
    assert sum(len(v) for v in by_run.values()) == len(ok)
    assert sum(x["requests"] for x in sl) == lv["requests"]
    # the drift: least squares within the runs, from the samples
    sxx = sxy = 0.0
    for v in by_run.values():
        mx = sum(s["start_ms"] for s in v) / len(v) / 60e3
        my = sum(s["ttft_ms"] for s in v) / len(v)
        sxx += sum((s["start_ms"] / 60e3 - mx) ** 2 for s in v)
        sxy += sum((s["start_ms"] / 60e3 - mx) * (s["ttft_ms"] - my) for s in v)
    got = lv["drift"]["ttft_slope_ms_per_min"]
    assert abs(got - sxy / sxx) < 0.01 * abs(sxy / sxx) + 0.05, (got, sxy / sxx)
    seams = re.findall(r'<line [^>]*data-run="(\d+)"', page)
    assert seams == [str(r) for r in range(1, runs)] * 2, seams
    # the drift in words: a fit that explains under a quarter is no trend
    trend = "no TTFT trend within the runs" if lv["drift"]["r2"] < 0.25 else \
        "ms per minute within the runs"
    assert trend in page, (lv["drift"], page[page.index('id="p-slices"'):][:800])
    path = re.search(r'data-series="slice_ttft_p50"><path class="line" d="([^"]*)"', page)
    assert path.group(1).count("M") == runs, path.group(1)


# ---------------------------------------------------------------- compare

def row(text, figure):
    """(A, B, change %, interval text) of the first row of that figure."""
    m = re.search(rf"^.{{25}}{figure}\s+(\S+)\s+(\S+)\s+([+-][0-9.]+) %\s+(.*)$", text, re.M)
    assert m, text
    return float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4)


def test_compare_flags_a_regression_and_passes_aa():
    """Two runs against TPOT 20 ms and one against 24 ms: B against A is
    +20 % at TPOT p50, significant, and fails tpot_p50>+10% (exit 1); the
    two runs at 20 ms pass it (exit 0); reversed, the fall fails
    tpot_p50<-10%."""
    common = ["-c", "8", "-n", "48", "--max-tokens", "12", "--warmup-requests", "8"]
    with Mock("--ttft", "20ms", "--tpot", "20ms") as m1, \
            Mock("--ttft", "20ms", "--tpot", "24ms") as m2, \
            tempfile.TemporaryDirectory() as d:
        a, a2, b = (os.path.join(d, n) for n in ("a.json", "a2.json", "b.json"))
        load(*common, "--json", a, m1.url(CHAT), report=False)
        load(*common, "--json", a2, m1.url(CHAT), report=False)
        load(*common, "--json", b, m2.url(CHAT), report=False)
        docs = {}
        for p in (a, b):
            with open(p) as f:
                docs[p] = json.load(f)
        # two mocks: two targets, which compare names and refuses (exit 4)
        # unless told
        out = load("compare", a, b, expect=4, report=False).stdout
        assert "workload differs: target" in out, out
        out = load("compare", "--allow-different", "--fail-on", "tpot_p50>+10%", a, b,
                   expect=1, report=False).stdout
        va, vb, change, interval = row(out, "tpot_p50")
        # compare's figures are the samples': saved to the µs, each a µs or
        # less from the one the run computed, both printed to 3 decimals
        assert abs(va - docs[a]["levels"][0]["tpot_ms"]["p50"]) <= 0.0011
        assert abs(vb - docs[b]["levels"][0]["tpot_ms"]["p50"]) <= 0.0011
        assert 17 < change < 23 and "*" in interval, out
        assert "FAIL tpot_p50>+10%" in out and "fail-on tpot_p50>+10%: FAILED at run" in out
        out = load("compare", "--fail-on", "tpot_p50>+10%", a, a2, expect=0, report=False).stdout
        _, _, change, _ = row(out, "tpot_p50")
        assert abs(change) < 3, out
        assert "fail-on tpot_p50>+10%: passed at 1 level" in out and "FAIL" not in out
        load("compare", "--allow-different", "--fail-on", "tpot_p50<-10%", b, a, expect=1,
             report=False)
        load("compare", "--allow-different", "--fail-on", "tpot_p50>+10%", b, a, expect=0,
             report=False)
        # the rows' figures; one asked for beyond the defaults
        out = load("compare", "--allow-different", "--metrics", "tpot_p99,e2el_mean", a, b,
                   expect=0, report=False).stdout
        assert re.search(r"^run\s+tpot_p99 ", out, re.M) and \
            re.search(r"^\s+e2e_mean ", out, re.M) and "ttft_p50" not in out, out


def test_compare_refuses_unlike_workloads():
    """8 users asking 32 tokens against 4 asking 16, on one target: each
    difference named, and refused (exit 4) unless --allow-different; the
    seed too. A level that ran twice (a capacity level within noise) is
    compared by its first run: a copy of a run's requests pooled with
    them gives the very intervals of the run alone, not narrower ones."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        p = {n: os.path.join(d, n + ".json") for n in ("a", "b", "seed", "twice")}
        load("-c", "8", "-n", "24", "--max-tokens", "32", "--json", p["a"], m.url(CHAT),
             report=False)
        load("-c", "4", "-n", "24", "--max-tokens", "16", "--json", p["b"], m.url(CHAT),
             report=False)
        load("-c", "8", "-n", "24", "--max-tokens", "32", "--seed", "2", "--json", p["seed"],
             m.url(CHAT), report=False)
        out = load("compare", p["a"], p["b"], expect=4, report=False).stdout
        assert "workload differs at run: concurrency 8 in A, 4 in B" in out, out
        assert "workload differs at run: max tokens 32 in A, 16 in B" in out, out
        assert "--allow-different" in out and "ttft_p50" not in out, out
        out = load("compare", "--allow-different", p["a"], p["b"], expect=0, report=False).stdout
        assert "concurrency 8 in A, 4 in B" in out and "ttft_p50" in out, out
        out = load("compare", p["a"], p["seed"], expect=4, report=False).stdout
        assert "seed 1 in A, 2 in B" in out, out
        with open(p["a"]) as f:
            doc = json.load(f)
        lv = doc["levels"][0]
        twice = dict(doc, levels=[dict(lv, runs=2, samples=lv["samples"] + lv["samples"])])
        with open(p["twice"], "w") as f:
            json.dump(twice, f)
        alone = load("compare", p["a"], p["a"], report=False).stdout
        pooled = load("compare", p["a"], p["twice"], report=False).stdout
        assert "runs pooled, 1 in A and 2 in B" in pooled, pooled
        for fig in ("ttft_p95", "e2e_p50", "tpot_p50"):
            assert row(pooled, fig) == row(alone, fig), (fig, alone, pooled)


def test_compare_exit_codes_and_bad_input():
    """Usage and documents: each mistake is named and exits 2; two
    documents with no level in common exit 2; a scenarios document, a
    newer schema, a wrong type and broken JSON are refused at
    FILE:LINE:COL."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        run, sweep = os.path.join(d, "run.json"), os.path.join(d, "sweep.json")
        load("-c", "1", "-n", "3", "--max-tokens", "3", "--json", run, m.url(CHAT), report=False)
        load("sweep", "--over", "concurrency", "--levels", "1", "-n", "3", "--warmup", "0",
             "--max-tokens", "3", "--json", sweep, m.url(CHAT), report=False)
        with open(run) as f:
            text = f.read()
        doc = json.loads(text)

        def write(name, body):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(body)
            return p

        err = load("compare", "--fail-on", "tpot_p50>=10%", run, run, expect=2, report=False).stderr
        assert "--fail-on: 'tpot_p50>=10%'" in err, err
        err = load("compare", "--fail-on", "latency>+10%", run, run, expect=2, report=False).stderr
        assert "unknown figure" in err
        err = load("compare", "--alpha", "5", run, run, expect=2, report=False).stderr
        assert "--alpha" in err
        err = load("compare", run, expect=2, report=False).stderr
        assert "two documents expected" in err
        err = load("compare", run, os.path.join(d, "nothere.json"), expect=2, report=False).stderr
        assert "nothere.json: No such file" in err
        out = load("compare", run, sweep, expect=2, report=False).stdout
        assert "no level of A matches a level of B" in out
        out = load("compare", "--help", expect=0, report=False).stdout
        assert "--fail-on" in out
        load("compare", run, run, expect=0, report=False)
        # broken JSON: where it broke
        err = load("compare", write("cut.json", text[:200]), run, expect=2, report=False).stderr
        assert re.search(r"cut\.json:\d+:\d+: ", err), err
        lines = text.splitlines()
        at = next(i for i, x in enumerate(lines) if '"requests":' in x)
        wrong = "\n".join(lines[:at] + [lines[at].replace('"requests": ', '"requests": "x", '
                                                          '"was": ')] + lines[at + 1:])
        err = load("compare", write("wrong.json", wrong), run, expect=2, report=False).stderr
        col = lines[at].index('"requests": ') + len('"requests": ') + 1
        assert f"wrong.json:{at + 1}:{col}: levels[0].requests: a number expected" in err, err
        err = load("compare", write("v2.json", json.dumps(dict(doc, schema_version=2))), run,
                   expect=2, report=False).stderr
        assert "v2.json:" in err and "schema_version" in err, err
        scen = write("scen.json", json.dumps({"schema_version": 1, "kind": "scenarios",
                                              "scenarios": []}))
        err = load("compare", scen, run, expect=2, report=False).stderr
        assert "a scenarios document" in err, err
        r = subprocess.run([binary("tokentap-load"), "report", scen], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and "a scenarios document" in r.stderr


def test_report_reads_back_a_rate_interval():
    """A rate search's saved document read back by `report`: its confidence
    interval is the document's, not lost.
    The interval is set in the document (both ends), so that the check does
    not hang on what a short search decided: load_read.c once iterated the
    "ci" array from the last element of "interval" and read [?, ?]. So the
    search is a coarse one (--resolution 40 %: 6 levels, not 11)."""
    d = tempfile.mkdtemp(prefix="tt-ci-")
    atexit.register(shutil.rmtree, d, True)
    path = os.path.join(d, "rate.json")
    with Mock("--slots", "4", "--ttft", "10ms", "--tpot", "4ms") as m:
        load("capacity", "--slo", "ttft_p95<=30ms", "--over", "rate", "--from", "20",
             "--resolution", "40%", "--repeats", "0", "-d", "600ms", "--warmup", "200ms",
             "--max-tokens", "12", "--json", path, m.url(CHAT), report=False)
    with open(path) as fh:
        doc = json.load(fh)
    cap, = doc["capacity"]
    assert cap["found"] and cap["key"] == "rate", cap
    cap["ci"] = [cap["interval"][0] - 0.5, cap["interval"][1] + 0.5]
    with open(path, "w") as fh:
        json.dump(doc, fh)
    table = load("report", path, report=False).stdout
    want = f"confidence interval [{cap['ci'][0]:.2f}, {cap['ci'][1]:.2f}]"
    assert want in table, (want, [ln for ln in table.splitlines()
                                  if ln.startswith("capacity")])


if __name__ == "__main__":
    import time
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    for name in sorted(n for n in dir() if n.startswith("test_") and only in n):
        t = time.monotonic()
        globals()[name]()
        print(f"ok   {name} ({time.monotonic() - t:.1f}s)")
