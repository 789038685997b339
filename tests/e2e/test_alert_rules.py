# SPDX-License-Identifier: Apache-2.0
"""One alerting path, one page: `tokentap --prometheus-rules -c FILE`
writes every built-in alert as Prometheus rules with the config's own
thresholds per route (and tenant), and the labels tokentap's notifiers
send. promtool checks them and runs them on series of known values (per
route thresholds, hysteresis, min_samples, route "-", client outcomes, per
tenant, stalls, pools, route names with regex characters, two instances);
the shipped conf/prometheus-rules.yaml is their output for
conf/tokentap.yaml; and with a real Prometheus evaluating them and
tokentap's own Alertmanager notifier both on, a real Alertmanager holds
exactly one alert per condition."""
import re
import socket
import os
import subprocess
import tempfile
import threading
import time

from harness import ROOT, Mock, Proc, Tokentap, binary, completion, free_port, get, until, \
    wait_port
from peers import ALERTMANAGER, Hook

PROMTOOL = "/usr/bin/promtool"
# a real Prometheus and Alertmanager under the sanitizer build add only minutes
SANITIZER_SKIP = {"test_both_paths_page_once_per_condition", "test_restarts_never_re_page"}
TIME_LIMITS = {"test_restarts_never_re_page": 240}
# and make check: a real Prometheus scraping for seconds is make test's
CHECK_SKIP = SANITIZER_SKIP


