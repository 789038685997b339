# SPDX-License-Identifier: Apache-2.0
"""The live dashboard at GET /ui, in a real browser: headless Chromium
driven by playwright-core (tests/e2e/ui_check.mjs) against tokentap with
traffic from tokentap-mock. Opened after a load, every chart is full from
tokentap's memory (GET /stats/history), and again after a restart; the
top of the board is the instance's figures as /stats has them; the cards
show what /stats says, coloured as the alert rules stand, the one with a
firing alert first, idle ones folded; nothing is loaded from anywhere but
the admin address; behind admin.token the page asks for the token, once.
The screenshots go to build/ (and to docs/ with UI_SCREENSHOT_DOCS=1)."""
import json
import os
import re
import subprocess
import tempfile
import threading
import time

from harness import ROOT, Mock, Tokentap, completion, get, node_modules, parallel, staircase, \
    until

# make check leaves out what needs Chromium
CHECK_SKIP = {"test_board_opens_full_from_history", "test_dashboard_in_browser",
              "test_dashboard_asks_for_token", "test_slo_panel_in_browser",
              "test_stream_health_badges_and_hints", "test_dashboard_shows_a_pools_replicas",
              "test_card_state_counts_every_alert", "test_board_rates_over_the_time_lived"}


# The browser tests take about 10 s together, so they run in the sanitizer
# pass too: tokentap serves the page under ASan there. All but the board's
# from history, whose 11 s are the clock's (8 s of load, two browsers): the
# history it reads is written, read back after a restart and queried under
# ASan by test_history (survives_restart_and_reload, day_of_1024_series_
# under_load), and the page by the tests here.
SANITIZER_SKIP = {"test_board_opens_full_from_history"}

CHROMIUM = "/usr/bin/chromium"
CHECK = os.path.join(ROOT, "tests", "e2e", "ui_check.mjs")
PAGE = os.path.join(ROOT, "src", "proxy", "ui", "index.html")
PAGE_MAX = 64 * 1024
TOKEN = "s3cret-tok"
SIX = ("--tpot", "4ms", "--tokens", "6")     # the mock's streams: 6 tokens 4 ms apart


def config(fast, slow=None, extra=""):
    slow_route = "" if slow is None else f"""  - name: slow
    match: {{path_prefix: /slow/}}
    upstream: http://127.0.0.1:{slow}
    strip_prefix: true
    thresholds: {{ttft_critical: 1200ms}}
"""
    return f"""{extra}tenant: {{header: X-Tenant-Id}}
routes:
  - name: fast
    match: {{path_prefix: /fast/}}
    upstream: http://127.0.0.1:{fast}
    strip_prefix: true
    thresholds: {{tpot_warning: 10ms}}
{slow_route}stats: {{windows: [1m, 5m]}}
alerts:
  evaluate_every: 500ms
  min_samples: 3
  thresholds: {{ttft_warning: 1000ms, ttft_critical: 2000ms, tpot_warning: 100ms,
               tpot_critical: 200ms, error_rate_warning: 0.05, error_rate_critical: 0.5}}
"""


def traffic(port, jobs):
    """Every (route, model, tenant, mock) at once, mock the X-Mock-*
    headers' values by name (ttft="40ms"): the statuses."""
    return parallel(lambda route, model, tenant, mock: completion(
        port, f"/{route}/v1/chat/completions", model, {"X-Tenant-Id": tenant},
        **(mock or {})).status, jobs, len(jobs))


def wait_firing(t, alertname, severity, route, token=None, timeout=15):
    return until(lambda: next((r for r in t.get("/alerts", token=token, json=True)["rules"]
                               if (r["alertname"], r["severity"], r["route"], r["state"]) ==
                               (alertname, severity, route, "firing")), None), timeout,
                 f"{alertname} {severity} firing")


def browse(plan):
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} missing: run sh tests/deps.sh"
    plan = dict(plan, modules=node_modules(), chromium=CHROMIUM)
    r = subprocess.run(["node", CHECK, json.dumps(plan)], capture_output=True, text=True,
                       timeout=90)
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"ui_check.mjs exit {r.returncode}:\n{r.stdout[-2000:]}\n"
                             f"{r.stderr[-3000:]}")
    assert out.get("error") is None, f"browser stopped at {out['steps'][-1:]}: {out['error']}"
    return out


def parse_ms(text):
    """An RFC 3339 time as tokentap writes it ("2026-12-06T17:28:52.029Z")
    in ms since 1970."""
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


def shown_ms(text):
    """The milliseconds a figure such as "1.50 s" or "40.8 ms" shows."""
    m = re.fullmatch(r"([0-9.]+) (ms|s)", text)
    assert m, f"not a duration: {text!r}"
    return float(m.group(1)) * (1000 if m.group(2) == "s" else 1)


def close(a, b):
    return abs(a - b) <= max(0.01 * abs(b), 0.006)


def group(stats, **key):
    for g in stats["groups"]:
        if all(g.get(k) == v for k, v in key.items()):
            return g
    raise AssertionError(f"no group {key} in {stats['groups']}")


def history_summary(port, rng, route=None, token=None):
    """The summary of one series of GET /stats/history (route None: the
    instance's)."""
    doc = get(port, f"/stats/history?range={rng}", token=token, json=True)
    (s,) = [x for x in doc["series"] if x["route"] == route]
    return s["summary"]


