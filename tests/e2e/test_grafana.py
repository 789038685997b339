# SPDX-License-Identifier: Apache-2.0
"""The Grafana board (conf/grafana-dashboard.json) against real Prometheus
2.42, one with native histograms and one without, both scraping a tokentap
whose traffic exercises every metric family it exports (pools, SLOs,
stream health, alerts and notifiers, both metric names) and both running
the --prometheus-rules rules: the board plots every family, each query
(every panel's, the annotation's, each variable's) returns data on both,
and each alternative of an `or` (native or classic buckets, tokentap or
OpenTelemetry names, a zero fill) returns data on at least one; a rate of
nothing reads 0, not "No data"; an SLO's alert stays in the alerts table
when a route is picked."""
import json
import os
import re
import socket
import tempfile
import threading
import urllib.parse

from harness import ROOT, Mock, Proc, Tokentap, free_port, get, until, wait_port
from test_alert_rules import rules_for
from peers import Hook

SANITIZER_SKIP = {"test_board_plots_every_family_and_every_query_has_data"}
# and make check: a real Prometheus scraping for seconds is make test's
CHECK_SKIP = SANITIZER_SKIP
BOARD = os.path.join(ROOT, "conf", "grafana-dashboard.json")
VARIABLES = ("instance", "route", "tenant", "model", "upstream")
ROWS = ("Overview", "Latency", "Traffic and errors", "Stream health", "SLOs",
        "Pools and upstreams", "Alerts", "The proxy itself")


def load_board():
    with open(BOARD) as f:
        return json.load(f)


