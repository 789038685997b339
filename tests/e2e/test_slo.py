"""SLOs end to end: tokentap-mock serves a known mix of fast, slow, failed
and abandoned streams through the real proxy, and /slo, /metrics and the
access log agree on exactly which were good; a burn-rate pair fires while
another, its short window burning as fast but its long window not, must
stay quiet; the error budget survives SIGHUP and a restart through the
state file (a corrupt or missing one is said and starts empty); the
generated Prometheus rules fire under promtool on series of known burn;
the headroom figure comes out of a mock whose TTFT grows linearly with
concurrency; tokentap-load reports goodput per scenario."""
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from harness import Proc, Tokentap, binary, free_port, wait_port
from test_alerts import ALERTMANAGER, Hook, Mock, wait_for

PROMTOOL = "/usr/bin/promtool"
EVERY = 0.2          # alerts.evaluate_every of these tests


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return r.read().decode()


def slo_doc(t):
    return json.loads(get(t.admin, "/slo"))


def slo(t, name):
    for s in slo_doc(t)["slos"]:
        if s["name"] == name:
            return s
    raise AssertionError(f"no SLO {name}")


def window(s, w):
    for x in s["windows"]:
        if x["window"] == w:
            return x
    raise AssertionError(f"no window {w} in {s['windows']}")


def metric(t, prefix):
    for line in get(t.admin, "/metrics").splitlines():
        if line.startswith(prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {prefix} in /metrics")


def request(port, model="m", ttft="20ms", tpot="5ms", tokens=5, fault=None, abort_after=None,
            reasoning=0):
    """One streamed completion; abort_after: close the connection after so
    many seconds, before anything came back; reasoning: that many reasoning
    tokens first. Returns the bytes received."""
    body = json.dumps({"model": model, "stream": True}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nX-Mock-TTFT: {ttft}\r\nX-Mock-TPOT: {tpot}\r\n"
            f"X-Mock-Tokens: {tokens}\r\n")
    if fault:
        head += f"X-Mock-Fault: {fault}\r\n"
    if reasoning:
        head += f"X-Mock-Reasoning: {reasoning}\r\n"
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    if abort_after is not None:
        time.sleep(abort_after)
        s.close()
        return b""
    buf = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return buf


def run_all(jobs, threads=8):
    """Runs request(**kw) for each kw of jobs on a pool of threads; the first
    error is raised here."""
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(request, **kw) for kw in jobs]:
            f.result()


def routes(mock_port):
    return f"routes:\n  - name: llm\n    upstream: http://127.0.0.1:{mock_port}\n"


# ---- attainment and goodput, exactly -------------------------------------------

MIX_SLOS = """stats: {windows: [10s, 1m]}
slos:
  - name: chat
    match: {route: llm}
    ttft: 150ms
    tpot: 30ms
    objective: 0.9
  - name: translate
    class: translation
    match: {model: m-tr}
"""


