# SPDX-License-Identifier: Apache-2.0
"""tokentap-load's conversations (--turns, --think-time, --sessions,
--sharegpt) against tokentap-mock, whose log shows each request as it
came: its size (input_tokens: body bytes / 4), what its prefix cache held
of it (cached_tokens), when it was read and when its last token went out
(t_req_mono_us, last_token_end_us: CLOCK_MONOTONIC, the load's clock too).
A request's X-Request-Id ends in its seq, which pairs it with its sample."""
import json
import math
import os
import tempfile

from harness import ROOT, Mock, load

CHAT = "/v1/chat/completions"
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SESSIONS = os.path.join(FIXTURES, "sessions.jsonl")
SHAREGPT = os.path.join(FIXTURES, "sharegpt.json")


def by_turn(j, served):
    """{session: [(sample, mock line), ...] in turn order}."""
    lines = {int(x["request_id"].rsplit("-", 1)[1]): x for x in served}
    out = {}
    for s in j["samples"]:
        out.setdefault(s["session"], []).append((s, lines[s["seq"]]))
    for turns in out.values():
        turns.sort(key=lambda p: p[0]["turn"])
        assert [s["turn"] for s, _ in turns] == list(range(1, len(turns) + 1)), turns
    return out


def end_us(line):
    return line["t_req_mono_us"] + line["last_token_end_us"]


def conversations(cache):
    """-c 2 users, 3 turns each, a new 200-token message a turn, against a
    mock charging 200 us a prefill token, with its prefix cache or not."""
    flags = ["--ttft", "20ms", "--tpot", "2ms", "--prefill-per-token", "200us"]
    if cache:
        flags += ["--prefix-cache", "60s"]
    with Mock(*flags) as m:
        j, err = load("-c", "2", "-n", "12", "--turns", "3", "--think-time", "20ms",
                      "--prompt-tokens", "200", "--max-tokens", "8", m.url(CHAT),
                      stderr=True)
        served = m.served(12)
    return j, err, served


def test_turns_carry_the_history_and_are_reported_per_turn():
    """Each turn's request opens with the whole of the one before (the
    mock's cache holds all of it but the tail after the messages) and adds
    the answer as received and a new message; the figures per turn: turn
    3's TTFT, its history mostly cached, well under what the same turn
    costs without the cache."""
    j, err, served = conversations(cache=True)
    assert j["errors"] == 0 and j["requests"] == 12, j["outcomes"]
    assert j["config"]["conversation"] == {"turns": [3, 3], "file": None,
                                           "format": None, "sessions": None,
                                           "speed": None, "think_time": "20ms"}
    conv = j["conversations"]
    assert conv["sessions"] == 4, conv
    assert [t["turn"] for t in conv["turns"]] == [1, 2, 3]
    assert [t["requests"] for t in conv["turns"]] == [4, 4, 4]
    assert all(t["ok"] == 4 and t["ttft_ms"]["count"] == 4 and
               t["tpot_ms"]["count"] == 4 for t in conv["turns"]), conv
    sessions = by_turn(j, served)
    assert len(sessions) == 4
    for turns in sessions.values():
        prev = None
        for s, line in turns:
            assert s["output_tokens"] == 8
            if prev is None:
                # but for a block of the opening all bodies share
                assert line["cached_tokens"] <= 16, line
            else:
                # the answer (8 tokens of text) and a new 200-token message
                assert line["input_tokens"] >= prev["input_tokens"] + 200 + 8, (prev, line)
                # the whole of the last body is a prefix of this one but its
                # tail after the messages (~70 bytes) and a part block (16)
                assert line["cached_tokens"] >= prev["input_tokens"] - 40, (prev, line)
                # the think time after the answer's end (the load stamps its
                # read by the kernel's arrival, the mock its last token after
                # the write returned, which on a busy machine comes later:
                # 1 ms of slack; without the think time it would be ~20 ms
                # early)
                assert line["t_req_mono_us"] >= end_us(prev) + 20000 - 1000, (prev, line)
            prev = line
    # the prompt asked for, per turn: the history's growth
    means = [t["prompt_tokens_mean"] for t in conv["turns"]]
    assert means[0] == 200 and means[1] > 400 and means[2] > 600, means
    # the table's block, the same figures
    rows = {x.split()[1]: x.split() for x in err.splitlines() if x.startswith("turn ")}
    assert sorted(rows) == ["1", "2", "3"], err
    assert float(rows["3"][5]) == round(conv["turns"][2]["ttft_ms"]["p50"], 2) or \
        abs(float(rows["3"][5]) - conv["turns"][2]["ttft_ms"]["p50"]) <= 0.006, rows
    assert "sessions              4" in err, err
    cold, _, cold_served = conversations(cache=False)
    assert all(x["cached_tokens"] == 0 for x in cold_served)
    hot3 = conv["turns"][2]["ttft_ms"]["p50"]
    cold3 = cold["conversations"]["turns"][2]["ttft_ms"]["p50"]
    # ~620 tokens at 200 us: 124 ms of prefill cold, ~50 ms with ~420 cached
    assert hot3 < cold3 - 40, (hot3, cold3)


