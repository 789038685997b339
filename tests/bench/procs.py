"""The processes of a benchmark run and what /proc says about them.

Every child is pinned to a CPU set and gets 20,000 descriptors (the soft
limit raised to the machine's hard limit at most): the mock and the client
share one set, the proxy under test has the other to itself (see bench.py).
"""
import json
import os
import resource
import signal
import socket
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("TOKENTAP_BUILD", "build"))
NOFILE = 20000
TICK = os.sysconf("SC_CLK_TCK")


# the floor is no part of the product: one build of it, whatever is tested
RELAY = os.path.join(ROOT, "build", "bench-relay")


def binary(name):
    return os.path.join(BUILD, name)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, timeout=10.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


def _preexec(cpus):
    def run():
        if cpus:
            os.sched_setaffinity(0, cpus)
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft = NOFILE if hard == resource.RLIM_INFINITY else min(NOFILE, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return run


class Child:
    """A pinned child process; stderr goes to a file of the run's directory."""

    def __init__(self, name, args, cpus, workdir, stdout=None):
        self.name = name
        self.args = args
        self.err_path = os.path.join(workdir, f"{name}.err")
        with open(self.err_path, "ab") as err:
            self.p = subprocess.Popen(args, stdout=stdout or subprocess.DEVNULL,
                                      stderr=err, preexec_fn=_preexec(cpus),
                                      cwd=workdir)
        self.pid = self.p.pid

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode(errors="replace")

    def check(self):
        if self.p.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.p.returncode}):\n"
                               f"{self.stderr()[-2000:]}")

    def stop(self, timeout=15):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode

    def pids(self):
        """This process and its children (nginx: master and workers)."""
        out = [self.pid]
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return out

    def cpu_s(self):
        """User + system CPU seconds of every thread of pids() so far."""
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])   # utime, stime
        return total / TICK

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

    def rss_kib(self):
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                continue
        return total

    def fds(self):
        total = 0
        for pid in self.pids():
            try:
                total += len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
        return total


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


TOKENTAP_YAML = """\
listen:
  - address: 127.0.0.1:{port}{listen_tls}
admin:
  address: 127.0.0.1:{admin}
workers: {workers}{timestamps}
limits:
  max_connections: 19000
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
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                             preexec_fn=_preexec(cpus))
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
