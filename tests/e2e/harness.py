# SPDX-License-Identifier: Apache-2.0
"""What the end-to-end tests share: the programs under test as processes,
one-route configs, a raw HTTP client that timestamps what it reads, the
admin endpoints and /metrics, tokentap-load, and waiting.

Tests are plain functions named test_* in tests/e2e/test_*.py; a failed
assert fails the test. Binaries come from $TOKENTAP_BUILD (default build/).
The raw HTTP client (request, Response, read_response, parse_sse, ...)
lives in client.py and is offered here; the peers a test talks to
(scripted backends, nginx, Prometheus, Alertmanager, webhook receivers,
TLS certificates, WebSocket frames, node) are in peers.py.

  with Mock() as m, Tokentap(conf(m)) as t:
      r = request(t.port, "/v1/chat/completions", {"stream": True})
      assert r.status == 200 and r.sse()[-1].data == "[DONE]"
      t.wait_logged(1)                      # its statistics are in now
      assert metric(t, "tokentap_requests_total", outcome="ok") == 1
"""
import concurrent.futures
import http.client
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import namedtuple

from client import (CHAT, Event, Response, build_request, dechunk, parse_response,  # noqa: F401
                    parse_sse, pipeline, raw_request, read_response, request,
                    split_response, sse_data)
from client import _header_list

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The build at import time; prefer binary(), which follows the runner.
BUILD = os.path.join(ROOT, os.environ.get("TOKENTAP_BUILD", "build"))
SAN_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

def binary(name):
    """A program of the build under test ($TOKENTAP_BUILD, read each time:
    the runner switches it between the plain and the sanitizer build)."""
    return os.path.join(ROOT, os.environ.get("TOKENTAP_BUILD", "build"), name)


def jsonl(f):
    """The complete lines of a JSON-lines file f, parsed. A line is one
    write(2), but a reader may see its first part: a write that crosses a
    page boundary extends the file after each page it copied (a tailer
    waits for the newline, as this does)."""
    return [json.loads(line) for line in f if line.endswith("\n") and line.strip()]


def report(msg):
    """A figure for the reader of the test run, not asserted."""
    print("REPORT " + msg, flush=True)


# ---------------------------------------------------------------- processes

_handed = []


def free_port():
    """A port nothing listens on now, not one of the last 256 handed out.

    The kernel may give the same free port to two bind(0)s in a row (a
    proxy's listen and admin ports, say); remembering them keeps one test's
    two servers apart. Another process may still take the port before ours
    binds it: Tokentap starts again on new ports when that happens.

    $TOKENTAP_TEST_PORTS (LO-HI, below the kernel's ephemeral range) gives
    the run a range of its own: make test's two passes run side by side,
    each in its half, so neither hands out a port the other just did."""
    span = os.environ.get("TOKENTAP_TEST_PORTS")
    lo, hi = (int(x) for x in span.split("-")) if span else (0, 0)
    while True:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", random.randint(lo, hi) if span else 0))
        except OSError:
            s.close()
            continue
        port = s.getsockname()[1]
        s.close()
        if port not in _handed:
            _handed.append(port)
            del _handed[:-256]
            return port


def wait_port(port, timeout=5.0, host="127.0.0.1", proc=None):
    """Until something accepts on port; stops early when proc has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited with status {proc.returncode} before "
                                 f"listening on {host}:{port}")
        try:
            socket.create_connection((host, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"nothing listens on {host}:{port} after {timeout}s")


def more_fds(n):
    """Raises this process's descriptor limit to n (the hard limit at most)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def pinned(cpus=None, nofile=None):
    """A preexec_fn that puts the child on cpus and raises its descriptor
    limit to nofile (the hard limit at most)."""
    def pin():
        if cpus:
            os.sched_setaffinity(0, cpus)
        if nofile:
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            soft = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return pin


