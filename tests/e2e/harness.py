"""Helpers shared by the end-to-end tests: ports, processes, raw HTTP.

Tests are plain functions named test_* in tests/e2e/test_*.py; a failed
assert fails the test. Binaries come from $TOKENTAP_BUILD (default build/).
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The build at import time; prefer binary(), which follows the runner.
BUILD = os.path.join(ROOT, os.environ.get("TOKENTAP_BUILD", "build"))


def binary(name):
    """A program of the build under test ($TOKENTAP_BUILD, read each time:
    the runner switches it between the plain and the sanitizer build)."""
    return os.path.join(ROOT, os.environ.get("TOKENTAP_BUILD", "build"), name)


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


_handed = []


def free_port():
    """A port nothing listens on now, not one of the last 256 handed out.

    The kernel may give the same free port to two bind(0)s in a row (a
    proxy's listen and admin ports, say); remembering them keeps one test's
    two servers apart. Another process may still take the port before ours
    binds it: Tokentap starts again on new ports when that happens."""
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
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


class Proc:
    """A child process whose stderr goes to a temp file, stopped on exit."""

    def __init__(self, args, env=None, stdout=None):
        self.err = tempfile.NamedTemporaryFile(prefix="tt-err-", delete=False)
        self.args = args
        e = dict(os.environ)
        if env:
            e.update(env)
        self.p = subprocess.Popen(args, stdout=stdout or subprocess.DEVNULL,
                                  stderr=self.err, env=e)

    def stderr(self):
        with open(self.err.name, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=15, timeout=10):
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
        for mark in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                     "runtime error:"):
            if mark in err:
                raise AssertionError(f"{os.path.basename(self.args[0])}: "
                                     f"sanitizer report:\n{err[-6000:]}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.stop()
        finally:
            os.unlink(self.err.name)


def raw_request(port, data, timeout=5.0, host="127.0.0.1"):
    """Sends raw bytes, returns every byte the peer sent until it closed."""
    s = socket.create_connection((host, port), timeout=timeout)
    s.sendall(data)
    chunks = []
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    except socket.timeout:
        pass
    s.close()
    return b"".join(chunks)


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
        """The mock's log lines; waits (briefly) until there are n."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log) as f:
                lines = [json.loads(x) for x in f if x.strip()]
            if n is None or len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def __exit__(self, *exc):
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
        text = yaml_text.replace("{port}", str(self.port)).replace(
            "{admin}", str(self.admin)).replace("{log}", self.log)
        if "listen:" not in text:
            text = f"listen:\n  - address: 127.0.0.1:{self.port}\n" + text
        if "admin:" not in text:
            text = f"admin:\n  address: 127.0.0.1:{self.admin}\n" + text
        if "access_log:" not in text:
            text = f"access_log: {self.log}\n" + text
        self.write_conf(text)
        super().__init__([*wrapper, binary("tokentap"), "-c", self.conf], env=env)

    def write_conf(self, text):
        with open(self.conf, "w") as f:
            f.write(text)

    def access(self, n=None, timeout=5.0):
        """The access-log lines as dicts; waits until there are n of them."""
        import json
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open(self.log) as f:
                    lines = [json.loads(l) for l in f if l.strip()]
            except FileNotFoundError:
                lines = []
            if n is None or len(lines) >= n or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    def url(self, path="/"):
        return f"http://127.0.0.1:{self.port}{path}"


def split_response(data):
    """(head bytes, body bytes) of a raw HTTP response."""
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def dechunk(body):
    out = b""
    while body:
        line, _, body = body.partition(b"\r\n")
        n = int(line.split(b";")[0], 16)
        if n == 0:
            break
        out += body[:n]
        body = body[n + 2:]
    return out
