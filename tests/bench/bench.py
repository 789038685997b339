#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""make bench: the same load four ways in one run, to tokentap-mock
directly, through the floor (tests/bench/relay.c: a bare relay, what any
proxy must spend), through tokentap and through nginx (proxy_buffering
off), for the figures of docs/contract.md §7, and the stall-free streams
of each path.

  python3 tests/bench/bench.py [--quick] [--runs N] [--only SECTIONS] [--out FILE]
  python3 tests/bench/bench.py --report FILE
     --quick   smoke mode: one run each, small loads, one stall-free probe
               a path, no tokentap-loop (under a minute)
     --runs    runs per figure, the median is reported (default 3)
     --only    comma-separated: latency,stallfree,throughput,memory,instructions,
               generator,otel,tls,timing,saturated
     --out     JSON output (default build/bench.json; Markdown beside it)
     --report  print the tables of an earlier run's JSON again (and its .md)
     --levels  latency: the stream counts (default 100,500,1000,3000)
     --workers proxy workers (default: one per CPU of the proxy's half)
     --shared  no pinning: mock, client and proxy share every CPU
  TOKENTAP_BENCH_KEEP=1 keeps the run's directory (logs, callgrind dumps)

Pinning: on a machine with 2 CPUs or more, the mock and the client share
the lower half of the CPUs and the proxy under test (tokentap or nginx,
one worker per CPU of that half each, as `workers: auto` and
`worker_processes` are meant to be set) has the upper half to itself, so
the proxy never competes with the load it forwards, and direct runs leave
that half idle.

Latency per event: tokentap-mock --stamp writes each token event's send
time (CLOCK_MONOTONIC µs) in an SSE comment; tokentap-load --lag takes the
time the event was read and records the difference. Both run on this host,
on one clock. Added latency = through a proxy minus direct, per quantile of
the medians of the runs.

The generator: tokentap-load's own accuracy, direct to the mock, against the
mock's log of when it sent each request's first and last token (matched
by the X-Request-Id tokentap-load sends), at 100 and 1,000 streams: the
client's first-token read minus the mock's send (what the client adds to
TTFT), its TPOT against the mock's; and the generator's CPU per event,
with the events one core of it drives (TPOT 0: as fast as the mock sends).

Measurement accuracy: tokentap's access log against the mock's own send
times, for tokentap as it runs (timestamps: kernel, the kernel's receive
times) and, side by side in the same runs, a second tokentap with
timestamps: loop (the event loop's clock: what it measured before). The
mock's times start at the kernel's receipt of the request, so tokentap's
TTFT less its own forwarding (t_sent - t0) is compared with the mock's
TTFT: what is left is the error of tokentap's first-token stamp
(accuracy() says more).

TLS (--only tls): tokentap and nginx each terminate the client's TLS and
speak TLS to a TLS backend; an nginx on the client's CPUs adds the TLS
around them (tokentap-load speaks plain HTTP) and is the backend's TLS
(tests/bench/nginx-edge.conf); direct-tls is that nginx alone.
"""
import argparse
import glob
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figures as fg  # noqa: E402
import procs  # noqa: E402
import report  # noqa: E402
import saturated  # noqa: E402
import timing  # noqa: E402

TPOT = "20ms"
TTFT = "50ms"
TOKENS = 50                    # per stream in the latency runs
PATH = "/v1/chat/completions"

FULL = {
    "runs": 3,
    # 3,000: past what 2 CPUs carry (the overload level)
    "levels": [100, 500, 1000, 3000],
    # where docs/contract.md §7 compares the proxies (100 and 1,000 streams)
    # and at the overload level, more runs: p99 and max vary from run to run
    "level_runs": {100: 5, 1000: 5, 3000: 5},
    "duration": "4s", "ramp": "1s",
    "tp_streams": 100, "tp_tokens": 2000, "tp_duration": "4s",
    "mem_levels": [1000, 8000],
    "cg_streams": 20, "cg_tokens": 200,
    "sf_start": 250, "sf_max": 8000, "sf_tokens": 100,
    "client_levels": [100, 1000], "client_duration": "6s",
    "otel_streams": 1000, "otel_duration": "4s",
}
QUICK = {
    "runs": 1,
    "levels": [100],
    "duration": "2s", "ramp": "200ms",
    "tp_streams": 50, "tp_tokens": 500, "tp_duration": "1s",
    "mem_levels": [200],
    "cg_streams": 5, "cg_tokens": 50,
    # one stall-free probe a path: the search's doubling is make bench's
    "sf_start": 100, "sf_max": 100, "sf_tokens": 50,
    "client_levels": [100], "client_duration": "2s",
    "otel_streams": 100, "otel_duration": "2s",
}
DISTURBED = 0.05              # share of CPU time other processes may take
# A virtual machine's CPUs are taken by its host now and then (steal time):
# a run that loses more than this share of any CPU's time to the host has
# its p99 and max made by the host, whichever path it measured.
STOLEN = 0.01
# seconds that repeated runs may take in all: keeps `make bench` under ten
# minutes on a host that steals all along
REPEAT_BUDGET_S = 60
SECTIONS = ("latency", "stallfree", "throughput", "memory", "instructions", "generator",
            "otel", "tls", "timing", "saturated")
# the OpenTelemetry export's cost: tokentap without it, with a span for
# every request (no client sends a traceparent: otel.traces.sample 1), and
# with the metrics export on too, to a collector that takes everything
OTEL_CONFIGS = {
    "off": "",
    "traces": "otel:\n  endpoint: http://127.0.0.1:{sink}\n  traces: {{sample: 1}}\n"
              "  metrics: {{enabled: false}}\n",
    "traces+metrics": "otel:\n  endpoint: http://127.0.0.1:{sink}\n"
                      "  traces: {{sample: 1}}\n  metrics: {{interval: 1s}}\n",
}
# the TLS rows' levels (quick: the first)
TLS_LEVELS = (100, 500)
TLS_MEMORY = 1000
# stall-free streams, as the public gateway boards count them: every frame
# arrives, no gap between frames over 10x the pace, under 0.1 % errors
SF_GAP_MS = 10 * 20
SF_ERRORS = 0.001
# floor: tests/bench/relay.c, a bare relay that does only what every proxy
# must (accept, connect, one recv and one send per readiness): what is
# left between it and a proxy is the proxy's own work
TARGETS = ("direct", "floor", "tokentap", "tokentap-loop", "nginx")
PROXIES = ("floor", "tokentap", "tokentap-loop", "nginx")
# the latency section's only: tokentap timed by the event loop (and the
# throughput and instructions sections'); --quick leaves it out: it is
# make bench's figure (the kernel stamps' cost), make test reads none of it
LOOP_ONLY = ("tokentap-loop",)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def machine(client, proxy, workers):
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True) \
        if shutil.which("nginx") else None
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "nginx": nginx.stderr.strip().split("/")[-1] if nginx else None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "pinning": {"mock_and_client": sorted(client), "proxy": sorted(proxy),
                    "workers": workers},
    }


def cpu_sets(shared=False):
    """The client's CPUs (mock and load) and the proxy's: halves, or all
    of them for both with --shared (as a box that runs the backend, the
    clients and the proxy together is)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or shared:
        return set(cpus), set(cpus)
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


class Bench:
    def __init__(self, a):
        self.p = dict(QUICK if a.quick else FULL)
        if a.levels:
            self.p["levels"] = [int(x) for x in a.levels.split(",")]
        self.runs = a.runs or self.p["runs"]
        self.quick = a.quick
        self.client, self.proxy = cpu_sets(a.shared)
        self.workers = a.workers or len(self.proxy)
        self.dir = tempfile.mkdtemp(prefix="tokentap-bench-")
        self.mock = self.tokentap = self.nginx = self.floor = None
        self.tokentap_loop = None
        self.marks = (0, 0)        # log sizes at the start of the last run
        self.has_nginx = shutil.which("nginx") is not None
        self.has_valgrind = shutil.which("valgrind") is not None and \
            shutil.which("callgrind_control") is not None
        self.repeat_budget = 0 if a.quick else REPEAT_BUDGET_S

    # ---- processes -------------------------------------------------------

    def start(self):
        self.mock = procs.Mock(self.client, self.dir, ttft=TTFT, tpot=TPOT)

    def start_proxies(self):
        self.floor = procs.Relay(self.proxy, self.dir, self.mock.port,
                                 workers=self.workers)
        self.tokentap = procs.Tokentap(self.proxy, self.dir, self.mock.port,
                                       workers=self.workers)
        self.tokentap_loop = procs.Tokentap(self.proxy, self.dir, self.mock.port,
                                            workers=self.workers, name="tokentap-loop",
                                            timestamps="loop")
        if self.has_nginx:
            self.nginx = procs.Nginx(self.proxy, self.dir, self.mock.port,
                                     workers=self.workers)

    def stop_proxies(self):
        for p in (self.nginx, self.tokentap, self.tokentap_loop, self.floor):
            if p is not None:
                p.stop()
        self.tokentap = self.nginx = self.floor = self.tokentap_loop = None

    def stop(self):
        self.stop_proxies()
        if self.mock is not None:
            self.mock.stop()

    def target(self, name):
        return {"direct": self.mock, "tokentap": self.tokentap,
                "tokentap-loop": self.tokentap_loop,
                "nginx": self.nginx, "floor": self.floor}[name]

    def url(self, name):
        return f"http://127.0.0.1:{self.target(name).port}{PATH}"

    def measure(self, name, args):
        """One tokentap-load run against target name: its figures and the
        CPU seconds of each process, of the network stack (softirq) on each
        CPU set and of processes not ours, over the run."""
        t = self.target(name)
        t.check()
        self.marks = self.log_marks(t)
        mine = [p for p in (self.mock, self.floor, self.tokentap, self.tokentap_loop,
                            self.nginx) if p is not None]
        before = [p.cpu_s() for p in mine]
        waited = t.runq_wait_s() if name != "direct" else None
        cpu0 = procs.cpu_times()
        fig, load_cpu = procs.run_load(self.client, self.dir, self.url(name), args)
        used = [p.cpu_s() - b for p, b in zip(mine, before)]
        if waited is not None:
            waited = t.runq_wait_s() - waited
        cpu1 = procs.cpu_times()

        def delta(cpus, i):
            return sum(cpu1[c][i] - cpu0[c][i] for c in cpus if c in cpu0)
        tasks = delta(cpu0.keys(), 0)
        cpu = {p.name: u for p, u in zip(mine, used)}
        other = max(tasks - sum(used) - load_cpu, 0.0)
        stolen = max((delta([c], 2) for c in cpu0), default=0.0)
        return fig, {"proxy": cpu.get(name) if name != "direct" else None,
                     "mock": cpu["mock"], "load": load_cpu,
                     "softirq_proxy": delta(self.proxy, 1),
                     "softirq_client": delta(self.client, 1),
                     "other": other, "proxy_runq_wait_s": waited,
                     "other_share": other / (fig["elapsed_s"] * len(cpu0)),
                     "steal_s": stolen, "steal_share": stolen / fig["elapsed_s"]}

    def measure_quiet(self, name, args):
        """measure(), again (twice at most) when other processes took over
        5 % of the machine's CPU time meanwhile or the host stole over 1 %
        of a CPU's, while the time budget of repeats lasts; the least
        disturbed attempt counts."""
        best = None
        for attempt in (1, 2, 3):
            began = time.monotonic()
            fig, cpu = self.measure(name, args)
            if attempt > 1:
                self.repeat_budget -= time.monotonic() - began
            cpu["attempts"] = attempt
            if best is None or disturbance(cpu) < disturbance(best[1]):
                best = (fig, cpu)
            if disturbance(cpu) <= 1.0 or self.repeat_budget <= 0:
                break
            log(f"  other processes took {100 * cpu['other_share']:.1f} % of the "
                f"CPU time, the host {100 * cpu['steal_share']:.1f} % of a CPU: "
                "once more")
        best[1]["attempts"] = attempt
        return best

    def targets(self, latency=False):
        loop = latency and not self.quick
        return [t for t in TARGETS if (t != "nginx" or self.has_nginx) and
                (loop or t not in LOOP_ONLY)]

    # ---- latency, TTFT, accuracy -----------------------------------------

    def latency_args(self, n):
        return ["-c", str(n), "--ramp", self.p["ramp"], "-d", self.p["duration"],
                "--max-tokens", str(TOKENS), "--lag", "--timeout", "120s",
                "--samples"]

    def latency_run(self, name, n):
        fig, cpu = self.measure_quiet(name, self.latency_args(n))
        lag = fig.get("lag_ms") or {}
        events = fig["output_tokens"]
        # TTFT from every request: the histogram's 0.5 ms buckets at 50 ms
        # would hide what a proxy adds
        ttft = sorted(x["ttft_ms"] for x in fig["samples"]
                      if x["outcome"] == "ok" and x["ttft_ms"] is not None)

        def us(v):
            return None if v is None else v * 1000
        return {
            "lag_p50_us": us(lag.get("p50")), "lag_p99_us": us(lag.get("p99")),
            "lag_max_us": us(lag.get("max")), "lag_events": lag.get("count", 0),
            "ttft_p50_ms": fg.quantile(ttft, 0.5), "ttft_p99_ms": fg.quantile(ttft, 0.99),
            "tpot_p50_ms": fig["tpot_ms"]["p50"],
            "requests": fig["requests"], "errors": fig["errors"],
            "events": events, "events_per_s": fig["output_tokens_per_s"],
            "proxy_cpu_s": cpu["proxy"],
            "cpu_s_per_M_events": fg.ratio(cpu["proxy"], events / 1e6)
            if cpu["proxy"] is not None and events else None,
            "mock_cpu_s": cpu["mock"], "load_cpu_s": cpu["load"],
            "softirq_proxy_cpus_s": cpu["softirq_proxy"],
            "softirq_client_cpus_s": cpu["softirq_client"],
            "other_cpu_s": cpu["other"], "other_share": cpu["other_share"],
            "attempts": cpu["attempts"], "steal_ms": 1000 * cpu["steal_s"],
            "proxy_runq_wait_ms": None if cpu["proxy_runq_wait_s"] is None
            else 1000 * cpu["proxy_runq_wait_s"],
            # how busy the mock and client's CPU set was: near 100 % the
            # direct path itself queues and every figure is the load's
            "client_busy": (cpu["mock"] + cpu["load"] + cpu["softirq_client"]) /
            (fig["elapsed_s"] * len(self.client)) if fig["elapsed_s"] else None,
        }

    def warm_up(self):
        for name in self.targets(True):
            self.measure(name, ["-c", "100", "-d", "1s", "--max-tokens", "20"])

    def latency(self):
        out = {}
        self.start_proxies()
        try:
            if not self.quick:
                self.warm_up()
            for n in self.p["levels"]:
                runs = {t: [] for t in self.targets(True)}
                pairs = {"tokentap": [], "tokentap-loop": []}
                count = max(self.runs, self.p.get("level_runs", {}).get(n, 0))
                for i in range(count):
                    # each run in another order, so that a slow drift of
                    # the machine does not always favour the same path
                    order = self.targets(True)
                    order = order[i % len(order):] + order[:i % len(order)]
                    for name in order:
                        log(f"latency: {n} streams, {name}, run {i + 1}/{count}")
                        runs[name].append(self.latency_run(name, n))
                        if name in pairs:
                            pairs[name] += self.matched(self.marks, self.target(name))
                out[str(n)] = self.latency_summary(n, runs, pairs)
        finally:
            self.stop_proxies()
        return out

    def latency_summary(self, n, runs, pairs):
        keys = list(runs["direct"][0].keys())
        level = {"streams": n, "offered_events_per_s": n * 1000 / 20.0,
                 "runs": len(runs["direct"])}
        for name, rs in runs.items():
            level[name] = {"median": fg.medians(rs, keys), "runs": rs}
        d = level["direct"]["median"]
        level["added"] = {}
        for name in (p for p in PROXIES if p in runs):
            m = level[name]["median"]
            level["added"][name] = {
                k: fg.diff(m[k], d[k]) for k in
                ("lag_p50_us", "lag_p99_us", "lag_max_us", "ttft_p50_ms", "ttft_p99_ms")}
        # kernel receive times (as tokentap runs) and the loop's, one run
        level["accuracy"] = accuracy(pairs["tokentap"])
        if "tokentap-loop" in runs:
            level["accuracy_loop"] = accuracy(pairs["tokentap-loop"])
        return level

    # The mock's request log and a tokentap's access log, matched by the
    # X-Request-Id tokentap forwards, over that tokentap's last run.
    def log_marks(self, t=None):
        return (procs.file_size(self.mock.log),
                procs.file_size(t.log) if t is not None and t is not self.mock and
                getattr(t, "log", None) else 0)

    def matched(self, marks, t):
        time.sleep(0.3)     # the last lines are written as the streams end
        mock, _ = procs.read_jsonl(self.mock.log, marks[0])
        tt, _ = procs.read_jsonl(t.log, marks[1])
        by_id = {m["request_id"]: m for m in mock if m.get("request_id")}
        return [(t, by_id[t["request_id"]]) for t in tt
                if t.get("request_id") in by_id]

    # ---- the client's own accuracy and cost ----------------------------------

    def client_run(self, args, whole=True):
        """tokentap-load direct to the mock: its document and the mock's
        log lines of the run, by request id; the load's CPU seconds."""
        mark = procs.file_size(self.mock.log)
        doc, cpu = procs.run_load(self.client, self.dir, self.url("direct"), args,
                                  whole=whole)
        time.sleep(0.3)     # the last lines are written as the streams end
        mock, _ = procs.read_jsonl(self.mock.log, mark)
        return doc, {m["request_id"]: m for m in mock if m.get("request_id")}, cpu

    def generator(self):
        out = {}
        for n in self.p["client_levels"]:
            log(f"generator: {n} streams")
            doc, by_id, cpu = self.client_run(
                ["-c", str(n), "--ramp", self.p["ramp"], "--warmup", "1s",
                 "-d", self.p["client_duration"], "--max-tokens", str(TOKENS),
                 "--timeout", "120s"])
            out[str(n)] = client_accuracy(doc, by_id, cpu)
        # the events one core of the generator drives: TPOT 0, 100 streams
        # of 2,000 tokens, the generator's CPU seconds per event
        log("generator: throughput, TPOT 0")
        lv, _, cpu = self.client_run(
            ["-c", "100", "-n", "200", "--max-tokens", "2000", "--timeout", "120s",
             "-H", "X-Mock-TPOT: 0", "-H", "X-Mock-TTFT: 1ms", "--no-samples"],
            whole=False)
        events = lv["generator"]["events"]
        out["throughput"] = {
            "events": events, "elapsed_s": lv["elapsed_s"], "load_cpu_s": cpu,
            "events_per_s": events / lv["elapsed_s"] if lv["elapsed_s"] else None,
            "cpu_share": cpu / lv["elapsed_s"] if lv["elapsed_s"] else None,
            "cpu_us_per_event": 1e6 * cpu / events if events else None,
            "events_per_cpu_s": events / cpu if cpu else None,
        }
        return out

    # ---- stall-free streams -------------------------------------------------

    def stall_free_probe(self, name, n):
        """n streams at once (started over half a second, each sf_tokens
        frames at its pace: 2 s long, so all n are open together for most
        of it; quick, 1 s): did every stream get all its frames, none late
        by more than SF_GAP_MS?"""
        tokens = self.p["sf_tokens"]
        fig, cpu = self.measure(name, ["-c", str(n), "-n", str(n),
                                       "--ramp", "0.5s",
                                       "--max-tokens", str(tokens),
                                       "--timeout", "60s"])
        gap = (fig.get("itl_ms") or {}).get("max")
        why = []
        if fig["errors"] > SF_ERRORS * fig["requests"]:
            why.append(f"{fig['errors']} errors")
        if fig["output_tokens"] < fig["ok"] * tokens:
            why.append(f"{fig['ok'] * tokens - fig['output_tokens']} frames missing")
        if gap is None or gap > SF_GAP_MS:
            why.append(f"gap {gap} ms")
        return {"streams": n, "passed": not why, "why": ", ".join(why),
                "gap_max_ms": gap, "errors": fig["errors"], "requests": fig["requests"],
                "other_share": cpu["other_share"]}

    def stall_free_search(self, name):
        """Doubling from sf_start until a level fails, then halving the
        interval to a tenth of the level: the largest level that passed."""
        p, probes = self.p, []
        lo, hi, n = 0, None, p["sf_start"]
        while hi is None and n <= p["sf_max"]:
            log(f"stall-free: {name}, {n} streams")
            probes.append(self.stall_free_probe(name, n))
            lo, hi = (n, None) if probes[-1]["passed"] else (lo, n)
            n *= 2
        while hi is not None and hi - lo > max(lo // 10, 50):
            mid = (lo + hi) // 100 * 50 or (lo + hi) // 2
            log(f"stall-free: {name}, {mid} streams")
            probes.append(self.stall_free_probe(name, mid))
            lo, hi = (mid, hi) if probes[-1]["passed"] else (lo, mid)
        return {"streams": lo, "capped": hi is None, "probes": probes}

    def stallfree(self):
        out = {"pace_ms": 20, "tokens": self.p["sf_tokens"], "gap_ms": SF_GAP_MS,
               "errors": SF_ERRORS}
        self.start_proxies()
        try:
            for name in self.targets():
                out[name] = self.stall_free_search(name)
        finally:
            self.stop_proxies()
        return out

    # ---- throughput ceiling and CPU per event ------------------------------

    def throughput(self):
        p = self.p
        args = ["-c", str(p["tp_streams"]), "-d", p["tp_duration"],
                "--max-tokens", str(p["tp_tokens"]), "-H", "X-Mock-TPOT: 0",
                "--timeout", "120s"]
        # tokentap-loop too: the kernel stamps' cost per event, side by side
        runs = {t: [] for t in self.targets(True)}
        self.start_proxies()
        try:
            for i in range(self.runs):
                for name in self.targets(True):
                    log(f"throughput: {name}, run {i + 1}/{self.runs}")
                    fig, cpu = self.measure_quiet(name, args)
                    ev, el = fig["output_tokens"], fig["elapsed_s"]
                    r = {"events": ev, "elapsed_s": el,
                         "events_per_s": fig["output_tokens_per_s"],
                         "errors": fig["errors"],
                         "proxy_cpu_s": cpu["proxy"], "mock_cpu_s": cpu["mock"],
                         "load_cpu_s": cpu["load"], "other_cpu_s": cpu["other"],
                         "other_share": cpu["other_share"],
                         "attempts": cpu["attempts"],
                         "softirq_proxy_cpus_s": cpu["softirq_proxy"],
                         "softirq_client_cpus_s": cpu["softirq_client"],
                         "proxy_cpu_util": None, "cpu_s_per_M_events": None,
                         "ceiling_events_per_s": None}
                    if cpu["proxy"]:
                        r["proxy_cpu_util"] = cpu["proxy"] / el
                        r["cpu_s_per_M_events"] = cpu["proxy"] / (ev / 1e6)
                        # what one fully busy proxy CPU set would forward
                        r["ceiling_events_per_s"] = ev / cpu["proxy"] * len(self.proxy)
                    runs[name].append(r)
        finally:
            self.stop_proxies()
        keys = list(runs["direct"][0].keys())
        out = {"streams": p["tp_streams"], "tokens_per_stream": p["tp_tokens"],
               "tpot_ms": 0}
        for name, rs in runs.items():
            out[name] = {"median": fg.medians(rs, keys), "runs": rs}
        return out

    # ---- memory per open stream ---------------------------------------------

    def start_one(self, kind, name):
        if kind == "tokentap":
            return procs.Tokentap(self.proxy, self.dir, self.mock.port, name=name,
                                  workers=self.workers)
        return procs.Nginx(self.proxy, self.dir, self.mock.port, name=name,
                           workers=self.workers)

    def memory_run(self, kind, n):
        proxy = self.start_one(kind, f"{kind}-mem")
        load = None
        try:
            time.sleep(0.3)
            idle_rss, idle_fds = proxy.rss_kib(), proxy.fds()
            ramp = max(0.2, n / 4000)
            # streams that outlast the measurement: one token every 500 ms
            load = procs.start_load(self.client, self.dir,
                                    f"http://127.0.0.1:{proxy.port}{PATH}",
                                    ["-c", str(n), "--ramp", f"{ramp:.1f}s",
                                     "-d", "600s", "--timeout", "600s",
                                     "--max-tokens", "100000",
                                     "-H", "X-Mock-TPOT: 500ms"])
            deadline = time.monotonic() + ramp + 30
            while proxy.fds() < idle_fds + 2 * n and time.monotonic() < deadline:
                load.check()
                time.sleep(0.1)
            time.sleep(1.5)     # every stream has had its first events
            samples = []
            for _ in range(3):
                samples.append(proxy.rss_kib())
                time.sleep(0.2)
            rss = fg.median(samples)
            opened = (proxy.fds() - idle_fds) / 2
        finally:
            if load is not None:
                load.p.kill()
                load.p.wait()
                time.sleep(0.5)
            proxy.stop()
        return {"idle_rss_kib": idle_rss, "rss_kib": rss, "open_streams": opened,
                "kib_per_stream": (rss - idle_rss) / n}

    def memory(self):
        out = {}
        # the floor's buffers are untouched pages: its RSS says nothing
        kinds = [k for k in ("tokentap", "nginx") if k != "nginx" or self.has_nginx]
        for n in self.p["mem_levels"]:
            level = {"streams": n}
            for kind in kinds:
                rs = []
                for i in range(self.runs):
                    log(f"memory: {n} streams, {kind}, run {i + 1}/{self.runs}")
                    rs.append(self.memory_run(kind, n))
                level[kind] = {"median": fg.medians(rs, list(rs[0].keys())),
                               "runs": rs}
            out[str(n)] = level
        return out

    # ---- the wall-clock figures make test leaves to the bench ---------------

    def timing(self):
        # unpinned, as make test ran them; the bench's own mock is idle now
        return timing.run(self.quick, log)

    def saturated(self):
        # issue #40's case, pinned its own way (tests/bench/saturated.py)
        return saturated.run(self.quick, log)
    # ---- TLS on both sides ----------------------------------------------------

    def tls_start(self):
        """tokentap and nginx with TLS both ways, the edge around them."""
        certs = make_certs(self.dir)
        backend, tt_in, ng_in = procs.free_port(), procs.free_port(), procs.free_port()
        tt = procs.Tokentap(self.proxy, self.dir, backend, workers=self.workers,
                            name="tokentap-tls", tls=certs)
        ng = procs.Nginx(self.proxy, self.dir, backend, workers=self.workers,
                         name="nginx-tls", tls=certs) if self.has_nginx else None
        edge = procs.Nginx(self.client, self.dir, self.mock.port,
                           workers=len(self.client), name="tls-edge",
                           template=os.path.join(os.path.dirname(__file__),
                                                 "nginx-edge.conf"),
                           extra=(("BACKEND", backend), ("TT_IN", tt_in),
                                  ("NG_IN", ng_in), ("TOKENTAP", tt.port),
                                  ("NGINX", ng.port if ng else 9), ("CA", certs["ca"]),
                                  ("CERT", certs["cert"]), ("KEY", certs["key"])))
        procs.wait_port(tt_in, proc=edge.p)
        paths = {"direct-tls": (None, edge.port), "tokentap-tls": (tt, tt_in)}
        if ng is not None:
            paths["nginx-tls"] = (ng, ng_in)
        return paths, [p for p in (edge, tt, ng) if p is not None]

    def tls_run(self, proxy, port, n, edge):
        """One latency run through a TLS path: its figures, the proxy's CPU,
        and for tokentap the accuracy pairs."""
        url = f"http://127.0.0.1:{port}{PATH}"
        marks = self.log_marks(proxy)
        before = proxy.cpu_s() if proxy else None
        edge_before = edge.cpu_s()
        fig, load_cpu = procs.run_load(self.client, self.dir, url, self.latency_args(n))
        cpu = proxy.cpu_s() - before if proxy else None
        lag = fig.get("lag_ms") or {}
        ttft = sorted(x["ttft_ms"] for x in fig["samples"]
                      if x["outcome"] == "ok" and x["ttft_ms"] is not None)
        pairs = self.matched(marks, proxy) if getattr(proxy, "log", None) else []
        return {"lag_p50_us": 1000 * lag["p50"] if lag.get("p50") is not None else None,
                "lag_p99_us": 1000 * lag["p99"] if lag.get("p99") is not None else None,
                "ttft_p50_ms": fg.quantile(ttft, 0.5), "errors": fig["errors"],
                "requests": fig["requests"], "events": fig["output_tokens"],
                "events_per_s": fig["output_tokens_per_s"], "proxy_cpu_s": cpu,
                "edge_cpu_s": edge.cpu_s() - edge_before, "load_cpu_s": load_cpu,
                "cpu_s_per_M_events": fg.ratio(cpu, fig["output_tokens"] / 1e6)
                if cpu is not None and fig["output_tokens"] else None}, pairs

    def tls_memory(self, proxy, port, n):
        """RSS per open stream of a TLS path's proxy at n streams."""
        load = None
        try:
            idle_rss, idle_fds = proxy.rss_kib(), proxy.fds()
            ramp = max(0.2, n / 4000)
            load = procs.start_load(self.client, self.dir,
                                    f"http://127.0.0.1:{port}{PATH}",
                                    ["-c", str(n), "--ramp", f"{ramp:.1f}s",
                                     "-d", "600s", "--timeout", "600s",
                                     "--max-tokens", "100000",
                                     "-H", "X-Mock-TPOT: 500ms"])
            deadline = time.monotonic() + ramp + 30
            while proxy.fds() < idle_fds + 2 * n and time.monotonic() < deadline:
                load.check()
                time.sleep(0.1)
            time.sleep(1.5)
            rss = fg.median([proxy.rss_kib() for _ in range(3)])
        finally:
            if load is not None:
                load.p.kill()
                load.p.wait()
                time.sleep(1.0)
        return {"idle_rss_kib": idle_rss, "rss_kib": rss,
                "kib_per_stream": (rss - idle_rss) / n}

    def tls(self):
        levels = TLS_LEVELS[:1] if self.quick else TLS_LEVELS
        paths, started = self.tls_start()
        edge = started[0]
        out = {"levels": {}}
        try:
            for name in paths:     # every path's connections opened once
                proxy, port = paths[name]
                self.tls_run(proxy, port, 20 if self.quick else 100, edge)
            for n in levels:
                runs = {name: [] for name in paths}
                pairs = []
                for i in range(self.runs):
                    order = list(paths)
                    order = order[i % len(order):] + order[:i % len(order)]
                    for name in order:
                        log(f"tls: {n} streams, {name}, run {i + 1}/{self.runs}")
                        r, p = self.tls_run(*paths[name], n, edge)
                        runs[name].append(r)
                        pairs += p if name == "tokentap-tls" else []
                keys = list(runs["direct-tls"][0].keys())
                level = {name: {"median": fg.medians(rs, keys), "runs": rs}
                         for name, rs in runs.items()}
                d = level["direct-tls"]["median"]
                level["added"] = {name: {k: fg.diff(level[name]["median"][k], d[k])
                                         for k in ("lag_p50_us", "lag_p99_us",
                                                   "ttft_p50_ms")}
                                  for name in paths if name != "direct-tls"}
                level["accuracy"] = accuracy(pairs)
                out["levels"][str(n)] = level
            mem = TLS_MEMORY // 10 if self.quick else TLS_MEMORY
            out["memory"] = {"streams": mem}
            for name in (x for x in paths if x != "direct-tls"):
                log(f"tls: memory, {mem} streams, {name}")
                out["memory"][name] = self.tls_memory(*paths[name], mem)
        finally:
            for p in reversed(started):
                p.stop()
        return out

    # ---- instructions per event (callgrind) ---------------------------------

    def callgrind_run(self, kind, extra="", tag="", tpot="5ms", tokens=None, streams=None):
        outfile = os.path.join(self.dir, f"callgrind-{kind}{tag}.out")
        wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={outfile}"]
        if kind == "tokentap":
            proxy = procs.Tokentap(self.proxy, self.dir, self.mock.port,
                                   wrapper=wrapper, name="tokentap-cg" + tag,
                                   start_timeout=120, extra=extra)
        elif kind == "floor":
            proxy = procs.Relay(self.proxy, self.dir, self.mock.port,
                                wrapper=wrapper, name="floor-cg", start_timeout=120)
        else:
            proxy = procs.Nginx(self.proxy, self.dir, self.mock.port,
                                wrapper=wrapper, name="nginx-cg",
                                start_timeout=120, single=True)
        p = self.p
        try:
            # count only the load: zero the counters now, dump them after
            subprocess.run(["callgrind_control", "-z", str(proxy.pid)],
                           capture_output=True, check=True, timeout=60)
            fig, _ = procs.run_load(self.client, self.dir,
                                    f"http://127.0.0.1:{proxy.port}{PATH}",
                                    ["-c", str(streams or p["cg_streams"]),
                                     "-n", str(streams or p["cg_streams"]),
                                     "--max-tokens", str(tokens or p["cg_tokens"]),
                                     "-H", f"X-Mock-TPOT: {tpot}",
                                     "-H", "X-Mock-TTFT: 10ms"])
            subprocess.run(["callgrind_control", "-d", str(proxy.pid)],
                           capture_output=True, check=True, timeout=60)
        finally:
            proxy.stop(timeout=60)
        dumps = sorted(glob.glob(outfile + ".*"))
        if not dumps:
            raise RuntimeError(f"callgrind wrote no dump for {kind}")
        total = callgrind_total(dumps[0])
        return {"events": fig["output_tokens"], "instructions": total,
                "per_event": total / fig["output_tokens"] if fig["output_tokens"] else None,
                "self": callgrind_profile(dumps[0], False),
                "inclusive": callgrind_profile(dumps[0], True),
                "inclusive_all": callgrind_profile(dumps[0], True, top=5000)}

    def instructions(self):
        out = {"streams": self.p["cg_streams"], "tokens_per_stream": self.p["cg_tokens"]}
        for kind in (k for k in PROXIES if (k != "nginx" or self.has_nginx) and
                     (k not in LOOP_ONLY or not self.quick)):
            log(f"instructions: {kind} under callgrind")
            out[kind] = self.callgrind_run(kind)
            out[kind].pop("inclusive_all")
        return out


    # ---- the OpenTelemetry export's cost ------------------------------------

    def otel(self):
        """CPU per event (and, under callgrind, instructions per event) of
        tokentap with spans for every request, and with the metrics export
        too, against tokentap without, alternating, medians of the runs."""
        p = self.p
        n = p["otel_streams"]
        args = ["-c", str(n), "--ramp", self.p["ramp"], "-d", p["otel_duration"],
                "--max-tokens", str(TOKENS), "--timeout", "120s"]
        sink = procs.Sink()
        runs = {c: [] for c in OTEL_CONFIGS}
        saved = self.tokentap
        try:
            for i in range(self.runs):
                for cname, extra in OTEL_CONFIGS.items():
                    log(f"otel: {n} streams, {cname}, run {i + 1}/{self.runs}")
                    self.tokentap = procs.Tokentap(
                        self.proxy, self.dir, self.mock.port, workers=self.workers,
                        extra=extra.format(sink=sink.port))
                    try:
                        exports = sink.exports
                        fig, cpu = self.measure_quiet("tokentap", args)
                        time.sleep(1.5)            # the last batch goes out
                        stats = procs.http_json(self.tokentap.admin, "/stats?window=1m")
                        st = stats.get("otel", {})
                        # every attempt's requests (measure_quiet may run again)
                        served = sum(g.get("requests", 0) for g in stats.get("groups", []))
                    finally:
                        self.tokentap.stop()
                        self.tokentap = None
                    ev = fig["output_tokens"]
                    runs[cname].append({
                        "events": ev, "requests": fig["requests"],
                        "errors": fig["errors"], "proxy_cpu_s": cpu["proxy"],
                        "cpu_s_per_M_events": cpu["proxy"] / (ev / 1e6) if ev else None,
                        "other_share": cpu["other_share"], "attempts": cpu["attempts"],
                        "spans_sent": (st.get("traces") or {}).get("sent", 0),
                        "spans_per_request": (st.get("traces") or {}).get("sent", 0) /
                        served if served else None,
                        "spans_dropped": st.get("spans_dropped", 0),
                        "exports": sink.exports - exports})
        finally:
            self.tokentap = saved
        out = {"streams": n, "tokens_per_stream": TOKENS}
        for cname, rs in runs.items():
            out[cname] = {"median": fg.medians(rs, list(rs[0].keys())), "runs": rs}
        if self.has_valgrind:
            for cname, extra in OTEL_CONFIGS.items():
                log(f"otel: instructions, {cname}, under callgrind")
                exports = sink.exports
                cg = self.callgrind_run("tokentap", extra.format(sink=sink.port),
                                        tag="-otel-" + cname.replace("+", "-"))
                out[cname]["instructions_per_event"] = cg["per_event"]
                out[cname]["callgrind_events"] = cg["events"]
                # what one export costs, whatever the slowdown of callgrind
                # (which makes a 1 s interval come ~50 times as often per
                # event as it does in real time)
                # (GCC may name a static function trace_span.isra.0)
                shares = {}
                for row in cg["inclusive_all"]:
                    shares.setdefault(row["function"].split(".")[0], row["share"])
                n = sink.exports - exports
                spans = p["cg_streams"]          # one request a stream
                # a span's cost on its worker (filling its record) and on
                # the main thread (encoding it), per span; one metrics
                # export's
                for fn, key, per in (("trace_span", "worker_instructions_per_span", spans),
                                     ("otlpspan_request", "main_instructions_per_span",
                                      spans),
                                     ("on_metrics", "instructions_per_metrics_export", n)):
                    if fn in shares and per:
                        out[cname][key] = shares[fn] * cg["instructions"] / per
                out[cname]["callgrind_exports"] = n
        sink.stop()
        return out


def make_certs(workdir):
    """A CA and a server certificate it signed for localhost and 127.0.0.1
    (EC P-256), for every TLS side of the TLS rows."""
    d = os.path.join(workdir, "certs")
    os.makedirs(d, exist_ok=True)
    ca, cakey = os.path.join(d, "ca.pem"), os.path.join(d, "ca.key")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    csr, ext = os.path.join(d, "req.csr"), os.path.join(d, "ext.cnf")

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", cakey, "-out", ca, "-days", "2", "-subj", "/CN=bench CA")
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext)
    return {"cert": cert, "key": key, "ca": ca}


def disturbance(cpu):
    """How disturbed a run was, relative to what is tolerated (1.0)."""
    return max(cpu["other_share"] / DISTURBED, cpu["steal_share"] / STOLEN)


def outside(v, lo, hi):
    """How far v lies outside [lo, hi] (0 inside it)."""
    return max(0.0, lo - v, v - hi)


def accuracy(pairs):
    """tokentap's access-log TTFT / TPOT against the mock's actual send
    times, over the matched requests. The mock stamps a request with the
    kernel's receipt of it (as tokentap does), so its TTFT starts when
    tokentap's write of the request reached it; tokentap's TTFT starts
    earlier, at its own receipt of the client's request, and holds its
    forwarding (its phases client + connect + send, t_sent - t0). TTFT err:
    tokentap's TTFT less that forwarding (t_first_token - t_sent) against
    the mock's TTFT: the error of tokentap's first-token stamp, as t0 is
    the kernel's receipt itself. whole: the TTFT against the mock's own
    without that split (the forwarding counted as error); loop mock: the
    same against the mock's TTFT from its loop's read (the reference
    before the mock took kernel stamps). head->token: the response head
    to the first token (the backend's alone; the mock sends its head as it
    reads the request), timed at both ends by tokentap. The mock reads
    its clock on both sides of each send(2) (on loopback the bytes are in
    tokentap's socket when it returns): the truth is that bracket, and TTFT
    and TPOT err are the distances outside it (0 inside); 'bracket' is its
    width, the truth's own doubt (a mock kept from its CPU mid-send)."""
    ttft, whole, loopmock, front, head, tpot, rel = [], [], [], [], [], [], []
    width, kernel, worst = [], 0, []
    for t, m in pairs:
        kernel += t.get("timestamps") == "kernel"
        p = t.get("phases") or {}
        if t.get("ttft_ms") is not None and m.get("ttft_us") is not None:
            mock = m["ttft_us"] / 1000
            hi = m.get("first_token_end_us", m["first_token_us"]) / 1000
            hi += mock - m["first_token_us"] / 1000
            width.append(hi - mock)
            fwd = [p.get(k) for k in ("client_ms", "connect_ms", "send_ms")]
            if None not in fwd:
                front.append(sum(fwd))
                ttft.append(outside(t["ttft_ms"] - sum(fwd), mock, hi))
                worst.append((ttft[-1], t, m))
            whole.append(abs(t["ttft_ms"] - mock))
            if m.get("read_wait_us") is not None:
                loopmock.append(abs(t["ttft_ms"] - mock + m["read_wait_us"] / 1000))
            # the mock's head goes out when its loop reads the request, a
            # read_wait after the kernel's receipt its times count from
            if p.get("first_event_ms") is not None and p.get("first_token_ms") is not None \
                    and m.get("first_token_us") is not None:
                head.append(abs(p["first_event_ms"] + p["first_token_ms"] -
                                (m["first_token_us"] - m.get("read_wait_us", 0)) / 1000))
        if t.get("tpot_ms") is not None and m.get("tpot_us"):
            lo = hi = m["tpot_us"] / 1000
            if m.get("last_token_end_us") is not None and m.get("tokens", 0) >= 2:
                gaps = 1000 * (m["tokens"] - 1)
                lo = (m["last_token_us"] - m["first_token_end_us"]) / gaps
                hi = (m["last_token_end_us"] - m["first_token_us"]) / gaps
            err = outside(t["tpot_ms"], lo, hi)
            tpot.append(err)
            rel.append(100 * err / (m["tpot_us"] / 1000))

    def stat(v):
        return {"median": fg.median(v), "max": max(v) if v else None}
    within = sum(1 for a, b in zip(ttft, rel) if a <= 1.0 and b <= 2.0)
    return {"matched": len(pairs), "kernel_stamped": kernel,
            "send_bracket_ms": stat(width),
            "ttft_abs_err_ms": stat(ttft), "ttft_whole_err_ms": stat(whole),
            "ttft_loop_mock_err_ms": stat(loopmock), "forwarding_ms": stat(front),
            "head_token_abs_err_ms": stat(head),
            "tpot_abs_err_ms": stat(tpot), "tpot_rel_err_pct": stat(rel),
            "within_target": within / len(ttft) if ttft else None,
            # the worst requests whole, both sides: where an outlier's
            # error lies (its phases, the mock's send times) is in them
            "worst": [{"ttft_err_ms": e, "tokentap": t, "mock": m} for e, t, m in
                      sorted(worst, key=lambda w: w[0], reverse=True)[:5]]}


def client_accuracy(doc, by_id, load_cpu_s):
    """tokentap-load's TTFT and TPOT against the mock's own account of the
    same requests: the first token read (the intended send + TTFT, on the
    host's CLOCK_MONOTONIC) minus the mock's send of it, and the TPOT
    error relative to the mock's (its send times, the same N - 1)."""
    lv = doc["levels"][0]
    base, prefix = lv["monotonic_start_us"], f"{doc['run_id']}-0-"
    ttft, tpot = [], []
    for s in lv["samples"]:
        m = by_id.get(prefix + str(s["seq"]))
        if s["warmup"] or s["outcome"] != "ok" or m is None or s["ttft_ms"] is None:
            continue
        read = base + 1000 * (s["start_ms"] + s["ttft_ms"])
        ttft.append((read - (m["t_req_mono_us"] + m["first_token_us"])) / 1000)
        if s["tpot_ms"] is not None and m.get("tpot_us"):
            tpot.append(100 * abs(s["tpot_ms"] - m["tpot_us"] / 1000) / (m["tpot_us"] / 1000))

    def stat(v):
        return {"p50": fg.quantile(sorted(v), 0.5), "p99": fg.quantile(sorted(v), 0.99),
                "max": max(v) if v else None}
    events = lv["generator"]["events"]
    return {"requests": lv["requests"], "matched": len(ttft),
            "ttft_err_ms": stat(ttft), "tpot_err_pct": stat(tpot),
            "events": events, "load_cpu_s": load_cpu_s,
            "cpu_us_per_event": 1e6 * load_cpu_s / events if events else None,
            "dispatch_lag_p99_ms": lv["dispatch_lag_ms"].get("p99")}


def callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals")


# Frames that were on the stack when the counters were zeroed: callgrind
# charges them the cost below them, so they say nothing as self cost.
ANNOTATE_LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?)(?:\s+\[[^\]]*\])?\s*$")
STACK_FRAMES = ("worker_main", "clone", "start_thread", "main", "run",
                "event_base_dispatch", "event_base_loop", "(below main)",
                "__libc_start_main@@GLIBC_2.34", "__libc_start_call_main")


