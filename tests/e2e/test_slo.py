# SPDX-License-Identifier: Apache-2.0
"""SLOs end to end: tokentap-mock serves a known mix of fast, slow, failed
and abandoned streams through the real proxy, and /slo, /metrics and the
access log agree on exactly which were good; a burn-rate pair fires while
another, its short window burning as fast but its long window not, must
stay quiet; the error budget survives SIGHUP and a restart through the
state file (a corrupt or missing one is said and starts empty); the
generated Prometheus rules fire under promtool on series of known burn;
the headroom figure comes out of a mock whose TTFT grows linearly with
concurrency; tokentap-load reports goodput per scenario."""
import json
import os
import subprocess
import tempfile
import time

from harness import Mock, Tokentap, completion, conf, metric, parallel, promtool_check, run, \
    staircase, until
from peers import Alertmanager, Hook

PROMTOOL = "/usr/bin/promtool"
# The burn-rate pair's 12 s are the clock's (a 6 s window left to forget,
# 5 s to empty), the same under ASan: test_alertmanager_gets_the_burn_rate_
# alert (both pairs firing and resolving, 5 s) runs the burn-rate rules
# under ASan, test_attainment_and_goodput_are_exact the SLO's good and bad
# counts, and tests/unit/test_slo.c the windows' arithmetic in both builds.
# The headroom's 7 s are two staircases of 2.4 s streams: the clock's too.
# Each request's concurrency and the TTFT-on-concurrency line run under
# ASan in test_history_survives_restart_and_reload (three staircases, the
# line's R2 from /stats), and the line and its reach are tests/unit/
# test_headroom.c's in both builds.
SANITIZER_SKIP = {"test_a_burn_rate_pair_fires_and_one_must_not",
                  "test_headroom_from_a_mock_linear_in_concurrency"}
EVERY = 0.2          # alerts.evaluate_every of these tests
DUE = 15             # seconds to wait for what is due after an evaluation or two


def slo(t, name):
    for s in t.get("/slo", json=True)["slos"]:
        if s["name"] == name:
            return s
    raise AssertionError(f"no SLO {name}")


def window(s, w):
    for x in s["windows"]:
        if x["window"] == w:
            return x
    raise AssertionError(f"no window {w} in {s['windows']}")


def run_all(port, jobs, threads=8):
    """A completion (harness.completion) for each dict of jobs, through
    port, threads at a time."""
    parallel(lambda kw: completion(port, **kw), jobs, threads)


# ---- attainment and goodput, exactly -------------------------------------------

# The targets lie far from what the mock is told (20 ms against 1 s, 5 ms
# against 100 ms) so that a busy host cannot move a request across one;
# what is slow is slow by causality (a TTFT of 1.5 s is never under 1 s).
MIX_SLOS = """stats: {windows: [10s, 1m]}
slos:
  - name: chat
    match: {route: llm}
    ttft: 1s
    tpot: 100ms
    objective: 0.9
  - name: translate
    class: translation
    match: {model: m-tr}
"""
FAST = {"ttft": "20ms", "tpot": "5ms", "tokens": 5}