class Proc:
    """A child process whose stderr goes to a file, stopped on exit (SIGTERM,
    then SIGKILL); a sanitizer's report in that file fails the test. cpus
    pins it, errfile and cwd place its stderr and its directory."""

    def __init__(self, args, env=None, stdout=None, cpus=None, errfile=None, cwd=None,
                 nofile=None):
        self.args = args
        self.keep_err = errfile is not None
        self.err = open(errfile, "ab") if errfile else \
            tempfile.NamedTemporaryFile(prefix="tt-err-", delete=False)
        e = dict(os.environ)
        if env:
            e.update(env)
        self.p = subprocess.Popen(args, stdout=stdout or subprocess.DEVNULL, stderr=self.err,
                                  env=e, cwd=cwd,
                                  preexec_fn=pinned(cpus, nofile) if cpus or nofile else None)
        self.err.close()
        self.pid = self.p.pid

    def stderr(self):
        with open(self.err.name, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.check_sanitizers()
        return self.p.returncode

    def check_sanitizers(self):
        err = self.stderr()
        for mark in SAN_MARKS:
            if mark in err:
                raise AssertionError(f"{os.path.basename(self.args[0])}: "
                                     f"sanitizer report:\n{err[-6000:]}")

    # what /proc says of it (and of its children: nginx's workers)
    def pids(self):
        out = [self.pid]
        try:
            with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return out

    def cpu_seconds(self):
        """User and system CPU seconds of every thread of pids() so far."""
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])      # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    def rss_kib(self, field="VmRSS"):
        total = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/status") as f:
                    total += next(int(x.split()[1]) for x in f if x.startswith(field + ":"))
            except (OSError, StopIteration):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            if not self.keep_err:
                os.unlink(self.err.name)


def run(program, *args, expect=None, timeout=60, input=None, env=None):
    """A program of the build (tokentap, tokentap-mock, tokentap-load) run to
    its end: the CompletedProcess (text). No sanitizer may speak; expect,
    when given, is the exit status it must have."""
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([binary(program), *args], capture_output=True, text=True,
                       timeout=timeout, input=input, env=e)
    for mark in SAN_MARKS:
        assert mark not in r.stderr, r.stderr[-6000:]
    assert expect is None or r.returncode == expect, \
        f"{program} {' '.join(args)}: exit {r.returncode}, wanted {expect}\n" \
        f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def load(*args, expect=0, timeout=120, report=True, whole=False, stderr=False):
    """tokentap-load with args (the URL among them): the figures of its one
    level (--json - is added; whole=True: the whole JSON document
    (docs/load-schema.md), every level of a sweep; stderr=True: a pair, and
    its words on stderr) or, with report=False, the CompletedProcess (its
    table on stdout, its words on stderr)."""
    if not report:
        return run("tokentap-load", *args, expect=expect, timeout=timeout)
    r = run("tokentap-load", *args, "--json", "-", expect=expect, timeout=timeout)
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1, doc.keys()
    if not whole:
        assert doc["kind"] == "run" and len(doc["levels"]) == 1, (doc["kind"], doc["levels"])
        doc = doc["levels"][0]
    return (doc, r.stderr) if stderr else doc