def check_card(card, g, th_ttft, th_tpot, th_err, peak=None):
    """Every figure of one card against its /stats group (all the traffic
    lies in the window and in the range the card shows); the peak against
    the history's (a /stats row's max_active is its busiest group's)."""
    figs = card["figs"]
    want = {"ttft_p50": g["ttft_ms"]["p50"], "ttft_p95": g["ttft_ms"]["p95"],
            "ttft_p99": g["ttft_ms"]["p99"], "tpot_p50": g["tpot_ms"]["p50"],
            "tpot_p95": g["tpot_ms"]["p95"], "error_rate": g["error_rate"],
            "speed": g["output_tokens_per_s"], "active": g["active"],
            "r2": g["ttft_concurrency_r2"]}
    if peak is not None:
        want["max_active"] = peak
    for k, v in want.items():
        got = figs[k]["value"]
        assert (got == "" if v is None else float(got) == v), (k, got, v)
    for k in ("ttft_p50", "ttft_p95", "ttft_p99", "tpot_p50", "tpot_p95"):
        assert close(shown_ms(figs[k]["text"]), want[k]), (k, figs[k], want[k])
    assert close(float(figs["error_rate"]["text"].rstrip(" %")), 100 * g["error_rate"])
    assert figs["errors"]["text"] == f"{g['errors']} of {g['requests']}", figs["errors"]

    def level(v, warn, crit):
        return "critical" if v > crit else "warning" if v > warn else "ok"

    for k in ("ttft_p50", "ttft_p95", "ttft_p99", "tpot_p50", "tpot_p95", "error_rate"):
        th = th_ttft if k.startswith("ttft") else th_tpot if k.startswith("tpot") else th_err
        assert level(want[k], *th) in figs[k]["cls"].split(), (k, figs[k], th)


def test_page_served():
    with open(PAGE, "rb") as f:
        page = f.read()
    assert 4096 < len(page) < PAGE_MAX, len(page)
    text = page.decode()
    # nothing to fetch from elsewhere: no absolute URL, no CSS import
    for bad in ("http://", "https://", "url(", "@import", " src=", "<iframe"):
        assert bad not in text, bad
    with Mock(*SIX) as fast, Tokentap(config(fast.port, extra=f"admin:\n  address: 127.0.0.1:{{admin}}\n"
                                                       f"  token: {TOKEN}\n")) as t:
        for path in ("/ui", "/ui/"):
            code, headers, body = t.get(path)   # no token: the page has no data
            assert code == 200 and body == page, (path, code, len(body))
            assert headers["Content-Type"].startswith("text/html"), headers
            assert "connect-src 'self'" in headers["Content-Security-Policy"], headers
        assert t.get("/ui/config.json").status == 401
        assert t.get("/ui/config.json", token="wrong").status == 401
        assert t.get("/stats").status == 401
        assert t.get("/ui/nope", token=TOKEN).status == 404
        cfg = t.get("/ui/config.json", token=TOKEN, json=True)
        assert cfg["windows"] == ["1m", "5m"], cfg
        assert cfg["history"] == [{"step": "10s", "keep": "1h"}, {"step": "1m", "keep": "1d"}], cfg
        assert cfg["alerts"] == {"window": "1m", "quantile": 0.95, "min_samples": 3}, cfg
        assert [r["name"] for r in cfg["routes"]] == ["fast"], cfg
        assert cfg["routes"][0]["thresholds"] == {
            "ttft_warning_ms": 1000, "ttft_critical_ms": 2000, "tpot_warning_ms": 10,
            "tpot_critical_ms": 200, "error_rate_warning": 0.05, "error_rate_critical": 0.5,
            "ttfo_warning_ms": None, "ttfo_critical_ms": None, "stall_ms": 10000,
            "ttft_uncertain_warning": None, "min_stalled": 1}
    with Mock(*SIX) as fast, Mock(*SIX) as slow, Tokentap(
            config(fast.port, slow.port).replace(
                ", error_rate_warning: 0.05, error_rate_critical: 0.5", "")) as t:
        cfg = t.get("/ui/config.json", json=True)
        th = {r["name"]: r["thresholds"] for r in cfg["routes"]}
        assert th["slow"]["ttft_critical_ms"] == 1200 and th["fast"]["ttft_critical_ms"] == 2000
        assert th["slow"]["ttft_warning_ms"] == 1000, th
        assert th["fast"]["error_rate_warning"] is None and th["fast"]["error_rate_critical"] is None


def test_config_names_the_access_log():
    """/ui/config.json's access_log: the file tokentap writes, absolute
    (tokentap-load --tokentap pairs its requests there by id) and escaped
    (a quote and a backslash in its name); a relative one joined to
    tokentap's working directory; null for stdout."""
    odd = os.path.realpath(tempfile.mkdtemp(prefix='tt "q\\ '))
    with Mock(*SIX) as m:
        path = os.path.join(odd, "a.jsonl")
        with Tokentap(f"access_log: '{path}'\n" + config(m.port)) as t:
            assert t.get("/ui/config.json", json=True)["access_log"] == path
        cd = ("sh", "-c", 'cd "$0" && exec "$@"', odd)
        with Tokentap("access_log: rel.jsonl\n" + config(m.port), wrapper=cd) as t:
            assert t.get("/ui/config.json", json=True)["access_log"] == \
                os.path.join(odd, "rel.jsonl")
        with Tokentap('access_log: "-"\n' + config(m.port)) as t:
            assert t.get("/ui/config.json", json=True)["access_log"] is None