def test_attainment_and_goodput_are_exact():
    with Mock() as m, Tokentap(conf(m, MIX_SLOS)) as t:
        jobs = ([FAST] * 12                                            # good
                + [dict(FAST, ttft="1500ms")] * 5                      # TTFT over: bad
                + [dict(FAST, tpot="300ms", tokens=4)] * 4             # TPOT over: bad
                + [dict(FAST, tokens=1)] * 3                           # no TPOT: good
                + [dict(FAST, fault="status:500")] * 2                 # errors: bad
                + [dict(FAST, ttft="3s", abort_after=0.05)] * 2        # left early: uncounted
                + [dict(FAST, ttft="3s", abort_after=1.5)] * 2         # gave up waiting: bad
                + [dict(FAST, model="m-tr")] * 3                       # good for both
                + [dict(FAST, model="m-tr", ttft="1500ms")] * 2)       # bad for both
        run_all(t.port, jobs)
        lines = t.wait_logged(len(jobs))
        outcomes = sorted(x["outcome"] for x in lines)
        assert outcomes.count("client_abort") == 4 and outcomes.count("upstream_error") == 2

        chat = until(lambda: window(s := slo(t, "chat"), "1m")["eligible"] == 33 and s,
                     DUE, "all requests counted")
        for w in ("10s", "1m"):
            x = window(chat, w)
            seconds = 10 if w == "10s" else 60
            assert (x["eligible"], x["good"], x["bad"]) == (33, 18, 15), (w, x)
            assert abs(x["attainment"] - 18 / 33) < 1e-6, x
            assert abs(x["goodput_per_s"] - 18 / seconds) < 1e-6, x
        b = chat["budget"]
        assert (b["eligible"], b["good"], b["bad"]) == (33, 18, 15), b
        assert abs(b["allowed_bad"] - 3.3) < 1e-6 and abs(b["remaining"] - (1 - 15 / 3.3)) < 1e-6, b
        assert chat["targets"] == {"ttft_ms": 1000, "tpot_ms": 100}
        assert chat["match"] == {"route": "llm", "tenant": None, "model": None}
        assert chat["objective"] == 0.9 and chat["period"] == "28d"

        tr = slo(t, "translate")
        assert tr["targets"] == {"ttft_ms": 200, "tpot_ms": 30}, tr   # the class's
        assert tr["objective"] == 0.99
        x = window(tr, "1m")
        assert (x["eligible"], x["good"], x["bad"]) == (5, 3, 2), x
        assert abs(x["attainment"] - 0.6) < 1e-6 and abs(x["goodput_per_s"] - 3 / 60) < 1e-6

        assert metric(t, "tokentap_slo_requests_total", slo="chat", result="good") == 18
        assert metric(t, "tokentap_slo_requests_total", slo="chat", result="bad") == 15
        assert metric(t, "tokentap_slo_requests_total", slo="translate", result="good") == 3
        assert metric(t, "tokentap_slo_objective", slo="chat") == 0.9
        promtool_check(t.get("/metrics").text)

        # the access log agrees, request by request, with the rule as written
        good = sum(1 for x in lines if x["outcome"] == "ok" and x["ttft_ms"] <= 1000
                   and (x["tpot_ms"] is None or x["tpot_ms"] <= 100))
        uncounted = sum(1 for x in lines if x["outcome"] == "client_abort"
                        and x["duration_ms"] <= 1000)
        assert good == 18 and uncounted == 2 and len(lines) - good - uncounted == 15


def test_ttfo_target_judges_the_answer_not_the_reasoning():
    """An SLO with a ttfo target: a stream whose first reasoning token is
    fast but whose answer comes late is bad; the same without reasoning is
    good; TTFT alone would have called both good."""
    with Mock() as m, Tokentap(conf(m, """stats: {windows: [1m]}
slos:
  - {name: think, ttft: 500ms, ttfo: 1s, objective: 0.9}
""")) as t:
        # 20 ms to the first reasoning token, 120 ms a token: 10 reasoning
        # tokens put the answer at 1.22 s, 2 at 260 ms; tokens
        # (X-Mock-Tokens) count the reasoning ones too
        run_all(t.port, [dict(ttft="20ms", tpot="120ms", reasoning=10, tokens=14)] * 3
                + [dict(ttft="20ms", tpot="120ms", reasoning=2, tokens=6)] * 2
                + [dict(ttft="20ms", tpot="120ms", tokens=4)] * 2)
        lines = t.wait_logged(7)
        assert all(x["ttft_ms"] < 500 for x in lines), lines
        assert sorted(x["ttfo_ms"] > 1000 for x in lines) == [False] * 4 + [True] * 3, lines
        s = until(lambda: window(s := slo(t, "think"), "1m")["eligible"] == 7 and s, DUE,
                  "all requests counted")
        x = window(s, "1m")
        assert (x["good"], x["bad"]) == (4, 3), x
        assert s["targets"] == {"ttft_ms": 500, "ttfo_ms": 1000}, s["targets"]


