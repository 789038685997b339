# SPDX-License-Identifier: Apache-2.0
"""tokentap-load's prompt sizes in the target's own tokens (issue #42).

tokentap-mock --prompt-bytes-per-token 3.1 counts a prompt as a tokenizer
of 3.1 bytes a token would (its text's bytes / 3.1, rounded up), not the
4 bytes a token tokentap-load writes synthetic prompts at: uncalibrated,
a prompt of N tokens is 1.29 N of the target's. --calibrate sizes them
from the target's own counts; a target that gives none leaves the sizes
estimates, and says so; prompts of a trace or a file report the target's
count beside their own.
"""
import json
import os
import tempfile

from harness import Mock, load

CHAT = "/v1/chat/completions"
RATIO = 3.1
MOCK = ("--ttft", "2ms", "--tpot", "1ms", "--prompt-bytes-per-token", str(RATIO))


def _by_seq(m, n):
    """The mock's log lines of the measured requests (those with a request
    id: the calibration's carry none), by their seq."""
    lines = [x for x in m.served(n) if x["request_id"] is not None]
    return {int(x["request_id"].rsplit("-", 1)[1]): x for x in lines}


def test_calibrated_prompts_land_on_the_asked_size():
    """After 8 calibration requests, each synthetic prompt of 100 to 400
    tokens is, by the target's count, within 2 % of its size; the ratio,
    its spread and its requests are in the JSON and the table. Without
    --calibrate the same prompts are 29 % over (what the check catches)."""
    with Mock(*MOCK) as m:
        doc, err = load("-c", "4", "-n", "40", "--max-tokens", "3", "--prompt-tokens",
                        "100-400", "--calibrate", "8", "--samples", m.url(CHAT),
                        whole=True, stderr=True)
        served = _by_seq(m, 48)
        calib = [x for x in m.served(48) if x["request_id"] is None]
    ps = doc["prompt_sizing"]
    assert ps["rule"] == "calibrated" and not ps["estimate"], ps
    assert ps["calibration_requests"] == 8 and ps["calibration_reported"] == 8, ps
    assert abs(ps["bytes_per_token"] / RATIO - 1) <= 0.02, ps
    assert 0 <= ps["spread"] < 0.1, ps
    # the calibration asked one token each, and came first
    assert len(calib) == 8 and all(x["tokens"] == 1 for x in calib), calib
    j = doc["levels"][0]
    assert len(j["samples"]) == 40 and len(served) == 40, (len(j["samples"]), len(served))
    for s in j["samples"]:
        got = served[s["seq"]]["input_tokens"]
        assert abs(got / s["prompt_tokens"] - 1) <= 0.02, (s["prompt_tokens"], got)
        assert s["input_tokens"] == got
    r = j["prompt_tokens_reported"]
    assert r["requests"] == 40 and abs(r["ratio_mean"] - 1) <= 0.02, r
    assert f"sized at {ps['bytes_per_token']:.3g} bytes/token (±" in err, err
    assert "calibrated on the target" in err and "estimate" not in err, err

    # the same load uncalibrated: 4 bytes a token, 4 / 3.1 of the size
    with Mock(*MOCK) as m:
        doc = load("-c", "4", "-n", "20", "--max-tokens", "3", "--prompt-tokens", "100-400",
                   m.url(CHAT), whole=True)
    assert doc["prompt_sizing"]["rule"] == "default" and doc["prompt_sizing"]["estimate"]
    r = doc["levels"][0]["prompt_tokens_reported"]
    assert abs(r["ratio_mean"] - 4 / RATIO) <= 0.02, r


def test_no_usage_leaves_estimates_and_says_so():
    """A target that reports no prompt count (Anthropic's stream without
    usage): the calibration has no ratio, the sizes stay at 4 bytes a token
    and the JSON, the table and a warning say they are estimates."""
    with Mock(*MOCK, "--usage", "off") as m:
        doc, err = load("-c", "2", "-n", "6", "--max-tokens", "3", "--calibrate", "4",
                        m.url("/v1/messages"), whole=True, stderr=True)
        served = _by_seq(m, 10)
    ps = doc["prompt_sizing"]
    assert ps["rule"] == "default" and ps["estimate"] and ps["bytes_per_token"] == 4, ps
    assert ps["calibration_requests"] == 4 and ps["calibration_reported"] == 0, ps
    assert ps["spread"] is None, ps
    j = doc["levels"][0]
    assert j["prompt_tokens_reported"] is None and j["ok"] == 6, j["prompt_tokens_reported"]
    # sent at 4 bytes a token: the mock counted 400 bytes of text
    assert {x["input_tokens"] for x in served.values()} == {-(-400 * 10 // 31)}, served
    assert "--calibrate: the target reported no prompt token counts in 4 requests" in err
    assert "warning      prompt sizes are estimates" in err, err


def test_trace_and_file_prompts_show_both_counts():
    """A trace's prompts (sized by count) and a file's (real text, its
    count an estimate) report the tokens asked beside the target's; with
    --bytes-per-token at the target's ratio the two agree."""
    with Mock(*MOCK) as m, tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "t.jsonl")
        with open(trace, "w") as f:
            for i in range(6):
                f.write(json.dumps({"offset_ms": 20 * i, "prompt_tokens": 200 + 40 * i,
                                    "output_tokens": 2}) + "\n")
        doc, err = load("--trace", trace, m.url(CHAT), whole=True, stderr=True)
        r = doc["levels"][0]["prompt_tokens_reported"]
        assert r["requests"] == 6 and r["asked_mean"] == 300, r
        assert abs(r["reported_mean"] / 300 - 4 / RATIO) <= 0.01, r
        assert "300.0 tokens asked, %.1f reported by the target" % r["reported_mean"] in err
        prompts = os.path.join(d, "p.jsonl")
        text = "a prompt of real text, thirty-one" * 10        # 330 bytes
        with open(prompts, "w") as f:
            f.write(json.dumps({"prompt": text, "max_tokens": 2}) + "\n")
        for extra, asked in (([], 330 // 4), (["--bytes-per-token", str(RATIO)],
                                              round(330 / RATIO))):
            doc = load("-n", "3", "-c", "1", "--prompts", prompts, *extra, m.url(CHAT),
                       whole=True)
            r = doc["levels"][0]["prompt_tokens_reported"]
            assert r["asked_mean"] == asked, (extra, r)
            assert r["reported_mean"] == -(-330 * 10 // 31), (extra, r)
        assert doc["prompt_sizing"]["rule"] == "given", doc["prompt_sizing"]
        assert not doc["prompt_sizing"]["estimate"]


def test_calibrate_options():
    """--calibrate and --bytes-per-token are one or the other, each in
    range."""
    for args in (["--calibrate", "4", "--bytes-per-token", "3"],
                 ["--calibrate", "0"], ["--bytes-per-token", "0.1"],
                 ["--bytes-per-token", "x"]):
        r = load(*args, "http://127.0.0.1:9/v1/chat/completions", expect=2,
                 report=False)
        assert "--calibrate" in r.stderr or "--bytes-per-token" in r.stderr, r.stderr
