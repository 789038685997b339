# SPDX-License-Identifier: Apache-2.0
"""Credentials in the request target stay out of every output
(docs/contract.md §5): the values of credential parameters are masked in
the access log however
the client spells the name (k%65y), whatever separates the parameters
(;), and in the path too (/models/key=..., matrix parameters); a Gemini
path's "model" that is a parameter labels nothing. Sent by curl, which
passes the target as written.
"""
from harness import Tokentap, conf
from peers import Backend, curl

TARGETS = [
    ("/v1/chat/completions?k%65y=SECRET1", "/v1/chat/completions?k%65y=***"),
    ("/v1/chat/completions?x=1;key=SECRET2;y=2", "/v1/chat/completions?x=1;key=***;y=2"),
    ("/v1beta/models/key=SECRET3:streamGenerateContent?alt=sse",
     "/v1beta/models/key=***?alt=sse"),
    ("/v1/models;api_key=SECRET4/x?%74oken=SECRET5&alt=sse",
     "/v1/models;api_key=***/x?%74oken=***&alt=sse"),
]


def test_escaped_semicolon_and_path_credentials_are_masked():
    seen = []

    def handle(req, c):
        seen.append(req.target)
        c.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
               b"Content-Length: 2\r\n\r\n{}")
        return "keep"

    with Backend(handle) as b, Tokentap(conf(b)) as t:
        for target, _ in TARGETS:
            r = curl(t.url(target), "--path-as-is", data="{}",
                     headers=["Content-Type: application/json"], timeout=10)
            assert r.returncode == 0 and r.stdout == b"{}", r.stderr
        # the backend got the targets as sent: masking is the log's alone
        assert seen == [target for target, _ in TARGETS], seen
        log = t.wait_logged(len(TARGETS))
        assert [e["path"] for e in log] == [want for _, want in TARGETS], log
        assert all(e["model"] == "llm" for e in log), [e["model"] for e in log]
        with open(t.log) as f:
            assert "SECRET" not in f.read()
        assert b"SECRET" not in t.get("/metrics").body
        assert b"SECRET" not in t.stderr().encode()