def test_dashboard_in_browser():
    with Mock(*SIX, "--ttft", "40ms") as fast, Mock(*SIX, "--ttft", "1500ms") as slow, \
            Tokentap(config(fast.port, slow.port)) as t:
        # spread out, so that every quantile differs from its neighbours
        jobs = [("fast", "m-fast", "acme" if i % 2 else "beta",
                 {"ttft": f"{10 * i}ms", "tpot": "30ms" if i % 4 == 0 else "2ms"})
                for i in range(1, 21)]
        jobs += [("fast", "m-fast", "acme", {"fault": "status:500"})] * 2
        jobs += [("slow", "m-slow", "acme", None)] * 4
        statuses = traffic(t.port, jobs)
        assert statuses == [200] * 20 + [500] * 2 + [200] * 4, statuses
        rule = wait_firing(t, "TTFTHigh", "critical", "slow")
        wait_firing(t, "ErrorRateHigh", "warning", "fast")
        shots = [os.path.join(ROOT, "build", "ui-dash.png")]
        for s in shots:
            if os.path.exists(s):
                os.unlink(s)
        out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["fast", "slow"],
                      "firing": {"alertname": "TTFTHigh", "severity": "critical",
                                 "route": "slow"},
                      "range": "5m", "expand": "slow", "screenshot": shots,
                      "dark": True, "mobile": True, "reload": True})
        # no traffic since: these are the figures the page polled
        stats = t.get("/stats?window=5m&by=route", json=True)
        tenants = t.get("/stats?window=5m&by=route,tenant", json=True)
        models = t.get("/stats?window=5m&by=route,model", json=True)
        alerts = t.get("/alerts", json=True)
        peaks = {r: history_summary(t.admin, "5m", r)["max_active"] for r in ("fast", "slow")}

    assert out["console"] == [], out["console"]
    admin = f"http://127.0.0.1:{t.admin}/"
    strays = [r["url"] for r in out["requests"]
              if not r["url"].startswith(admin) and not r["url"].startswith("data:")]
    assert strays == [], strays
    paths = [r["url"][len(admin) - 1:] for r in out["requests"]]
    # the whole range when it opens or the range changes, then the points
    # from the last two on; the live figures from the longest window within
    for p in ("/ui", "/ui/config.json", "/stats/history?range=1h", "/stats/history?range=5m",
              "/stats?window=5m&by=route", "/stats?window=5m&by=route,tenant",
              "/stats?window=5m&by=route,model", "/alerts"):
        assert p in paths, (p, paths)
    assert any(p.startswith("/stats/history?range=5m&since=") for p in paths), paths
    # one /alerts a poll: polls 2 s apart but for the three the test caused
    # (choosing a window, opening a card, reloading)
    polls = [r["t"] for r in out["requests"] if r["url"] == admin + "alerts"]
    assert sum(b - a < 1900 for a, b in zip(polls, polls[1:])) <= 3, polls
    assert out["windows"] == ["1m", "5m", "1h", "1d"], out["windows"]
    assert out["range"] == "5m" and out["window"] == "5m", (out["range"], out["window"])

    fast = group(stats, route="fast")
    q, p = fast["ttft_ms"], fast["tpot_ms"]
    assert q["p50"] < q["p90"] < q["p95"] < q["p99"] and p["p50"] < p["p95"], (q, p)
    cards = out["cards"]
    assert set(cards) == {"fast", "slow"}, cards.keys()
    check_card(cards["fast"], group(stats, route="fast"), (1000, 2000), (10, 200), (0.05, 0.5),
               peaks["fast"])
    check_card(cards["slow"], group(stats, route="slow"), (1000, 1200), (100, 200), (0.05, 0.5),
               peaks["slow"])
    # the route's own ttft_critical (1200ms) beats the global one (2000ms)
    assert "critical" in cards["slow"]["figs"]["ttft_p95"]["cls"].split()
    assert cards["slow"]["state"] == "critical" and cards["fast"]["state"] == "warning", \
        (cards["slow"]["state"], cards["fast"]["state"])
    assert "warning" in cards["fast"]["figs"]["error_rate"]["cls"].split()
    assert "ok" in cards["fast"]["figs"]["ttft_p95"]["cls"].split()
    # the route's tpot_warning (10ms) lies between its TPOT P50 (2 ms) and P95 (30 ms)
    assert "ok" in cards["fast"]["figs"]["tpot_p50"]["cls"].split()
    assert "warning" in cards["fast"]["figs"]["tpot_p95"]["cls"].split()
    # one burst of traffic: a point or two of 10 s in every chart
    for name, c in cards.items():
        assert min(c["charts"]) >= 1, (name, c["charts"])

    slow = cards["slow"]
    assert slow["expanded"] and not cards["fast"]["expanded"]
    assert [r["key"] for r in slow["detail"]["tenant"]] == ["acme"], slow["detail"]
    assert [r["key"] for r in slow["detail"]["model"]] == ["m-slow"], slow["detail"]
    assert float(slow["detail"]["tenant"][0]["cells"][2]) == \
        group(tenants, route="slow", tenant="acme")["ttft_ms"]["p95"]
    assert float(slow["detail"]["model"][0]["cells"][2]) == \
        group(models, route="slow", model="m-slow")["ttft_ms"]["p95"]

    firing = [f for f in out["firing"] if f["state"] == "firing"]
    want = {(r["alertname"], r["severity"], r["route"], r["since"])
            for r in alerts["rules"] if r["state"] == "firing"}
    assert {(f["alertname"], f["severity"], f["route"], f["since"]) for f in firing} == want
    assert ("TTFTHigh", "critical", "slow", rule["since"]) in want
    assert len(out["transitions"]) == min(25, len(alerts["transitions"])) > 0

    for s in shots:
        with open(s, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", s
        assert os.path.getsize(s) > 20000, s
    dark = [int(x) for x in re.findall(r"\d+", out["dark_bg"])[:3]]
    light = [int(x) for x in re.findall(r"\d+", out["light_bg"])[:3]]
    assert sum(dark) < 150 < 600 < sum(light), (out["dark_bg"], out["light_bg"])
    m = out["mobile"]
    assert m["scroll_width"] <= m["width"] and m["card_width"] <= m["width"], m
    assert out["asks"] == 0 and out["prompted_after_reload"] is False


def test_dashboard_asks_for_token():
    admin = f"admin:\n  address: 127.0.0.1:{{admin}}\n  token: {TOKEN}\n"
    with Mock(*SIX, "--ttft", "30ms") as fast, Tokentap(config(fast.port, extra=admin)) as t:
        assert traffic(t.port, [("fast", "m", "acme", None)] * 3) == [200] * 3
        out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["fast"],
                      "tokens": ["not-the-token", TOKEN], "reload": True})
        stats = t.get("/stats?window=1m&by=route", token=TOKEN, json=True)

    assert len(out["prompts"]) == 2 and out["asks"] == 2, (out["asks"], out["prompts"])
    assert "refused" not in out["prompts"][0] and "refused" in out["prompts"][1], out["prompts"]
    assert out["prompted_after_reload"] is False
    assert out["storage"] == {"token": TOKEN, "local": 0}, out["storage"]
    assert float(out["cards"]["fast"]["figs"]["ttft_p95"]["value"]) == \
        group(stats, route="fast")["ttft_ms"]["p95"]
    # the refused fetches are the only errors the browser reports
    assert all("401" in m for m in out["console"]), out["console"]
    base = f"http://127.0.0.1:{t.admin}"
    api = [r for r in out["requests"] if not r["url"].startswith(base + "/ui")
           or r["url"].startswith(base + "/ui/config.json")]
    assert all(r["url"].startswith(base + "/") for r in out["requests"]), out["requests"]
    assert all(TOKEN not in r["url"] for r in out["requests"])
    authed = [r for r in api if r["auth"] == "Bearer " + TOKEN]
    assert len(authed) >= 4, api
    # once the right token was given, every data request carries it
    first = api.index(authed[0])
    assert all(r["auth"] == "Bearer " + TOKEN for r in api[first:]), api[first:]
    assert api[0]["auth"] is None and api[0]["url"] == base + "/ui/config.json", api[0]


