# SPDX-License-Identifier: Apache-2.0
"""make demo, shortened: it runs to completion, its table has the routes it
drove, the slow route's alert fires, and it leaves nothing running."""
import os
import re
import subprocess

from harness import ROOT

# make check leaves out what needs the demo
CHECK_SKIP = {"*"}
SANITIZER_SKIP = {"test_demo_runs_and_tells_the_story"}


def test_demo_runs_and_tells_the_story():
    env = dict(os.environ, DEMO_SECONDS="2")
    r = subprocess.run(["sh", "tests/demo.sh"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=env)
    out = r.stdout
    assert r.returncode == 0, out[-3000:] + r.stderr[-2000:]
    table = out[out.index("tokentap /stats"):]
    rows = {l.split()[0] + "/" + l.split()[1] for l in table.splitlines()[2:]
            if l and not l.startswith(("alerts", " ", "=="))}
    assert {"chat/team-chat", "chat/team-code", "slow/team-batch"} <= rows, table
    assert re.search(r"TTFTHigh severity=critical route=slow", out), out[-2000:]
    assert "scenario short-text: PASS" in out
    # client-side and tokentap-side TTFT p50 agree for the code-generation
    # scenario, the only traffic of tenant team-code
    client = float(re.search(r"== scenario code-generation.*?TTFT ms\s+\d+\s+([\d.]+)", out, re.S).group(1))
    chat = next(l for l in table.splitlines() if l.startswith("chat") and "team-code" in l)
    server = float(chat.split()[5])
    assert abs(client - server) < 0.05 * client + 3, (client, server)
    for port in (18000, 18001, 18080, 19464):
        assert subprocess.run(["sh", "-c", f"ss -ltn | grep -q ':{port} '"]).returncode != 0, \
            f"port {port} still listening after the demo"
