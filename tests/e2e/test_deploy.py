# SPDX-License-Identifier: Apache-2.0
"""The deployment kit (deploy/), checked with the real tools: promtool and
amtool take the Prometheus and Alertmanager configs; the Kubernetes
manifests validate against the Kubernetes API's schemas (kubernetes-models,
and the Prometheus Operator's for ServiceMonitor and PrometheusRule); the
PrometheusRule is exactly the rules tokentap writes for the ConfigMap's
config; the Collector's pipelines name only components it defines; and
two problems driven through a real Prometheus and Alertmanager with the
kit's configs make exactly two notifications.

  python3 tests/e2e/test_deploy.py --write   rewrites prometheusrule.yaml"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, Mock, Proc, binary, completion, free_port, node_modules, until, \
    wait_port  # noqa: E402
from peers import ALERTMANAGER, Hook  # noqa: E402

DEPLOY = os.path.join(ROOT, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
PROMTOOL = "/usr/bin/promtool"
AMTOOL = "/usr/bin/amtool"
ENV = {"TOKENTAP_UPSTREAM": "http://127.0.0.1:9", "TOKENTAP_ADMIN_TOKEN": "t0ken"}
# a real Prometheus and Alertmanager for a minute and more: make test's plain pass
SANITIZER_SKIP = {"test_two_problems_page_twice"}
CHECK_SKIP = SANITIZER_SKIP
TIME_LIMITS = {"test_two_problems_page_twice": 240}


def configmap_config():
    """The tokentap.yaml the ConfigMap holds (its literal block)."""
    with open(os.path.join(K8S, "configmap.yaml")) as f:
        lines = f.read().split("\n")
    start = lines.index("  tokentap.yaml: |") + 1
    body = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        body.append(line[4:])
    return "\n".join(body).rstrip("\n") + "\n"


def rules_of(conf_text, env=None):
    d = tempfile.mkdtemp(prefix="tt-deploy-")
    path = os.path.join(d, "tokentap.yaml")
    with open(path, "w") as f:
        f.write(conf_text)
    r = subprocess.run([binary("tokentap"), "--prometheus-rules", "-c", path],
                       capture_output=True, text=True, timeout=30,
                       env={**os.environ, **(env or ENV)})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    return r.stdout


def prometheusrule_text():
    rules = rules_of(configmap_config())
    groups = rules[rules.index("\ngroups:\n") + 1:]
    return ("# tokentap's alerts for the ConfigMap's config, as the Prometheus Operator\n"
            "# loads them: tokentap --prometheus-rules -c tokentap.yaml, under spec\n"
            "# (python3 tests/e2e/test_deploy.py --write writes this file anew).\n"
            "apiVersion: monitoring.coreos.com/v1\n"
            "kind: PrometheusRule\n"
            "metadata:\n"
            "  name: tokentap\n"
            "  labels: {app.kubernetes.io/name: tokentap}\n"
            "spec:\n" + "".join("  " + line if line.strip() else line
                                for line in groups.splitlines(True)))


def node_check(*args):
    mods = node_modules()
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "e2e", "deploy_check.mjs"), *args],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "NODE_MODULES": mods})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def manifests():
    """deploy/kubernetes's, and the load test's of its folder load/."""
    return sorted(os.path.join(d, f) for d in (K8S, os.path.join(K8S, "load"))
                  for f in os.listdir(d) if f.endswith(".yaml"))


# ---- the files ------------------------------------------------------------------

def test_kubernetes_manifests_validate_against_the_api_schemas():
    """Every document of deploy/kubernetes is a kind the schemas know and
    valid under them; and the validator refuses a broken one (a replica
    count as text, a probe without a port), so it can fail."""
    got = node_check(*manifests())
    kinds = set()
    for f, docs in got.items():
        assert docs, f
        for doc in docs:
            assert doc["error"] is None, (f, doc)
            kinds.add(doc["kind"])
    assert {"v1/ConfigMap", "apps/v1/Deployment", "v1/Service",
            "monitoring.coreos.com/v1/ServiceMonitor",
            "monitoring.coreos.com/v1/PrometheusRule", "batch/v1/Job",
            "v1/PersistentVolumeClaim"} <= kinds, kinds
    d = tempfile.mkdtemp(prefix="tt-deploy-")
    with open(os.path.join(K8S, "deployment.yaml")) as f:
        good = f.read()
    broken = {"replicas.yaml": good.replace("replicas: 2", "replicas: two"),
              "probe.yaml": good.replace("httpGet: {path: /healthz, port: admin}\n"
                                         "            periodSeconds: 5",
                                         "httpGet: {path: /healthz}\n            periodSeconds: 5")}
    for name, text in broken.items():
        assert text != good, name
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    got = node_check(*(os.path.join(d, n) for n in broken))
    for name in broken:
        assert got[os.path.join(d, name)][0]["error"], (name, got)


def test_the_load_job_shards_one_plan_and_merges_every_shard():
    """The Indexed Job's pods are shards 0 to N-1 of --shard I/N (N its
    completions, all run at once: merge wants their windows to overlap),
    each writing shard-I.json; the merge Job reads exactly those N."""
    load = os.path.join(K8S, "load")
    got = node_check("--yaml", os.path.join(load, "load-job.yaml"),
                     os.path.join(load, "merge-job.yaml"))
    job = [d for d in got[os.path.join(load, "load-job.yaml")] if d["kind"] == "Job"][0]
    spec = job["spec"]
    args = spec["template"]["spec"]["containers"][0]["args"]
    n = spec["completions"]
    assert spec["completionMode"] == "Indexed" and spec["parallelism"] == n, spec
    assert args[args.index("--shard") + 1] == f"$(JOB_COMPLETION_INDEX)/{n}", args
    out = args[args.index("--json") + 1]
    assert "$(JOB_COMPLETION_INDEX)" in out, out
    merge = got[os.path.join(load, "merge-job.yaml")][0]
    margs = merge["spec"]["template"]["spec"]["containers"][0]["args"]
    assert margs[0] == "merge", margs
    assert [a for a in margs if a.startswith("/results/shard-")] == \
        [out.replace("$(JOB_COMPLETION_INDEX)", str(i)) for i in range(n)], margs


def test_the_configmap_config_is_valid_and_the_rule_its_rules():
    """tokentap -t takes the ConfigMap's config; the PrometheusRule is its
    --prometheus-rules output; promtool takes the rules; the Deployment's
    probes and ports are the config's admin and listen ports."""
    conf = configmap_config()
    d = tempfile.mkdtemp(prefix="tt-deploy-")
    path = os.path.join(d, "tokentap.yaml")
    with open(path, "w") as f:
        f.write(conf)
    r = subprocess.run([binary("tokentap"), "-t", "-c", path], capture_output=True, text=True,
                       timeout=30, env={**os.environ, **ENV})
    assert r.returncode == 0, r.stderr
    with open(os.path.join(K8S, "prometheusrule.yaml")) as f:
        assert f.read() == prometheusrule_text(), \
            "deploy/kubernetes/prometheusrule.yaml is out of date: python3 tests/e2e/test_deploy.py --write"
    rules = os.path.join(d, "rules.yaml")
    with open(rules, "w") as f:
        f.write(rules_of(conf))
    r = subprocess.run([PROMTOOL, "check", "rules", rules], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(K8S, "deployment.yaml")) as f:
        dep = f.read()
    listen = re.search(r"address: 0\.0\.0\.0:(\d+)\nadmin:\n  address: 0\.0\.0\.0:(\d+)",
                       conf)
    assert listen, conf
    assert f"{{name: http, containerPort: {listen.group(1)}}}" in dep
    assert f"{{name: admin, containerPort: {listen.group(2)}}}" in dep
    assert dep.count("httpGet: {path: /healthz, port: admin}") == 2