def test_attainment_and_goodput_are_exact():
    with Mock() as m, Tokentap(routes(m.port) + MIX_SLOS) as t:
        wait_port(t.admin)
        p = t.port
        jobs = ([dict(port=p)] * 12                                    # good
                + [dict(port=p, ttft="400ms")] * 5                     # TTFT over: bad
                + [dict(port=p, tpot="60ms", tokens=4)] * 4            # TPOT over: bad
                + [dict(port=p, tokens=1)] * 3                         # no TPOT: good
                + [dict(port=p, fault="status:500")] * 2               # errors: bad
                + [dict(port=p, ttft="2s", abort_after=0.05)] * 2      # left early: uncounted
                + [dict(port=p, ttft="2s", abort_after=0.5)] * 2       # gave up waiting: bad
                + [dict(port=p, model="m-tr", ttft="100ms")] * 3       # good for both
                + [dict(port=p, model="m-tr", ttft="250ms")] * 2)      # bad for both
        run_all(jobs)
        lines = t.access(len(jobs))
        assert len(lines) == len(jobs), lines
        outcomes = sorted(x["outcome"] for x in lines)
        assert outcomes.count("client_abort") == 4 and outcomes.count("upstream_error") == 2

        def settled():
            s = slo(t, "chat")
            return window(s, "1m")["eligible"] + 0 == 33 and s

        chat = wait_for(settled, 5, "all requests counted")
        for w in ("10s", "1m"):
            x = window(chat, w)
            seconds = 10 if w == "10s" else 60
            assert (x["eligible"], x["good"], x["bad"]) == (33, 18, 15), (w, x)
            assert abs(x["attainment"] - 18 / 33) < 1e-6, x
            assert abs(x["goodput_per_s"] - 18 / seconds) < 1e-6, x
        b = chat["budget"]
        assert (b["eligible"], b["good"], b["bad"]) == (33, 18, 15), b
        assert abs(b["allowed_bad"] - 3.3) < 1e-6 and abs(b["remaining"] - (1 - 15 / 3.3)) < 1e-6, b
        assert chat["targets"] == {"ttft_ms": 150, "tpot_ms": 30}
        assert chat["match"] == {"route": "llm", "tenant": None, "model": None}
        assert chat["objective"] == 0.9 and chat["period"] == "28d"

        tr = slo(t, "translate")
        assert tr["targets"] == {"ttft_ms": 200, "tpot_ms": 30}, tr   # the class's
        assert tr["objective"] == 0.99
        x = window(tr, "1m")
        assert (x["eligible"], x["good"], x["bad"]) == (5, 3, 2), x
        assert abs(x["attainment"] - 0.6) < 1e-6 and abs(x["goodput_per_s"] - 3 / 60) < 1e-6

        assert metric(t, 'tokentap_slo_requests_total{slo="chat",result="good"}') == 18
        assert metric(t, 'tokentap_slo_requests_total{slo="chat",result="bad"}') == 15
        assert metric(t, 'tokentap_slo_requests_total{slo="translate",result="good"}') == 3
        assert metric(t, 'tokentap_slo_objective{slo="chat"}') == 0.9
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=get(t.admin, "/metrics"),
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr

        # the access log agrees, request by request, with the rule as written
        good = sum(1 for x in lines if x["outcome"] == "ok" and x["ttft_ms"] <= 150
                   and (x["tpot_ms"] is None or x["tpot_ms"] <= 30))
        uncounted = sum(1 for x in lines if x["outcome"] == "client_abort"
                        and x["duration_ms"] <= 150)
        assert good == 18 and uncounted == 2 and len(lines) - good - uncounted == 15


def test_ttfo_target_judges_the_answer_not_the_reasoning():
    """An SLO with a ttfo target: a stream whose first reasoning token is
    fast but whose answer comes late is bad; the same without reasoning is
    good; TTFT alone would have called both good."""
    with Mock() as m, Tokentap(routes(m.port) + """stats: {windows: [1m]}
slos:
  - {name: think, ttft: 100ms, ttfo: 300ms, objective: 0.9}
""") as t:
        wait_port(t.admin)
        # 20 ms to the first reasoning token, 40 ms a token: 10 reasoning
        # tokens put the answer at 420 ms, 2 at 100 ms
        # tokens (X-Mock-Tokens) count the reasoning ones too
        run_all([dict(port=t.port, ttft="20ms", tpot="40ms", reasoning=10, tokens=14)] * 3
                + [dict(port=t.port, ttft="20ms", tpot="40ms", reasoning=2, tokens=6)] * 2
                + [dict(port=t.port, ttft="20ms", tpot="40ms")] * 2)
        lines = t.access(7)
        assert all(x["ttft_ms"] < 100 for x in lines), lines
        assert sorted(x["ttfo_ms"] > 300 for x in lines) == [False] * 4 + [True] * 3, lines

        def settled():
            s = slo(t, "think")
            return window(s, "1m")["eligible"] == 7 and s
        s = wait_for(settled, 5, "all requests counted")
        x = window(s, "1m")
        assert (x["good"], x["bad"]) == (4, 3), x
        assert s["targets"] == {"ttft_ms": 100, "ttfo_ms": 300}, s["targets"]


# ---- burn-rate pairs ---------------------------------------------------------------

