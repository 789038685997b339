# SPDX-License-Identifier: Apache-2.0
"""The processes of a benchmark run and what /proc says about them, on
the harness of the end-to-end tests (tests/e2e/harness.py: Proc, ports,
the build's programs).

Every child is pinned to a CPU set and gets 20,000 descriptors (the soft
limit raised to the machine's hard limit at most): the mock and the client
share one set, the proxy under test has the other to itself (see bench.py).
"""
import json
import os
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from harness import ROOT, Proc, binary, free_port, pinned, wait_port  # noqa: E402,F401

NOFILE = 20000
TICK = os.sysconf("SC_CLK_TCK")


# the floor is no part of the product: one build of it, whatever is tested
RELAY = os.path.join(ROOT, "build", "bench-relay")


class Child(Proc):
    """A pinned child process (the harness's Proc: pinned to cpus, 20,000
    descriptors); stderr goes to a file of the run's directory."""

    def __init__(self, name, args, cpus, workdir, stdout=None):
        self.name = name
        super().__init__(args, stdout=stdout, cpus=cpus, cwd=workdir, nofile=NOFILE,
                         errfile=os.path.join(workdir, f"{name}.err"))

    def check(self):
        if self.p.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.p.returncode}):\n"
                               f"{self.stderr()[-2000:]}")

    def stop(self, timeout=15):
        return super().stop(timeout=timeout)

    def cpu_s(self):
        return self.cpu_seconds()

    def runq_wait_s(self):
        """Seconds the threads of pids() have waited, runnable, for a CPU
        (schedstat's second field): what other tasks on the proxy's CPUs
        took from it."""
        total = 0
        for pid in self.pids():
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        total += int(f.read().split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        return total / 1e9


class Mock(Child):
    """tokentap-mock: every token event stamped with its send time."""

    def __init__(self, cpus, workdir, ttft="50ms", tpot="20ms"):
        self.port = free_port()
        self.log = os.path.join(workdir, "mock.jsonl")
        super().__init__("mock", [binary("tokentap-mock"), "-l",
                                  f"127.0.0.1:{self.port}", "--stamp", "on",
                                  "--ttft", ttft, "--tpot", tpot,
                                  "--log", self.log], cpus, workdir)
        wait_port(self.port, proc=self.p)


# Idle upstream connections kept as the bench's nginx keeps them (nginx.conf:
# keepalive 10000, and its upstream keepalive_timeout default of 60 s), so
# that no run begins with handshakes the other proxy does not make (with
# the 256 a replica of tokentap's default, a TLS run at 500 streams after
# another opened 178 upstream connections and closed as many, where nginx
# closed none).
TOKENTAP_YAML = """\
listen:
  - address: 127.0.0.1:{port}{listen_tls}
admin:
  address: 127.0.0.1:{admin}
workers: {workers}{timestamps}
limits:
  max_connections: 19000
  upstream_keepalive: 10000
timeouts:
  upstream_keepalive: 60s
access_log: {log}
routes:
  - name: bench
    match: {{path_prefix: /}}
    upstream: {scheme}://127.0.0.1:{upstream}{route_tls}
"""


class Tokentap(Child):
    """tokentap with its access log and statistics on (the defaults);
    timestamps: kernel or loop; tls: {cert, key, ca} for a TLS listener
    and an https upstream verified against ca."""

    def __init__(self, cpus, workdir, upstream, workers=2, wrapper=(),
                 name="tokentap", start_timeout=10.0, timestamps="kernel", tls=None,
                 extra=""):
        self.port = free_port()
        self.admin = free_port()
        self.log = os.path.join(workdir, f"{name}-access.jsonl")
        conf = os.path.join(workdir, f"{name}.yaml")
        listen_tls = route_tls = ""
        if tls:
            listen_tls = f"\n    tls: {{cert: {tls['cert']}, key: {tls['key']}}}"
            route_tls = f"\n    tls: {{ca_file: {tls['ca']}, sni: localhost}}"
        with open(conf, "w") as f:
            f.write(TOKENTAP_YAML.format(port=self.port, admin=self.admin,
                                         workers=workers, log=self.log,
                                         upstream=upstream,
                                         timestamps="" if timestamps == "kernel" else
                                         f"\ntimestamps: {timestamps}",
                                         scheme="https" if tls else "http",
                                         listen_tls=listen_tls, route_tls=route_tls) + extra)
        super().__init__(name, [*wrapper, binary("tokentap"), "-c", conf],
                         cpus, workdir)
        wait_port(self.port, start_timeout, proc=self.p)


class Relay(Child):
    """The floor: tests/bench/relay.c, a bare relay (one recv and one send
    per readiness, nothing else), with as many workers as the proxies."""

    def __init__(self, cpus, workdir, upstream, workers=2, wrapper=(),
                 name="floor", start_timeout=10.0):
        self.port = free_port()
        super().__init__(name, [*wrapper, RELAY, str(self.port),
                                str(upstream), str(workers)], cpus, workdir)
        wait_port(self.port, start_timeout, proc=self.p)


class Nginx(Child):
    """nginx in the foreground with its own prefix, config and temp dirs;
    tls: {cert, key, ca}: a TLS listener and an https upstream verified
    against ca (the same certificates as tokentap's, OpenSSL's defaults)."""

    TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nginx.conf")

    def __init__(self, cpus, workdir, upstream, workers=2, wrapper=(),
                 name="nginx", start_timeout=10.0, single=False, tls=None,
                 template=None, extra=()):
        self.port = free_port()
        # under valgrind: one process, no master/worker split to follow
        self.GLOBAL = "daemon off; master_process off;" if single else "daemon off;"
        prefix = os.path.join(workdir, name)
        os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
        with open(template or self.TEMPLATE) as f:
            text = f.read()
        ssl = (f" ssl;\n        ssl_certificate {tls['cert']};\n"
               f"        ssl_certificate_key {tls['key']}") if tls else ""
        upstream_ssl = (f"\n            proxy_ssl_trusted_certificate {tls['ca']};\n"
                        "            proxy_ssl_verify on;\n"
                        "            proxy_ssl_name localhost;\n"
                        "            proxy_ssl_session_reuse on;") if tls else ""
        for key, value in (("WORKERS", workers), ("NOFILE", NOFILE),
                           ("PREFIX", prefix), ("PORT", self.port),
                           ("UPSTREAM", upstream), ("SSL", ssl),
                           ("SCHEME", "https" if tls else "http"),
                           ("UPSTREAM_SSL", upstream_ssl), *extra):
            text = text.replace("@" + key + "@", str(value))
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(text)
        super().__init__(name, [*wrapper, "nginx", "-p", prefix + "/", "-c", conf,
                                "-e", "stderr", "-g", self.GLOBAL], cpus, workdir)
        wait_port(self.port, start_timeout, proc=self.p)

    def stop(self, timeout=15):
        # SIGQUIT is nginx's graceful stop; SIGTERM its fast one: we want fast
        return super().stop(timeout)


class Sink:
    """An OTLP/HTTP collector that takes every export and answers 200
    (the otel section's: decoding is the tests' job, not the bench's),
    counting exports and bytes; a thread of the bench's own process."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        sink = self
        self.exports = self.bytes = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                sink.exports += 1
                sink.bytes += n
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def http_json(port, path):
    """GET http://127.0.0.1:port/path as JSON ({} when it fails)."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return json.load(r)
    except (OSError, ValueError):
        return {}


def run_load(cpus, workdir, url, args, timeout=600, whole=False):
    """Runs tokentap-load pinned to cpus. Returns its JSON figures (the one
    level's; whole: the document) and the CPU seconds it used."""
    fd, out = tempfile.mkstemp(prefix="load-", suffix=".json", dir=workdir)
    os.close(fd)
    cmd = [binary("tokentap-load"), *args, "--json", out, url]
    with open(os.path.join(workdir, "load.err"), "ab") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=pinned(cpus, NOFILE))
    # wait4 for the child's rusage; a watchdog bounds a load that hangs
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"tokentap-load exited {p.returncode}: {' '.join(cmd)}")
    with open(out) as f:
        figures = json.load(f)
    if not whole:
        figures = figures["levels"][0]          # one run: one level
    os.unlink(out)
    return figures, usage.ru_utime + usage.ru_stime


def start_load(cpus, workdir, url, args):
    """tokentap-load in the background (for the memory runs)."""
    return Child("load-bg", [binary("tokentap-load"), *args, url], cpus, workdir)


def read_jsonl(path, offset=0):
    """The JSON lines of path from byte offset on, and the end offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = offset + data.rfind(b"\n") + 1
    lines = [json.loads(x) for x in data[:end - offset].splitlines() if x.strip()]
    return lines, end


def cpu_times():
    """{cpu: (task seconds, irq + softirq seconds, steal seconds)} since
    boot (/proc/stat). Task time is user + nice + system: what processes
    are charged; the network stack's softirq work is charged to no process;
    steal is time the hypervisor ran something else on this virtual CPU."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not (line.startswith("cpu") and line[3].isdigit()):
                continue
            name, *v = line.split()
            v = [int(x) for x in v]
            out[int(name[3:])] = ((v[0] + v[1] + v[2]) / TICK, (v[5] + v[6]) / TICK,
                                  (v[7] if len(v) > 7 else 0) / TICK)
    return out


def file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