def rules_for(d, conf_text):
    """The rules tokentap writes for conf_text, checked by promtool; their path."""
    conf = os.path.join(d, "tokentap.yaml")
    with open(conf, "w") as f:
        f.write(conf_text)
    r = subprocess.run([binary("tokentap"), "--prometheus-rules", "-c", conf],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    path = os.path.join(d, "rules.yaml")
    with open(path, "w") as f:
        f.write(r.stdout)
    r = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    return path


def prometheus_yml(d, rules, am_port, admin):
    """d/prometheus.yml: a 1 s scrape of tokentap's admin port, the rules,
    the Alertmanager on am_port."""
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [{rules}]
alerting:
  alertmanagers:
    - static_configs: [{{targets: ['127.0.0.1:{am_port}']}}]
scrape_configs:
  - job_name: tokentap
    static_configs: [{{targets: ['127.0.0.1:{admin}']}}]
""")


# ---- the shipped file ----------------------------------------------------------

def test_shipped_rules_are_the_reference_configs():
    """conf/prometheus-rules.yaml is what --prometheus-rules writes for
    conf/tokentap.yaml (before, it was written by hand, with TTFT 1 s / 2 s
    for every route whatever the config said), and promtool takes it."""
    r = subprocess.run([binary("tokentap"), "--prometheus-rules", "-c", "conf/tokentap.yaml"],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    with open(os.path.join(ROOT, "conf", "prometheus-rules.yaml")) as f:
        assert f.read() == r.stdout, ("conf/prometheus-rules.yaml is out of date: "
                                      "tokentap --prometheus-rules -c conf/tokentap.yaml")
    r = subprocess.run([PROMTOOL, "check", "rules", "conf/prometheus-rules.yaml"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr


# ---- promtool on series of known values ------------------------------------------

# two scraped targets and the names tokentap gives itself on its alerts
TARGETS = {"a": ("10.0.0.1:9464", "a.example/0.0.0.0:8080"),
           "b": ("10.0.0.2:9464", "b.example/0.0.0.0:8080")}
BOUNDS = ("0.05", "0.1", "0.25", "1", "2", "5", "+Inf")
STEPS = 48                     # 15 s apart: 12 minutes, four phases of 3 minutes
WEIRD = 'a.b|"c\\'             # a route name with regex metacharacters and a quote


def promql_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sel(name, target, **labels):
    labels = {"instance": TARGETS[target][0], "job": "tokentap", **labels}
    return name + "{" + ",".join(f"{k}={promql_str(v)}" for k, v in labels.items()) + "}"


def info(target):
    return (sel("tokentap_alert_instance_info", target, alert_instance=TARGETS[target][1]),
            [1] * (STEPS + 1))


def phases(*per_phase):
    """A value per 15 s step from one value per 3-minute phase."""
    out = []
    for v in per_phase:
        out += [v] * (STEPS // len(per_phase))
    return out


def counter(per_step):
    """Cumulative values (from 0 at step 0) of increments per step."""
    out, total = [0], 0
    for n in per_step:
        total += n
        out.append(total)
    return out


def hist(family, target, obs, **labels):
    """A classic histogram whose every step observes obs[i] = (n, value)
    (n 0: nothing)."""
    out = []
    for le in BOUNDS:
        inc = [n if le == "+Inf" or float(le) >= v else 0 for n, v in obs]
        out.append((sel(family + "_bucket", target, le=le, **labels), counter(inc)))
    out.append((sel(family + "_count", target, **labels), counter([n for n, _ in obs])))
    return out


def requests(target, route, tenant="-", **per_step):
    return [(sel("tokentap_requests_total", target, route=route, tenant=tenant, model="m",
                 upstream="u", outcome=k, code="2xx"), counter([n] * STEPS))
            for k, n in per_step.items()]


def gauge(name, target, values, **labels):
    return (sel(name, target, **labels), values + values[-1:])


TTFT = "tokentap_time_to_first_token_server_seconds"   # what the rules judge
RULES_CONF = f"""tenant: {{header: X-Tenant-Id, header_values: [acme, globex]}}
routes:
  - name: strict
    match: {{path_prefix: /s/}}
    upstream: http://127.0.0.1:9
    thresholds: {{ttft_warning: 50ms, ttft_critical: 100ms, stall: 1s, min_stalled: 2}}
  - name: llm
    match: {{path_prefix: /l/}}
    upstream: http://127.0.0.1:9
  - name: '{WEIRD}'
    match: {{path_prefix: /w/}}
    upstream: http://127.0.0.1:9
  - name: a.b
    match: {{path_prefix: /ab/}}
    upstream: http://127.0.0.1:9
  - name: rare
    match: {{path_prefix: /r/}}
    upstream: http://127.0.0.1:9
  - name: pool
    match: {{path_prefix: /p/}}
    upstreams: [{{url: http://127.0.0.1:9}}, {{url: http://127.0.0.1:10}}]
    min_healthy: 2
alerts:
  window: 1m
  min_samples: 10
  per_tenant: true
  thresholds: {{error_rate_warning: 0.05, error_rate_critical: 0.2}}
"""


def firing(*alerts):
    """ALERTS samples as promtool expects them: (alertname, severity,
    target, route[, tenant])."""
    out = []
    for name, sev, target, route, *tenant in alerts:
        labels = {"alertname": name, "alertstate": "firing", "severity": sev,
                  "instance": TARGETS[target][1], "route": route}
        if tenant:
            labels["tenant"] = tenant[0]
        body = ",".join(f"{k}={promql_str(v)}" for k, v in labels.items())
        out.append(f"          - labels: '{('ALERTS{' + body + '}').replace(chr(39), chr(39) * 2)}'\n"
                   f"            value: 1\n")
    return "".join(out)


def test_rules_fire_like_the_builtin_alerts():
    """Four 3-minute phases of known series from two instances, evaluated
    by promtool every 15 s; the alerts firing late in each phase (Prometheus'
    ALERTS series: labels only) are exactly the ones tokentap fires:
    - route strict (its own TTFT thresholds 50 / 100 ms) at p95 242 ms:
      warning and critical, where route llm at the same p95 (the global
      1 s / 2 s) has none; at p95 97.5 ms (under 100 ms, over 90 ms) both
      stay (hysteresis 0.1); at 47.5 ms the warning stays (over 45 ms) and
      the critical resolves; with no sample, both resolve. Before, the
      rules said 1 s / 2 s for every route: strict was never critical.
    - per tenant: tenant acme of strict and of llm too, each by its own
      figures (llm's acme 30 % errors: critical; llm over all 15 %:
      warning only); requests the user stopped (client_abort) or that
      were too slow to send or read (client_timeout) count on neither
      side; route "-" never; fewer than min_samples (route rare)
      never; a route that is not configured (axb) never, though the
      configured a.b would match it as a regex.
    - instance a fires, instance b with the same routes but fast does not:
      each alert names its instance as tokentap does (not the scrape
      target), and has no job.
    - StreamStalled: strict (min_stalled 2) fires at 2 stalled streams
      summed over tenants, not at 1, stays at 1 while firing, resolves at
      0; llm (min_stalled 1) fires at 1. PoolUnhealthy: one of pool's two
      replicas down (min_healthy 2)."""
    d = tempfile.mkdtemp(prefix="tt-rules-")
    rules = rules_for(d, RULES_CONF)
    slow = (10, 0.25)                     # p95 0.1 + 0.95 * 0.15 = 242.5 ms
    series = [info("a"), info("b")]
    strict_obs = phases(slow, (10, 0.1), (10, 0.05), (0, 0))
    series += hist(TTFT, "a", strict_obs, route="strict", tenant="acme", model="m", upstream="u")
    series += hist(TTFT, "b", [(10, 0.05)] * STEPS, route="strict", tenant="acme", model="m",
                   upstream="u")
    series += hist(TTFT, "a", [slow] * STEPS, route="llm", tenant="acme", model="m", upstream="u")
    series += hist(TTFT, "a", [(10, 1.5)] * STEPS, route=WEIRD, tenant="-", model="m",
                   upstream="u")
    series += hist(TTFT, "a", [(10, 5)] * STEPS, route="axb", tenant="-", model="m", upstream="u")
    series += hist(TTFT, "a", [(10, 5)] * STEPS, route="-", tenant="-", model="m", upstream="u")
    series += hist(TTFT, "a", [(2, 5)] * STEPS, route="rare", tenant="-", model="m", upstream="u")
    series += requests("a", "llm", "acme", ok=7, upstream_error=3, client_abort=20,
                       client_timeout=20)
    series += requests("a", "llm", "globex", ok=10)
    series += requests("a", "strict", "acme", ok=10, client_abort=20, client_timeout=20)
    series += requests("a", "-", rejected=15)
    series += requests("a", "rare", upstream_error=2)
    stalled = dict(tenant="acme", model="m", upstream="u")
    series.append(gauge("tokentap_stalled_streams", "a", phases(1, 1, 1, 0), route="strict",
                        **stalled))
    series.append(gauge("tokentap_stalled_streams", "a", phases(0, 1, 0, 0), route="strict",
                        **{**stalled, "tenant": "globex"}))
    series.append(gauge("tokentap_stalled_streams", "a", phases(0, 0, 1, 0), route="llm",
                        **stalled))
    series.append(gauge("tokentap_upstream_up", "a", phases(1, 0, 1, 1), route="pool",
                        upstream="http://127.0.0.1:9"))
    series.append(gauge("tokentap_upstream_up", "a", phases(1, 1, 1, 1), route="pool",
                        upstream="http://127.0.0.1:10"))
    errors = [("ErrorRateHigh", "warning", "a", "llm"), ("ErrorRateHigh", "warning", "a", "llm", "acme"),
              ("ErrorRateHigh", "critical", "a", "llm", "acme")]
    weird = [("TTFTHigh", "warning", "a", WEIRD), ("TTFTHigh", "warning", "a", WEIRD, "-")]
    strict = lambda sev: [("TTFTHigh", sev, "a", "strict"), ("TTFTHigh", sev, "a", "strict", "acme")]
    expect = {
        "2m45s": strict("warning") + strict("critical") + errors + weird,
        "5m45s": strict("warning") + strict("critical") + errors + weird +
        [("StreamStalled", "warning", "a", "strict"), ("PoolUnhealthy", "critical", "a", "pool")],
        "8m45s": strict("warning") + errors + weird +
        [("StreamStalled", "warning", "a", "strict"), ("StreamStalled", "warning", "a", "llm")],
        "11m45s": errors + weird,
    }
    tests = "".join(f"""      - expr: ALERTS{{alertstate="firing"}}
        eval_time: {at}
        exp_samples:
{firing(*alerts)}""" for at, alerts in expect.items())
    text = f"""rule_files: [{rules}]
evaluation_interval: 15s
tests:
  - interval: 15s
    input_series:
{chr(10).join(f"      - {{series: '{s.replace(chr(39), chr(39) * 2)}', values: '{' '.join(map(str, v))}'}}"
              for s, v in series)}
    promql_expr_test:
{tests}"""
    path = os.path.join(d, "test.yaml")
    with open(path, "w") as f:
        f.write(text)
    r = subprocess.run([PROMTOOL, "test", "rules", path], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


# ---- both paths, one page ----------------------------------------------------------

LIVE = """tenant: {{header: X-Tenant-Id, header_values: [acme]}}
stats: {{windows: [10s]}}
routes:
  - name: strict
    match: {{path_prefix: /s/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
    thresholds: {{ttft_warning: 50ms, ttft_critical: 100ms, tpot_warning: 20ms,
                 ttfo_warning: 150ms, stall: 1s}}
  - name: llm
    match: {{path_prefix: /l/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
  - name: pool
    match: {{path_prefix: /p/}}
    strip_prefix: true
    upstreams: [{{url: 'http://127.0.0.1:{mock}'}}, {{url: 'http://127.0.0.1:{dead}'}}]
    min_healthy: 2
    health: {{path: /healthz, interval: 200ms, timeout: 500ms, backoff: 60s, backoff_max: 60s}}
slos:
  - {{name: chat, match: {{route: strict}}, ttft: 100ms, objective: 0.9}}
alerts:
  evaluate_every: 500ms
  window: 10s
  min_samples: 3
  per_tenant: true
  thresholds: {{error_rate_warning: 0.2}}
  burn_rates: [{{severity: critical, long: 10s, short: 5s, rate: 2}}]
  burn_min_requests: 3
  notify:
    - {{type: log}}
    - {{type: alertmanager, url: 'http://127.0.0.1:{am}', repeat_interval: 1s}}
"""

# (alertname, severity, the other labels): every condition the traffic below
# makes, each once
LIVE_ALERTS = {
    ("TTFTHigh", "warning", (("route", "strict"),)),
    ("TTFTHigh", "critical", (("route", "strict"),)),
    ("TTFTHigh", "warning", (("route", "strict"), ("tenant", "acme"))),
    ("TTFTHigh", "critical", (("route", "strict"), ("tenant", "acme"))),
    ("TPOTHigh", "warning", (("route", "strict"),)),
    ("TPOTHigh", "warning", (("route", "strict"), ("tenant", "acme"))),
    ("TTFOHigh", "warning", (("route", "strict"),)),
    ("TTFOHigh", "warning", (("route", "strict"), ("tenant", "acme"))),
    ("ErrorRateHigh", "warning", (("route", "llm"),)),
    ("ErrorRateHigh", "warning", (("route", "llm"), ("tenant", "acme"))),
    ("StreamStalled", "warning", (("route", "strict"),)),
    ("PoolUnhealthy", "critical", (("route", "pool"),)),
    ("SLOBurnRate", "critical", (("long_window", "10s"), ("short_window", "5s"), ("slo", "chat"))),
}


def key(labels, instance):
    """An alert's labels as LIVE_ALERTS has them; asserts its instance."""
    labels = dict(labels)
    labels.pop("alertstate", None)
    assert labels.pop("instance", None) == instance, (labels, instance)
    name, sev = labels.pop("alertname"), labels.pop("severity")
    return name, sev, tuple(sorted(labels.items()))


def test_both_paths_page_once_per_condition():
    """tokentap's Alertmanager notifier and a real Prometheus 2.42 running
    the rules --prometheus-rules wrote for the same config, both sending
    to one real Alertmanager: for every condition the traffic makes (TTFT
    over route strict's own 50 / 100 ms where route llm at the same TTFT
    is under its 1 s, TPOT, TTFO, errors, per tenant too, a stalled
    stream, a pool below min_healthy, an SLO burning), both paths fire the
    same alerts, and Alertmanager holds each once: the same alertname,
    severity and labels, instance included, and the same summary.
    Before, the rules said warning where tokentap said critical, and an
    SLOBurnRate from each path had its own labels: two pages."""
    am_port, prom_port, dead = free_port(), free_port(), free_port()
    d = tempfile.mkdtemp(prefix="tt-pages-")
    with open(os.path.join(d, "am.yml"), "w") as f:
        f.write('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    am_args = [ALERTMANAGER, f"--config.file={d}/am.yml", f"--storage.path={d}/am",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="]
    stop = threading.Event()
    with Proc(am_args) as am, Mock() as m:
        conf = LIVE.format(mock=m.port, dead=dead, am=am_port)
        with Tokentap(conf) as t:
            rules = rules_for(d, open(t.conf).read())
            prometheus_yml(d, rules, am_port, t.admin)
            prom = Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                         f"--storage.tsdb.path={d}/data", "--rules.alert.resend-delay=1s",
                         f"--web.listen-address=127.0.0.1:{prom_port}"])
            # a stream whose tokens stop for a minute: stalled from 1 s on
            stalled = socket.create_connection(("127.0.0.1", t.port), timeout=10)
            stalled.sendall(b"POST /s/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                            b"X-Tenant-Id: acme\r\nX-Mock-Stall: 1:60s\r\nX-Mock-Tokens: 3\r\n"
                            b"Content-Length: 2\r\n\r\n{}")

            def traffic():
                slow = ["X-Mock-TTFT: 200ms", "X-Mock-TPOT: 40ms", "X-Mock-Tokens: 3",
                        "X-Mock-Reasoning: 1"]
                fail = ["X-Mock-Fault: status:500"]
                while not stop.is_set():
                    completion(t.port, "/s/v1/chat/completions", headers=["X-Tenant-Id: acme", *slow])
                    completion(t.port, "/l/v1/chat/completions", headers=["X-Tenant-Id: acme", "X-Mock-TTFT: 200ms"])
                    completion(t.port, "/l/v1/chat/completions", headers=["X-Tenant-Id: acme", *fail])

            workers = [threading.Thread(target=traffic) for _ in range(2)]
            try:
                with prom:
                    for w in workers:
                        w.start()
                    wait_port(am_port, 15)
                    wait_port(prom_port, 20)
                    text = t.get("/metrics").text
                    instance = re.search(r'tokentap_alert_instance_info\{alert_instance="([^"]+)"\}',
                                         text).group(1)

                    def ours():
                        return {key(dict(alertname=r["alertname"], severity=r["severity"],
                                         **{k: r[k] for k in ("route", "tenant", "slo",
                                                              "long_window", "short_window")
                                            if r.get(k) is not None}), None)
                                for r in t.get("/alerts", json=True)["rules"]
                                if r["state"] == "firing"}

                    def prometheus():
                        return {key(a["labels"], instance): a["annotations"]["summary"]
                                for a in get(prom_port, "/api/v1/alerts", json=True)["data"]["alerts"]
                                if a["state"] == "firing"}

                    def alertmanager():
                        return get(am_port, "/api/v2/alerts", json=True)

                    until(lambda: ours() == LIVE_ALERTS, 25, f"tokentap fires {LIVE_ALERTS}")
                    until(lambda: set(prometheus()) == LIVE_ALERTS, 25,
                             "Prometheus fires the same")
                    # both have sent (and go on re-sending every second)
                    until(lambda: float(re.search(
                        r"^tokentap_notify_sent_total\{[^}]*\} (\S+)$", t.get("/metrics").text,
                        re.M).group(1)) >= len(LIVE_ALERTS) + 2, 10, "tokentap's sends")
                    until(lambda: sum(float(x) for x in re.findall(
                        r"^prometheus_notifications_sent_total\{[^}]*\} (\S+)$",
                        get(prom_port, "/metrics").text, re.M)) >= 2 * len(LIVE_ALERTS), 10,
                        "Prometheus' sends")
                    time.sleep(2)
                    got = alertmanager()
                    keys = [key(a["labels"], instance) for a in got]
                    assert len(keys) == len(set(keys)) and set(keys) == LIVE_ALERTS, \
                        (len(keys), set(keys) - LIVE_ALERTS, LIVE_ALERTS - set(keys))
                    summaries = prometheus()
                    for a in got:
                        k = key(a["labels"], instance)
                        assert a["annotations"]["summary"] == summaries[k], (a, summaries[k])
                    now = ours()
                    assert now == LIVE_ALERTS, (now - LIVE_ALERTS, LIVE_ALERTS - now)
            finally:
                stop.set()
                for w in workers:
                    if w.is_alive():
                        w.join(15)
                stalled.close()
        assert am.p.poll() is None, am.stderr()[-2000:]


RESTART = """listen:
  - address: 127.0.0.1:{port}
admin:
  address: 127.0.0.1:{admin}
access_log: {d}/access.jsonl
stats: {{windows: [10s]}}
routes:
  - name: strict
    match: {{path_prefix: /s/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
    thresholds: {{ttft_warning: 50ms, ttft_critical: 100ms}}
slos:
  - {{name: chat, match: {{route: strict}}, ttft: 100ms, objective: 0.9}}
alerts:
  evaluate_every: 500ms
  window: 10s
  min_samples: 3
  burn_rates: [{{severity: critical, long: 10s, short: 5s, rate: 2}}]
  burn_min_requests: 3
"""
RESTART_ALERTS = {("TTFTHigh", "warning"), ("TTFTHigh", "critical"), ("SLOBurnRate", "critical")}


def test_restarts_never_re_page():
    """Two restarts of tokentap (two seconds down each: a scrape or two
    fail) while TTFTHigh and SLOBurnRate fire on its rules in a real
    Prometheus, routed by a real Alertmanager to a webhook: each alert is
    notified firing once and never resolved, as its problem never went
    away. Before, the rules lost their instance's name and the SLO's
    objective at the first failed scrape (instant vectors of a target
    marked stale): every alert resolved, then fired again, a second page.
    (Each restart is 7 s; the first already paged again, five took 45 s;
    the second is a restart of a process that came back from one.)"""
    am_port, prom_port, port, admin = free_port(), free_port(), free_port(), free_port()
    d = tempfile.mkdtemp(prefix="tt-repage-")
    hook = Hook()

    def notes():
        """(alertname, severity, status) of each alert of each notification"""
        return [(a["labels"]["alertname"], a["labels"]["severity"], a["status"])
                for _, _, _, body in list(hook.got) for a in body["alerts"]]

    with open(os.path.join(d, "am.yml"), "w") as f:
        f.write(f"""route:
  receiver: hook
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs: [{{url: 'http://127.0.0.1:{hook.port}/', send_resolved: true}}]
""")
    am_args = [ALERTMANAGER, f"--config.file={d}/am.yml", f"--storage.path={d}/am",
               f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="]
    stop = threading.Event()
    with Proc(am_args) as am, Mock() as m:
        conf = os.path.join(d, "tokentap.yaml")
        with open(conf, "w") as f:
            f.write(RESTART.format(port=port, admin=admin, d=d, mock=m.port))
        rules = rules_for(d, open(conf).read())
        prometheus_yml(d, rules, am_port, admin)

        def start():
            p = Proc([binary("tokentap"), "-c", conf])
            wait_port(port, 10, proc=p.p)
            wait_port(admin, 10, proc=p.p)
            return p

        def traffic():
            while not stop.is_set():
                try:
                    completion(port, "/s/v1/chat/completions", ttft="200ms", tokens=2,
                               timeout=5)
                except OSError:
                    time.sleep(0.05)        # tokentap is restarting

        tt = start()
        prom = Proc(["prometheus", f"--config.file={d}/prometheus.yml",
                     f"--storage.tsdb.path={d}/data", "--rules.alert.resend-delay=1s",
                     f"--web.listen-address=127.0.0.1:{prom_port}"])
        workers = [threading.Thread(target=traffic) for _ in range(3)]
        try:
            with prom:
                for w in workers:
                    w.start()
                until(lambda: {(n, s) for n, s, st in notes() if st == "firing"} >= RESTART_ALERTS,
                      60, f"Alertmanager notifies {RESTART_ALERTS}")
                for _ in range(2):
                    tt.stop()
                    # down long enough for a scrape to fail (1 s interval)
                    time.sleep(2.5)
                    tt = start()
                    # back long enough for a few evaluations after it
                    up_since = time.monotonic()
                    until(lambda: time.monotonic() - up_since > 4, 10, "a few evaluations")
                # a resolve in flight reaches the hook within group_interval
                time.sleep(3)
                seen = notes()
                resolved = [x for x in seen if x[2] == "resolved"]
                assert not resolved, seen
                firing = [x for x in seen if x[2] == "firing"]
                assert sorted(set(firing)) == sorted((n, s, "firing") for n, s in RESTART_ALERTS), seen
                # each notified once: no group was notified again
                assert len(firing) == len(set(firing)), seen
        finally:
            stop.set()
            for w in workers:
                if w.is_alive():
                    w.join(15)
            tt.stop()
            hook.__exit__()
        assert am.p.poll() is None, am.stderr()[-2000:]
