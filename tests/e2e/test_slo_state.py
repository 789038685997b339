# SPDX-License-Identifier: Apache-2.0
"""The SLO state file (slo_state) as an operator may find it: written on a
clock an hour or ten years ahead, or with a head of -1 (tokentap starts,
says so, and the burn-rate pair fires on the requests that come after; what
it writes back is not ahead), a FIFO (refused by -t and at start, which no
longer hangs), a symlink planted as <slo_state>.tmp (never followed), a
symlinked state file (refused: the rename would replace the link)."""
import os
import tempfile
import time

from harness import Mock, Tokentap, check_config, conf, conf_file, free_port, run, until
from test_slo import BAD, GOOD, burn_rule, run_all, slo

BURN_B = 1000000           # the burn ring's bucket: a fifth of the 5 s short window
BUDGET_B = 300000000       # the budget's: 5 min (28 days / 8064)
AHEAD_US = 60 * 10**6      # SLO_STATE_AHEAD_US
DUE = 15                   # seconds to wait for what is due after an evaluation or two

CONF = """stats: {windows: [1m]}
slo_state: STATE
alerts:
  evaluate_every: 200ms
  burn_min_requests: 3
  burn_rates:
    - {severity: critical, long: 6s, short: 5s, rate: 5}
slos:
  - {name: chat, ttft: 500ms, objective: 0.9}
"""


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
    with Tokentap(conf(m, CONF.replace("STATE", state))) as t:
        err = t.stderr()
        for part in said:
            assert part in err, (part, err)
        b = slo(t, "chat")["budget"]
        assert (b["good"], b["bad"]) == budget, b
        run_all(t.port, [BAD] * 5, threads=5)
        # firing from the third; all five counted once they are in
        until(lambda: (x := burn_rule(t, "critical"))["state"] == "firing" and
              x["samples"] == 5, DUE, "the critical pair firing on all five")
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
    with Tokentap(conf(m, CONF.replace("STATE", state))) as t:
        err = t.stderr()
        assert "error budgets of 1 SLO(s) read" in err and "after this clock" not in err, err
        b = slo(t, "chat")["budget"]
        assert (b["good"], b["bad"]) == (budget[0], budget[1] + 5), b


def test_state_an_hour_ahead_keeps_the_rest_and_fires():
    """A state written on a clock an hour ahead (or before this one was
    stepped back an hour): its buckets of that hour are dropped, said with
    the line; its older budget buckets (yesterday's) kept."""
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
    now = int(time.time() * 1e6)
    pb_old = (now - 86400 * 10**6) // BUDGET_B
    pb, bb = (now + 3600 * 10**6) // BUDGET_B, (now + 3600 * 10**6) // BURN_B
    with open(state, "w") as f:
        f.write(f"tokentap-slo-state 1\nslo chat budget {BUDGET_B} {pb} 2\n{pb_old} 4 1\n"
                f"{pb} 70 30\nslo chat burn {BURN_B} {bb} 1\n{bb} 70 30\nend 2\n")
    with Mock() as m:
        check_fires_and_writes_back_sane(m, state, [
            # 55 to 60 minutes: the hour ahead, less where in its bucket
            # now falls (60 when now is near a bucket's start)
            f"slo_state {state}: line 2: slo chat budget: its newest bucket begins ",
            " minutes after this clock's now (the file was written on a clock ahead of this "
            "one, or this clock was stepped back); its 1 bucket(s) after now (100 request(s)) "
            "dropped, the 1 older kept",
            f"slo_state {state}: line 5: slo chat burn: its newest bucket begins 60 minutes ",
            "(100 request(s)) dropped, the 0 older kept",
            f"slo_state {state}: error budgets of 1 SLO(s) read"], budget=(4, 1))


def test_state_head_minus_one_is_refused():
    """sscanf's %lu read -1 as 2^64 - 1: the budget froze for good."""
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
    with open(state, "w") as f:
        f.write(f"tokentap-slo-state 1\nslo chat budget {BUDGET_B} -1 0\n"
                f"slo chat burn {BURN_B} -1 0\nend 2\n")
    with Mock() as m:
        check_fires_and_writes_back_sane(m, state, [
            f"slo_state {state}: corrupt, line 2: expected 'slo NAME RING "
            "BUCKET_US HEAD COUNT'; the error budgets start empty"])


def test_state_ten_years_ahead_fires():
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
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

def key_pos(conf_path, key):
    """LINE:COL of key's value in the config file."""
    with open(conf_path) as f:
        for no, line in enumerate(f, 1):
            if line.startswith(key + ":"):
                return f"{no}:{len(key) + 3}"
    raise AssertionError(f"no {key} in {conf_path}")


def test_state_fifo_is_refused_by_t_and_start():
    """A FIFO held the start before the listeners, with no word, and -t
    said OK."""
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
    os.mkfifo(state)
    text = conf(free_port(), CONF.replace("STATE", state))
    path, r = check_config(text)
    want = f"{path}:{key_pos(path, 'slo_state')}: slo_state {state}: a FIFO, not a regular file"
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr)
    # at start too, at once (a FIFO held the start before the listeners)
    r = run("tokentap", "-c", conf_file(text), expect=1, timeout=5)
    assert f"slo_state {state}: a FIFO, not a regular file" in r.stderr, r.stderr


def test_state_symlink_is_refused_and_left_alone():
    """A symlinked state file was replaced by a regular file at the first
    write: refused instead (the rename replaces a link, not what it names;
    logrotate refuses to rotate one alike), the link and its target left."""
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
    target = os.path.join(os.path.dirname(state), "real.state")
    with open(target, "w") as f:
        f.write("tokentap-slo-state 1\nend 0\n")
    os.symlink(target, state)
    text = conf(free_port(), CONF.replace("STATE", state))
    path, r = check_config(text)
    want = f"{path}:{key_pos(path, 'slo_state')}: slo_state {state}: a symlink: tokentap " \
           "replaces the file by rename, which would replace the link; name the file itself"
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr)
    r = run("tokentap", "-c", conf_file(text), expect=1, timeout=5)
    assert f"slo_state {state}: a symlink" in r.stderr, r.stderr
    assert os.path.islink(state) and os.readlink(state) == target
    with open(target) as f:
        assert f.read() == "tokentap-slo-state 1\nend 0\n"
    # named by its target, it is used
    with Mock() as m, Tokentap(conf(m, CONF.replace("STATE", target))) as t:
        run_all(t.port, [GOOD] * 2)
        until(lambda: slo(t, "chat")["budget"]["eligible"] == 2, DUE, "counted")
    with open(target) as f:
        assert f.read().endswith("end 2\n")
    assert os.path.islink(state)


def test_planted_tmp_symlink_is_not_followed():
    """<slo_state>.tmp planted as a symlink to a victim file: the victim was
    overwritten with the state and the link renamed over the state."""
    state = os.path.join(tempfile.mkdtemp(prefix="tt-slostate-"), "slo.state")
    victim = os.path.join(os.path.dirname(state), "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.symlink(victim, state + ".tmp")
    with Mock() as m, Tokentap(conf(m, CONF.replace("STATE", state))) as t:
        run_all(t.port, [GOOD] * 2)
        until(lambda: slo(t, "chat")["budget"]["eligible"] == 2, DUE, "counted")
        assert t.stop() == 0
        assert "cannot write" not in t.stderr(), t.stderr()
    with open(victim) as f:
        assert f.read() == "precious\n"
    assert not os.path.islink(state) and os.path.isfile(state)
    with open(state) as f:
        assert f.read().startswith("tokentap-slo-state 1\nslo chat budget ")
    assert not os.path.lexists(state + ".tmp")