def test_slo_panel_in_browser():
    """The SLO panel: per SLO the attainment against its objective, the
    budget left, each burn-rate pair and the goodput, as /slo says; a
    firing SLOBurnRate on top; the headroom on the route card. The
    screenshot goes to build/ui-slo.png (docs/ui-slo.png with
    UI_SCREENSHOT_DOCS=1)."""
    slos = """slos:
  - {name: chat, class: chat, match: {route: fast}}
  - {name: slow-chat, ttft: 300ms, tpot: 50ms, objective: 0.95, match: {route: slow}}
"""
    with Mock(*SIX, "--ttft", "40ms", "--ttft-per-stream", "25ms", "--tokens", "60") as fast, \
            Mock(*SIX, "--ttft", "700ms") as slow, \
            Tokentap(config(fast.port, slow.port).replace(
                "  evaluate_every: 500ms\n", "  evaluate_every: 500ms\n  burn_min_requests: 3\n"
                # short windows of a minute: the slow requests still burn in
                # them however long the browser takes to start
                "  burn_rates:\n    - {severity: critical, long: 2m, short: 1m, rate: 4}\n"
                "    - {severity: warning, long: 5m, short: 1m, rate: 2}\n")
                .replace("    thresholds: {tpot_warning: 10ms}\n",
                         "    thresholds: {tpot_warning: 10ms, ttft_warning: 250ms}\n") + slos) as t:
        for _ in range(2):
            staircase(t.port, "/fast/v1/chat/completions", 6)
        assert traffic(t.port, [("slow", "m-slow", "acme", None)] * 5) == [200] * 5
        shots = [os.path.join(ROOT, "build", "ui-slo.png")]
        if os.environ.get("UI_SCREENSHOT_DOCS") == "1":
            shots.append(os.path.join(ROOT, "docs", "ui-slo.png"))
        for s in shots:
            if os.path.exists(s):
                os.unlink(s)
        out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["fast", "slow"],
                      "slos": ["chat", "slow-chat"], "range": "1m",
                      "slo_firing": {"slo": "slow-chat", "severity": "critical"},
                      "screenshot": shots})
        read = time.time() * 1000
        doc = t.get("/slo", json=True)
        stats = t.get("/stats?window=1m&by=route", json=True)

    assert out["console"] == [], out["console"]
    assert out["slo_hidden"] is False
    rows = out["slos"]
    assert list(rows) == ["chat", "slow-chat"], rows
    for s in doc["slos"]:
        row, w = rows[s["name"]], s["windows"][0]
        assert w["window"] == out["window"] == "1m"
        assert float(row["cells"]["attainment"]["value"]) == w["attainment"], (row, w)
        pct = 100 * w["attainment"]
        assert row["cells"]["attainment"]["text"].startswith(f"{pct:.{1 if pct >= 10 else 2}f} %")
        assert f"{w['good']} of {w['eligible']} good" in row["cells"]["attainment"]["text"]
        assert float(row["cells"]["objective"]["value"]) == s["objective"]
        assert float(row["cells"]["budget"]["value"]) == s["budget"]["remaining"]
        # good over the time the window covers: all of it, or since the start
        lo, hi = out["opened"] - parse_ms(stats["since"]), read - parse_ms(stats["since"])
        gp = float(row["cells"]["goodput"]["value"])
        if lo >= 60e3:
            assert gp == w["goodput_per_s"], (gp, w)
        else:
            assert w["good"] / (hi / 1000) * 0.99 <= gp <= w["good"] / (max(lo, 1) / 1000) * 1.01 \
                or (hi >= 60e3 and gp == w["goodput_per_s"]), (gp, w, lo, hi)
        assert [b["long_window"] for b in row["burns"]] == ["2m", "5m"]
    chat, slow_chat = rows["chat"], rows["slow-chat"]
    assert chat["state"] == "ok" and slow_chat["state"] == "critical", (chat, slow_chat)
    assert "TTFT ≤ 300 ms · TPOT ≤ 50.0 ms" in chat["cells"]["targets"]["text"], chat
    assert "route fast" in chat["cells"]["name"]["text"]
    assert "overspent" in slow_chat["cells"]["budget"]["text"], slow_chat
    assert [b["state"] for b in slow_chat["burns"]] == ["firing", "firing"], slow_chat["burns"]
    assert float(chat["cells"]["attainment"]["value"]) == 1.0
    firing = [f for f in out["firing"] if f["alertname"] == "SLOBurnRate"]
    assert {f["severity"] for f in firing} == {"critical", "warning"}, out["firing"]
    assert all("on SLO slow-chat · burn " in f["text"] for f in firing), firing
    # the headroom: (250 - 40) / 25 = 8.4 streams on a quiet host, as /stats says
    g = group(stats, route="fast")
    hr = out["cards"]["fast"]["figs"]["headroom"]
    # (test_slo checks the line itself; a busy host moves it)
    assert g["headroom_streams"] is not None, g
    assert float(hr["value"]) == g["headroom_streams"]
    # Math.round: halves up (Python's round would take 8.5 to 8)
    assert hr["text"] == f"about {int(g['headroom_streams'] + 0.5)} streams", hr
    # the slow route's TTFT does not follow the load: whatever its line says
    gs, hs = group(stats, route="slow"), out["cards"]["slow"]["figs"]["headroom"]
    assert hs["text"] == ("–" if gs["headroom_streams"] is None
                          else f"about {int(gs['headroom_streams'] + 0.5)} streams"), (hs, gs)
    for s in shots:
        with open(s, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", s


def test_stream_health_badges_and_hints():
    """A stream stalled behind heartbeats shows a "1 stalled" badge while it
    lasts; streams through a buffering hop bring a hint naming the causes;
    requests without a token and stalls get theirs; TTFO P95 is /stats'."""
    import subprocess as sp
    from relay import FlushingRelay
    with Mock(*SIX) as m, FlushingRelay(m.port, 0.2) as relay:
        conf = f"""routes:
  - name: think
    match: {{path_prefix: /think/}}
    upstream: http://127.0.0.1:{m.port}
    strip_prefix: true
    thresholds: {{ttfo_warning: 100ms, ttfo_critical: 5s}}
  - name: hop
    match: {{path_prefix: /hop/}}
    upstream: http://127.0.0.1:{relay.port}
    strip_prefix: true
  - name: stall
    match: {{path_prefix: /stall/}}
    upstream: http://127.0.0.1:{m.port}
    strip_prefix: true
    thresholds: {{stall: 1s}}
"""
        with Tokentap(conf) as t:
            for _ in range(3):
                traffic(t.port, [("think", "m", "a", {"reasoning": 4, "tokens": 6, "tpot": "40ms",
                                                      "ttft": "10ms"})])
            traffic(t.port, [("think", "m", "a", {"tokens": 0, "ttft": "10ms"})])
            for _ in range(2):
                traffic(t.port, [("hop", "m", "a", {"tokens": 30, "tpot": "20ms", "ttft": "10ms"})])
            stuck = sp.Popen(["curl", "-sN", "-d", '{"model":"m","stream":true}',
                              "-H", "X-Mock-Stall: 2:20s", "-H", "X-Mock-Heartbeat: 300ms",
                              "-H", "X-Mock-Tokens: 4", "-H", "X-Mock-TTFT: 10ms",
                              t.url("/stall/v1/chat/completions")], stdout=sp.DEVNULL)
            try:
                out = browse({"url": f"http://127.0.0.1:{t.admin}/ui",
                              "routes": ["think", "hop", "stall"],
                              "firing": {"alertname": "StreamStalled", "severity": "warning",
                                         "route": "stall"},
                              "wait": ['#cards .card[data-route="stall"] '
                                       '[data-k="stalled"]:not([hidden])',
                                       '#cards .card[data-route="hop"] '
                                       '[data-k="hint_buffered"]:not([hidden])']})
                st = t.get("/stats?window=1h", json=True)
            finally:
                stuck.kill()
                stuck.wait()
        cards = out["cards"]
        assert cards["stall"]["figs"]["stalled"]["text"] == "1 stalled", cards["stall"]["figs"]
        assert cards["stall"]["state"] == "warning", cards["stall"]["state"]
        assert cards["think"]["figs"]["stalled"]["value"] == "0"
        hop = cards["hop"]["figs"]["hint_buffered"]["text"]
        assert "clumps on 100.0 % of the streams (2)" in hop and "buffers or flushes on a timer" in hop, hop
        assert cards["think"]["figs"]["hint_buffered"]["text"] == ""
        nt = cards["think"]["figs"]["hint_no_token"]["text"]
        assert nt == "Requests that ended without a single token: 1 ok.", nt
        ttfo = group(st, route="think")["ttfo_ms"]["p95"]
        f = cards["think"]["figs"]["ttfo_p95"]
        assert float(f["value"]) == ttfo and close(shown_ms(f["text"]), ttfo), (f, ttfo)
        assert "warning" in f["cls"].split(), f          # over ttfo_warning 100ms
        assert cards["think"]["figs"]["overhead"]["text"].endswith("µs"), cards["think"]["figs"]
        # the share of uncertain TTFTs, as /stats has it (every TTFT stamped)
        u = group(st, route="think")["ttft_uncertain_share"]
        f = cards["think"]["figs"]["ttft_uncertain"]
        assert u is not None and float(f["value"]) == u and f["text"].endswith(" %"), (f, u)
        assert not out["console"], out["console"]


def test_dashboard_shows_a_pools_replicas():
    """A route of several replicas: its card lists them with what /stats
    says (state, open streams), an ejected one marked; PoolUnhealthy shows
    in the alert list as below its minimum; a pool of one shows no list."""
    with Mock(*SIX) as a, Mock(*SIX, "--fault", "status:503") as b, Mock(*SIX) as one:
        yaml = (f"routes:\n  - name: pool\n    match: {{path_prefix: /pool/}}\n"
                f"    upstreams: [{{url: http://127.0.0.1:{a.port}}}, {{url: http://127.0.0.1:{b.port}}}]\n"
                f"    min_healthy: 2\n    health: {{path: /health, interval: 200ms, backoff: 30s, "
                f"backoff_max: 30s}}\n"
                f"  - name: one\n    upstream: http://127.0.0.1:{one.port}\n"
                f"alerts: {{evaluate_every: 200ms}}\n")
        with Tokentap(yaml) as t:
            ua, ub = f"http://127.0.0.1:{a.port}", f"http://127.0.0.1:{b.port}"
            wait_firing(t, "PoolUnhealthy", "critical", "pool")
            out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["pool", "one"],
                          "firing": {"alertname": "PoolUnhealthy", "severity": "critical",
                                     "route": "pool"},
                          "pool": {"route": "pool", "state": {ua: "healthy", ub: "ejected"}}})
            pools = {p["route"]: p for p in t.get("/stats", json=True)["pools"]}
    assert out["console"] == [], out["console"]
    card = out["cards"]["pool"]
    assert card["pool_shown"] and card["pool_title"].startswith("1 of 2 healthy"), card
    want = [(u["upstream"], u["state"]) for u in pools["pool"]["upstreams"]]
    assert [(r["upstream"], r["state"]) for r in card["replicas"]] == want
    assert card["replicas"][1]["cells"][4] != "", card["replicas"]    # ejected for
    assert not out["cards"]["one"]["pool_shown"]
    (f,) = [f for f in out["firing"] if f["alertname"] == "PoolUnhealthy"]
    assert "healthy replicas 1 < 2" in f["text"], f