def conf_file(text, listen=True):
    """A config file of its own holding text, with listen and admin on
    fresh ports unless the text has them (listen=False: as it is)."""
    if listen:
        if "listen:" not in text:
            text = f"listen:\n  - address: 127.0.0.1:{free_port()}\n" + text
        if "admin:" not in text:
            text = f"admin:\n  address: 127.0.0.1:{free_port()}\n" + text
    path = os.path.join(tempfile.mkdtemp(prefix="tt-conf-"), "tokentap.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def check_config(text, listen=True):
    """tokentap -t on text: (the config file's path, the CompletedProcess)."""
    path = conf_file(text, listen)
    return path, run("tokentap", "-t", "-c", path, timeout=30)


def _url(u):
    if isinstance(u, int):
        return f"http://127.0.0.1:{u}"
    if isinstance(u, str):
        return u
    if hasattr(u, "url"):
        return u.url()
    return f"http://127.0.0.1:{u.port}"


def conf(upstream, extra="", name="llm", prefix=None, top=""):
    """The YAML of one route: name, forwarding to upstream (a port, a URL, a
    Mock or a backend; a list of them is a pool, `upstreams:`), matching
    path_prefix prefix if given. extra follows the route (its own keys
    indented four spaces, or top-level keys); top comes before `routes:`."""
    out = f"{top}routes:\n  - name: {name}\n"
    if prefix is not None:
        out += f"    match: {{path_prefix: {prefix}}}\n"
    if isinstance(upstream, (list, tuple)):
        out += "    upstreams:\n" + "".join(f"      - {{url: {_url(u)}}}\n" for u in upstream)
    else:
        out += f"    upstream: {_url(upstream)}\n"
    return out + extra


class Mock(Proc):
    """tokentap-mock on a fresh port (or the one given), logging each request
    it served to a file of its own; stop() and start(*flags) run it again on
    the same port with other flags."""

    def __init__(self, *flags, port=None):
        self.port = port or free_port()
        fd, self.log = tempfile.mkstemp(prefix="tt-mocklog-")
        os.close(fd)
        self.start(*flags)

    def start(self, *flags):
        super().__init__([binary("tokentap-mock"), "-l", f"127.0.0.1:{self.port}",
                          "--log", self.log, *flags])
        wait_port(self.port, proc=self.p)

    def url(self, path=""):
        """Its URL, as a route names it (and the upstream label shows it)."""
        return f"http://127.0.0.1:{self.port}{path}"

    def served(self, n=None, timeout=3.0):
        """The mock's log lines; waits (briefly) until there are n. A mock
        logs a request once it has sent all of it: maybe after the client
        had it."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log) as f:
                lines = [json.loads(x) for x in f if x.strip()]
            if n is None or len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def __exit__(self, *exc):
        try:
            running = self.p.poll() is None
            rc = self.stop()
            # SIGTERM ends it cleanly, streams open or not
            assert exc[0] is not None or not running or rc == 0, \
                f"tokentap-mock exited {rc}: {self.stderr()[-3000:]}"
        finally:
            try:
                super().__exit__(*exc)
            finally:
                os.unlink(self.log)


class Tokentap(Proc):
    """tokentap on a fresh port with the given YAML (routes and more).

    The listen, admin and access_log keys are filled in unless the YAML
    sets them; {port}, {admin} and {log} in the YAML are replaced."""

    def __init__(self, yaml_text, env=None, wait=True, wrapper=(), start_timeout=5.0):
        # a port taken by another process between free_port() and our bind
        # fails the start with "Address already in use": new ports, again
        for attempt in range(3):
            self.start(yaml_text, env, wrapper)
            if not wait:
                return
            try:
                wait_port(self.port, start_timeout, proc=self.p)
                if self.admin_ours:
                    wait_port(self.admin, start_timeout, proc=self.p)
                return
            except AssertionError as e:
                if attempt == 2 or self.p.poll() is None or \
                        "Address already in use" not in self.stderr():
                    raise AssertionError(f"tokentap did not start ({e}):\n" +
                                         self.stderr())
                os.unlink(self.err.name)

    def start(self, yaml_text, env, wrapper):
        self.port = free_port()
        self.admin = free_port()
        self.dir = tempfile.mkdtemp(prefix="tt-")
        self.log = os.path.join(self.dir, "access.jsonl")
        self.conf = os.path.join(self.dir, "tokentap.yaml")
        # the admin address is ours to wait for when we chose it
        self.admin_ours = "admin:" not in yaml_text or "{admin}" in yaml_text
        self.write_conf(self._filled(yaml_text))
        super().__init__([*wrapper, binary("tokentap"), "-c", self.conf], env=env)

    def _filled(self, text):
        text = text.replace("{port}", str(self.port)).replace(
            "{admin}", str(self.admin)).replace("{log}", self.log)
        if "listen:" not in text:
            text = f"listen:\n  - address: 127.0.0.1:{self.port}\n" + text
        if "admin:" not in text:
            text = f"admin:\n  address: 127.0.0.1:{self.admin}\n" + text
        if "access_log:" not in text:
            text = f"access_log: {self.log}\n" + text
        return text

    def write_conf(self, text):
        with open(self.conf, "w") as f:
            f.write(text)

    def reload(self, old=None, new=None, text=None):
        """SIGHUP, the config changed first: old replaced by new in it, or
        text as the new one (its listen, admin and access_log filled in as
        at start)."""
        if text is not None:
            self.write_conf(self._filled(text))
        elif old is not None:
            conf = open(self.conf).read()
            assert old in conf, (old, conf)
            self.write_conf(conf.replace(old, new, 1))
        self.p.send_signal(signal.SIGHUP)

    def access(self, n=None, timeout=5.0):
        """The access-log lines as dicts; waits until there are n of them
        (returns what there is after timeout: see wait_logged)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(self.log) as f:
                    lines = jsonl(f)
            except FileNotFoundError:
                lines = []
            if n is None or len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def wait_logged(self, n, timeout=10.0):
        """The access log once it has n lines; fails after timeout. A request
        is in /stats and /metrics before its line is written (the exchange
        publishes its record first): a test that reads them right after its
        client had the last byte waits here first. The stream and its
        connection leave active_streams and active_connections only after
        the line is written: wait for those gauges themselves."""
        lines = self.access(n, timeout)
        assert len(lines) >= n, f"{len(lines)} access-log lines of {n} after {timeout}s:" \
            f"\n{lines[-3:]}\n{self.stderr()[-2000:]}"
        return lines

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path, **kw):
        """get() on the admin address."""
        return get(self.admin, path, **kw)

    def __exit__(self, *exc):
        text = _metrics_texts.pop(self.admin, None)
        try:
            if exc[0] is None and text is not None:
                promtool_check(text)
        finally:
            super().__exit__(*exc)

    def get_when(self, path, ok, timeout=15.0):
        """The admin document at path (text) once ok(text) holds."""
        return until(lambda: ok(text := self.get(path).text) and text, timeout,
                     f"{path} as wanted")

    def stats(self, token=None, timeout=10.0, **query):
        """/stats?query as JSON."""
        q = "&".join(f"{k}={v}" for k, v in query.items())
        return get(self.admin, "/stats" + ("?" + q if q else ""), token=token, json=True,
                   timeout=timeout)

    def metric(self, name, **labels):
        return metric(self, name, **labels)


