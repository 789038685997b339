# SPDX-License-Identifier: Apache-2.0
"""What one client can do to everyone's statistics (issue 26): tenant
patterns that cost the main thread seconds, model names that take the
label budget, and groups by the hundred thousand."""
import json
import os
import re
import time

from harness import CHAT, Mock, Tokentap, build_request, completion, conf, conf_file, metric, \
    parallel, pipeline, promtool_check, run, samples, until
from peers import SSE_HEAD, Backend

# 100,000 requests, and the sanitizer's own memory would be the measure
SANITIZER_SKIP = {"test_100k_groups_stay_within_the_stated_memory_and_stats_is_paged"}
# and make check, which leaves the loads by the ten thousand to make test
CHECK_SKIP = SANITIZER_SKIP
# its /stats pages are built by the main thread (nice +10), which two CPU
# hogs beside it slow tenfold: a page took over 10 s in a stressed run
TIME_LIMITS = {"test_100k_groups_stay_within_the_stated_memory_and_stats_is_paged": 300}
SLOW = 60.0

# the optional a's: 2,040 positions counted out, within the bound; glibc
# took 0.83 s to match 64 a's against it (a main thread's second a tenant)
HEAVY = "(a?){255}" * 8


def chat(port, tenant="", model="m", **mock):
    """One stream for tenant naming model: its status."""
    return completion(port, model=model, headers={"X-Tenant-Id": tenant} if tenant else {},
                      timeout=30, **mock).status


def test_tenant_patterns_refused_at_check_and_linear_when_matched():
    """A back-reference and a repetition that counts out to millions of
    positions are refused at -t with FILE:LINE:COL (before: "configuration
    OK", then 6.4 s of main-thread CPU for 8 tenant values, /healthz in
    3.1 s; 10 s and 1.7 GB at -t). The largest pattern allowed still names
    the tenants it matches, each value matched in bounded time however
    long the header: 9 values cost the process well under a second of CPU
    (glibc: 0.83 s each)."""
    refused = {
        r"(.*)(.*)(.*)(.*)(.*)\\2\\3\\4\\5\\6x": "back-reference \\2 refused",
        "((((a{30}){30}){30}){30}){10}": "more than 4096 positions",
    }
    for pattern, why in refused.items():
        path = conf_file(f'tenant:\n  header: X-Tenant-Id\n  header_pattern: "{pattern}"\n'
                         "routes: []\n", listen=False)
        t0 = time.monotonic()
        r = run("tokentap", "-t", "-c", path, expect=1)
        assert r.stderr.startswith(f"{path}:3:19: tenant.header_pattern: "), r.stderr
        assert why in r.stderr, r.stderr
        assert "configuration OK" not in r.stdout + r.stderr
        assert time.monotonic() - t0 < 10
    text = (f"tenant:\n  header: X-Tenant-Id\n  header_pattern: 'team-[0-9]+|{HEAVY}'\n")
    with Mock("--ttft", "0", "--tpot", "0") as m, \
            Tokentap(conf(m, name="chat", prefix="/v1/", top=text)) as t:
        assert chat(t.port, "warm") == 200
        t.get("/metrics")
        before = t.cpu_seconds()
        # 8 tenants of 56..63 a's, and a header of 16 KiB (the head may have 32): kept as 63 bytes
        for n in range(56, 64):
            assert chat(t.port, "a" * n) == 200
        assert chat(t.port, "a" * 16384) == 200
        assert chat(t.port, "team-7") == 200
        assert chat(t.port, "team-") == 200
        t.get_when("/metrics", lambda x: 'tenant="team-7"' in x and 'tenant="_other"' in x and
                   all('tenant="%s"' % ("a" * n) in x for n in range(56, 64)))
        start = time.monotonic()
        text = t.get("/metrics").text
        healthz = t.get("/healthz").text
        took = time.monotonic() - start
        spent = t.cpu_seconds() - before
        assert healthz.startswith("ok"), healthz
        tenants = set(re.findall(r'tenant="([^"]*)"', text))
        assert {"a" * n for n in range(56, 64)} <= tenants, tenants
        assert "team-7" in tenants and "team-" not in tenants and "_other" in tenants
        assert "a" * 64 not in text
        # glibc: 0.83 s of CPU a value on the main thread, then again per
        # label set; and /healthz waited seconds behind it (5: a busy host's)
        assert spent < 1.0 and took < 5.0, (spent, took)