TRUTH = """routes:
  - name: burn
    match: {{path_prefix: /burn/}}
    upstream: http://127.0.0.1:{mock}
    strip_prefix: true
  - name: down
    match: {{path_prefix: /down/}}
    upstream: http://127.0.0.1:{mock}
    strip_prefix: true
  - name: fine
    match: {{path_prefix: /fine/}}
    upstream: http://127.0.0.1:{mock}
    strip_prefix: true
stats: {{windows: [1m, 5m]}}
alerts:
  evaluate_every: 500ms
  min_samples: 3
  burn_min_requests: 3
  burn_rates: [{{severity: critical, long: 2m, short: 1m, rate: 4}}]
slos:
  - {{name: burn-chat, ttft: 5ms, objective: 0.9, match: {{route: burn}}}}
  - {{name: fine-chat, ttft: 2s, objective: 0.9, match: {{route: fine}}}}
"""


def test_card_state_counts_every_alert():
    """A route whose only firing alert is its SLO's burn rate (SLOBurnRate
    has no route label: the SLO names the route) is not "ok"; a route that
    fails every request is critical with no error-rate rule set (none is
    here: the defaults have none), its error rate red; a healthy one ok."""
    with Mock(*SIX, "--ttft", "20ms") as m, Tokentap(TRUTH.format(mock=m.port)) as t:
        assert traffic(t.port, [("burn", "m", "a", None)] * 5 + [("fine", "m", "a", None)] * 5
                       + [("down", "m", "a", {"fault": "status:500"})] * 5) == \
            [200] * 10 + [500] * 5
        until(lambda: [r for r in t.get("/alerts", json=True)["rules"]
                       if r["alertname"] == "SLOBurnRate" and r["state"] == "firing"],
              15, "SLOBurnRate firing")
        out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["burn", "down", "fine"],
                      "slo_firing": {"slo": "burn-chat", "severity": "critical"}})
        alerts = t.get("/alerts", json=True)
        cfg = t.get("/ui/config.json", json=True)
    assert out["console"] == [], out["console"]
    firing = [r for r in alerts["rules"] if r["state"] == "firing"]
    # what the test stands on: the burn alert alone fires, and on no route;
    # no error-rate rule is set
    assert [(r["alertname"], r["route"], r["slo"]) for r in firing] == \
        [("SLOBurnRate", None, "burn-chat")], firing
    th = {r["name"]: r["thresholds"] for r in cfg["routes"]}["down"]
    assert th["error_rate_warning"] is None and th["error_rate_critical"] is None, th
    cards = out["cards"]
    assert cards["burn"]["state"] == "critical", cards["burn"]["state"]
    assert cards["burn"]["figs"]["firing"]["value"] == "1", cards["burn"]["figs"]
    down = cards["down"]
    assert down["state"] == "critical", (down["state"], down["figs"]["error_rate"])
    assert "critical" in down["figs"]["error_rate"]["cls"].split(), down["figs"]["error_rate"]
    assert down["figs"]["failing"]["text"] == "100.0 % of requests fail", down["figs"]["failing"]
    assert cards["fine"]["state"] == "ok", cards["fine"]["state"]
    assert cards["fine"]["figs"]["failing"]["text"] == ""
    assert out["order"][2] == "fine", out["order"]