def test_a_session_trace_replays_in_order_with_its_think_times():
    """The fixture's two sessions, interleaved in the file: each turn sent
    its delay_ms after the answer before it ended (at the mock: never
    sooner; from the load's read of that end to the request's arrival,
    within 5 ms but for the load's own dispatch lag, which its latency
    counts), session b starting 30 ms after a."""
    with Mock("--ttft", "10ms", "--tpot", "1ms") as m:
        j = load("-c", "2", "--sessions", SESSIONS, m.url(CHAT))
        served = m.served(6)
    assert j["errors"] == 0 and j["requests"] == 6, j["outcomes"]
    conf = j["config"]["conversation"]
    assert conf["format"] == "sessions" and conf["sessions"] == 2, conf
    assert conf["speed"] == 1 and conf["turns"] is None, conf
    with open(SESSIONS) as f:
        want = {}
        for x in map(json.loads, f):
            want.setdefault(x["session_id"], []).append(x)
    sessions = by_turn(j, served)
    assert len(sessions) == 2
    # the sessions in order of their start: a (0 ms) then b (30 ms)
    for (s0, _), name in ((sessions[0][0], "a"), (sessions[1][0], "b")):
        assert s0["max_tokens"] == want[name][0]["max_tokens"], s0
    a1, b1 = sessions[0][0][1], sessions[1][0][1]
    assert b1["t_req_mono_us"] - a1["t_req_mono_us"] >= 25000, (a1, b1)
    t0 = j["monotonic_start_us"]
    for k, name in ((0, "a"), (1, "b")):
        turns = sessions[k]
        assert len(turns) == 3
        for i in range(1, 3):
            s, line = turns[i]
            p, prev = turns[i - 1]
            delay = want[name][i]["delay_ms"] * 1000
            # at the mock, from the answer's last token to the next request:
            # never sooner than the think time (both ends stamp a read by
            # the kernel's arrival, the mock its last token after the write
            # returned, later on a busy machine: 1 ms of slack)
            gap = line["t_req_mono_us"] - end_us(prev)
            assert gap >= delay - 1000, (name, i, gap, delay)
            # and from when the load read the answer's end (it may read
            # late on a busy host) to the request's arrival, within 5 ms
            # but for the load's own dispatch lag, which its latency counts
            read_end = t0 + (p["start_ms"] + p["e2el_ms"]) * 1000
            late = line["t_req_mono_us"] - read_end - s["dispatch_lag_ms"] * 1000
            assert delay - 100 <= late <= delay + 5000, (name, i, late, delay, s)
            # its intended send time is the think time after that end (to
            # the JSON's rounding of each time to 1 us)
            assert abs((s["start_ms"] - p["start_ms"] - p["e2el_ms"]) * 1000 - delay) <= 3, \
                (name, i, p, s)
            assert line["input_tokens"] > prev["input_tokens"], (prev, line)
            assert s["output_tokens"] == want[name][i]["max_tokens"]
    # a synthetic message of prompt_tokens: b's turn 1 is 40 tokens
    assert sessions[1][0][0]["prompt_tokens"] == 40


