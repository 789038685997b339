# SPDX-License-Identifier: Apache-2.0
"""A backend killed (-9) and started again on the same port while tokentap
holds pooled connections to it: a POST is never sent twice, so a request
must not go out on a pooled connection the old process left behind (one
it has already closed or reset); nginx's figure for the same case is
100/100.
"""
import signal
import socket
import subprocess
import sys
import threading
import time

from harness import Tokentap, build_request, conf, free_port, read_response, report, until
from peers import Backend as ThreadBackend

N = 100

# The backend: HTTP/1.1 keep-alive, every request answered 200 after
# DELAY seconds (so that N requests at once hold N connections), on a port
# bound with SO_REUSEADDR once it reads a line on stdin: the next process
# waits ready, and the restart takes a few milliseconds.
BACKEND = r"""
import socket, sys, threading, time
port, delay = int(sys.argv[1]), float(sys.argv[2])
sys.stdin.readline()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
while True:        # until the killed process's listener is gone
    try:
        srv.bind(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.0005)
srv.listen(1024)
print("listening", flush=True)

def serve(c):
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            d = c.recv(65536)
            if not d:
                return
            buf += d
        head, buf = buf.split(b"\r\n\r\n", 1)
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        while len(buf) < n:
            buf += c.recv(65536)
        buf = buf[n:]
        time.sleep(delay)
        body = b'{"pid":%d}' % os.getpid()
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

import os
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


class Backend:
    """A backend process, started and waiting for go()."""

    def __init__(self, port, delay=0.0):
        self.p = subprocess.Popen([sys.executable, "-c", BACKEND, str(port), str(delay)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def go(self):
        self.p.stdin.write(b"go\n")
        self.p.stdin.flush()
        assert self.p.stdout.readline() == b"listening\n"

    def kill(self):
        self.p.kill()
        self.p.wait()


BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
POST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))


def round_trip(clients):
    """One POST on each client connection at once; the statuses. A client
    tokentap closed (after a 502) is opened again for the next round."""
    for s in clients:
        s.sendall(POST)
    return collect(clients)


def collect(clients):
    out = []
    for i, s in enumerate(clients):
        status = read_response(s).status or 0
        out.append(status)
        if status != 200:
            s.close()
            clients[i] = socket.create_connection(clients.addr, timeout=10)
    return out


class Clients(list):
    def __init__(self, port):
        self.addr = ("127.0.0.1", port)
        super().__init__(socket.create_connection(self.addr, timeout=10) for _ in range(N))

    def close(self):
        for s in self:
            s.close()


def restart(old, port):
    """kill -9 and the next process listening: (new backend, milliseconds)."""
    new = Backend(port)
    time.sleep(0.2)          # python is up and waits for its go
    t0 = time.monotonic()
    old.p.kill()
    new.go()
    ms = (time.monotonic() - t0) * 1000
    old.p.wait()
    return new, ms


def test_backend_restart_within_25ms_every_post_answered():
    """N keep-alive clients, each POST answered after 50 ms, so tokentap
    pools N upstream connections. The backend is killed and its successor
    listens a few ms later (25 ms at most on a quiet machine): the next N
    POSTs are all answered 200 by the new process. Then the harder order: tokentap is stopped (SIGSTOP) while the
    clients send their POSTs, the backend is killed and started again, and
    tokentap goes on: each request is read before the pooled connections'
    ends are, so only a check before reuse keeps them off the dead ones."""
    port = free_port()
    b = Backend(port, 0.05)
    b.go()
    try:
        with Tokentap(conf(port, prefix="/", top="workers: 1\n")) as t:
            clients = Clients(t.port)
            try:
                assert round_trip(clients) == [200] * N
                # (a few ms when the machine is quiet; a loaded one may take
                # longer, which only makes the case easier)
                b, ms = restart(b, port)
                got = round_trip(clients)
                assert got.count(200) == N, f"{got.count(200)}/{N} answered 200 after a " \
                    f"restart in {ms:.1f} ms: {sorted(set(got))}"

                assert round_trip(clients) == [200] * N   # pooled on the new process
                t.p.send_signal(signal.SIGSTOP)
                try:
                    for s in clients:
                        s.sendall(POST)
                    time.sleep(0.1)
                    b, ms = restart(b, port)
                finally:
                    t.p.send_signal(signal.SIGCONT)
                got = collect(clients)
                # Before the check before reuse this order answered 0 to 4
                # of 100. With it, 1 in 100 was still a 502 in busy runs:
                # the killed backend's FIN waited in the kernel's deferred
                # loopback delivery past the check, and the POST went out on
                # the dead connection. Its FIN acknowledged none of the
                # POST, so tokentap sends it again (tokentap.yaml(5), retries).
                again = t.stderr().count("pooled upstream connection closed, retrying")
                if again:
                    report(f"restart while stopped: {again} POST(s) the backend never "
                           "read sent again on a new connection")
                bad = [x for x in t.access(4 * N, 10) if x["status"] != 200]
                ids = [x["request_id"] for x in bad]
                said = [ln for ln in t.stderr().splitlines() if any(i in ln for i in ids)]
                assert got.count(200) == N, f"{got.count(200)}/{N} answered 200 when " \
                    f"the requests came before the close: {sorted(set(got))}; logged: " \
                    f"{bad}; tokentap said: {said}"
                log = t.wait_logged(4 * N)
                assert [x["status"] for x in log].count(200) == 3 * N + got.count(200)
            finally:
                clients.close()
    finally:
        b.kill()


def test_one_reset_retires_its_siblings():
    """Two pooled connections; a POST on the newest is read and dropped by
    the backend (it closes without answering: 502, never sent twice). The
    other pooled connection is as old: it is closed, not reused, and the
    next POST goes out on a new connection."""
    body = b'{"ok":1}'
    gate = threading.Barrier(2)

    def handle(req, c):
        if req.target.endswith("/drop"):
            return "close"
        if req.target.endswith("/pair"):
            gate.wait(5)            # two at once: two connections
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return "keep"

    with ThreadBackend(handle) as b, Tokentap(conf(b, prefix="/", top="workers: 1\n")) as t:
        def send(path):
            s = socket.create_connection(("127.0.0.1", t.port), timeout=10)
            s.sendall(build_request(path.decode(), b"{}", close=True))
            status = read_response(s).status
            s.close()
            return status

        pair = [None, None]
        threads = [threading.Thread(target=lambda i=i: pair.__setitem__(i, send(b"/pair")))
                   for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert pair == [200, 200] and len(b.conns) == 2
        assert send(b"/drop") == 502
        assert send(b"/next") == 200
        assert len(b.conns) == 3, "an idle connection as old as the reset one was reused"
        assert b.requests[-1].conn_id == 2 and b.requests[-1].target == "/next"
        # the sibling was closed by tokentap (the backend saw its end and
        # closed its side), not left to time out
        other = b.conns[1 - b.requests[-2].conn_id]
        # at once, not at upstream_keepalive's 4 s
        until(lambda: other.sock.fileno() == -1, 3, "the sibling closed", every=0.01)