def kit_prometheus(d, admin_port, am_port, rules, scrape="15s"):
    """deploy/prometheus/prometheus.yml with the test's addresses and files."""
    with open(os.path.join(DEPLOY, "prometheus", "prometheus.yml")) as f:
        text = f.read()
    token = os.path.join(d, "token")
    with open(token, "w") as f:
        f.write(ENV["TOKENTAP_ADMIN_TOKEN"])
    for old, new in (("/etc/prometheus/tokentap-rules.yaml", rules),
                     ("/etc/prometheus/tokentap-admin-token", token),
                     ("'alertmanager:9093'", f"'127.0.0.1:{am_port}'"),
                     ("['tokentap-1:9464', 'tokentap-2:9464']", f"['127.0.0.1:{admin_port}']"),
                     ("scrape_interval: 15s", f"scrape_interval: {scrape}"),
                     ("evaluation_interval: 15s", f"evaluation_interval: {scrape}")):
        assert old in text, old
        text = text.replace(old, new)
    path = os.path.join(d, "prometheus.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def kit_alertmanager(d, hook_port, group_wait):
    """The kit's Alertmanager config, sending to hook_port, its group_wait
    (30 s) shortened to group_wait: grouping and inhibition as shipped."""
    with open(os.path.join(DEPLOY, "alertmanager", "alertmanager.yml")) as f:
        text = f.read()
    for old, new in (("http://pager-gateway.example:9000/tokentap",
                      f"http://127.0.0.1:{hook_port}/"),
                     ("group_wait: 30s", f"group_wait: {group_wait}")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = os.path.join(d, "am.yml")
    with open(path, "w") as f:
        f.write(text)
    return path


def test_prometheus_and_alertmanager_take_the_kit():
    d = tempfile.mkdtemp(prefix="tt-deploy-")
    rules = os.path.join(d, "rules.yaml")
    with open(rules, "w") as f:
        f.write(rules_of(configmap_config()))
    r = subprocess.run([PROMTOOL, "check", "config", kit_prometheus(d, 9464, 9093, rules)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([AMTOOL, "check-config", os.path.join(DEPLOY, "alertmanager",
                                                             "alertmanager.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "SUCCESS" in r.stdout, r.stdout + r.stderr
    assert " - 1 inhibit rules" in r.stdout, r.stdout


def test_the_collector_pipelines_name_what_it_defines():
    """No otelcol in Debian: the config is read as YAML and its pipelines'
    receivers, processors and exporters must each be defined (what
    otelcol validate checks first); OTLP over HTTP on 4318, where tokentap
    sends, is among the receivers."""
    path = os.path.join(DEPLOY, "otel-collector", "config.yaml")
    conf = node_check("--yaml", path)[path][0]
    assert conf["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    pipes = conf["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipes), pipes
    for name, p in pipes.items():
        for kind in ("receivers", "processors", "exporters"):
            for c in p.get(kind, []):
                assert c in conf[kind], (name, kind, c)


def test_grafana_provisioning_points_at_the_board():
    path_ds = os.path.join(DEPLOY, "grafana", "provisioning", "datasources", "tokentap.yaml")
    path_db = os.path.join(DEPLOY, "grafana", "provisioning", "dashboards", "tokentap.yaml")
    got = node_check("--yaml", path_ds, path_db)
    ds = got[path_ds][0]["datasources"]
    assert [x["type"] for x in ds] == ["prometheus"], ds
    with open(os.path.join(ROOT, "conf", "grafana-dashboard.json")) as f:
        board = json.load(f)
    # the board picks its data source by type, so the provisioned one serves it
    var = [v for v in board["templating"]["list"] if v["name"] == "datasource"][0]
    assert var["query"] == "prometheus", var
    assert got[path_db][0]["providers"][0]["type"] == "file"


# ---- one problem, one page --------------------------------------------------------

def test_two_problems_page_twice():
    """tokentap with the ConfigMap's config, scraped by a real Prometheus
    with the kit's config and rules, routed by a real Alertmanager with
    the kit's routing, grouping and inhibition to a webhook: two problems
    (route default's TTFT over both thresholds; SLO chat burning in all
    three of its pairs) raise five alerts and make exactly two
    notifications: TTFTHigh critical (its warning inhibited) and the SLO's
    two critical pairs in one (the warning pair inhibited). Without the
    kit's grouping and inhibition (group_by ['...'], no inhibit_rules)
    the same run made five."""
    d = tempfile.mkdtemp(prefix="tt-deploy-")
    hook = Hook()
    port, admin, am_port, prom_port = free_port(), free_port(), free_port(), free_port()
    stop = threading.Event()
    with Mock() as m:
        conf = configmap_config().replace("0.0.0.0:8080", f"127.0.0.1:{port}").replace(
            "0.0.0.0:9464", f"127.0.0.1:{admin}")
        env = {**ENV, "TOKENTAP_UPSTREAM": f"http://127.0.0.1:{m.port}"}
        path = os.path.join(d, "tokentap.yaml")
        with open(path, "w") as f:
            f.write(conf)
        rules = os.path.join(d, "rules.yaml")
        with open(rules, "w") as f:
            f.write(rules_of(conf, env))
        # all five alerts fire at one evaluation of the rules (one
        # activeAt) and reach Alertmanager together: a group_wait of 10 s
        # (ten 1 s evaluations) gathers them as the kit's 30 s does, 20 s
        # sooner
        am = Proc([ALERTMANAGER, f"--config.file={kit_alertmanager(d, hook.port, '10s')}",
                   f"--storage.path={d}/am", f"--web.listen-address=127.0.0.1:{am_port}",
                   "--cluster.listen-address="])
        tt = Proc([binary("tokentap"), "-c", path], env=env)
        prom = Proc(["prometheus", f"--config.file={kit_prometheus(d, admin, am_port, rules, '1s')}",
                     f"--storage.tsdb.path={d}/data", "--rules.alert.resend-delay=1s",
                     f"--web.listen-address=127.0.0.1:{prom_port}"])

        def traffic():
            while not stop.is_set():
                try:
                    completion(port, "/v1/chat/completions", ttft="2500ms", tokens=2,
                               timeout=10)
                except OSError:
                    time.sleep(0.1)

        workers = [threading.Thread(target=traffic) for _ in range(12)]
        try:
            with am, tt, prom:
                wait_port(port, 10, proc=tt.p)
                wait_port(prom_port, 20, proc=prom.p)
                for w in workers:
                    w.start()

                def firing():
                    from harness import get
                    try:
                        got = get(prom_port, "/api/v1/alerts", json=True)["data"]["alerts"]
                    except AssertionError:          # 503 while Prometheus starts
                        return None
                    return sorted((a["labels"]["alertname"], a["labels"]["severity"])
                                  for a in got if a["state"] == "firing")

                want = [("SLOBurnRate", "critical"), ("SLOBurnRate", "critical"),
                        ("SLOBurnRate", "warning"), ("TTFTHigh", "critical"),
                        ("TTFTHigh", "warning")]
                until(lambda: firing() == want, 150, f"Prometheus fires {want}")
                until(lambda: len(hook.got) >= 2, 60, "two notifications")
                # and no more to come: a group is notified once its
                # group_wait (10 s here) ends, unless all its alerts
                # are inhibited; Alertmanager's groups say so at once (a
                # wait for whatever else might come took 15 s more)
                from harness import get
                groups = get(am_port, "/api/v2/alerts/groups", json=True)
                active = sorted(sorted((a["labels"]["alertname"], a["labels"]["severity"])
                                       for a in g["alerts"] if a["status"]["state"] == "active")
                                for g in groups)
                got = [sorted((a["labels"]["alertname"], a["labels"]["severity"])
                              for a in n[3]["alerts"] if a["status"] == "firing")
                       for n in hook.got]
                assert [a for a in active if a] == sorted(got), (active, groups)
                assert len(hook.got) == 2, got
                assert sorted(got) == [[("SLOBurnRate", "critical"), ("SLOBurnRate", "critical")],
                                       [("TTFTHigh", "critical")]], got
        finally:
            stop.set()
            for w in workers:
                if w.is_alive():
                    w.join(15)
            hook.__exit__()


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    with open(os.path.join(K8S, "prometheusrule.yaml"), "w") as f:
        f.write(prometheusrule_text())