# ---- the label budget: names are earned (issue 26, item 4) ------------------

SERVED = {b"llama-3", b"qwen-new", b"mistral"}


def vllm(req, c):
    """What vLLM answers: its models stream, any other model is a 404
    ("The model `x` does not exist."), and no key is asked for."""
    model = json.loads(req.body or b"{}").get("model", "").encode()
    if model not in SERVED:
        body = json.dumps({"object": "error", "message": f"The model `{model.decode()}` "
                           "does not exist.", "type": "NotFoundError", "param": None,
                           "code": 404}).encode()
        c.send(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return "keep"
    c.send(SSE_HEAD)
    for text in (b"Hel", b"lo"):
        c.chunk(b'data: {"id":"c1","object":"chat.completion.chunk","model":"%s",'
                b'"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % (model, text))
    c.chunk(b"data: [DONE]\n\n")
    c.end_chunks()
    return "keep"


def flood(port, n, tenants=True):
    """n requests naming random models (404 each), from random tenants."""
    def one(i):
        tenant = "t-" + os.urandom(4).hex() if tenants else "acme"
        return chat(port, tenant, "gpt-" + os.urandom(6).hex())
    return parallel(one, range(n))


def test_unknown_models_earn_no_label_and_a_real_one_still_gets_its_own():
    """vLLM answers 404 to a model it does not serve, and asks for no key:
    50 requests with random models took 10,400 of the 20,000 series, and
    after 1,200 of them a named tenant's new model had no series and was
    `_other` in /stats (max_models spent) until restart. A model earns its
    label with a 2xx now: the flood adds the route's _other series only,
    and the real model gets its own. (300 random models here: /stats
    keeps 100.)"""
    top = "tenant: {header: X-Tenant-Id, header_values: [acme]}\n"
    with Backend(vllm) as b, Tokentap(conf(b, name="chat", prefix="/v1/", top=top)) as t:
        assert chat(t.port, "acme", "llama-3") == 200
        # the request counted (the model's label shows in the active
        # gauges first, while the stream ends)
        base = t.get_when("/metrics", lambda x: (
            'tokentap_requests_total{route="chat",tenant="acme",model="llama-3",'
            'upstream="http://127.0.0.1:%d",outcome="ok",code="2xx"} 1\n' % b.port) in x)
        assert set(flood(t.port, 50)) == {404}
        t.wait_logged(51)
        fifty = t.get_when("/metrics", lambda x: ',code="4xx"} 50\n' in x)
        assert set(flood(t.port, 250)) == {404}
        assert set(flood(t.port, 50, tenants=False)) == {404}   # acme's own typos
        t.wait_logged(352 - 1)
        text = t.get_when("/metrics", lambda x: 'code="4xx"} 50\n' in x)
        added = (len(samples(fifty)) - len(samples(base)),
                 len(samples(text)) - len(samples(base)))
        used = metric(text, "tokentap_metrics_series") - metric(base, "tokentap_metrics_series")
        used50 = metric(fifty, "tokentap_metrics_series") - metric(base, "tokentap_metrics_series")
        print(f"after 50 404s: {added[0]} lines, tokentap_metrics_series +{used50:.0f}; "
              f"after 350: {added[1]} lines, +{used:.0f}")
        assert added[1] <= 400 and used <= 300, (added, used)
        assert "gpt-" not in text
        assert chat(t.port, "acme", "qwen-new") == 200
        # its line once the request is counted (its label comes with the
        # active gauges first, while the stream ends): a wait, not a race
        text = t.get_when("/metrics", lambda x: (
            'tokentap_requests_total{route="chat",tenant="acme",model="qwen-new",'
            'upstream="http://127.0.0.1:%d",outcome="ok",code="2xx"} 1\n' % b.port) in x)
        assert ('tenant="acme",model="_other",upstream="http://127.0.0.1:%d",'
                'outcome="upstream_error",code="4xx"} 50\n' % b.port) in text
        rows = t.stats(by="tenant,model", limit=10000)
        named = {(g["tenant"], g["model"]): g["requests"] for g in rows["groups"]}
        assert named[("acme", "qwen-new")] == 1 and named[("acme", "llama-3")] == 1, named
        assert named[("_other", "_other")] == 300 and named[("acme", "_other")] == 50, named
        assert not any(m.startswith("gpt-") for _, m in named)
        # every request is still in the access log, with the model it named
        log = t.wait_logged(352)
        assert len(log) == 352, len(log)
        assert sum(1 for l in log if l["model"].startswith("gpt-")) == 350
        promtool_check(text)


def test_idle_label_sets_and_names_are_given_back():
    """A label set idle for metrics.expiration (2 s here; 10 min by
    default) leaves /metrics and gives its series back; one that comes
    back starts from zero. A group goes once its windows hold nothing, and
    with it its model's place under max_models: a model that found none
    finds one then (before: `_other` until restart)."""
    top = ("tenant: {header: X-Tenant-Id, header_values: [acme]}\n"
           "models: {max_models: 2}\nmetrics: {expiration: 2s}\n"
           "stats: {windows: [1s]}\nalerts: {window: 1s}\n")
    with Backend(vllm) as b, Tokentap(conf(b, name="chat", prefix="/v1/", top=top)) as t:
        base = metric(t, "tokentap_metrics_series")
        # one at a time, each read before the next: which two names come
        # first is the drain's order otherwise (the workers' rings)
        for n, model in enumerate(("llama-3", "qwen-new", "mistral")):
            assert chat(t.port, "acme", model) == 200
            text = t.get_when("/metrics",
                              lambda x: x.count('outcome="ok",code="2xx"} 1\n') == n + 1)
        last = time.monotonic()
        assert 'model="llama-3"' in text and 'model="qwen-new"' in text, text
        assert 'model="mistral"' not in text                # max_models: 2
        assert metric(text, "tokentap_metrics_series") > base
        text = t.get_when("/metrics", lambda x: metric(x, "tokentap_metrics_series") == base)
        assert 'tenant="acme"' not in text
        # the groups go once two windows hold nothing (2 x 1 s and a slice;
        # nothing outside says when: 4 s after the last request, what the
        # main thread's timer may be late by on a busy host included)
        time.sleep(max(0.0, last + 4.0 - time.monotonic()))
        for n, model in enumerate(("mistral", "llama-3")):
            assert chat(t.port, "acme", model) == 200
            text = t.get_when("/metrics",
                              lambda x: x.count('outcome="ok",code="2xx"} 1\n') == n + 1)
        for model in ("mistral", "llama-3"):
            assert ('tokentap_requests_total{route="chat",tenant="acme",model="%s",'
                    'upstream="http://127.0.0.1:%d",outcome="ok",code="2xx"} 1\n'
                    % (model, b.port)) in text, text
        rows = t.stats(by="tenant,model")["groups"]
        assert {(g["tenant"], g["model"]) for g in rows} == \
            {("acme", "mistral"), ("acme", "llama-3")}, rows


# ---- 100,000 groups (issue 26, item 6) --------------------------------------

TENANTS, MODELS = 1000, 100        # the default max_tenants x max_models
PER_GROUP_KB = 3.0                 # docs/alerts-and-metrics.md: about 2 KB


def test_100k_groups_stay_within_the_stated_memory_and_stats_is_paged():
    """100,000 (tenant, model) groups, the defaults' max_tenants x
    max_models, one request each through tokentap: RSS grows by at most
    3 KB a group (docs/alerts-and-metrics.md: about 2 KB; before: 8.1 KB,
    and 1.5 GB in all once /stats had read them), and
    /stats?by=route,tenant,model answers a
    page of 1,000 rows that says how many there are (before: 85 MB in one
    answer, 7.6 s of the main thread)."""
    def req(tenant, model):
        return build_request(CHAT, b'{"model":"m%d","stream":true,"max_tokens":1}' % model,
                             {"X-Tenant-Id": f"t{tenant}", "Content-Type": "application/json"})

    with Mock("--ttft", "0", "--tpot", "0", "--tokens", "1") as m, \
            Tokentap(conf(m, name="chat", prefix="/v1/",
                          top="tenant: {header: X-Tenant-Id}\n")) as t:
        assert pipeline(t.port, [req(0, 0)]) == [200]          # the route's own series
        t.get("/stats?by=route,tenant,model", timeout=SLOW)
        before = t.rss_kib()
        reqs = [req(tn, md) for tn in range(TENANTS) for md in range(MODELS)]
        statuses = parallel(lambda k: pipeline(t.port, reqs[k::4], 64, 60), range(4), 4)
        assert all(x == [200] * len(reqs[k::4]) for k, x in enumerate(statuses))
        doc = until(lambda: (d := t.stats(by="route,tenant,model", timeout=SLOW))
                    ["total_groups"] >= TENANTS * MODELS and d, SLOW,
                    "100,000 groups in /stats", every=0.2)
        grown = t.rss_kib() - before
        print(f"100,000 groups: RSS +{grown / 1024:.0f} MiB, "
              f"{grown * 1024 / (TENANTS * MODELS):.0f} bytes a group")
        assert grown <= PER_GROUP_KB * TENANTS * MODELS, grown
        # the default page: the first 1,000 rows of 100,000, in key order
        assert doc["total_groups"] == TENANTS * MODELS, doc["total_groups"]
        assert len(doc["groups"]) == 1000 and doc["truncated"] is True
        assert (doc["groups"][0]["tenant"], doc["groups"][0]["model"]) == ("t0", "m0")
        raw = t.get("/stats?by=route,tenant,model&offset=99500&limit=10000",
                    timeout=SLOW).body
        page = json.loads(raw)
        assert len(page["groups"]) == 500 and page["truncated"] is False
        assert len(raw) < 4 * 1024 * 1024, len(raw)
        # reading them all, a page at a time, costs no memory that stays
        assert t.rss_kib() - before - grown < 64 * 1024
        # a group of every tenant and model: the metrics' budget held
        assert metric(t.get("/metrics", timeout=SLOW).text, "tokentap_metrics_series") <= 20000


def test_stats_paging_arguments():
    """limit is 1..10,000 and offset a count: anything else is a 400 that
    says what is valid."""
    with Mock("--ttft", "0", "--tpot", "0") as m, \
            Tokentap(conf(m, name="chat", prefix="/v1/")) as t:
        assert chat(t.port) == 200
        t.get_when("/stats", lambda x: '"requests":1,' in x)
        for q in ("limit=0", "limit=10001", "limit=x", "offset=-1", "offset=1e3"):
            r = t.get("/stats?" + q)
            assert r.status == 400 and b"valid: " in r.body, (q, r.body[:200])
        doc = t.stats(limit=1, offset=1)
        assert doc["groups"] == [] and doc["total_groups"] == 1 and not doc["truncated"]
        assert (doc["offset"], doc["limit"]) == (1, 1)


def test_listed_models_alone_get_labels():
    """With models.names or models.pattern, those alone name models,
    whatever the backend answers: tokentap-mock answers 2xx to any model,
    as llama.cpp and TGI do; a listed model's 404 is its own."""
    top = ("tenant: {header: X-Tenant-Id, header_values: [acme]}\n"
           "models: {names: [llama-3], pattern: 'qwen-[0-9a-z.]+'}\n")
    with Mock("--ttft", "0", "--tpot", "0") as m, \
            Tokentap(conf(m, name="chat", prefix="/v1/", top=top)) as t:
        for model in ("llama-3", "qwen-2.5", "random-x", "qwen-"):
            assert chat(t.port, "acme", model) == 200
        assert chat(t.port, "acme", "qwen-72b", fault="status:404") == 404
        # all five counted: a request's record may come a moment after the
        # next one's, from the other worker
        text = t.get_when("/metrics", lambda x: 'code="4xx"} 1\n' in x and
                          x.count('code="2xx"} 1\n') >= 2 and
                          re.search(r'model="_other",[^}]*code="2xx"\} 2\n', x))
        models = set(re.findall(r'tokentap_requests_total\{[^}]*model="([^"]*)"', text))
        assert models == {"llama-3", "qwen-2.5", "qwen-72b", "_other"}, models
        rows = t.stats(by="model")["groups"]
        assert {g["model"]: g["requests"] for g in rows} == \
            {"llama-3": 1, "qwen-2.5": 1, "qwen-72b": 1, "_other": 2}, rows
