# SPDX-License-Identifier: Apache-2.0
"""The raw HTTP/1.1 client of the end-to-end tests (harness.py offers it):
requests built byte by byte, responses parsed as their bytes arrive with
the time of each read, chunk and event, Server-Sent Events split and read.
The conformance corpus and the bench read responses with it too."""
import json
import re
import socket
import time
from collections import namedtuple

CHAT = "/v1/chat/completions"


def build_request(path=CHAT, body=b"", headers=None, method="POST", close=False,
                  version="1.1"):
    """The bytes of one request. body: bytes, str, or a dict sent as JSON
    (Content-Type application/json then); Content-Length whenever there is
    a body or the method is POST; headers: a dict, or "Name: value" strings
    (they may repeat), added after Host."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
        headers = [("Content-Type", "application/json")] + _header_list(headers)
    elif isinstance(body, str):
        body = body.encode()
    h = [("Host", "x")] + _header_list(headers)
    names = {k.lower() for k, _ in h}
    if (body or method == "POST") and "content-length" not in names and \
            "transfer-encoding" not in names:
        h.append(("Content-Length", str(len(body))))
    if close and "connection" not in names:
        h.append(("Connection", "close"))
    head = f"{method} {path} HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h)
    return head.encode("latin-1") + b"\r\n" + body


def _header_list(headers):
    if not headers:
        return []
    if isinstance(headers, dict):
        return list(headers.items())
    return [tuple(p.strip() for p in x.split(":", 1)) if isinstance(x, str) else x
            for x in headers]


BLANK = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")
Event = namedtuple("Event", "t type data raw")


def parse_sse(raw):
    """(event type, data) of one SSE event, WHATWG field rules (data None
    when the event has no data line: a comment, a bare event: line)."""
    etype, data = "", []
    for line in re.split(rb"\r\n|\r|\n", raw):
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            etype = value.decode(errors="replace")
        elif name == b"data":
            data.append(value.decode(errors="replace"))
    return etype, "\n".join(data) if data else None


class Response:
    """One HTTP/1.1 response parsed as its bytes come (feed(data, t)); each
    chunk and each event (SSE, split on blank lines, or an NDJSON line) is
    kept with the time of the read that completed it.

    status, reason, status_line, head (the raw head), headers (lower-case
    names; a repeated field's values joined by ", "), header_list (as
    sent), interim [(status, head)] of 1xx heads before it (interim_ends:
    a 1xx head is the response), body (decoded), raw (the body as framed on
    the wire, trailers included; cut short or broken: all that came),
    chunks and events [(t, bytes)], complete (the body ended as its framing
    says), eof (the peer closed), broken (no HTTP head, or framing that is
    none), rest (bytes after the response), t_head, t_end,
    and t_sent when request() sent it (just before its first byte left)."""

    def __init__(self, head_request=False, interim_ends=False):
        self.head_request = head_request
        self.interim_ends = interim_ends
        # what came and is not parsed yet: _buf from _pos on (an offset, so
        # that a body of megabytes is not copied again for each chunk)
        self._buf, self._pos = bytearray(), 0
        self._body, self._raw = bytearray(), bytearray()
        self._pending, self._scan = bytearray(), 0
        self.state = "head"
        self.status = self.reason = self.status_line = self.head = None
        self.headers, self.header_list, self.interim = {}, [], []
        self.length = None
        self.chunked = False
        self.chunks, self.events = [], []
        self.complete = self.eof = self.reset = self.broken = False
        self.t_sent = self.t_head = self.t_end = None

    @property
    def body(self):
        return bytes(self._body)

    @property
    def raw(self):
        return bytes(self._raw)

    @property
    def rest(self):
        return bytes(self._buf[self._pos:])

    buf = rest

    def feed(self, data, t=None):
        if self._pos > 65536 and self._pos * 2 > len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data
        t = time.monotonic() if t is None else t
        while self.state != "done" and self._step(t):
            pass

    def close(self, t=None):
        """The peer closed: a close-delimited body ends here."""
        t = time.monotonic() if t is None else t
        self.eof = True
        if self.state == "close":
            self.complete, self.state, self.t_end = True, "done", t
            self._events(t, final=True)
        elif self.state not in ("head", "done"):
            # cut short: what came of the body stays in raw, as received
            self._take(len(self._buf) - self._pos, raw=True)

    def _take(self, n, raw=False):
        """The next n unparsed bytes, consumed (and kept in raw)."""
        out = self._buf[self._pos:self._pos + n]
        self._pos += len(out)
        if raw:
            self._raw += out
        return out

    def _find(self, sep):
        i = self._buf.find(sep, self._pos)
        return -1 if i < 0 else i - self._pos

    def _broken(self):
        """Framing no HTTP/1.1 peer sends: the rest is kept in raw, as
        received, and nothing more is parsed."""
        self._take(len(self._buf) - self._pos, raw=True)
        self.state, self.broken = "done", True
        return False

    def _done(self, t):
        self.state, self.complete, self.t_end = "done", True, t
        self._events(t, final=True)

    def _step(self, t):
        left = len(self._buf) - self._pos
        if self.state == "head":
            i = self._find(b"\r\n\r\n")
            if i < 0:
                return False
            head = bytes(self._take(i))
            self._take(4)
            lines = head.decode("latin-1").split("\r\n")
            if not re.match(r"HTTP/1\.[01] \d{3}( |$)", lines[0]):
                self.head, self.state, self.broken = head, "done", True   # no HTTP head
                return False
            status = int(lines[0].split()[1])
            if 100 <= status < 200 and status != 101 and not self.interim_ends:
                self.interim.append((status, head))
                return True
            self.head, self.status, self.status_line, self.t_head = head, status, lines[0], t
            self.reason = lines[0].split(" ", 2)[2] if lines[0].count(" ") >= 2 else ""
            for line in lines[1:]:
                k, _, v = line.partition(":")
                self.header_list.append((k.strip(), v.strip()))
                k = k.strip().lower()
                self.headers[k] = self.headers[k] + ", " + v.strip() if k in self.headers \
                    else v.strip()
            if self.head_request or status < 200 or status in (204, 304):
                self._done(t)
            elif "chunked" in self.headers.get("transfer-encoding", "").lower():
                self.chunked, self.state = True, "size"
            elif "content-length" in self.headers:
                self.length = int(self.headers["content-length"])
                self.state = "length"
                if self.length == 0:
                    self._done(t)
            else:
                self.state = "close"
            return True
        if self.state == "size":
            i = self._find(b"\r\n")
            if i < 0:
                return False
            try:
                size = int(bytes(self._buf[self._pos:self._pos + i]).split(b";")[0], 16)
            except ValueError:
                return self._broken()
            if size == 0:
                self._take(i + 2, raw=True)
                self.state = "trailers"
                return True
            if left < i + 2 + size + 2:
                return False
            end = self._pos + i + 2 + size
            if self._buf[end:end + 2] != b"\r\n":
                return self._broken()
            payload = bytes(self._take(i + 4 + size, raw=True)[i + 2:i + 2 + size])
            self.chunks.append((t, payload))
            self._add(payload, t)
            return True
        if self.state == "trailers":
            i = self._find(b"\r\n")
            if i < 0:
                return False
            if not self._take(i + 2, raw=True)[:i]:
                self._done(t)
            return True
        if self.state == "length":
            take = self._take(self.length - len(self._body), raw=True)
            self._add(take, t)
            if len(self._body) == self.length:
                self._done(t)
            return False
        if self.state == "close":
            if left:
                self._add(self._take(left, raw=True), t)
            return False
        return False

    def _add(self, data, t):
        self._body += data
        self._pending += data
        self._events(t)

    def _events(self, t, final=False):
        if "ndjson" in self.headers.get("content-type", ""):
            *lines, last = bytes(self._pending).split(b"\n")
            self.events += [(t, ln) for ln in lines if ln.strip()]
            self._pending = bytearray(last)
            if final and last.strip():
                self.events.append((t, last))
                self._pending = bytearray()
            return
        while True:
            m = BLANK.search(self._pending, max(0, self._scan - 2))
            # a lone CR at the end may be the first half of CRLF
            if m is None or (m.end() == len(self._pending) and
                             self._pending.endswith(b"\r") and not final):
                self._scan = len(self._pending)
                return
            self.events.append((t, bytes(self._pending[:m.start()])))
            del self._pending[:m.end()]
            self._scan = 0

    def sse(self):
        """The events as Event(t, type, data, raw), comments included."""
        return [Event(t, *parse_sse(raw), raw) for t, raw in self.events]

    def after(self, pattern):
        """Seconds from sending the request to the first event holding
        pattern (bytes, or a compiled regular expression); None if none."""
        for t, raw in self.events:
            if (pattern.search(raw) if hasattr(pattern, "search") else pattern in raw):
                return t - self.t_sent
        return None

    def json(self):
        return json.loads(self.body)


def read_response(sock, resp=None, timeout=10.0, deadline=None, head_request=False):
    """Reads one response from a socket until its body ends (or the peer
    closes: resp.eof, resp.reset for a reset). Bytes already read for it:
    pass resp, or Response().feed(rest) first. timeout: per read; deadline
    (monotonic): for the whole response. A timeout raises socket.timeout."""
    resp = resp or Response(head_request)
    while not resp.complete and not resp.broken:
        left = timeout if deadline is None else min(timeout, deadline - time.monotonic())
        if left <= 0:
            raise socket.timeout("response not complete by the deadline")
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            data, resp.reset = b"", True
        t = time.monotonic()
        if not data:
            resp.close(t)
            break
        resp.feed(data, t)
    return resp


def parse_response(data, head_request=False):
    """The Response of bytes read until the peer closed (raw_request's)."""
    r = Response(head_request)
    r.feed(data)
    r.close()
    return r


def request(port, path=CHAT, body=None, headers=None, method="POST", timeout=10.0,
            version="1.1", keep=False, abort_after=None):
    """One request on a connection of its own (Connection: close unless
    keep), read to its end: the Response, with t_sent the time just before
    its first byte left (so resp.after(b'"content"') is the client's TTFT).
    body: as build_request's; none given, a POST sends {}. keep: (Response,
    the open socket). abort_after: the client closes the connection that
    many seconds after sending, reading nothing."""
    if body is None:
        body = b"{}" if method == "POST" else b""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        data = build_request(path, body, headers, method, close=not keep, version=version)
        resp = Response(head_request=method == "HEAD")
        resp.t_sent = time.monotonic()
        s.sendall(data)
        if abort_after is not None:
            time.sleep(abort_after)
            s.close()
            return resp
        read_response(s, resp, timeout=timeout)
    except BaseException:
        s.close()
        raise
    if keep:
        return resp, s
    s.close()
    return resp


def raw_request(port, data, timeout=5.0, host="127.0.0.1"):
    """Sends raw bytes, returns every byte the peer sent until it closed (or
    went quiet for timeout)."""
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


def pipeline(port, reqs, batch=50, timeout=60.0):
    """reqs (bytes each) on one keep-alive connection, batch at a time, each
    batch's responses read before the next goes: their statuses."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    out, rest = [], b""
    try:
        for i in range(0, len(reqs), batch):
            s.sendall(b"".join(reqs[i:i + batch]))
            for _ in reqs[i:i + batch]:
                r = Response()
                r.feed(rest)
                read_response(s, r, timeout=timeout)
                assert r.complete, f"tokentap closed the connection after {len(out)}"
                out.append(r.status)
                rest = r.rest
    finally:
        s.close()
    return out


def split_response(data):
    """(head bytes, body bytes as framed) of a raw HTTP response."""
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def dechunk(body):
    """A chunked body's payload."""
    r = Response()
    r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    return r.body


def sse_data(obj):
    """One SSE event carrying obj as JSON."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"
