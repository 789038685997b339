"""Command line, reload and drain: the process as an operator runs it."""
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

from backend import SSE_HEAD, Backend
from harness import Tokentap, binary, dechunk, free_port, raw_request, split_response

ROUTE = "routes:\n  - name: r\n    match: {path_prefix: /v1/}\n    upstream: http://127.0.0.1:9\n"

SANITIZER_SKIP = set()


def run(*args):
    return subprocess.run([binary("tokentap"), *args], capture_output=True, text=True,
                          timeout=10)


def test_flags():
    for flag in ("-V", "--version"):
        r = run(flag)
        assert r.returncode == 0 and r.stdout.startswith("tokentap "), (flag, r)
    for flag in ("-h", "--help"):
        r = run(flag)
        assert r.returncode == 0 and "usage" in r.stdout, (flag, r)
    r = run("--bogus")
    assert r.returncode == 2 and "usage" in r.stderr
    r = run("-x")
    assert r.returncode == 2 and "usage" in r.stderr


def test_check_config():
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("routes:\n  - name: a\n    upstream: http://127.0.0.1:1\n")
    r = run("-t", "-c", f.name)
    assert r.returncode == 0 and r.stdout.strip() == "configuration OK", r
    with open(f.name, "w") as g:
        g.write("routes:\n  - name: a\n    upstream: http://127.0.0.1:1\n    dialekt: raw\n"
                "timeouts:\n  idle: forever\n")
    r = run("-t", "-c", f.name)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert any(l.startswith(f"{f.name}:4:5: ") for l in lines), r.stderr
    assert any(l.startswith(f"{f.name}:6:9: ") for l in lines), r.stderr
    os.unlink(f.name)


def stream_handler(events, gap):
    def handle(req, c):
        c.send(SSE_HEAD)
        for i in range(events):
            c.chunk(b"data: %d\n\n" % i)
            time.sleep(gap)
        c.end_chunks()
        return "keep"
    return handle


def fetch(port, results, i):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
        s.close()
        results[i] = data
    except OSError as e:
        results[i] = e


def expected(events):
    return b"".join(b"data: %d\n\n" % i for i in range(events))


def test_sighup_reload_under_load_loses_nothing():
    n, events = 200, 20
    with Backend(stream_handler(events, 0.025)) as b:
        cfg = f"routes:\n  - name: r1\n    upstream: http://127.0.0.1:{b.port}\n"
        with Tokentap(cfg) as t:
            results = [None] * n
            threads = [threading.Thread(target=fetch, args=(t.port, results, i)) for i in range(n)]
            for th in threads:
                th.start()
            time.sleep(0.3)
            t.write_conf(open(t.conf).read().replace(
                "name: r1\n", "name: r1\n    set_headers: {X-Gen: two}\n"))
            t.p.send_signal(signal.SIGHUP)
            for th in threads:
                th.join(15)
            for r in results:
                assert isinstance(r, bytes), r
                assert dechunk(split_response(r)[1]) == expected(events)
            time.sleep(0.1)
            fetch(t.port, results, 0)
            assert b.requests[-1].header("X-Gen") == "two"
            assert b.requests[0].header("X-Gen") is None
            assert len(t.access(n + 1)) == n + 1


def test_bad_reload_keeps_running_config():
    with Backend(stream_handler(1, 0)) as b:
        cfg = f"routes:\n  - name: r1\n    upstream: http://127.0.0.1:{b.port}\n"
        with Tokentap(cfg) as t:
            t.write_conf("routes: [oops\n")
            t.p.send_signal(signal.SIGHUP)
            time.sleep(0.3)
            results = [None]
            fetch(t.port, results, 0)
            assert dechunk(split_response(results[0])[1]) == expected(1)
            assert "keeping the running configuration" in t.stderr()


def test_sigterm_drains_streams_in_flight():
    n, events = 200, 20
    with Backend(stream_handler(events, 0.03)) as b:
        cfg = f"routes:\n  - name: r1\n    upstream: http://127.0.0.1:{b.port}\n"
        with Tokentap(cfg) as t:
            results = [None] * n
            threads = [threading.Thread(target=fetch, args=(t.port, results, i)) for i in range(n)]
            for th in threads:
                th.start()
            deadline = time.monotonic() + 10    # every stream in flight first
            while len(b.requests) < n and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(b.requests) == n
            t.p.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            try:
                socket.create_connection(("127.0.0.1", t.port), timeout=1).close()
                refused = False
            except OSError:
                refused = True
            assert refused, "still accepting after SIGTERM"
            for th in threads:
                th.join(15)
            assert t.p.wait(10) == 0
            for r in results:
                assert isinstance(r, bytes) and dechunk(split_response(r)[1]) == expected(events)
            assert len(t.access()) == n


def test_sigterm_gives_up_after_shutdown_timeout():
    with Backend(stream_handler(100, 0.05)) as b:
        cfg = (f"timeouts: {{shutdown: 300ms}}\nroutes:\n  - name: r1\n"
               f"    upstream: http://127.0.0.1:{b.port}\n")
        with Tokentap(cfg) as t:
            results = [None]
            th = threading.Thread(target=fetch, args=(t.port, results, 0))
            th.start()
            time.sleep(0.2)
            start = time.monotonic()
            t.p.send_signal(signal.SIGTERM)
            assert t.p.wait(5) == 0
            assert time.monotonic() - start < 2
            th.join(5)
            assert t.access(1)[0]["outcome"] == "timeout"


def test_sigusr1_reopens_access_log():
    with Backend(stream_handler(1, 0)) as b:
        cfg = f"routes:\n  - name: r1\n    upstream: http://127.0.0.1:{b.port}\n"
        with Tokentap(cfg) as t:
            results = [None]
            fetch(t.port, results, 0)
            assert len(t.access(1)) == 1
            for n in (1, 2):         # twice: a reopen must not spoil the next one
                os.rename(t.log, t.log + f".{n}")
                t.p.send_signal(signal.SIGUSR1)
                time.sleep(0.2)
                fetch(t.port, results, 0)
                assert len(t.access(1)) == 1
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
        r = subprocess.run([binary("tokentap"), "-c", os.path.join(t.dir, "two.yaml")],
                           capture_output=True, text=True, timeout=10)
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
        r = run("-t", "-c", path)
        assert r.returncode == 1 and r.stdout == "", r
        assert r.stderr.splitlines() == [
            f"{path}:3:5: listen: 0.0.0.0:8080 is given twice",
            f"{path}:5:12: admin.address 127.0.0.1:8080 is also a listen address"], r.stderr
        # the files it writes, once the rest is right
        with open(path, "w") as f:
            f.write(f"access_log: {d}/missing/access.jsonl\n"
                    f"stats:\n  file: {locked}/stats.jsonl\n" + ROUTE)
        r = run("-t", "-c", path)
        assert r.returncode == 1 and r.stdout == "", r
        lines = r.stderr.splitlines()
        assert lines[0] == (f"{path}:1:13: access_log {d}/missing/access.jsonl: the "
                            f"directory {d}/missing does not exist"), lines
        if os.geteuid() != 0:          # root writes anywhere
            assert lines[1] == (f"{path}:3:9: stats.file {locked}/stats.jsonl: the "
                                f"directory {locked} is not writable"), lines
        r = run("-t", "-c", os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), "conf", "quickstart.yaml"))
        assert (r.returncode, r.stdout) == (0, "configuration OK\n"), r