def callgrind_profile(path, inclusive, top=12):
    """The functions that cost the most instructions, self or inclusive, as
    a share of the total. Inclusive keeps tokentap's own functions and the
    parsers it links (the call chain of the hot path)."""
    r = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                        "--threshold=100", path], capture_output=True, text=True)
    rows, total = [], None
    for line in r.stdout.splitlines():
        m = ANNOTATE_LINE.match(line)
        if m is None:
            continue
        ir, where = int(m.group(1).replace(",", "")), m.group(2)
        if where == "PROGRAM TOTALS":
            total = ir
            continue
        fn = where.rsplit(":", 1)[-1]
        # no real function here costs half of everything by itself: those
        # are stack frames charged at zeroing too
        if not total or fn in STACK_FRAMES or fn.startswith("0x") or \
                (not inclusive and ir >= total / 2):
            continue
        if inclusive and not ("/src/" in where or "jsmn" in where or "llhttp" in where):
            continue
        rows.append({"function": fn, "share": ir / total})
    return rows[:top]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=0)
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--out", default=os.path.join(procs.ROOT, "build", "bench.json"))
    ap.add_argument("--report", metavar="FILE")
    ap.add_argument("--levels", help="latency: comma-separated stream counts")
    ap.add_argument("--shared", action="store_true",
                    help="no pinning: mock, client and proxy share every CPU")
    ap.add_argument("--workers", type=int, default=0,
                    help="proxy workers (default: one per CPU of the proxy's set)")
    a = ap.parse_args()
    if a.report:
        with open(a.report) as f:
            res = json.load(f)
        res["targets"] = report.targets(res)
        report.write(res, a.report)
        return 0
    only = [s for s in a.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error(f"--only: unknown section {s!r}")
    for b in ("tokentap", "tokentap-mock", "tokentap-load"):
        if not os.access(procs.binary(b), os.X_OK):
            ap.error(f"{procs.binary(b)} missing: run make first")
    if subprocess.run(["make", "-s", "-C", procs.ROOT, "build/bench-relay"]).returncode:
        ap.error("the floor (tests/bench/relay.c) does not build")
    bench = Bench(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    started = time.monotonic()
    res = {"machine": machine(bench.client, bench.proxy, bench.workers),
           "settings": {"quick": a.quick, "runs": bench.runs, "tpot_ms": 20,
                        "ttft_ms": 50, "tokens_per_stream": TOKENS,
                        "duration": bench.p["duration"], "ramp": bench.p["ramp"]}}
    try:
        bench.start()
        for s in only:
            if s == "instructions" and not bench.has_valgrind:
                log("instructions: valgrind missing, skipped")
                continue
            began = time.monotonic()
            res[s] = getattr(bench, s)()
            res.setdefault("section_s", {})[s] = time.monotonic() - began
    except BaseException:
        log(f"bench: failed; the processes' logs are in {bench.dir}")
        raise
    finally:
        bench.stop()
    res["elapsed_s"] = time.monotonic() - started
    res["targets"] = report.targets(res)
    report.write(res, a.out)
    if os.environ.get("TOKENTAP_BENCH_KEEP"):
        log(f"bench: kept {bench.dir}")
    else:
        shutil.rmtree(bench.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
