# SPDX-License-Identifier: Apache-2.0
"""The 128-field cap on a head (HTTPHEAD_MAX_HEADERS, documented in the
docs/operating.md and tokentap(8)): a request with 128 fields goes
through, the 129th is a 431 tokentap answers itself (logged `rejected`, the
backend never
asked); a response with 129 fields is a 502. nginx 1.22 has no count,
only its header buffers' size.
"""
from harness import Tokentap, conf, parse_response, raw_request, request
from peers import Backend


def test_the_129th_header_field_is_a_431_and_a_129_field_response_a_502():
    many = []

    def handle(req, c):
        n = 129 if req.target.endswith("/many") else 1
        many.append(len(req.headers))
        fields = b"".join(b"X-R-%03d: v\r\n" % i for i in range(n - 1))
        c.send(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\nok")
        return "keep"

    def fields(n):
        """A GET with n header fields in all (Host and Connection included)."""
        return [f"X-F-{i:03d}: v" for i in range(n - 2)]

    with Backend(handle) as b, Tokentap(conf(b)) as t:
        assert request(t.port, "/v1/models", b"", fields(128), "GET").status == 200
        assert len(many) == 1
        r = request(t.port, "/v1/models", b"", fields(129), "GET")
        assert r.status == 431, r.head
        assert r.json()["error"]["type"] == "request_header_too_large", r.body
        assert len(many) == 1, "the backend was asked"
        out = raw_request(t.port, b"GET /v1/many HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
        assert parse_response(out).status == 502, out[:200]
        # sorted: a line is written just after the response's last byte,
        # and the next request (on the other worker) can be logged first
        log = t.wait_logged(3)
        assert sorted((e["status"], e["outcome"]) for e in log) == \
            [(200, "ok"), (431, "rejected"), (502, "upstream_error")], log

