# SPDX-License-Identifier: Apache-2.0
"""Command line, reload and drain: the process as an operator runs it."""
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import Tokentap, conf, free_port, parallel, raw_request, request, run, until
from peers import Backend, sse_handler

ROUTE = "routes:\n  - name: r\n    match: {path_prefix: /v1/}\n    upstream: http://127.0.0.1:9\n"
EVENTS = [b"data: %d\n\n" % i for i in range(100)]

SANITIZER_SKIP = set()


def test_flags():
    for flag in ("-V", "--version"):
        r = run("tokentap", flag)
        assert r.returncode == 0 and r.stdout.startswith("tokentap "), (flag, r)
    for flag in ("-h", "--help"):
        r = run("tokentap", flag)
        assert r.returncode == 0 and "usage" in r.stdout, (flag, r)
    r = run("tokentap", "--bogus")
    assert r.returncode == 2 and "usage" in r.stderr
    r = run("tokentap", "-x")
    assert r.returncode == 2 and "usage" in r.stderr


def test_check_config():
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("routes:\n  - name: a\n    upstream: http://127.0.0.1:1\n")
    r = run("tokentap", "-t", "-c", f.name)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r
    with open(f.name, "w") as g:
        g.write("routes:\n  - name: a\n    upstream: http://127.0.0.1:1\n    dialekt: raw\n"
                "timeouts:\n  idle: forever\n")
    r = run("tokentap", "-t", "-c", f.name)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert any(l.startswith(f"{f.name}:4:5: ") for l in lines), r.stderr
    assert any(l.startswith(f"{f.name}:6:9: ") for l in lines), r.stderr
    os.unlink(f.name)