BURN = f"""stats: {{windows: [1m]}}
alerts:
  evaluate_every: {int(EVERY * 1000)}ms
  burn_min_requests: 3
  burn_rates:
    - {{severity: critical, long: 4s, short: 2s, rate: 5}}
    - {{severity: warning, long: 60s, short: 2s, rate: 5}}
  notify:
    - {{type: log}}
    - {{type: webhook, url: 'URL'}}
slos:
  - {{name: chat, ttft: 100ms, objective: 0.9}}
"""


def burn_rule(t, severity):
    for r in json.loads(get(t.admin, "/alerts"))["rules"]:
        if r["alertname"] == "SLOBurnRate" and r["severity"] == severity:
            return r
    raise AssertionError(f"no SLOBurnRate {severity}")


def test_a_burn_rate_pair_fires_and_one_must_not():
    with Mock() as m, Hook() as h:
        conf = routes(m.port) + BURN.replace("URL", f"http://127.0.0.1:{h.port}/slo")
        with Tokentap(conf) as t:
            wait_port(t.admin)
            run_all([dict(port=t.port)] * 40)
            time.sleep(4.5)        # the 4 s window forgets them; 60 s keeps them
            run_all([dict(port=t.port, ttft="300ms")] * 10, threads=10)
            done = time.monotonic()
            at, path, _, body = h.wait(lambda b: b["alertname"] == "SLOBurnRate", EVERY + 3)
            # both windows of the critical pair: every request bad, burn 10
            assert body["status"] == "firing" and body["severity"] == "critical", body
            assert body["slo"] == "chat" and body["route"] is None and body["metric"] == "burn_rate"
            assert body["window_s"] == 4 and body["short_window_s"] == 2, body
            assert body["value"] > 5 and body["short_value"] > 5 and body["threshold"] == 5, body
            assert body["samples"] >= 3 and body["objective"] == 0.9, body
            assert path == "/slo" and at - done < EVERY + 1.5
            # the warning pair: its short window burns as fast, its long one
            # (40 good, 10 bad: burn 2) does not
            w = wait_for(lambda: (r := burn_rule(t, "warning"))["samples"] == 50 and r, 1.5,
                         "all 50 in the warning pair's long window")
            assert w["state"] == "ok" and w["short_value"] > 5 and w["value"] < 5, w
            assert abs(w["value"] - 2) < 1e-6 and w["samples"] == 50, w
            c = burn_rule(t, "critical")
            assert c["state"] == "firing" and c["long_window"] == "4s" and c["slo"] == "chat"
            assert metric(t, 'tokentap_alert_firing{alertname="SLOBurnRate",severity="critical",'
                             'slo="chat",long_window="4s",short_window="2s"}') == 1
            assert metric(t, 'tokentap_alert_firing{alertname="SLOBurnRate",severity="warning",'
                             'slo="chat",long_window="1m",short_window="2s"}') == 0
            assert "alert firing: SLOBurnRate severity=critical slo=chat burn " in t.stderr()
            # nothing bad for 2 s: the short window empties and it resolves
            _, _, _, res = h.wait(lambda b: b["status"] == "resolved", 2 + EVERY + 3)
            assert res["severity"] == "critical" and res["ends_at"] >= res["starts_at"]
            tr = json.loads(get(t.admin, "/alerts"))["transitions"]
            assert [(x["status"], x["severity"]) for x in tr] == \
                [("resolved", "critical"), ("firing", "critical")], tr
            assert tr[1]["slo"] == "chat" and tr[1]["short_window"] == "2s"
        assert [b[3]["severity"] for b in h.got] == ["critical", "critical"], h.got


