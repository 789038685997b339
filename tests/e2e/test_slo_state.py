"""The SLO state file (slo_state) as an operator may find it: written on a
clock an hour or ten years ahead, or with a head of -1 (tokentap starts,
says so, and the burn-rate pair fires on the requests that come after; what
it writes back is not ahead), a FIFO (refused by -t and at start, which no
longer hangs), a symlink planted as <slo_state>.tmp (never followed), a
symlinked state file (refused: the rename would replace the link)."""
import os
import subprocess
import tempfile
import time

from harness import Tokentap, binary, free_port, wait_port
from test_alerts import Mock, wait_for
from test_slo import burn_rule, routes, run_all, slo

BURN_B = 400000            # the burn ring's bucket: a fifth of the 2 s short window
BUDGET_B = 300000000       # the budget's: 5 min (28 days / 8064)
AHEAD_US = 60 * 10**6      # SLO_STATE_AHEAD_US

CONF = """stats: {windows: [1m]}
slo_state: STATE
alerts:
  evaluate_every: 200ms
  burn_min_requests: 3
  burn_rates:
    - {severity: critical, long: 4s, short: 2s, rate: 5}
slos:
  - {name: chat, ttft: 100ms, objective: 0.9}
"""


def state_dir():
    d = tempfile.mkdtemp(prefix="tt-slostate-")
    return d, os.path.join(d, "slo.state")


def conf_for(state, mock_port):
    return routes(mock_port) + CONF.replace("STATE", state)


def heads(text):
    """{(ring): (bucket_us, head)} of a state file's text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("slo "):
            _, name, ring, b, head, _ = line.split()
            out[(name, ring)] = (int(b), int(head))
    return out


def check_fires_and_writes_back_sane(m, state, said, budget=(0, 0)):
    """tokentap starts on the state file, says each of `said` on stderr,
    keeps the budget counts `budget` (good, bad), fires on five slow
    requests, and writes back a file that is read without a word."""
    with Tokentap(conf_for(state, m.port)) as t:
        wait_port(t.admin)
        err = t.stderr()
        for part in said:
            assert part in err, (part, err)
        b = slo(t, "chat")["budget"]
        assert (b["good"], b["bad"]) == budget, b
        run_all([dict(port=t.port, ttft="300ms")] * 5, threads=5)
        r = wait_for(lambda: (x := burn_rule(t, "critical"))["state"] == "firing" and x, 3,
                     "the critical pair firing")
        assert r["samples"] == 5, r
        b = slo(t, "chat")["budget"]
        assert (b["good"], b["bad"]) == (budget[0], budget[1] + 5), b
        assert t.stop() == 0
        stopped = time.time()
    with open(state) as f:
        text = f.read()
    assert text.startswith("tokentap-slo-state 1\n") and text.endswith("end 2\n"), text
    for ring, (b, head) in heads(text).items():
        assert head * b <= stopped * 1e6 + AHEAD_US, (ring, head, text)
    # read back: no word about the clock, the counts there
    with Tokentap(conf_for(state, m.port)) as t:
        wait_port(t.admin)
        err = t.stderr()
        assert "error budgets of 1 SLO(s) read" in err and "after this clock" not in err, err
        b = slo(t, "chat")["budget"]
        assert (b["good"], b["bad"]) == (budget[0], budget[1] + 5), b


def test_state_an_hour_ahead_keeps_the_rest_and_fires():
    """A state written on a clock an hour ahead (or before this one was
    stepped back an hour): its buckets of that hour are dropped, said with
    the line; its older budget buckets (yesterday's) kept."""
    d, state = state_dir()
    now = int(time.time() * 1e6)
    pb_old = (now - 86400 * 10**6) // BUDGET_B
    pb, bb = (now + 3600 * 10**6) // BUDGET_B, (now + 3600 * 10**6) // BURN_B
    with open(state, "w") as f:
        f.write(f"tokentap-slo-state 1\nslo chat budget {BUDGET_B} {pb} 2\n{pb_old} 4 1\n"
                f"{pb} 70 30\nslo chat burn {BURN_B} {bb} 1\n{bb} 70 30\nend 2\n")
    with Mock() as m:
        check_fires_and_writes_back_sane(m, state, [
            f"slo_state {state}: line 2: slo chat budget: its newest bucket begins 5",
            " minutes after this clock's now (the file was written on a clock ahead of this "
            "one, or this clock was stepped back); its 1 bucket(s) after now (100 request(s)) "
            "dropped, the 1 older kept",
            f"slo_state {state}: line 5: slo chat burn: its newest bucket begins 60 minutes ",
            "(100 request(s)) dropped, the 0 older kept",
            f"slo_state {state}: error budgets of 1 SLO(s) read"], budget=(4, 1))


def test_state_head_minus_one_is_refused():
    """sscanf's %lu read -1 as 2^64 - 1: the budget froze for good."""
    d, state = state_dir()
    with open(state, "w") as f:
        f.write(f"tokentap-slo-state 1\nslo chat budget {BUDGET_B} -1 0\n"
                f"slo chat burn {BURN_B} -1 0\nend 2\n")
    with Mock() as m:
        check_fires_and_writes_back_sane(m, state, [
            f"slo_state {state}: corrupt, line 2: expected 'slo NAME RING "
            "BUCKET_US HEAD COUNT'; the error budgets start empty"])


def test_state_ten_years_ahead_fires():
    d, state = state_dir()
    now = int(time.time() * 1e6) + 3650 * 86400 * 10**6
    pb, bb = now // BUDGET_B, now // BURN_B
    with open(state, "w") as f:
        f.write(f"tokentap-slo-state 1\nslo chat budget {BUDGET_B} {pb} 1\n{pb} 7 3\n"
                f"slo chat burn {BURN_B} {bb} 1\n{bb} 7 3\nend 2\n")
    with Mock() as m:
        check_fires_and_writes_back_sane(m, state, [
            f"slo_state {state}: line 2: slo chat budget: its newest bucket begins 3650 days "
            "after this clock's now",
            f"slo_state {state}: line 4: slo chat burn: its newest bucket begins 3650 days ",
            "(10 request(s)) dropped, the 0 older kept"])


# ---- the file itself ------------------------------------------------------------------

def tokentap_t(conf_text):
    """tokentap -t on conf_text: (the config's path, the run)."""
    conf_text = f"listen:\n  - address: 127.0.0.1:{free_port()}\n" \
                f"admin:\n  address: 127.0.0.1:{free_port()}\n" + conf_text
    d = tempfile.mkdtemp(prefix="tt-slostate-t-")
    path = os.path.join(d, "tokentap.yaml")
    with open(path, "w") as f:
        f.write(conf_text)
    r = subprocess.run([binary("tokentap"), "-t", "-c", path], capture_output=True, text=True,
                       timeout=10)
    return path, r


def key_pos(conf_path, key):
    """LINE:COL of key's value in the config file."""
    with open(conf_path) as f:
        for no, line in enumerate(f, 1):
            if line.startswith(key + ":"):
                return f"{no}:{len(key) + 3}"
    raise AssertionError(f"no {key} in {conf_path}")


def start_fails(conf_text, want):
    """tokentap exits at start (before listening, in well under 5 s) with
    want on stderr."""
    conf = f"listen:\n  - address: 127.0.0.1:{free_port()}\n" \
           f"admin:\n  address: 127.0.0.1:{free_port()}\n" + conf_text
    d = tempfile.mkdtemp(prefix="tt-slostate-s-")
    path = os.path.join(d, "tokentap.yaml")
    with open(path, "w") as f:
        f.write(conf)
    r = subprocess.run([binary("tokentap"), "-c", path], capture_output=True, text=True,
                       timeout=5)
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr)


