# SPDX-License-Identifier: Apache-2.0
"""tokentap-load against targets that fail: the pre-flight (the first
answer of the invocation decides whether the target works at all), the
exit statuses of runs, sweeps and searches that met errors or nothing,
and the errors by HTTP status."""
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time

from harness import CHAT, Mock, Tokentap, binary, free_port, load
from peers import SSE_HEAD, Backend, TLSBackend, pki

# long enough that a run which does not stop at once is plainly seen:
# before the pre-flight each of these ran its whole duration and exited 0
LONG = ["-c", "4", "-d", "30s", "--max-tokens", "4"]


def timed(*args, expect):
    t = time.monotonic()
    j, err = load(*args, expect=expect, stderr=True)
    return j, err, time.monotonic() - t


def test_preflight_stops_a_refused_port():
    port = free_port()     # nothing listens there
    j, err, took = timed(*LONG, f"http://127.0.0.1:{port}{CHAT}", expect=3)
    assert "refused the connection" in err and "listening on that port" in err, err
    assert j["requests"] <= 4 and j["outcomes"]["connect_error"] == j["requests"], j
    assert took < 10, took     # at once, not the 30 s level


def test_connect_errors_back_off():
    """Without the pre-flight, a user whose connection was refused waits
    10 ms, doubling to a second, before it tries again: 2 users in 1 s
    try some 14 times, not thousands (38,000 a second before)."""
    port = free_port()
    j = load("-c", "2", "-d", "1s", "--no-preflight", f"http://127.0.0.1:{port}{CHAT}",
             expect=3)
    assert 2 <= j["requests"] <= 40 and j["outcomes"]["connect_error"] == j["requests"], j


def test_preflight_stops_a_tls_failure():
    p = pki()
    with TLSBackend(lambda req, c: None, p["server.crt"], p["server.key"]) as b:
        # the system store does not know the test CA
        j, err, took = timed(*LONG, f"https://localhost:{b.port}{CHAT}", expect=3)
    assert err.count("certificate verification failed") == 1, err
    assert "the TLS handshake with localhost" in err and "--cacert" in err, err
    assert j["outcomes"]["connect_error"] == j["requests"] <= 4, j
    assert took < 10, took


def test_preflight_stops_429_and_500():
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m:
        for code, words in (("429", "limits the request rate"), ("500", "see its log")):
            j, err, took = timed(*LONG, "-H", f"X-Mock-Fault: status:{code}", m.url(CHAT),
                                 expect=3)
            assert f"answered HTTP {code}" in err and words in err, err
            assert j["requests"] <= 4 and j["errors"] == j["requests"], j
            assert took < 10, took
        # a target that works passes it, and exits 0
        j = load("-c", "2", "-n", "4", "--max-tokens", "2", m.url(CHAT))
        assert j["ok"] == 4