def queries(board):
    """(where, expr) of every PromQL query on the board."""
    out = []
    for p in board["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    for a in board["annotations"]["list"]:
        if "expr" in a:
            out.append(("annotation " + a["name"], a["expr"]))
    return out


def grafana(expr, picked=None):
    """expr as Grafana sends it: $__rate_interval and $__range given, each
    variable All (".*") or the value picked (a regex of one value)."""
    picked = picked or {}
    expr = expr.replace("$__rate_interval", "1m").replace("$__range", "5m")
    for v in VARIABLES:
        expr = expr.replace("$" + v, re.escape(picked[v]) if v in picked else ".*")
    assert "$" not in expr.replace("$1", ""), expr
    return expr


def alternatives(expr):
    """The operands of every `or` in expr, at any depth: each is a query of
    its own."""
    out, start = [], {0: 0}
    cuts = {0: []}
    i, depth, quoted = 0, 0, False
    while i < len(expr):
        c = expr[i]
        if quoted:
            if c == "\\":
                i += 1
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in "({[":
            depth += 1
            start[depth], cuts[depth] = i + 1, []
        elif c in ")}]":
            if cuts[depth]:
                out += operands(expr, start[depth], i, cuts[depth])
            depth -= 1
        elif expr.startswith(" or ", i):
            m = re.match(r" or (on ?\([^)]*\) )?", expr[i:])
            cuts[depth].append((i, i + m.end()))
        i += 1
    if cuts[0]:
        out += operands(expr, 0, len(expr), cuts[0])
    return out


def operands(expr, a, b, cuts):
    out, at = [], a
    for x, y in cuts:
        out.append(expr[at:x].strip())
        at = y
    out.append(expr[at:b].strip())
    return out


def query(port, expr):
    res = get(port, "/api/v1/query?query=" + urllib.parse.quote(expr), json=True)
    assert res["status"] == "success", (expr, res)
    return res["data"]["result"]


def scraped(port):
    """Is Prometheus up (it answers 503 while it starts) and has it scraped?"""
    r = get(port, "/api/v1/query?query=" + urllib.parse.quote("up == 1"))
    assert r.status in (200, 503), (r.status, r.body[:2000])
    return r.status == 200 and r.json()["data"]["result"]


def finite(result):
    """The samples of a query's result that are numbers (NaN plots nothing)."""
    return [r for r in result if r["value"][1] not in ("NaN", "+Inf", "-Inf")]


def check_board(port):
    """Every query of the board runs on the Prometheus at port (data or
    not): the check the other Prometheus tests make of it."""
    for where, expr in queries(load_board()):
        query(port, grafana(expr))


def families(text):
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def used(board, histograms):
    """The metric families the board's queries read."""
    names = set()
    for _, expr in queries(board):
        for n in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", n)
            names.add(base if base in histograms else n)
    return names


def send(port, path, hdrs, keep=False, tenant="acme", model="m1"):
    body = json.dumps({"model": model, "stream": True}).encode()
    head = "".join(f"{h}\r\n" for h in [f"X-Tenant-Id: {tenant}", *hdrs])
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{head}"
              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    if keep:
        return s
    while s.recv(65536):
        pass
    s.close()
    return None


CONF = """tenant: {{header: X-Tenant-Id, header_values: [acme, globex]}}
metrics: {{names: both}}
stats: {{windows: [10s, 1m]}}
routes:
  - name: chat
    match: {{path_prefix: /c/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
    thresholds: {{ttft_warning: 50ms, stall: 300ms}}
  - name: fast
    match: {{path_prefix: /f/}}
    strip_prefix: true
    upstream: http://127.0.0.1:{mock}
    timeouts: {{upstream_keepalive: 100ms}}
  - name: pool
    match: {{path_prefix: /p/}}
    strip_prefix: true
    upstreams: [{{url: 'http://127.0.0.1:{mock}'}}, {{url: 'http://127.0.0.1:{dead}'}}]
    balance: round_robin
    retries: 1
    min_healthy: 2
    health: {{failures: 1, backoff: 60s, backoff_max: 60s}}
slos:
  - {{name: chat, match: {{route: chat}}, ttft: 100ms, objective: 0.9}}
alerts:
  evaluate_every: 500ms
  window: 10s
  min_samples: 2
  thresholds: {{error_rate_warning: 0.5}}
  burn_rates: [{{severity: critical, long: 10s, short: 5s, rate: 2}}]
  burn_min_requests: 2
  notify:
    - {{type: webhook, url: 'http://127.0.0.1:{hook}/h'}}
"""


def prometheus(d, name, target, rules, native):
    port = free_port()
    os.makedirs(os.path.join(d, name))
    conf = os.path.join(d, name, "prometheus.yml")
    with open(conf, "w") as f:
        f.write(f"global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n"
                f"rule_files: [{rules}]\n"
                "scrape_configs:\n  - job_name: tokentap\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{target}']\n")
    args = ["prometheus", f"--config.file={conf}", f"--storage.tsdb.path={d}/{name}/data",
            f"--web.listen-address=127.0.0.1:{port}"]
    if native:
        args.append("--enable-feature=native-histograms")
    p = Proc(args)
    p.port = port
    return p


def test_board_plots_every_family_and_every_query_has_data():
    """How each family gets data: streams with tokens (TTFT, TPOT, ITL,
    duration, tokens, the OpenTelemetry histograms with metrics.names
    both) and a reasoning token first (TTFO); a new upstream connection
    for each of route fast's requests, whose pooled ones are kept 100 ms
    (connect: a rate over a minute has data only while connections are
    opened; once the first burst's were reused it had none, once in a
    fresh machine's run) and the proxy's time (overhead); a 500 (an error, a request
    without a token); TTFT over route chat's 50 ms (threshold_exceeded,
    TTFTHigh firing, and SLO chat's bad requests, SLOBurnRate firing); a
    stream whose tokens stop for a minute (stalls, stalled now); tokens
    in clumps (buffered); a pool with a dead replica (ejections, up 0,
    open streams); a webhook (notifications); the rest (build, process,
    logs lost, stats dropped, metrics series, connections, backlog, the
    alert instance name) are there from the start."""
    board = load_board()
    assert board["uid"] and board["schemaVersion"] >= 36
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", *VARIABLES} <= names, names
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == list(ROWS), rows
    ids, cells = set(), set()
    for p in board["panels"]:
        g = p["gridPos"]
        assert p["id"] not in ids and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        ids.add(p["id"])
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps another panel"
                cells.add((x, y))
        assert p["type"] == "row" or p["targets"], p["title"]

    d = tempfile.mkdtemp(prefix="tt-grafana-")
    dead = free_port()
    with Mock() as m, Hook() as h:
        with Tokentap(CONF.format(mock=m.port, dead=dead, hook=h.port)) as t:
            rules = rules_for(d, open(t.conf).read())
            stop = threading.Event()
            with prometheus(d, "native", t.admin, rules, True) as pn, \
                    prometheus(d, "classic", t.admin, rules, False) as pc:
                for p in (pn, pc):
                    wait_port(p.port, 20)
                    until(lambda: scraped(p.port), 20, "the first scrape")
                stalled = send(t.port, "/c/v1/chat/completions",
                               ["X-Mock-Stall: 1:60s", "X-Mock-Tokens: 3"], keep=True)
                slow = ("/c/v1/chat/completions", ["X-Mock-TTFT: 120ms", "X-Mock-Tokens: 4",
                                                   "X-Mock-Reasoning: 1"], "acme", "m1")
                quick = ("/f/v1/chat/completions", ["X-Mock-TTFT: 5ms", "X-Mock-Tokens: 3"],
                         "globex", "m2")
                fail = ("/c/v1/chat/completions", ["X-Mock-Fault: status:500"], "acme", "m1")
                jobs = [slow] * 4 + [quick] * 4 + [fail] * 2
                jobs += [("/p/v1/chat/completions", ["X-Mock-Tokens: 2"], "acme", "m1")] * 4
                jobs += [("/f/v1/chat/completions", ["X-Mock-TPOT: 30ms", "X-Mock-Clump: 5",
                                                     "X-Mock-Tokens: 40"], "globex", "m2")]

                def more():         # the rates and alerts stay fresh while we look
                    while not stop.wait(0.3):
                        send(t.port, *slow[:2], False, *slow[2:])
                        send(t.port, *quick[:2], False, *quick[2:])
                        send(t.port, *fail[:2], False, *fail[2:])

                threads = [threading.Thread(target=send, args=(t.port, p, hd, False, te, mo))
                           for p, hd, te, mo in jobs] + [threading.Thread(target=more)]
                try:
                    for th in threads:
                        th.start()
                    for th in threads[:-1]:
                        th.join(30)
                    text = t.get("/metrics").text
                    exported = families(text)
                    assert len(exported) >= 44, sorted(exported)
                    hists = set(re.findall(r"^# TYPE (\S+) histogram", text, re.M))
                    plotted = used(board, hists)
                    assert exported - plotted == set(), f"not on the board: {exported - plotted}"
                    assert plotted - exported == {"ALERTS"}, plotted - exported
                    print(f"{len(exported)} families exported, all on the board")
                    # both have scraped it all, and the alerts fire in both paths
                    for p in (pn, pc):
                        for what in ("sum(tokentap_stalls_total) >= 1",
                                     "sum(tokentap_buffered_streams_total) >= 1",
                                     "sum(tokentap_upstream_ejections_total) >= 1",
                                     'ALERTS{alertstate="firing"}',
                                     'tokentap_alert_firing{alertname="SLOBurnRate"} == 1'):
                            until(lambda: query(p.port, what), 20, what)
                    check_queries(board, pn.port, pc.port)
                    check_zeros_and_picks(board, pn.port, pc.port)
                    for p, native in ((pn, 1), (pc, 0)):
                        got = query(p.port, grafana(panel(board, "Histograms")["targets"][0]["expr"]))
                        assert float(got[0]["value"][1]) == native, (native, got)
                finally:
                    stop.set()
                    for th in threads:
                        if th.is_alive():
                            th.join(30)
                    stalled.close()
    assert h.got, "the webhook got nothing"


def check_queries(board, *ports):
    """Every query has data on each Prometheus, every alternative on one,
    within 10 s: a scrape a busy host let time out leaves a gap a rate
    over it may fall in (the upstream connect quantile once had none in a
    full make test, while it always had in runs of its own)."""
    n_alt = 0
    for where, expr in queries(board):
        q = grafana(expr)
        for port in ports:
            until(lambda: finite(query(port, q)), 10, f"{where}: data on :{port}: {q}", 0.5)
        for alt in alternatives(q):
            if alt == "vector(0)":
                continue
            n_alt += 1
            until(lambda: any(finite(query(port, alt)) for port in ports), 10,
                  f"{where}: data for {alt}", 0.5)
    for v in board["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.*), (\w+)\)", v["query"]["query"])
        for port in ports:
            got = query(port, grafana(m.group(1)))
            assert got and all(m.group(2) in r["metric"] for r in got), v["name"]
    print(f"{len(queries(board))} queries, {n_alt} alternatives: data on both Prometheus")


def panel(board, title):
    (p,) = [x for x in board["panels"] if x["title"] == title]
    return p


def check_zeros_and_picks(board, *ports):
    for port in ports:
        # a route with traffic and no error: 0, not "No data"
        rates = {r["metric"]["route"]: float(r["value"][1]) for r in query(
            port, grafana(panel(board, "Error rate by route")["targets"][0]["expr"]))}
        assert rates.get("fast") == 0 and rates.get("chat", 0) > 0, rates
        got = query(port, grafana(panel(board, "Error rate")["targets"][0]["expr"],
                                  {"route": "fast"}))
        assert [float(r["value"][1]) for r in got] == [0], got
        got = query(port, grafana(panel(board, "Stalls/s by route")["targets"][0]["expr"],
                                  {"route": "fast"}))
        assert got and all(float(r["value"][1]) == 0 for r in got), got
        # a route picked: its own alerts and the SLOs' stay in the table
        table = panel(board, "Firing alerts (tokentap)")["targets"][0]["expr"]
        got = {(r["metric"]["alertname"], r["metric"].get("route")) for r in query(
            port, grafana(table, {"route": "chat"}))}
        assert ("SLOBurnRate", None) in got and ("TTFTHigh", "chat") in got, got
        got = query(port, grafana(table, {"route": "fast"}))
        assert {r["metric"]["alertname"] for r in got} == {"SLOBurnRate"}, got