def test_alertmanager_gets_the_burn_rate_alert():
    am_port = free_port()
    d = tempfile.mkdtemp(prefix="tt-am-")
    with open(os.path.join(d, "am.yml"), "w") as f:
        f.write('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    am_args = [ALERTMANAGER, f"--config.file={d}/am.yml", f"--storage.path={d}/data",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="]
    with Proc(am_args) as am, Mock() as m:
        wait_port(am_port, timeout=15)
        conf = routes(m.port) + BURN.replace(
            "    - {type: webhook, url: 'URL'}",
            f"    - {{type: alertmanager, url: 'http://127.0.0.1:{am_port}'}}")
        with Tokentap(conf) as t:
            wait_port(t.admin)
            run_all([dict(port=t.port, ttft="300ms")] * 5, threads=5)
            got = wait_for(lambda: json.loads(get(am_port, "/api/v2/alerts")), EVERY + 5,
                           "the alert in Alertmanager")
            labels = {tuple(sorted((k, v) for k, v in a["labels"].items() if k != "instance"))
                      for a in got}
            # 5 bad of 5: both pairs burn 10 in both windows
            assert labels == {
                (("alertname", "SLOBurnRate"), ("long_window", "4s"), ("severity", "critical"),
                 ("short_window", "2s"), ("slo", "chat")),
                (("alertname", "SLOBurnRate"), ("long_window", "1m"), ("severity", "warning"),
                 ("short_window", "2s"), ("slo", "chat")),
            }, got
            a = got[0]
            assert "SLO chat burns its error budget faster than 5x" == a["annotations"]["summary"]
            assert "(objective 0.9)" in a["annotations"]["description"], a
            # resolved once the short window empties: Alertmanager lists active alerts only
            wait_for(lambda: json.loads(get(am_port, "/api/v2/alerts")) == [], 2 + EVERY + 6,
                     "resolved in Alertmanager")
        assert am.p.poll() is None, am.stderr()[-2000:]


# ---- the budget survives -----------------------------------------------------------

def test_budget_survives_sighup_and_restart():
    d = tempfile.mkdtemp(prefix="tt-slo-")
    state = os.path.join(d, "slo.state")
    conf = f"""stats: {{windows: [1m]}}
slo_state: {state}
slos:
  - {{name: chat, ttft: 100ms, objective: 0.9}}
"""
    with Mock() as m:
        with Tokentap(routes(m.port) + conf) as t:
            wait_port(t.admin)
            assert f"slo_state {state}: not there yet" in t.stderr()
            run_all([dict(port=t.port)] * 6 + [dict(port=t.port, ttft="300ms")] * 4)
            wait_for(lambda: slo(t, "chat")["budget"]["eligible"] == 10, 5, "counted")
            # a reload that changes the objective and adds an SLO keeps the counts
            t.write_conf(open(t.conf).read().replace("objective: 0.9", "objective: 0.95")
                         + "  - {name: other, tpot: 10ms}\n")
            t.p.send_signal(signal.SIGHUP)
            wait_for(lambda: len(slo_doc(t)["slos"]) == 2, 5, "reload")
            s = slo(t, "chat")
            assert (s["budget"]["good"], s["budget"]["bad"], s["objective"]) == (6, 4, 0.95), s
            assert window(s, "1m")["eligible"] == 10
            assert metric(t, 'tokentap_slo_requests_total{slo="chat",result="bad"}') == 4
            assert not os.path.exists(state)           # at most once a minute: not yet
            assert t.stop() == 0
        with open(state) as f:
            text = f.read()
        assert text.startswith("tokentap-slo-state 1\nslo chat ") and text.endswith("end 4\n")
        assert not os.path.exists(state + ".tmp")

        with Tokentap(routes(m.port) + conf) as t:
            wait_port(t.admin)
            assert "error budgets of 1 SLO(s) read" in t.stderr(), t.stderr()
            s = slo(t, "chat")
            assert (s["budget"]["good"], s["budget"]["bad"]) == (6, 4), s
            assert window(s, "1m")["eligible"] == 0      # windows are not kept: the budget is
            run_all([dict(port=t.port)] * 2)
            wait_for(lambda: slo(t, "chat")["budget"]["eligible"] == 12, 5, "counted on")

        with open(state, "w") as f:
            f.write(text.replace("end 4", "end 7"))
        with Tokentap(routes(m.port) + conf) as t:
            wait_port(t.admin)
            err = t.stderr()
            assert f"slo_state {state}: corrupt, line " in err and "start empty" in err, err
            assert slo(t, "chat")["budget"]["eligible"] == 0
            run_all([dict(port=t.port)] * 1)
            wait_for(lambda: slo(t, "chat")["budget"]["eligible"] == 1, 5, "counting")
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
    r = subprocess.run([binary("tokentap"), "--prometheus-rules", "-c", conf],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
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


# ---- capacity headroom ---------------------------------------------------------------

def staircase(port, path, n):
    """n streams opened one by one, each once the ones before stream: the
    k-th starts with k - 1 others in flight. Reads them all to the end."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        body = b'{"model":"m","stream":true}'
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body))
        buf = b""
        while b'"content":"' not in buf:
            buf += s.recv(65536)
        socks.append(s)
    for s in socks:
        while s.recv(65536):
            pass
        s.close()


def test_headroom_from_a_mock_linear_in_concurrency():
    # TTFT = 50 ms + 20 ms for each other stream; ttft_warning 250 ms: the
    # line reaches it at (250 - 50) / 20 = 10 streams
    mp = free_port()
    with Proc([binary("tokentap-mock"), "-l", f"127.0.0.1:{mp}", "--ttft", "50ms",
               "--ttft-per-stream", "20ms", "--tpot", "20ms", "--tokens", "80"]):
        wait_port(mp)
        conf = routes(mp) + ("    thresholds: {ttft_warning: 250ms, ttft_critical: 10s}\n"
                             "stats: {windows: [1m]}\n")
        with Tokentap(conf) as t:
            wait_port(t.admin)
            for _ in range(2):
                staircase(t.port, "/v1/chat/completions", 8)
            t.access(16)
            g = wait_for(lambda: next((x for x in json.loads(get(t.admin, "/stats"))["groups"]
                                       if x["route"] == "llm" and x["requests"] >= 16), None),
                         5, "16 requests in /stats")
            assert g["ttft_concurrency_r2"] > 0.95, g
            assert abs(g["ttft_concurrency_slope_ms"] - 20) < 2, g
            assert abs(g["ttft_concurrency_intercept_ms"] - 50) < 8, g
            assert abs(g["headroom_streams"] - 10) < 1.5, g
            # grouped without the route, no route's threshold applies
            g = json.loads(get(t.admin, "/stats?by=tenant"))["groups"][0]
            assert g["headroom_streams"] is None and g["ttft_concurrency_slope_ms"] > 0


# ---- tokentap-load's goodput -----------------------------------------------------

def test_load_reports_goodput_per_scenario():
    mp = free_port()
    d = tempfile.mkdtemp(prefix="tt-load-")
    scen = os.path.join(d, "s.yaml")
    with open(scen, "w") as f:
        f.write(f"""target: http://127.0.0.1:{mp}/v1/chat/completions
requests: 12
concurrency: 3
max_tokens: 4
scenarios:
  - name: fast
    headers: {{X-Mock-TTFT: 20ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 100ms, ttft_p50: 50ms, tpot_p50: 20ms}}
  - name: slow
    headers: {{X-Mock-TTFT: 150ms, X-Mock-TPOT: 5ms}}
    targets: {{ttft_p95: 100ms}}
  - name: none
    headers: {{X-Mock-TTFT: 5ms}}
""")
    with Proc([binary("tokentap-mock"), "-l", f"127.0.0.1:{mp}"]):
        wait_port(mp)
        out = os.path.join(d, "r.json")
        r = subprocess.run([binary("tokentap-load"), "--scenarios", scen, "--json", out],
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr            # slow misses its target
    with open(out) as f:
        sc = {x["name"]: x for x in json.load(f)["scenarios"]}
    fast = sc["fast"]["goodput"]
    assert fast["targets"] == {"ttft_ms": 100, "tpot_ms": 20}, fast
    assert (fast["good"], fast["judged"], fast["attainment"]) == (12, 12, 1.0), fast
    assert fast["per_s"] > 0
    slow = sc["slow"]["goodput"]
    assert (slow["good"], slow["judged"], slow["attainment"], slow["per_s"]) == (0, 12, 0.0, 0.0)
    assert sc["none"]["goodput"] is None
    assert "goodput" in r.stdout and "attainment 100.00 % (12 of 12 ok within ttft <= 100 ms, " \
        "tpot <= 20 ms)" in r.stdout, r.stdout
    assert "attainment 0.00 % (0 of 12 ok within ttft <= 100 ms)" in r.stdout