# ---- burn-rate pairs ---------------------------------------------------------------

# the short windows are 5 s: long enough that the bad requests are still in
# them when a busy host lets the test read /alerts, short enough to resolve
BURN = f"""stats: {{windows: [1m]}}
alerts:
  evaluate_every: {int(EVERY * 1000)}ms
  burn_min_requests: 3
  burn_rates:
    - {{severity: critical, long: 6s, short: 5s, rate: 5}}
    - {{severity: warning, long: 60s, short: 5s, rate: 5}}
  notify:
    - {{type: log}}
    - {{type: webhook, url: 'URL'}}
slos:
  - {{name: chat, ttft: 500ms, objective: 0.9}}
"""
GOOD, BAD = dict(ttft="20ms", tpot="5ms", tokens=5), dict(ttft="700ms", tpot="5ms", tokens=5)


def burn_rule(t, severity):
    for r in t.get("/alerts", json=True)["rules"]:
        if r["alertname"] == "SLOBurnRate" and r["severity"] == severity:
            return r
    raise AssertionError(f"no SLOBurnRate {severity}")


def test_a_burn_rate_pair_fires_and_one_must_not():
    with Mock() as m, Hook() as h:
        with Tokentap(conf(m, BURN.replace("URL", f"http://127.0.0.1:{h.port}/slo"))) as t:
            run_all(t.port, [GOOD] * 40)
            t.wait_logged(40)
            time.sleep(6.5)        # the 6 s window forgets them; 60 s keeps them
            run_all(t.port, [BAD] * 10, threads=10)
            at, path, _, body = h.wait(lambda b: b["alertname"] == "SLOBurnRate", DUE)
            # both windows of the critical pair: every request bad, burn 10
            assert body["status"] == "firing" and body["severity"] == "critical", body
            assert body["slo"] == "chat" and body["route"] is None and body["metric"] == "burn_rate"
            assert body["window_s"] == 6 and body["short_window_s"] == 5, body
            assert body["value"] > 5 and body["short_value"] > 5 and body["threshold"] == 5, body
            assert body["samples"] >= 3 and body["objective"] == 0.9, body
            assert path == "/slo"
            # the warning pair: its short window burns as fast, its long one
            # (40 good, 10 bad: burn 2) does not
            w = until(lambda: (r := burn_rule(t, "warning"))["samples"] == 50 and r, DUE,
                      "all 50 in the warning pair's long window")
            assert w["state"] == "ok" and w["short_value"] > 5 and w["value"] < 5, w
            assert abs(w["value"] - 2) < 1e-6 and w["samples"] == 50, w
            c = burn_rule(t, "critical")
            assert c["state"] == "firing" and c["long_window"] == "6s" and c["slo"] == "chat"
            pair = {"alertname": "SLOBurnRate", "slo": "chat", "short_window": "5s"}
            assert metric(t, "tokentap_alert_firing", severity="critical", long_window="6s",
                          **pair) == 1
            assert metric(t, "tokentap_alert_firing", severity="warning", long_window="1m",
                          **pair) == 0
            assert "alert firing: SLOBurnRate severity=critical slo=chat burn " in t.stderr()
            # nothing bad for 5 s: the short window empties and it resolves
            _, _, _, res = h.wait(lambda b: b["status"] == "resolved", 5 + DUE)
            assert res["severity"] == "critical" and res["ends_at"] >= res["starts_at"]
            tr = [x for x in t.get("/alerts", json=True)["transitions"]
                  if x["alertname"] == "SLOBurnRate"]
            assert [(x["status"], x["severity"]) for x in tr] == \
                [("resolved", "critical"), ("firing", "critical")], tr
            assert tr[1]["slo"] == "chat" and tr[1]["short_window"] == "5s"
        assert [b[3]["severity"] for b in h.got if b[3]["alertname"] == "SLOBurnRate"] == \
            ["critical", "critical"], h.got