def test_board_rates_over_the_time_lived():
    """On a process younger than the range (the default hour), a rate is
    what was served over the time it lived, not diluted by the empty rest
    of the hour: the top's throughput (every stream's output tokens per
    second, beside the per-stream speed) and an SLO's goodput, against
    /stats' and /slo's counts over the time between the process's start
    and the page's read; the notes say "since start". With 1,000 errors
    (a 4-digit count), and then with the widest figures the board can
    show, no figure runs into another at a desktop's and a phone's width."""
    with Mock(*SIX, "--ttft", "20ms") as m:
        before = time.time() * 1000
        with Tokentap(TRUTH.format(mock=m.port)) as t:
            n_ok, n_err = 12, 1000
            statuses = traffic(t.port, [("fine", "m", "a", None)] * n_ok)
            statuses += parallel(lambda i: completion(t.port, "/down/v1/chat/completions", "m",
                                                      fault="status:500").status,
                                 [(i,) for i in range(n_err)], 16)
            assert statuses == [200] * n_ok + [500] * n_err, statuses[:20]
            # every request counted before the page opens
            stats0 = until(lambda: (lambda st: st if st["instance"]["requests"] == n_ok + n_err
                                    else None)(t.get("/stats?window=5m", json=True)), 10,
                           "the requests in /stats")
            until(lambda: [w for s in t.get("/slo", json=True)["slos"] if s["name"] == "fine-chat"
                           for w in s["windows"] if w["window"] == "5m" and w["good"] == n_ok],
                  10, "the good requests in /slo")
            out = browse({"url": f"http://127.0.0.1:{t.admin}/ui", "routes": ["fine", "down"],
                          "slos": ["fine-chat"], "overlap": [1280, 390]})
            read = time.time() * 1000
            stats = t.get("/stats?window=5m", json=True)
            slo = t.get("/slo", json=True)
    assert out["console"] == [], out["console"]
    since = parse_ms(stats["since"])
    # /stats' windows began as the process started, and not since
    assert before - 1 <= since <= parse_ms(stats0["generated_at"]), (before, stats0)
    assert stats["since"] == stats0["since"], (stats0["since"], stats["since"])
    # the page read between its opening and the test's read after it (the
    # times are whole ms)
    lo, hi = out["opened"] - since - 2, read - since + 2
    assert 0 < lo < hi < 600e3, (lo, hi)
    figs = out["board"]["figs"]
    assert out["range"] == "1h", out["range"]
    tokens = stats["instance"]["output_tokens"]
    assert tokens == 6 * n_ok, stats["instance"]
    tp = figs["throughput"]
    assert int(tp["tokens"]) == tokens, tp
    ms = float(tp["ms"])
    assert lo <= ms <= hi, (ms, lo, hi)
    assert abs(float(tp["value"]) - tokens / (ms / 1000)) < 1e-9 * tokens, tp
    assert tokens / (hi / 1000) <= float(tp["value"]) <= tokens / (lo / 1000), (tp, lo, hi)
    shown = float(tp["text"].split()[0])
    assert tp["text"].endswith(" tok/s") and abs(shown - float(tp["value"])) <= \
        0.5 * 10 ** -(2 if shown < 10 else 1 if shown < 100 else 0) + 1e-9, tp
    # beside it, and named apart: one stream's speed
    assert float(figs["speed"]["value"]) == stats["instance"]["output_tokens_per_s"]
    assert out["board"]["young"] and out["notes"]["board"].startswith("since start, "), out["notes"]
    assert out["notes"]["routes"].startswith("since start, "), out["notes"]
    # the SLO's goodput: good requests over the time the window lived
    (w,) = [x for x in next(s for s in slo["slos"] if s["name"] == "fine-chat")["windows"]
            if x["window"] == "5m"]
    assert w["good"] == n_ok, w
    gp = float(out["slos"]["fine-chat"]["cells"]["goodput"]["value"])
    assert n_ok / (hi / 1000) <= gp <= n_ok / (lo / 1000), (gp, lo, hi)
    assert "since start, " in out["notes"]["slos"], out["notes"]
    # nothing runs into anything, as served (1000 errors in the top's
    # count) and at the widest
    assert f"{n_err} of {n_ok + n_err}" in figs["errors"]["text"], figs["errors"]
    assert [o["width"] for o in out["overlap"]] == [1280, 390], out["overlap"]
    for o in out["overlap"]:
        for k in ("served", "widest"):
            r = o[k]
            assert r["lists"] >= 3 and r["figures"] >= 30, (o["width"], k, r)
            assert r["meet"] == [] and r["out"] == [], (o["width"], k, r)
        assert "123456 of 123456" in "".join(o["widest"]["texts"]), o["widest"]["texts"]


