"""The 128-field cap on a head (HTTPHEAD_MAX_HEADERS, documented in the
README and tokentap(8)): a request with 128 fields goes through, the 129th
is a 431 tokentap answers itself (logged `rejected`, the backend never
asked); a response with 129 fields is a 502. nginx 1.22 has no count,
only its header buffers' size.

Run alone with `python3 tests/e2e/test_header_cap.py [name-filter]`.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend import Backend  # noqa: E402
from harness import Tokentap, raw_request, split_response  # noqa: E402


def request(n):
    """A GET with n header fields in all (Host and Connection included)."""
    fields = b"".join(b"X-F-%03d: v\r\n" % i for i in range(n - 2))
    return b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + fields + b"Connection: close\r\n\r\n"


def test_the_129th_header_field_is_a_431_and_a_129_field_response_a_502():
    many = []

    def handle(req, c):
        n = 129 if req.target.endswith("/many") else 1
        many.append(len(req.headers))
        fields = b"".join(b"X-R-%03d: v\r\n" % i for i in range(n - 1))
        c.send(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\nok")
        return "keep"

    with Backend(handle) as b, Tokentap(f"routes:\n  - name: r\n"
                                        f"    upstream: http://127.0.0.1:{b.port}\n") as t:
        assert raw_request(t.port, request(128)).startswith(b"HTTP/1.1 200 ")
        assert len(many) == 1
        head, body = split_response(raw_request(t.port, request(129)))
        assert head.startswith(b"HTTP/1.1 431 "), head
        assert json.loads(body)["error"]["type"] == "request_header_too_large", body
        assert len(many) == 1, "the backend was asked"
        out = raw_request(t.port, b"GET /v1/many HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
        assert out.startswith(b"HTTP/1.1 502 "), out[:200]
        log = t.access(3)
        assert [(e["status"], e["outcome"]) for e in log] == \
            [(200, "ok"), (431, "rejected"), (502, "upstream_error")], log


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and (len(sys.argv) < 2 or sys.argv[1] in name):
            fn()
            print("ok", name)