def test_alertmanager_gets_the_burn_rate_alert():
    """Both pairs fire on 5 bad of 5 and both reach Alertmanager (the test
    waits for the two, not the first), and leave it once the short
    window empties."""
    with Alertmanager() as am, Mock() as m:
        text = conf(m, BURN.replace("    - {type: webhook, url: 'URL'}",
                                    f"    - {{type: alertmanager, url: '{am.url}'}}"))
        with Tokentap(text) as t:
            run_all(t.port, [BAD] * 5, threads=5)

            def labels():
                return {tuple(sorted((k, v) for k, v in a["labels"].items() if k != "instance"))
                        for a in am.alerts()}
            # 5 bad of 5: both pairs burn 10 in both windows
            want = {
                (("alertname", "SLOBurnRate"), ("long_window", "6s"), ("severity", "critical"),
                 ("short_window", "5s"), ("slo", "chat")),
                (("alertname", "SLOBurnRate"), ("long_window", "1m"), ("severity", "warning"),
                 ("short_window", "5s"), ("slo", "chat")),
            }
            until(lambda: labels() == want, DUE, "both alerts in Alertmanager")
            a = am.alerts()[0]
            assert "SLO chat burns its error budget faster than 5x" == a["annotations"]["summary"]
            assert "(objective 0.9)" in a["annotations"]["description"], a
            # resolved once the short window empties: Alertmanager lists active alerts only
            until(lambda: am.alerts() == [], 5 + DUE, "resolved in Alertmanager")


# ---- the budget survives -----------------------------------------------------------

def test_budget_survives_sighup_and_restart():
    d = tempfile.mkdtemp(prefix="tt-slo-")
    state = os.path.join(d, "slo.state")
    yaml = f"""stats: {{windows: [1m]}}
slo_state: {state}
slos:
  - {{name: chat, ttft: 500ms, objective: 0.9}}
"""
    with Mock() as m:
        with Tokentap(conf(m, yaml)) as t:
            assert f"slo_state {state}: not there yet" in t.stderr()
            run_all(t.port, [GOOD] * 6 + [BAD] * 4)
            until(lambda: slo(t, "chat")["budget"]["eligible"] == 10, DUE, "counted")
            # a reload that changes the objective and adds an SLO keeps the counts
            t.reload(text=open(t.conf).read().replace("objective: 0.9", "objective: 0.95")
                     + "  - {name: other, tpot: 10ms}\n")
            until(lambda: len(t.get("/slo", json=True)["slos"]) == 2, DUE, "the reload")
            s = slo(t, "chat")
            assert (s["budget"]["good"], s["budget"]["bad"], s["objective"]) == (6, 4, 0.95), s
            assert window(s, "1m")["eligible"] == 10
            assert metric(t, "tokentap_slo_requests_total", slo="chat", result="bad") == 4
            assert not os.path.exists(state)           # at most once a minute: not yet
            assert t.stop() == 0
        with open(state) as f:
            text = f.read()
        assert text.startswith("tokentap-slo-state 1\nslo chat ") and text.endswith("end 4\n")
        assert not os.path.exists(state + ".tmp")

        with Tokentap(conf(m, yaml)) as t:
            assert "error budgets of 1 SLO(s) read" in t.stderr(), t.stderr()
            s = slo(t, "chat")
            assert (s["budget"]["good"], s["budget"]["bad"]) == (6, 4), s
            assert window(s, "1m")["eligible"] == 0      # windows are not kept: the budget is
            run_all(t.port, [GOOD] * 2)
            until(lambda: slo(t, "chat")["budget"]["eligible"] == 12, DUE, "counted on")

        with open(state, "w") as f:
            f.write(text.replace("end 4", "end 7"))
        with Tokentap(conf(m, yaml)) as t:
            err = t.stderr()
            assert f"slo_state {state}: corrupt, line " in err and "start empty" in err, err
            assert slo(t, "chat")["budget"]["eligible"] == 0
            run_all(t.port, [GOOD])
            until(lambda: slo(t, "chat")["budget"]["eligible"] == 1, DUE, "counting")
        with open(state) as f:
            assert f.read().endswith("end 2\n")     # a good file replaced it


