# SPDX-License-Identifier: Apache-2.0
"""The peers of the conformance corpus: a backend that records the exact
bytes it receives, and a client that sends raw bytes and reads responses.

The backend frames what it receives as an ordinary HTTP/1.1 server would
(Content-Length, chunked with trailers, else no body) only to know when to
answer; what the tests judge is the raw byte stream of each upstream
connection, and how many requests the backend found in it.
"""
import os
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from client import Response  # noqa: E402
from client import read_response as read_http  # noqa: E402

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class UpConn:
    def __init__(self, sock, cid):
        self.sock = sock
        self.cid = cid
        self.raw = b""
        self.requests = []        # first lines of the requests the backend parsed
        self.error = None         # what the backend could not parse


def parse_request(buf):
    """One request from the start of buf: (first line, bytes used), None if
    incomplete; raises ValueError on bytes no server would take."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > 65536:
            raise ValueError("head too long")
        return None
    lines = buf[:end].split(b"\r\n")
    first = lines[0]
    if not re.fullmatch(rb"[A-Z]+ \S+ HTTP/1\.[01]", first):
        raise ValueError(f"bad request line {first[:60]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not re.fullmatch(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            raise ValueError(f"bad header line {line[:60]!r}")
        headers.setdefault(name.lower(), []).append(value.strip())
    pos = end + 4
    te = b",".join(headers.get(b"transfer-encoding", [])).lower()
    if te:
        if te != b"chunked":
            raise ValueError(f"transfer-encoding {te!r}")
        while True:
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                return None
            size = int(buf[pos:nl].split(b";")[0], 16)
            pos = nl + 2
            if size == 0:
                break
            if len(buf) < pos + size + 2:
                return None
            pos += size + 2
        while True:           # trailer section, up to its empty line
            nl = buf.find(b"\r\n", pos)
            if nl < 0:
                return None
            line, pos = buf[pos:nl], nl + 2
            if not line:
                break
    elif b"content-length" in headers:
        n = int(headers[b"content-length"][0])
        if len(buf) < pos + n:
            return None
        pos += n
    return first.decode("latin-1"), pos


class Backend:
    """Answers every request it parses with respond(conn, index) -> bytes,
    or (bytes, close_after); records each connection's raw bytes."""

    def __init__(self, respond=None):
        self.respond = respond or (lambda c, i: OK)
        self.conns = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self, respond=None):
        with self.lock:
            for c in self.conns:
                try:
                    c.sock.close()
                except OSError:
                    pass
            self.conns = []
            self.respond = respond or (lambda c, i: OK)

    def _accept(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                c = UpConn(s, len(self.conns))
                self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        buf = b""
        try:
            while True:
                d = c.sock.recv(65536)
                if not d:
                    break
                c.raw += d
                buf += d
                while c.error is None:
                    try:
                        r = parse_request(buf)
                    except ValueError as e:
                        c.error = str(e)
                        break
                    if r is None:
                        break
                    first, used = r
                    buf = buf[used:]
                    c.requests.append(first)
                    out = self.respond(c, len(c.requests) - 1)
                    close = False
                    if isinstance(out, tuple):
                        out, close = out
                    for part in out if isinstance(out, list) else [out]:
                        if isinstance(part, float):
                            time.sleep(part)
                        else:
                            c.sock.sendall(part)
                    if close:
                        c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def raw(self):
        with self.lock:
            return [c.raw for c in self.conns]

    def parsed(self):
        with self.lock:
            return [r for c in self.conns for r in c.requests]

    def errors(self):
        with self.lock:
            return [c.error for c in self.conns if c.error]

    def close(self):
        self.sock.close()
        self.reset()


def read_response(sock, buf, head_req=False, deadline=None):
    """Reads one response with the harness's reader: (status, head bytes,
    body bytes as framed, rest); status is None when the peer closed first
    or sent no HTTP head. 1xx heads come back as their own responses."""
    r = Response(head_request=head_req, interim_ends=True)
    r.feed(buf)
    read_http(sock, r, deadline=deadline)
    if r.status is None:
        return None, (r.head if r.head is not None else r.buf), b"", r.buf if r.head else b""
    return r.status, r.head, r.raw, r.rest


def exchange(port, data, n, head_req=False, timeout=3.0, gap=0.0, wait_close=False):
    """Sends data (bytes, or a list of bytes and pauses in seconds), reads up
    to n responses; returns (list of (status, head, body), closed, extra),
    closed telling whether the peer closed the connection after them.
    After the responses it waits 50 ms for more bytes or the close, or, with
    wait_close, until the deadline: a proxy that closes does so just after
    its last byte, but on a busy host that moment can come later than 50 ms
    (a 400 seen "kept open" once, in a fresh-machine run)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    deadline = time.monotonic() + timeout
    try:
        for part in data if isinstance(data, list) else [data]:
            if isinstance(part, float):
                time.sleep(part)
            else:
                s.sendall(part)
        out, buf = [], b""
        try:
            while sum(1 for st, _, _ in out if st >= 200) < n:
                status, head, body, buf = read_response(s, buf, head_req, deadline)
                if status is None:
                    return out, True, head
                out.append((status, head, body))
            # anything more, or the close, within a short grace
            end = deadline if wait_close else min(deadline, time.monotonic() + 0.05)
            try:
                while True:
                    s.settimeout(max(end - time.monotonic(), 0.001))
                    d = s.recv(65536)
                    if not d:
                        return out, True, buf
                    buf += d
            except (socket.timeout, BlockingIOError):
                return out, False, buf
        except socket.timeout:
            return out, False, buf
        except ConnectionResetError:
            return out, True, buf
    finally:
        s.close()