# The board's test: a load of LOAD_S seconds on 1 s steps, then the page.
# The shipped steps are 10 s for an hour; a page opened after 3 minutes of
# load there shows 18 points a chart, all from the history, as this one
# shows LOAD_S: the same code reads and draws them, only the step differs.
# The checks' slack is seconds at each end (check_charts), not a share, so
# 8 s leaves 5 points at least, as 15 s left 12: a chart drawn from the
# live windows only, or from the last seconds, fails either way.
LOAD_S = 8
TIME_LIMITS = {"test_board_opens_full_from_history": 200}

BOARD = """workers: 1
routes:
  - name: chat
    match: {{path_prefix: /chat/}}
    upstream: http://127.0.0.1:{fast}
    strip_prefix: true
  - name: slow
    match: {{path_prefix: /slow/}}
    upstream: http://127.0.0.1:{slow}
    strip_prefix: true
    thresholds: {{ttft_warning: 300ms, ttft_critical: 500ms}}
  - name: quiet
    match: {{path_prefix: /quiet/}}
    upstream: http://127.0.0.1:{fast}
stats:
  windows: [1m, 10m]
  history: [{{step: 1s, keep: 1m}}, {{step: 10s, keep: 10m}}]
  history_file: {hist}
alerts:
  evaluate_every: 500ms
  min_samples: 3
  thresholds: {{error_rate_warning: 0.2}}
slos:
  - {{name: chat, ttft: 80ms, objective: 0.9, match: {{route: chat}}}}
"""