# ---- Prometheus rules --------------------------------------------------------------

def counters(slo_name, per_min_good, per_min_bad, instances=("a",)):
    """Series of two scraped targets (a, b) whose tokentap calls itself
    a/x and b/x on its alerts; the requests shared between the instances."""
    out = []
    for inst in instances:
        target = f'instance="{inst}:9464",job="tokentap"'
        for result, n in (("good", per_min_good), ("bad", per_min_bad)):
            out.append((f'tokentap_slo_requests_total{{{target},slo="{slo_name}",'
                        f'result="{result}"}}', f"0+{n / len(instances):g}x420"))
        out.append((f'tokentap_slo_objective{{{target},slo="{slo_name}"}}', "0.99+0x420"))
    return out


def infos(*instances):
    return [(f'tokentap_alert_instance_info{{instance="{i}:9464",job="tokentap",'
             f'alert_instance="{i}/x"}}', "1+0x420") for i in instances]


def exp(slo_name, severity, lw, sw, rate, value, inst="a"):
    return f"""          - exp_labels: {{slo: {slo_name}, severity: {severity}, long_window: "{lw}", short_window: "{sw}", instance: {inst}/x}}
            exp_annotations:
              summary: "SLO {slo_name} burns its error budget faster than {rate}x"
              description: "SLO {slo_name} burned its error budget {value}x over the last {lw}, and faster than {rate}x over the last {sw} too; the {severity} rate is {rate}x."
"""


