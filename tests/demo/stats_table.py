#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints tokentap's /stats (and firing alerts) as a table for people.

  python3 tests/demo/stats_table.py [ADMIN_URL] [--window 1m] [--by route,tenant]
"""
import argparse
import json
import urllib.request


def fetch(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def ms(v):
    return "-" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def pct(v):
    return "-" if v is None else f"{v * 100:+.0f}%"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("admin", nargs="?", default="http://127.0.0.1:19464")
    ap.add_argument("--window", default="1m")
    ap.add_argument("--by", default="route")
    a = ap.parse_args()
    s = fetch(f"{a.admin}/stats?window={a.window}&by={a.by}")
    keys = s["by"]
    head = [k.upper() for k in keys] + ["REQS", "ERR%", "TTFT p50", "p95", "p99",
                                         "trend", "TPOT p50", "p95", "tok/s", "ACT/MAX", "R2"]
    rows = []
    for g in s["groups"]:
        t, p = g["ttft_ms"], g["tpot_ms"]
        rows.append([g[k] for k in keys] + [
            str(g["requests"]), f"{(g['error_rate'] or 0) * 100:.1f}",
            ms(t["p50"]), ms(t["p95"]), ms(t["p99"]), pct(g["trend"]["ttft_p95"]),
            ms(p["p50"]), ms(p["p95"]),
            "-" if g["output_tokens_per_s"] is None else f"{g['output_tokens_per_s']:.0f}",
            f"{g['active']}/{g['max_active']}",
            "-" if g["ttft_concurrency_r2"] is None else f"{g['ttft_concurrency_r2']:.2f}"])
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    print(f"tokentap /stats, window {s['window']}, times in ms "
          f"(active streams {s['active_streams']}, max {s['max_active_streams']})")
    for r in [head] + rows:
        print("  ".join(str(c).rjust(w) if i >= len(keys) else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths))))
    try:
        alerts = fetch(f"{a.admin}/alerts")
    except Exception:
        return
    firing = [r for r in alerts.get("rules", []) if r.get("state") == "firing"]
    print(f"\nalerts firing: {len(firing)}")
    for r in firing:
        unit = "" if r["metric"] == "error_rate" else " ms"
        print(f"  {r['alertname']} severity={r['severity']} route={r['route']} "
              f"value={r['value']:.0f}{unit} > {r['threshold']:.0f}{unit} "
              f"(n={r['samples']}, since {r['since']})")


if __name__ == "__main__":
    main()