def load_for(port, seconds):
    """Three clients on chat (TTFT 20-95 ms, one in 13 a 500), two on slow
    (TTFT 600 ms), for that long; returns the wall times it began and
    ended (ms)."""
    begun = time.time() * 1000
    stop = time.monotonic() + seconds

    def chat(k):
        i = k
        while time.monotonic() < stop:
            i += 3
            completion(port, "/chat/v1/chat/completions", "m",
                       {"X-Tenant-Id": "acme" if i % 2 else "beta"},
                       **({"TTFT": f"{20 + (i * 7) % 75}ms", "TPOT": f"{2 + i % 5}ms"} if i % 13
                          else {"Fault": "status:500"}))

    def slow():
        while time.monotonic() < stop:
            completion(port, "/slow/v1/chat/completions", "m", {"X-Tenant-Id": "acme"},
                       TTFT="600ms")

    ts = [threading.Thread(target=chat, args=(k,)) for k in range(3)]
    ts += [threading.Thread(target=slow) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return begun, time.time() * 1000


def check_charts(charts, begun, ended, opened, where):
    """Each chart holds the load, from its first second to its last, drawn
    from points older than the page."""
    for name, c in charts.items():
        assert c["drawn"] and c["points"] >= LOAD_S - 3, (where, name, c)
        assert c["from"] <= begun + 1500 and c["to"] >= ended - 2500, (where, name, begun, ended, c)
        assert opened - c["from"] >= (LOAD_S - 3) * 1000, (where, name, opened, c)


def test_board_opens_full_from_history():
    hist = os.path.join(tempfile.mkdtemp(prefix="tt-hist-"), "history")
    shots = [os.path.join(ROOT, "build", "ui.png")]
    phone = [[os.path.join(ROOT, "build", "ui-phone.png"), None],
             [os.path.join(ROOT, "build", "ui-phone-slo.png"), "#slo-section"]]
    if os.environ.get("UI_SCREENSHOT_DOCS") == "1":
        os.makedirs(os.path.join(ROOT, "docs"), exist_ok=True)
        shots.append(os.path.join(ROOT, "docs", "ui.png"))
        phone += [[os.path.join(ROOT, "docs", "ui-phone.png"), None],
                  [os.path.join(ROOT, "docs", "ui-phone-slo.png"), "#slo-section"]]
    for s in shots + [p for p, _ in phone]:
        if os.path.exists(s):
            os.unlink(s)
    with Mock(*SIX) as fast, Mock(*SIX) as slow:
        yaml = BOARD.format(fast=fast.port, slow=slow.port, hist=hist)
        with Tokentap(yaml) as t:
            begun, ended = load_for(t.port, LOAD_S)
            out = browse({"url": f"http://127.0.0.1:{t.admin}/ui",
                          "routes": ["chat", "slow", "quiet"], "range": "1m",
                          "firing": {"alertname": "TTFTHigh", "severity": "critical",
                                     "route": "slow"},
                          "screenshot": shots, "mobile": True, "phone_screenshot": phone})
            # no traffic since: what the page read
            stats = t.get("/stats?window=1m", json=True)
            doc = t.get("/stats/history?range=1m", json=True)
            assert t.stop() == 0
        assert os.path.getsize(hist) > 0
        with Tokentap(yaml) as t:
            again = browse({"url": f"http://127.0.0.1:{t.admin}/ui",
                            "routes": ["chat", "slow", "quiet"], "range": "1m"})
            after = t.get("/stats?window=1m", json=True)
            err = t.stderr()

    for o in (out, again):
        assert o["console"] == [], o["console"]
        admin = "http://127.0.0.1:"
        assert all(r["url"].startswith(admin) for r in o["requests"]), o["requests"]
    # every chart full on open: the board's four and each busy route's
    check_charts(out["board"]["charts"], begun, ended, out["opened"], "board")
    for route in ("chat", "slow"):
        check_charts(out["cards"][route]["chart"], begun, ended, out["opened"], route)
    assert out["cards"]["quiet"]["chart"]["rate"]["points"] == 0
    # what is drawn is the history's: the instance's TTFT at the alert quantile
    (inst,) = [x for x in doc["series"] if x["route"] is None]
    drawn = [v for v in out["board"]["charts"]["ttft"]["values"] if v is not None]
    assert drawn == [v for v in inst["points"]["ttft_ms"]["p95"] if v is not None], drawn
    assert sum(inst["points"]["requests"]) == stats["instance"]["requests"] > 100

    # the top of the board is the instance's row of /stats
    figs, g = out["board"]["figs"], stats["instance"]
    assert out["board"]["range"] == "1m", out["board"]
    for k, v in {"ttft_p50": g["ttft_ms"]["p50"], "ttft_p95": g["ttft_ms"]["p95"],
                 "ttft_p99": g["ttft_ms"]["p99"], "tpot_p50": g["tpot_ms"]["p50"],
                 "tpot_p95": g["tpot_ms"]["p95"], "speed": g["output_tokens_per_s"],
                 "error_rate": g["error_rate"], "active": stats["active_streams"],
                 "max_active": stats["max_active_streams"]}.items():
        assert float(figs[k]["value"]) == v, (k, figs[k], v)
    for k in ("ttft_p50", "ttft_p95", "ttft_p99", "tpot_p50", "tpot_p95"):
        assert close(shown_ms(figs[k]["text"]), float(figs[k]["value"])), (k, figs[k])
    assert figs["errors"]["text"] == f"{g['errors']} of {g['requests']}", figs["errors"]
    assert g["errors"] > 0
    r2 = g["ttft_concurrency_r2"]
    assert (figs["r2"]["value"] == "") if r2 is None else abs(float(figs["r2"]["value"]) - r2) < 2e-3
    assert figs["r2_word"]["text"] == ("" if r2 is None else "weak" if r2 < 0.3 else
                                       "moderate" if r2 < 0.7 else "strong"), figs["r2_word"]
    trend = g["trend"]["ttft_p95"]
    assert (figs["ttft_trend"]["value"] == "") if trend is None else \
        float(figs["ttft_trend"]["value"]) == trend, (figs["ttft_trend"], trend)

    # the route with a firing alert first, though chat carries more; the
    # idle one folded into one line
    cards = out["cards"]
    assert out["order"] == ["slow", "chat"], out["order"]
    assert cards["slow"]["state"] == "critical", cards["slow"]["state"]
    assert int(cards["chat"]["figs"]["errors"]["text"].split(" of ")[1]) > \
        int(cards["slow"]["figs"]["errors"]["text"].split(" of ")[1])
    assert cards["quiet"]["folded"] and not out["idle"]["hidden"], out["idle"]
    assert out["idle"]["routes"] == "quiet" and "quiet" in out["idle"]["text"], out["idle"]
    # a phone: nothing sticks out, the SLO table whole
    m = out["mobile"]
    assert m["scroll_width"] <= m["width"] and m["wide"] == [], m
    assert m["slo_cells"] == 7 and m["slo_right"] <= m["width"] and m["slo_scroll"] <= m["width"], m
    for s in shots + [p for p, _ in phone]:
        with open(s, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", s

    # after a restart: the same charts and figures, from the file, while
    # /stats' windows start empty
    assert f"stats.history_file {hist}: the history of" in err, err
    assert after["instance"]["requests"] == 0, after["instance"]
    check_charts(again["board"]["charts"], begun, ended, again["opened"], "after a restart")
    for k in ("ttft", "tpot", "rate", "errors"):
        assert again["board"]["charts"][k]["from"] == out["board"]["charts"][k]["from"], k
    assert again["board"]["figs"]["errors"]["text"] == figs["errors"]["text"]
    assert again["board"]["figs"]["ttft_p99"]["value"] == figs["ttft_p99"]["value"]
    assert again["order"][0] != "quiet" and again["cards"]["chat"]["figs"]["errors"]["text"] == \
        cards["chat"]["figs"]["errors"]["text"]
