# SPDX-License-Identifier: Apache-2.0
"""tokentap, tokentap-mock and tokentap-load under valgrind's memcheck:
no invalid access, no use of uninitialised memory, nothing definitely lost,
along the paths a stream takes (direct body reads, keep-alive, a client
that leaves mid-stream, stray upstream bytes, errors, admin scrapes, a
reload) and a clean exit."""
import os
import shutil
import signal
import socket
import subprocess
import time

from harness import Proc, Tokentap, binary, build_request, free_port, raw_request, until, \
    wait_port
from peers import Backend

# valgrind cannot run an AddressSanitizer build
# make check leaves out what needs valgrind
CHECK_SKIP = {"*"}
SANITIZER_SKIP = {"test_memcheck_proxy_mock_and_load"}

MEMCHECK = ["valgrind", "--quiet", "--error-exitcode=99", "--leak-check=full",
            "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
            "--track-fds=no"]


def stop(proc):
    """SIGTERM, then the exit status valgrind gives (99: it found errors)."""
    proc.p.send_signal(signal.SIGTERM)
    try:
        proc.p.wait(60)
    except subprocess.TimeoutExpired:
        proc.p.kill()
        proc.p.wait()
    return proc.p.returncode


def test_memcheck_proxy_mock_and_load():
    if shutil.which("valgrind") is None:
        raise AssertionError("valgrind missing: make deps installs it")
    mock_port = free_port()
    mock = Proc([*MEMCHECK, binary("tokentap-mock"), "-l", f"127.0.0.1:{mock_port}",
                 "--ttft", "5ms", "--tpot", "1ms"])

    def stray(req, c):
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Content-Length: 11\r\n\r\n")
        time.sleep(0.05)
        c.send(b"data: one\n\nSTRAY")
        return "keep"

    try:
        wait_port(mock_port, 60)
        with Backend(stray) as b:
            yaml = f"""workers: 1
routes:
  - name: stray
    match: {{path_prefix: /stray}}
    upstream: http://127.0.0.1:{b.port}
  - name: mock
    upstream: http://127.0.0.1:{mock_port}
    thresholds: {{ttft_warning: 1ms}}
"""
            t = Tokentap(yaml, wrapper=MEMCHECK, start_timeout=60)
            try:
                # streams read directly, on one kept connection each side
                s = socket.create_connection(("127.0.0.1", t.port), timeout=20)
                for _ in range(3):
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                              b"X-Mock-Tokens: 20\r\nContent-Length: 2\r\n\r\n{}")
                    data = b""
                    while not data.endswith(b"0\r\n\r\n"):
                        data += s.recv(65536)
                    assert b"[DONE]" in data, data[-200:]
                s.close()
                # a client that leaves mid-stream
                s = socket.create_connection(("127.0.0.1", t.port), timeout=20)
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                          b"X-Mock-Tokens: 500\r\nX-Mock-TPOT: 5ms\r\n"
                          b"Content-Length: 2\r\n\r\n{}")
                s.recv(4096)
                s.close()
                # stray bytes after a response, an error, a bad request
                body = b'{"model":"m1","stream":true,"x"'

                def post(path="/v1/chat/completions", headers=None):
                    return raw_request(t.port, build_request(path, body, headers, close=True),
                                       timeout=20)
                assert post("/stray").endswith(b"data: one\n\n")
                assert b" 400 " in raw_request(t.port, b"GET / HTTP/1.1\r\n\r\n")
                assert b"404" not in post()[:20]
                # the load generator through it, under memcheck too
                load = subprocess.run(
                    [*MEMCHECK, binary("tokentap-load"), "-c", "4", "-n", "8",
                     "--max-tokens", "10", "--lag",
                     f"http://127.0.0.1:{t.port}/v1/chat/completions"],
                    capture_output=True, text=True, timeout=120)
                assert load.returncode == 0, load.stderr[-3000:]
                for path in ("/metrics", "/stats?by=route,tenant,model", "/alerts"):
                    r = t.get(path, timeout=20)
                    assert r.status == 200, (path, r.body[:200])
                t.reload()
                until(lambda: "reload: configuration" in t.stderr(), 60, "the reload")
                assert b"[DONE]" in post(headers={"X-Mock-Tokens": "5"})
                assert t.access(8, timeout=20), t.stderr()
            finally:
                rc = stop(t)
                err = t.stderr()
                os.unlink(t.err.name)
            assert rc == 0, f"tokentap under memcheck exited {rc}:\n{err[-6000:]}"
    finally:
        rc = stop(mock)
        err = mock.stderr()
        os.unlink(mock.err.name)
    assert rc == 0, f"tokentap-mock under memcheck exited {rc}:\n{err[-6000:]}"