class Crowded:
    """A backend that streams to one request at a time and answers 429 to
    any other while one streams."""

    def __init__(self):
        self.busy = 0
        self.lock = threading.Lock()

    def __call__(self, req, c):
        with self.lock:
            busy = self.busy
            if not busy:
                self.busy = 1
        if busy:
            c.send(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n")
            time.sleep(0.005)
            return "keep"
        try:
            c.send(SSE_HEAD)
            for _ in range(3):
                time.sleep(0.01)
                c.chunk(b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n')
            c.chunk(b"data: [DONE]\n\n")
            c.end_chunks()
        finally:
            with self.lock:
                self.busy = 0
        return "keep"


def test_no_request_ok_and_error_rate_exit_3():
    """Without the pre-flight, a run whose every request failed exits 3;
    one whose error rate passed --stop-error-rate (default 10 %) too."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m:
        j, err = load("-c", "2", "-n", "6", "--max-tokens", "2", "--no-preflight",
                      "-H", "X-Mock-Fault: status:503", m.url(CHAT), expect=3, stderr=True)
        assert j["outcomes"]["upstream_error"] == 6 and "no request succeeded" in err, err
    # two users of a backend that serves one at a time: many 429s among
    # the streams, past 10 %; and under a --stop-error-rate of 100 %, 0
    with Backend(Crowded()) as b:
        url = f"http://127.0.0.1:{b.port}{CHAT}"
        j, err = load("-c", "2", "-n", "40", "--max-tokens", "4", "--no-preflight", url,
                      expect=3, stderr=True)
        assert 0 < j["ok"] and j["error_rate"] > 0.1, j["outcomes"]
        assert "over --stop-error-rate 10.00 %" in err, err
        load("-c", "2", "-n", "10", "--no-preflight", "--stop-error-rate", "100%", url)


def test_sweep_stopped_by_errors_exits_3():
    with Backend(Crowded()) as b:
        r = load("sweep", "--over", "concurrency", "--levels", "1,4,8", "--warmup", "100ms",
                 "-d", "1s", "--max-tokens", "4", f"http://127.0.0.1:{b.port}{CHAT}",
                 whole=True, expect=3, stderr=True)
    doc, err = r
    assert doc["sweep"]["stop_reason"] == "error_rate", doc["sweep"]
    assert len(doc["levels"]) == 2 and doc["levels"][0]["errors"] == 0
    assert "error rate" in err and "--stop-error-rate" in err, err


def test_capacity_that_meets_nothing_exits_1():
    with Mock("--ttft", "40ms", "--tpot", "1ms") as m:
        doc, err = load("capacity", "--slo", "ttft_p95<=1ms", "--over", "concurrency",
                        "--warmup", "100ms", "-d", "500ms", "--max-tokens", "2",
                        m.url(CHAT), whole=True, expect=1, stderr=True)
    assert doc["capacity"][0]["found"] is False, doc["capacity"]
    assert "no level met the SLO" in err, err


def test_tokentap_log_pairs_each_request():
    """Three levels through tokentap with --tokentap-log: each measured
    request is paired with tokentap's access-log line of it by
    X-Request-Id, and the client - tokentap figures are those of the
    pairs (recomputed here, numpy's rule); no /stats window is waited for
    between levels, so the invocation takes about the levels' own time.
    The client sent before tokentap read and read after tokentap sent:
    each TTFT difference is positive."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        began = time.monotonic()
        csv = os.path.join(os.path.dirname(t.log), "pairs.csv")
        doc = load("sweep", "--over", "concurrency", "--levels", "1,2,4", "--no-stop",
                   "-d", "1s", "--warmup", "100ms", "--max-tokens", "10", "--csv", csv,
                   "--tokentap-log", t.log, t.url(CHAT), whole=True)
        took = time.monotonic() - began
        with open(csv) as f:
            rows = [x.split(",") for x in f.read().splitlines()]
        logged = {x["request_id"]: x for x in t.access()}
    assert len(doc["levels"]) == 3
    run = doc["run_id"]
    for lv in doc["levels"]:
        p = lv["tokentap_paired"]
        mine = [s for s in lv["samples"] if not s["warmup"] and not s["cooldown"]]
        assert p["requests"] == len(mine) == lv["requests"] and p["missing"] == 0, p
        d = sorted(s["ttft_ms"] - logged[f"{run}-{lv['index']}-{s['seq']}"]["ttft_ms"]
                   for s in mine)
        assert d[0] >= 0, d
        got = p["client_minus_tokentap_ttft_ms"]
        assert got["count"] == len(d) and abs(got["max"] - d[-1]) < 0.002, (got, d)
        assert abs(got["p50"] - statistics.quantiles(d, n=100, method="inclusive")[49]) \
            < 0.002 if len(d) > 1 else True, (got, d)
        # the CSV's columns of it
        at = rows[0].index("paired_ttft_diff_max_ms")
        assert abs(float(rows[1 + lv["index"]][at]) - got["max"]) < 0.002, rows
    # the levels' own time and the log's last lines: not a window each
    assert took < sum(lv["elapsed_s"] for lv in doc["levels"]) + 5, took


def test_tokentap_log_read_from_the_runs_start_or_whole_once_rotated():
    """The log is read from where it ended when the run began (a busy
    proxy's is gigabytes of other requests); cut to nothing during the
    level, after five of its lines (copytruncate), it is shorter than that
    at the end and is read
    whole: the requests that ended after the cut are paired, those before
    it are missing (before: none paired, the read began past its end)."""
    with Mock("--ttft", "20ms", "--tpot", "3ms") as m, \
            Tokentap("routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                     f"    upstream: http://127.0.0.1:{m.port}\n") as t:
        with open(t.log, "a") as f:     # older lines, more than the run writes
            f.write(('{"request_id": "older", "x": "%s"}\n' % ("y" * 1000)) * 1000)
            older = f.tell()

        def cut_after_five():           # lines of the run, whatever the start took
            for _ in range(3000):
                with open(t.log, "rb") as f:
                    f.seek(older)
                    if f.read().count(b"\n") >= 5:
                        os.truncate(t.log, 0)
                        return
                time.sleep(0.01)
        cut = threading.Thread(target=cut_after_five)
        cut.start()
        doc = load("-c", "2", "-d", "2s", "--warmup", "0", "--max-tokens", "10",
                   "--no-samples", "--tokentap-log", t.log, t.url(CHAT))
        cut.join()
    p = doc["tokentap_paired"]
    assert p["requests"] > 0 and p["missing"] > 0, p
    assert p["requests"] + p["missing"] == doc["requests"], (p, doc["requests"])

def test_cosmetic_faults():
    """The replay header says its requests and where the sizes come from
    (it said "requests0)" and "prompt 100-100 tokens"); a rate is a plain
    number (it said 1e+04 req/s); an undefined output speed is null (it
    was -1); a --lag row with nothing stamped says why."""
    with Mock("--ttft", "2ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        with open(trace, "w") as f:
            for i in range(3):
                f.write(json.dumps({"offset_ms": 10 * i, "prompt_tokens": 50,
                                    "output_tokens": 2}) + "\n")
        out = load("--trace", trace, m.url(CHAT), report=False).stdout
        assert f"replaying {trace} (3 requests)," in out, out
        assert "prompt and output tokens as the trace has them" in out, out
        assert "100-100" not in out and "requests0" not in out, out
        out = load("-r", "10000", "-n", "3", "--max-tokens", "2", m.url(CHAT),
                   report=False).stdout
        assert "10000 req/s" in out and "e+" not in out, out
        out = load("-c", "1", "-n", "2", "--max-tokens", "3", m.url(CHAT), report=False).stdout
        assert "max 3 tokens" in out and "3-3" not in out, out
        j = load("-c", "1", "-n", "2", "--max-tokens", "1", m.url(CHAT))
        assert [s["output_speed"] for s in j["samples"]] == [None, None], j["samples"]
        out = load("-c", "1", "-n", "2", "--max-tokens", "3", "--lag", m.url(CHAT),
                   report=False).stdout
        assert "no event was stamped" in out and "--stamp on" in out, out


def test_errors_by_status_everywhere():
    """429 and 500 are both upstream_error; the status is said beside the
    cause in the table, the JSON, the CSV and the HTML page."""
    with Backend(Crowded()) as b, tempfile.TemporaryDirectory() as d:
        p = {n: os.path.join(d, n) for n in ("run.json", "run.csv", "run.html")}
        r = load("-c", "3", "-n", "30", "--max-tokens", "4", "--no-preflight",
                 "--stop-error-rate", "100%", "--json", p["run.json"], "--csv", p["run.csv"],
                 "--report", p["run.html"], f"http://127.0.0.1:{b.port}{CHAT}", report=False)
        with open(p["run.json"]) as f:
            lv = json.load(f)["levels"][0]
        with open(p["run.csv"]) as f:
            head, row = f.read().splitlines()[:2]
        with open(p["run.html"]) as f:
            html = f.read()
    n = lv["outcomes"]["upstream_error"]
    assert n > 0 and lv["errors_by_status"] == {"429": n}, lv["errors_by_status"]
    assert f"by status    HTTP 429 {n}\n" in r.stdout, r.stdout
    assert f",errors_by_status,paired_ttft_diff_p50_ms," in head and \
        f",429:{n},,,,,," in row, (head, row)
    assert f'data-status="429" data-count="{n}"' in html


def stopped_a_while(args):
    """tokentap-load run with args, stopped (SIGSTOP) for 300 ms in its
    middle: every read due then comes late. Returns (document, stdout)."""
    p = subprocess.Popen([binary("tokentap-load"), *args, "--json", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.8)
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.3)
    p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return json.loads(out), err


def test_reads_late_warned_once():
    """A generator stopped for 300 ms reads late: from tokentap-mock's
    stamps with --lag, else from its own loop's timer, it says so once
    for the invocation (not once per level), against the tightest target
    of its SLO; the levels that read late carry it in the JSON."""
    with Mock("--ttft", "5ms", "--tpot", "5ms", "--stamp", "on") as m:
        doc, err = stopped_a_while(["-c", "2", "-d", "2s", "--max-tokens", "50", "--lag",
                                    m.url(CHAT)])
        g = doc["levels"][0]["generator"]
        assert g["read_late_source"] == "stamps" and g["read_late_p99_ms"] > 100, g
        assert "read_late" in g["warnings"], g
        with tempfile.TemporaryDirectory() as d:
            page = os.path.join(d, "sweep.html")
            doc, err = stopped_a_while(["sweep", "--over", "concurrency", "--levels", "1,2",
                                        "--no-stop", "--warmup", "100ms", "-d", "1.5s",
                                        "--max-tokens", "50", "--slo", "ttft_p95<=1s",
                                        "--report", page, m.url(CHAT)])
            with open(page) as f:
                html = f.read()
    assert html.count("data-read-late-p99=") == 1 and "the generator read late" in html
    gens = [lv["generator"] for lv in doc["levels"]]
    assert gens[0]["read_late_source"] == "timer" and gens[0]["read_late_p99_ms"] > 100, gens
    # the table (on stderr with --json -) warns once, naming the target
    assert err.count("the generator read late") == 1, err
    assert "of the target ttft_p95 <= 1000 ms" in err, err


def test_request_rate_is_not_quantised():
    """4 users of requests some 550 ms long (TTFT 20 ms, 19 gaps of 28
    ms) in a 1 s window: each completes 1.8 a second, c / E2E by Little's
    law, and req/s says so, where counting whole completions in the window
    said 4 (1 each: 0.55 of it, at most 0.7 on a machine slow enough to
    make them 700 ms). Tokens/s, which spreads each request's tokens, says
    the same."""
    with Mock("--ttft", "20ms", "--tpot", "28ms") as m:
        j = load("-c", "4", "-d", "1s", "--max-tokens", "20", m.url(CHAT))
    per_s = 4 * 1000 / j["e2el_ms"]["mean"]
    assert abs(j["request_throughput"] / per_s - 1) < 0.15, (j["request_throughput"], per_s)
    assert abs(j["output_throughput"] / (20 * per_s) - 1) < 0.15, \
        (j["output_throughput"], 20 * per_s)