# ---------------------------------------------------------- waiting, threads

def until(fn, timeout=5.0, what="the condition", every=0.05):
    """fn()'s first true value, asked every `every` s; fails after timeout
    naming what and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {v!r:.2000})")
        time.sleep(every)


def completion(port, path=CHAT, model="m", headers=None, timeout=10.0, abort_after=None,
               **mock):
    """One streamed completion (stream: true) through port, its schedule
    asked of tokentap-mock with X-Mock-* headers: ttft="20ms" sends
    X-Mock-ttft: 20ms, role_delay X-Mock-role-delay, and so on (the mock
    reads them in any case). The Response (see request)."""
    h = {"X-Mock-" + k.replace("_", "-"): str(v) for k, v in mock.items()}
    h.update(_header_list(headers))
    return request(port, path, {"model": model, "stream": True}, h, timeout=timeout,
                   abort_after=abort_after)


def staircase(port, path, n, headers=None):
    """n streams opened one by one, each once the ones before stream (its
    first content came): the k-th starts with k - 1 others in flight. Reads
    them all to the end: {the X-Request-Id each was sent with: its client
    TTFT}."""
    token = re.compile(rb'"content":"[^"]')
    streams, ttft = [], {}
    for k in range(n):
        rid = f"stair-{k}-{os.urandom(4).hex()}"
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        r = Response()
        r.t_sent = time.monotonic()
        s.sendall(build_request(path, {"model": "m", "stream": True},
                                {"X-Request-Id": rid, **(headers or {})}, close=True))
        while r.after(token) is None:
            d = s.recv(65536)
            assert d, f"stream {k} ended before its first content"
            r.feed(d)
        ttft[rid] = r.after(token)
        streams.append((s, r))
    for s, r in streams:
        read_response(s, r, timeout=30)
        s.close()
    return ttft


def parallel(fn, items, threads=8):
    """fn(*item) (fn(item) if item is no tuple) for every item on a pool of
    threads: the results in order; the first exception is raised here."""
    def call(item):
        return fn(*item) if isinstance(item, tuple) else fn(item)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, items))


# ---------------------------------------------------------- admin, /metrics

class Reply(namedtuple("Reply", "status headers body")):
    """An admin answer: status, headers (case-insensitive), body bytes."""

    @property
    def text(self):
        return self.body.decode()

    def json(self):
        return json.loads(self.body)


def _admin_port(where):
    if isinstance(where, int):
        return where
    return where.admin if hasattr(where, "admin") else where.port


def get(where, path, token=None, headers=None, json=False, timeout=10.0, method="GET",
        body=None):
    """One request to an admin address (a port, or a Tokentap: its admin
    port) and its Reply, whatever the status; json=True: the body decoded,
    which must come with a 200. token: sent as a Bearer token."""
    c = http.client.HTTPConnection("127.0.0.1", _admin_port(where), timeout=timeout)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        reply = Reply(r.status, r.headers, r.read())
    finally:
        c.close()
    if path.startswith("/metrics") and reply.status == 200 and method == "GET":
        _metrics_read(_admin_port(where), reply)
    if json:
        assert reply.status == 200, f"GET {path}: {reply.status} {reply.body[:2000]!r}"
        return reply.json()
    return reply


# The last text exposition a test read from each admin port: when the
# tokentap serving it stops, promtool checks it (Tokentap.__exit__), so
# every test that reads /metrics proves it valid, whatever features it
# turned on, at no more than one promtool run a test.
_metrics_texts = {}


def _metrics_read(port, reply):
    kind = reply.headers.get("Content-Type", "")
    if reply.headers.get("Content-Encoding") or not kind.startswith("text/plain"):
        return
    _metrics_texts[port] = reply.body.decode()


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


def samples(text):
    """Every sample of a Prometheus text exposition: (name, {label: value},
    value), label values unescaped."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample: {line!r}"
        labels, pos, inner = {}, 0, m.group(2) or ""
        while pos < len(inner):
            lm = _LABEL.match(inner, pos)
            assert lm and lm.end() > pos, f"bad labels: {line!r}"
            labels[lm.group(1)] = re.sub(r'\\(.)', lambda x: "\n" if x.group(1) == "n"
                                         else x.group(1), lm.group(2))
            pos = lm.end()
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def metric(source, name, **labels):
    """The value of metric `name`: the sum of its samples whose labels hold
    each of labels with exactly that value, summed over every other label
    (a histogram's le too, unless given: ask for name_bucket with le=...);
    None when no sample matches. source: the /metrics text, an admin port,
    or a Tokentap (its /metrics is read)."""
    text = source if isinstance(source, str) else get(source, "/metrics").text
    vals = [v for n, ls, v in samples(text) if n == name and
            all(ls.get(k) == str(want) for k, want in labels.items())]
    return sum(vals) if vals else None