def test_sighup_reload_under_load_loses_nothing():
    n, events = 200, 20
    with Backend(sse_handler(EVENTS[:events], 0.025)) as b, Tokentap(conf(b, name="r1")) as t:
        out = []
        th = threading.Thread(target=lambda: out.extend(
            parallel(lambda _: request(t.port, method="GET", timeout=15), range(n), n)))
        th.start()
        until(lambda: len(b.requests) >= n // 2, 10, "streams in flight")
        t.reload("name: r1\n", "name: r1\n    set_headers: {X-Gen: two}\n")
        th.join(30)
        assert len(out) == n and all(r.body == b"".join(EVENTS[:events]) for r in out)
        until(lambda: request(t.port, method="GET") and b.requests[-1].header("X-Gen") == "two",
              10, "a request after the reload with its header")
        assert b.requests[0].header("X-Gen") is None
        assert len(t.wait_logged(n + 1)) >= n + 1


def test_bad_reload_keeps_running_config():
    with Backend(sse_handler(EVENTS[:1])) as b, Tokentap(conf(b)) as t:
        t.write_conf("routes: [oops\n")
        t.reload()
        until(lambda: "keeping the running configuration" in t.stderr(), 10, "the refusal")
        assert request(t.port, method="GET").body == EVENTS[0]


def test_sigterm_drains_streams_in_flight():
    n, events = 200, 20
    with Backend(sse_handler(EVENTS[:events], 0.03)) as b, Tokentap(conf(b)) as t:
        out = []
        th = threading.Thread(target=lambda: out.extend(
            parallel(lambda _: request(t.port, method="GET", timeout=15), range(n), n)))
        th.start()
        until(lambda: len(b.requests) == n, 10, "every stream in flight", every=0.01)
        t.p.send_signal(signal.SIGTERM)

        def refused():
            try:
                socket.create_connection(("127.0.0.1", t.port), timeout=1).close()
                return False
            except OSError:
                return True
        until(refused, 5, "the listener closed after SIGTERM", every=0.01)
        th.join(30)
        assert t.p.wait(10) == 0
        assert len(out) == n and all(r.body == b"".join(EVENTS[:events]) for r in out)
        assert len(t.access()) == n


def test_sigterm_gives_up_after_shutdown_timeout():
    with Backend(sse_handler(EVENTS, 0.05)) as b, \
            Tokentap(conf(b, top="timeouts: {shutdown: 300ms}\n")) as t:
        th = threading.Thread(target=lambda: request(t.port, method="GET"))
        th.start()
        until(lambda: b.requests, 10, "the stream in flight")
        start = time.monotonic()
        t.p.send_signal(signal.SIGTERM)
        assert t.p.wait(15) == 0
        # 300 ms configured; 30 s the default, and the stream's 5 s
        assert time.monotonic() - start < 4
        th.join(10)
        assert t.wait_logged(1)[0]["outcome"] == "timeout"


def test_sigusr1_reopens_access_log():
    with Backend(sse_handler(EVENTS[:1])) as b, Tokentap(conf(b)) as t:
        request(t.port, method="GET")
        assert len(t.wait_logged(1)) == 1
        for n in (1, 2):         # twice: a reopen must not spoil the next one
            os.rename(t.log, t.log + f".{n}")
            t.p.send_signal(signal.SIGUSR1)
            # "logs reopened" once the new file is the one written (the
            # file exists a moment before that: the main thread, nice +10,
            # may be preempted in between on a busy machine)
            until(lambda: t.stderr().count("logs reopened") >= n, 10, "the access log reopened")
            assert os.path.exists(t.log)
            request(t.port, method="GET")
            assert len(t.wait_logged(1)) == 1
        assert sorted(os.listdir(t.dir)) == ["access.jsonl", "access.jsonl.1",
                                             "access.jsonl.2", "tokentap.yaml"]


def test_one_instance_per_address_and_the_backlog_configured():
    """A second tokentap on an address the first listens on refuses to
    start (before, SO_REUSEPORT let it bind beside the first and take half
    the connections); the backlog is the one configured (4096 by default;
    evconnlistener_new(-1) had listen(2)ed again at 128)."""
    with Tokentap("listen:\n  - address: 127.0.0.1:{port}\n"
                  "  - address: 127.0.0.1:{admin2}\n    backlog: 1000\n"
                  .replace("{admin2}", str(free_port())) + ROUTE) as t:
        ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
        queues = {}
        for line in ss.splitlines():
            f = line.split()
            queues.setdefault(f[3], set()).add(int(f[2]))
        assert queues[f"127.0.0.1:{t.port}"] == {4096}, ss
        second = [a for a in queues if a != f"127.0.0.1:{t.port}" and a.startswith("127.0.0.1:")
                  and 1000 in queues[a]]
        assert second, ss
        with open(os.path.join(t.dir, "two.yaml"), "w") as f:
            f.write(f"listen:\n  - address: 127.0.0.1:{t.port}\n"
                    f"admin: {{address: 127.0.0.1:{free_port()}}}\n" + ROUTE)
        r = run("tokentap", "-c", os.path.join(t.dir, "two.yaml"), timeout=10)
        assert r.returncode != 0 and "Address already in use" in r.stderr, r
        # the first still answers every connection
        for _ in range(10):
            out = raw_request(t.port, b"GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 404"), out


def test_check_fails_for_what_start_would_fail_on():
    """-t names, at FILE:LINE:COL, what would stop tokentap at start: log
    and stats files it could not open, the admin listener on a proxy
    address, an address given twice (before: configuration OK, then the
    start failed); the README's quickstart config checks as it is."""
    with tempfile.TemporaryDirectory() as d:
        locked = os.path.join(d, "locked")
        os.mkdir(locked, 0o500)
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write("listen:\n  - address: 127.0.0.1:8080\n  - address: 0.0.0.0:8080\n"
                    "admin:\n  address: 127.0.0.1:8080\n" + ROUTE)
        r = run("tokentap", "-t", "-c", path)
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.splitlines() == [
            f"{path}:3:5: listen: 0.0.0.0:8080 is given twice",
            f"{path}:5:12: admin.address 127.0.0.1:8080 is also a listen address"], r.stderr
        # the files it writes, once the rest is right
        with open(path, "w") as f:
            f.write(f"access_log: {d}/missing/access.jsonl\n"
                    f"stats:\n  file: {locked}/stats.jsonl\n" + ROUTE)
        r = run("tokentap", "-t", "-c", path)
        assert r.returncode == 1 and r.stdout == "", r
        lines = r.stderr.splitlines()
        assert lines[0] == (f"{path}:1:13: access_log {d}/missing/access.jsonl: the "
                            f"directory {d}/missing does not exist"), lines
        if os.geteuid() != 0:          # root writes anywhere
            assert lines[1] == (f"{path}:3:9: stats.file {locked}/stats.jsonl: the "
                                f"directory {locked} is not writable"), lines
        r = run("tokentap", "-t", "-c", os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), "conf", "quickstart.yaml"))
        assert (r.returncode, r.stdout) == (0, "configuration OK\n"), r