def test_prometheus_rules_fire_on_series_of_known_burn():
    """Each instance's burn, as each tokentap evaluates its own, labelled
    as its notifier labels the alert (instance: its own name, no job); the
    pairs and burn_min_requests as configured."""
    d = tempfile.mkdtemp(prefix="tt-rules-")
    conf = os.path.join(d, "tokentap.yaml")
    with open(conf, "w") as f:
        f.write("slos:\n  - {name: fast, tpot: 50ms}\n")      # the Workbook's pairs
    r = run("tokentap", "--prometheus-rules", "-c", conf, expect=0)
    assert r.stderr == "", r.stderr
    rules = os.path.join(d, "rules.yaml")
    with open(rules, "w") as f:
        f.write(r.stdout)
    r = subprocess.run([PROMTOOL, "check", "rules", rules], capture_output=True, text=True)
    assert r.returncode == 0 and "SUCCESS: 13 rules found" in r.stdout, r.stdout + r.stderr
    # fast: 20 % bad of 100/min on each of two instances, burn 20: every pair.
    # slow: 3 %, burn 3: the warning pair only. fine: 0.5 %: none.
    # rare: all bad but 0.1/min: only 6 h holds 10 requests.
    series = (counters("fast", 160, 40, ("a", "b")) + counters("slow", 97, 3)
              + counters("fine", 995, 5) + counters("rare", 0, 0.1) + infos("a", "b"))
    fast = "".join(exp("fast", sev, lw, sw, rate, 20, inst) for inst in ("a", "b")
                   for sev, lw, sw, rate in (("critical", "1h", "5m", 14.4),
                                             ("critical", "6h", "30m", 6),
                                             ("warning", "3d", "6h", 1)))
    test = f"""rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{chr(10).join(f"      - {{series: '{s}', values: '{v}'}}" for s, v in series)}
    alert_rule_test:
      - eval_time: 400m
        alertname: SLOBurnRate
        exp_alerts:
{fast}{exp("slow", "warning", "3d", "6h", 1, 3)}{exp("rare", "warning", "3d", "6h", 1, 100)}"""
    path = os.path.join(d, "test.yaml")
    with open(path, "w") as f:
        f.write(test)
    r = subprocess.run([PROMTOOL, "test", "rules", path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + test
    # and a pair that must not: with "fast" at burn 10, the first pair (14.4) stays quiet
    with open(path, "w") as f:
        f.write(test.replace("0+80x420", "0+90x420").replace("0+20x420", "0+10x420"))
    r = subprocess.run([PROMTOOL, "test", "rules", path], capture_output=True, text=True,
                       timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "got:[" in out, out
    got = out.split("got:[", 1)[1]
    assert 'long_window="1h"' not in got, got
    assert ('instance="a/x", long_window="6h", severity="critical", short_window="30m", '
            'slo="fast"') in got, got
    assert "burned its error budget 10x over the last 6h" in got, got


def test_prometheus_rules_keep_firing_across_a_restart():
    """A tokentap restart: one scrape fails (Prometheus marks every series
    of the target stale at once), and the counters start again from 0.
    The burn is as true after as before, so SLOBurnRate must fire at the
    failed scrape too. Before, the rules joined on the instance's name and
    the SLO's objective as instant vectors: at the stale scrape they had no
    value, the alert resolved, and fired again a scrape later: on-call was
    paged twice for one problem (#41: 3 restarts in 5 re-paged)."""
    d = tempfile.mkdtemp(prefix="tt-rules-")
    conf = os.path.join(d, "tokentap.yaml")
    with open(conf, "w") as f:
        f.write("slos:\n  - {name: fast, tpot: 50ms}\n")
    r = run("tokentap", "--prometheus-rules", "-c", conf, expect=0)
    rules = os.path.join(d, "rules.yaml")
    with open(rules, "w") as f:
        f.write(r.stdout)
    target = 'instance="a:9464",job="tokentap"'
    # 400 minutes at 80 good and 20 bad a minute (burn 20: every pair), the
    # scrape at 400m failed, then the counters from 0 again
    series = [(f'tokentap_slo_requests_total{{{target},slo="fast",result="good"}}',
               "0+80x399 stale 0+80x30"),
              (f'tokentap_slo_requests_total{{{target},slo="fast",result="bad"}}',
               "0+20x399 stale 0+20x30"),
              (f'tokentap_slo_objective{{{target},slo="fast"}}', "0.99+0x399 stale 0.99+0x30"),
              (f'tokentap_alert_instance_info{{{target},alert_instance="a/x"}}',
               "1+0x399 stale 1+0x30")]
    pairs = (("critical", "1h", "5m", 14.4), ("critical", "6h", "30m", 6),
             ("warning", "3d", "6h", 1))
    evals = "".join(f"""      - eval_time: {m}m
        alertname: SLOBurnRate
        exp_alerts:
{"".join(exp("fast", sev, lw, sw, rate, 20) for sev, lw, sw, rate in pairs)}"""
                    for m in (399, 400, 401, 402))
    test = f"""rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{chr(10).join(f"      - {{series: '{s}', values: '{v}'}}" for s, v in series)}
    alert_rule_test:
{evals}"""
    path = os.path.join(d, "test.yaml")
    with open(path, "w") as f:
        f.write(test)
    r = subprocess.run([PROMTOOL, "test", "rules", path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- capacity headroom ---------------------------------------------------------------

def test_headroom_from_a_mock_linear_in_concurrency():
    """tokentap-mock's TTFT is 50 ms + 20 ms for each other stream it
    serves (ttft_warning 250 ms: 10 streams of headroom). Two staircases of
    8 streams: each request's logged concurrency is the mock's count of the
    others, its TTFT lies between the mock's schedule and the client's
    own; /stats' line is the least-squares line of exactly those (TTFT,
    concurrency) pairs, and its headroom that line's reach of 250 ms. How
    close the line comes to 20 ms and 50 ms is the host's: reported."""
    # 120 tokens (2.4 s): the first stream still runs when the eighth
    # starts, however late a busy host starts it (the climb is 0.96 s)
    with Mock("--ttft", "50ms", "--ttft-per-stream", "20ms", "--tpot", "20ms",
              "--tokens", "120") as m, \
            Tokentap(conf(m, "    thresholds: {ttft_warning: 250ms, ttft_critical: 10s}\n"
                             "stats: {windows: [1m]}\n")) as t:
        client = staircase(t.port, "/v1/chat/completions", 8)
        # the first staircase's streams all ended in tokentap too: a client
        # has the last byte a moment before tokentap counts its stream out,
        # and the next request would see it still in progress while the
        # mock sees none (beside two CPU hogs, once)
        until(lambda: t.stats()["active_streams"] == 0, DUE, "no stream in progress")
        client.update(staircase(t.port, "/v1/chat/completions", 8))
        lines = t.wait_logged(16)
        mock = {x["request_id"]: x for x in m.served(16)}
        pairs = []
        for x in lines:
            sched = mock[x["request_id"]]["sched_first_token_us"]
            assert x["concurrency"] == (sched - 50000) / 20000, (x, mock[x["request_id"]])
            assert sched / 1000 <= x["ttft_ms"] <= client[x["request_id"]] * 1000, x
            pairs.append((x["concurrency"], x["ttft_ms"]))
        g = until(lambda: next((x for x in t.stats()["groups"]
                                if x["route"] == "llm" and x["requests"] >= 16), None),
                  DUE, "16 requests in /stats")
        n = len(pairs)
        sx, sy = sum(c for c, _ in pairs), sum(y for _, y in pairs)
        vx = n * sum(c * c for c, _ in pairs) - sx * sx
        vy = n * sum(y * y for _, y in pairs) - sy * sy
        cov = n * sum(c * y for c, y in pairs) - sx * sy
        slope, r2 = cov / vx, cov * cov / (vx * vy)
        intercept = (sy - slope * sx) / n
        print(f"line: {slope:.2f} ms a stream, {intercept:.2f} ms at none, r2 {r2:.4f}")
        # /stats writes 4 decimals, and the headroom 1
        for key, want in (("slope_ms", slope), ("intercept_ms", intercept), ("r2", r2)):
            assert abs(g["ttft_concurrency_" + key] - want) <= 0.51e-4, (key, want, g)
        assert r2 >= 0.5 and slope > 0, g
        assert abs(g["headroom_streams"] - (250 - intercept) / slope) <= 0.051, g
        # grouped without the route, no route's threshold applies
        g = t.stats(by="tenant")["groups"][0]
        assert g["headroom_streams"] is None and g["ttft_concurrency_slope_ms"] > 0


# ---- tokentap-load's goodput -----------------------------------------------------

def test_load_reports_goodput_per_scenario():
    """Goodput per scenario: fast meets targets far above its schedule
    (20 ms against 500 ms), slow cannot meet its target (600 ms against
    500 ms); a scenario without targets has none."""
    with Mock() as m:
        d = tempfile.mkdtemp(prefix="tt-load-")
        scen = os.path.join(d, "s.yaml")
        with open(scen, "w") as f:
            f.write(f"""target: {m.url("/v1/chat/completions")}
requests: 12
concurrency: 3
max_tokens: 4
scenarios:
  - name: fast
    headers: {{X-Mock-TTFT: 20ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 500ms, ttft_p50: 250ms, tpot_p50: 100ms}}
  - name: slow
    headers: {{X-Mock-TTFT: 600ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 500ms}}
  - name: none
    headers: {{X-Mock-TTFT: 5ms}}
""")
        out = os.path.join(d, "r.json")
        r = run("tokentap-load", "--scenarios", scen, "--json", out, timeout=120,
                expect=1)                                    # slow misses its target
    with open(out) as f:
        sc = {x["name"]: x for x in json.load(f)["scenarios"]}
    fast = sc["fast"]["goodput"]
    assert fast["targets"] == {"ttft_ms": 500, "tpot_ms": 100}, fast
    assert (fast["good"], fast["judged"], fast["attainment"]) == (12, 12, 1.0), fast
    assert fast["per_s"] > 0
    slow = sc["slow"]["goodput"]
    assert (slow["good"], slow["judged"], slow["attainment"], slow["per_s"]) == (0, 12, 0.0, 0.0)
    assert sc["none"]["goodput"] is None
    assert "goodput" in r.stdout and "attainment 100.00 % (12 of 12 ok within ttft <= 500 ms, " \
        "tpot <= 100 ms)" in r.stdout, r.stdout
    assert "attainment 0.00 % (0 of 12 ok within ttft <= 500 ms)" in r.stdout