def promtool_check(text):
    """promtool check metrics passes the exposition."""
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


NODE_DIR = os.path.join(ROOT, "build", "node")
NODE_PACKAGES = os.path.join(ROOT, "tests", "e2e", "package.json")


def node_modules():
    """build/node/node_modules holding the npm packages of tests/e2e/package.json
    at their pinned versions; npm installs them when one is missing or differs."""
    with open(NODE_PACKAGES) as f:
        want = json.load(f)["dependencies"]
    mods = os.path.join(NODE_DIR, "node_modules")

    def version(name):
        try:
            with open(os.path.join(mods, name, "package.json")) as f:
                return json.load(f)["version"]
        except (OSError, ValueError, KeyError):
            return None

    if any(version(name) != v for name, v in want.items()):
        os.makedirs(NODE_DIR, exist_ok=True)
        shutil.copyfile(NODE_PACKAGES, os.path.join(NODE_DIR, "package.json"))
        r = subprocess.run(["npm", "install", "--prefix", NODE_DIR, "--no-package-lock",
                            "--no-audit", "--no-fund"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"npm install in {NODE_DIR}:\n{r.stderr[-2000:]}"
        bad = {name: version(name) for name, v in want.items() if version(name) != v}
        assert not bad, f"npm installed {bad}, not {want}"
    return mods