def test_state_fifo_is_refused_by_t_and_start():
    """A FIFO held the start before the listeners, with no word, and -t
    said OK."""
    d, state = state_dir()
    os.mkfifo(state)
    conf = routes(free_port()) + CONF.replace("STATE", state)
    path, r = tokentap_t(conf)
    want = f"{path}:{key_pos(path, 'slo_state')}: slo_state {state}: a FIFO, not a regular file"
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr)
    start_fails(conf, f"slo_state {state}: a FIFO, not a regular file")


def test_state_symlink_is_refused_and_left_alone():
    """A symlinked state file was replaced by a regular file at the first
    write: refused instead (the rename replaces a link, not what it names;
    logrotate refuses to rotate one alike), the link and its target left."""
    d, state = state_dir()
    target = os.path.join(d, "real.state")
    with open(target, "w") as f:
        f.write("tokentap-slo-state 1\nend 0\n")
    os.symlink(target, state)
    conf = routes(free_port()) + CONF.replace("STATE", state)
    path, r = tokentap_t(conf)
    want = f"{path}:{key_pos(path, 'slo_state')}: slo_state {state}: a symlink: tokentap " \
           "replaces the file by rename, which would replace the link; name the file itself"
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr)
    start_fails(conf, f"slo_state {state}: a symlink")
    assert os.path.islink(state) and os.readlink(state) == target
    with open(target) as f:
        assert f.read() == "tokentap-slo-state 1\nend 0\n"
    # named by its target, it is used
    with Mock() as m, Tokentap(conf_for(target, m.port)) as t:
        wait_port(t.admin)
        run_all([dict(port=t.port)] * 2)
        wait_for(lambda: slo(t, "chat")["budget"]["eligible"] == 2, 5, "counted")
    with open(target) as f:
        assert f.read().endswith("end 2\n")
    assert os.path.islink(state)


def test_planted_tmp_symlink_is_not_followed():
    """<slo_state>.tmp planted as a symlink to a victim file: the victim was
    overwritten with the state and the link renamed over the state."""
    d, state = state_dir()
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, state + ".tmp")
    with Mock() as m, Tokentap(conf_for(state, m.port)) as t:
        wait_port(t.admin)
        run_all([dict(port=t.port)] * 2)
        wait_for(lambda: slo(t, "chat")["budget"]["eligible"] == 2, 5, "counted")
        assert t.stop() == 0
        assert "cannot write" not in t.stderr(), t.stderr()
    with open(victim) as f:
        assert f.read() == "precious\n"
    assert not os.path.islink(state) and os.path.isfile(state)
    with open(state) as f:
        assert f.read().startswith("tokentap-slo-state 1\nslo chat budget ")
    assert not os.path.lexists(state + ".tmp")