def test_a_session_trace_replays_faster():
    """--trace-speed 4: session b starts 7.5 ms after a, and its think
    time of 200 ms is 50 ms (from the load's read of the answer's end)."""
    with Mock("--ttft", "5ms", "--tpot", "1ms") as m:
        j = load("-c", "2", "--sessions", SESSIONS, "--trace-speed", "4", m.url(CHAT))
        served = m.served(6)
    assert j["errors"] == 0 and j["config"]["conversation"]["speed"] == 4
    sessions = by_turn(j, served)
    t0 = j["monotonic_start_us"]
    p, _ = sessions[1][0]
    s, line = sessions[1][1]
    read_end = t0 + (p["start_ms"] + p["e2el_ms"]) * 1000
    late = line["t_req_mono_us"] - read_end - s["dispatch_lag_ms"] * 1000
    assert 50000 - 100 <= late <= 50000 + 5000, (late, p, s)
    assert 7.5 - 0.1 <= p["start_ms"] <= 7.5 + 5 + p["dispatch_lag_ms"], p


def test_sharegpt_conversations_replay_as_sessions():
    """ShareGPT's JSON: each human message a turn (the system one and a
    conversation with none left out), its max_tokens the recorded
    answer's length at 4 characters a token; Anthropic's messages."""
    with open(SHAREGPT) as f:
        convs = json.load(f)
    want = []
    for c in convs:
        turns = []
        for m in c["conversations"]:
            if m["from"] == "human":
                turns.append(None)
            elif m["from"] == "gpt" and turns:
                turns[-1] = math.ceil(len(m["value"]) / 4)
        if turns:
            want.append(turns)
    with Mock("--ttft", "10ms", "--tpot", "1ms", "--prefix-cache", "60s") as m:
        j = load("-c", "1", "--sharegpt", SHAREGPT, "--think-time", "5ms",
                 m.url("/v1/messages"))
        served = m.served(4)
    assert j["errors"] == 0 and j["requests"] == sum(map(len, want)) == 4
    conv = j["conversations"]
    assert conv["sessions"] == 2
    assert [t["requests"] for t in conv["turns"]] == [2, 1, 1], conv
    sessions = by_turn(j, served)
    for k, turns in enumerate(want):
        assert [s["max_tokens"] for s, _ in sessions[k]] == turns, sessions[k]
        lines = [x for _, x in sessions[k]]
        for a, b in zip(lines, lines[1:]):
            assert b["input_tokens"] > a["input_tokens"]
            assert b["cached_tokens"] >= a["input_tokens"] - 40, (a, b)


def test_bad_conversations_are_refused_with_where():
    """A session trace's problem at FILE:LINE:COL; a conversation on an API
    without messages, or with --rate, is a usage error."""
    port = "1"
    url = f"http://127.0.0.1:{port}{CHAT}"
    bad = os.path.join(ROOT, "build", "tt-bad-sessions.jsonl")
    with open(bad, "w") as f:
        f.write('{"session_id": "a", "turn": 1, "prompt": "hi"}\n'
                '{"session_id": "a", "turn": 3, "prompt": "x"}\n'
                '{"session_id": "b", "turn": 1, "promt": "x"}\n')
    try:
        err = load("--sessions", bad, url, expect=2, report=False).stderr
    finally:
        os.unlink(bad)
    assert f"{bad}:2:1: session 'a': turn 3 after turn 1" in err, err
    assert f"{bad}:3:32: unknown key 'promt'; did you mean 'prompt'?" in err, err
    err = load("--turns", "3", f"http://127.0.0.1:{port}/v1/completions", expect=2,
               report=False).stderr
    assert "conversations need a chat API's messages" in err, err
    err = load("--turns", "3", "-r", "5", url, expect=2, report=False).stderr
    assert "no --rate or trace" in err, err
    err = load("--think-time", "1s", url, expect=2, report=False).stderr
    assert "--think-time goes with --turns" in err, err
    err = load("--turns", "0", url, expect=2, report=False).stderr
    assert "--turns" in err and "1 to 1000" in err, err


