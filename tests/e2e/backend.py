"""A scriptable HTTP/1.1 upstream for end-to-end tests, on raw sockets.

The test gives a handler(req, conn) that writes exactly the bytes it wants
(head, chunks, delays, abrupt closes); the backend records every request and
connection so tests can check what tokentap sent upstream.
"""
import select
import socket
import threading
import time


class Request:
    def __init__(self, method, target, version, headers, body, conn_id):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers          # list of (name, value), as received
        self.body = body
        self.conn_id = conn_id

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]


class Conn:
    def __init__(self, sock):
        self.sock = sock
        self.sent_at = []               # (monotonic time, bytes) per send
        self.peer_closed_at = None

    def send(self, data):
        self.sock.sendall(data)
        self.sent_at.append((time.monotonic(), data))

    def chunk(self, data):
        self.send(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self):
        self.send(b"0\r\n\r\n")

    def sleep_watching(self, seconds):
        """Sleeps, noting when the peer closes. Returns False once it has."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            r, _, _ = select.select([self.sock], [], [], left)
            if r:
                try:
                    data = self.sock.recv(65536, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    self.peer_closed_at = time.monotonic()
                    return False
                time.sleep(min(left, 0.005))


def read_request(sock, buf):
    """Reads one request from sock; returns (Request fields, rest) or None."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = []
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers.append((k, v.strip()))
    hmap = {k.lower(): v for k, v in headers}
    body = b""
    if "content-length" in hmap:
        n = int(hmap["content-length"])
        while len(buf) < n:
            d = sock.recv(65536)
            if not d:
                return None
            buf += d
        body, buf = buf[:n], buf[n:]
    elif hmap.get("transfer-encoding", "").lower() == "chunked":
        while True:
            while b"\r\n" not in buf:
                buf += sock.recv(65536)
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                buf += sock.recv(65536)
            if size == 0:
                buf = buf[2:]
                break
            body += buf[:size]
            buf = buf[size + 2:]
    return (method, target, version, headers, body), buf


class Backend:
    def __init__(self, handler):
        self.handler = handler
        self.requests = []
        self.conns = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = Conn(s)
            with self.lock:
                self.conns.append(c)
                cid = len(self.conns) - 1
            threading.Thread(target=self._serve, args=(c, cid), daemon=True).start()

    def _serve(self, c, cid):
        buf = b""
        try:
            while True:
                r = read_request(c.sock, buf)
                if r is None:
                    break
                (method, target, version, headers, body), buf = r
                req = Request(method, target, version, headers, body, cid)
                with self.lock:
                    self.requests.append(req)
                if self.handler(req, c) != "keep":
                    break
        except OSError:
            pass
        finally:
            try:
                c.sock.close()
            except OSError:
                pass

    def close(self):
        self.stopped = True
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


SSE_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


def sse_handler(chunks, gap=0.0, head=SSE_HEAD):
    """A handler that streams the given chunks (chunked framing), gap apart."""
    def handle(req, c):
        c.send(head)
        for i, ch in enumerate(chunks):
            if gap and i:
                time.sleep(gap)
            c.chunk(ch)
        c.end_chunks()
        return "keep"
    return handle