def test_a_saved_run_reports_its_turns():
    """tokentap-load report recomputes the figures per turn from a saved
    document's samples: the same table, and the HTML page's turns table;
    compare tells another conversation from it."""
    with Mock("--ttft", "10ms", "--tpot", "1ms") as m:
        doc = load("-c", "1", "-n", "4", "--turns", "2", "--max-tokens", "4",
                   m.url(CHAT), whole=True)
    j = doc["levels"][0]
    assert [t["requests"] for t in j["conversations"]["turns"]] == [2, 2]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        out = load("report", path, "--html", os.path.join(d, "run.html"),
                   report=False).stdout
        with open(os.path.join(d, "run.html")) as f:
            page = f.read()
        # another think time is another workload to compare
        other = json.loads(json.dumps(doc))
        other["levels"][0]["config"]["conversation"]["think_time"] = "uniform:1s-2s"
        with open(os.path.join(d, "other.json"), "w") as f:
            json.dump(other, f)
        cmp = load("compare", path, os.path.join(d, "other.json"), report=False, expect=4)
        assert "workload differs at run: conversations 2 turns, think 0s in A, " \
            "2 turns, think uniform:1s-2s in B" in cmp.stdout, cmp.stdout
    rows = [x.split() for x in out.splitlines() if x.startswith("turn ")]
    assert [r[1:4] for r in rows] == [["1", "2", "2"], ["2", "2", "2"]], out
    for t in j["conversations"]["turns"]:
        row = rows[t["turn"] - 1]
        assert abs(float(row[5]) - t["ttft_ms"]["p50"]) <= 0.006, (row, t)
        assert f'<tr data-level="0" data-turn="{t["turn"]}">' in page
    assert '<table id="turns">' in page


def test_a_scenario_holds_conversations():
    """A scenario's turns and think_time are the flags'; turns on an API
    without messages, or think_time alone, is FILE:LINE:COL, exit 2."""
    with Mock("--ttft", "10ms", "--tpot", "1ms") as m, tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.yaml")
        with open(path, "w") as f:
            f.write(f"target: {m.url(CHAT)}\nmax_tokens: 2\nscenarios:\n"
                    "  - name: chat\n    concurrency: 2\n    requests: 6\n"
                    "    turns: 3\n    think_time: uniform:5ms-10ms\n"
                    "    targets: {error_rate: 0}\n")
        js = os.path.join(d, "s.json")
        load("--scenarios", path, "--json", js, report=False)
        with open(js) as f:
            sc = json.load(f)["scenarios"][0]
        assert sc["config"]["conversation"]["turns"] == [3, 3], sc["config"]
        assert sc["config"]["conversation"]["think_time"] == "uniform:5ms-10ms"
        assert [t["requests"] for t in sc["conversations"]["turns"]] == [2, 2, 2], sc
        with open(path, "w") as f:
            f.write(f"target: {m.url('/v1/completions')}\nscenarios:\n  - name: x\n"
                    "    turns: 2\n")
        r = load("--scenarios", path, report=False, expect=2)
        assert "s.yaml:3:5: scenario \"x\": turns need a chat API's messages" in r.stderr, \
            r.stderr
        with open(path, "w") as f:
            f.write(f"target: {m.url(CHAT)}\nscenarios:\n  - name: x\n"
                    "    think_time: 1s\n")
        r = load("--scenarios", path, report=False, expect=2)
        assert "scenario \"x\": think_time goes with turns" in r.stderr, r.stderr


def test_a_seed_gives_the_same_conversations_whatever_the_timing():
    """A session's draws (its turns, its messages' sizes, its think times)
    are its number's and the seed's: two runs of one seed against a
    backend of another speed, whose users take their sessions in another
    order, hold the same conversations. (They drew from the run's one
    stream, in the order the timing gave: session 6 had 3 turns in one
    run and 4 in the next.)"""
    runs = []
    for ttft, seed in (("2ms", "1"), ("9ms", "2")):
        with Mock("--ttft", ttft, "--tpot", "1ms", "--jitter", "uniform:3ms",
                  "--seed", seed) as m:
            doc = load("-c", "3", "-n", "40", "--turns", "1-5", "--prompt-tokens", "50-150",
                       "--max-tokens", "3", "--think-time", "uniform:0ms-4ms",
                       "--seed", "5", m.url(CHAT), whole=True)
        sessions = {}
        for s in doc["levels"][0]["samples"]:
            sessions.setdefault(s["session"], {})[s["turn"]] = s["prompt_tokens"]
        runs.append(sessions)
    a, b = runs
    # the last users' sessions are cut by the count where it falls
    done = min(len(a), len(b)) - 3
    assert done >= 5, (len(a), len(b))
    for k in range(done):
        assert len(a[k]) == len(b[k]), (k, a[k], b[k])
        assert a[k][1] == b[k][1], (k, a[k], b[k])
