"""Credentials in the request target stay out of every output (SPEC §5):
the values of credential parameters are masked in the access log however
the client spells the name (k%65y), whatever separates the parameters
(;), and in the path too (/models/key=..., matrix parameters); a Gemini
path's "model" that is a parameter labels nothing. Sent by curl, which
passes the target as written.

Run alone with `python3 tests/e2e/test_masking.py [name-filter]`.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backend import Backend  # noqa: E402
from harness import Tokentap, raw_request  # noqa: E402

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

    with Backend(handle) as b, Tokentap(f"routes:\n  - name: llm\n"
                                        f"    upstream: http://127.0.0.1:{b.port}\n") as t:
        for target, _ in TARGETS:
            r = subprocess.run(["curl", "-sS", "--path-as-is", "-d", "{}",
                                "-H", "Content-Type: application/json",
                                f"http://127.0.0.1:{t.port}{target}"],
                               capture_output=True, timeout=10)
            assert r.returncode == 0 and r.stdout == b"{}", r.stderr
        # the backend got the targets as sent: masking is the log's alone
        assert seen == [target for target, _ in TARGETS], seen
        log = t.access(len(TARGETS))
        assert [e["path"] for e in log] == [want for _, want in TARGETS], log
        assert all(e["model"] == "llm" for e in log), [e["model"] for e in log]
        with open(t.log) as f:
            assert "SECRET" not in f.read()
        metrics = raw_request(t.admin, b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                              b"Connection: close\r\n\r\n")
        assert b"SECRET" not in metrics
        assert b"SECRET" not in t.stderr().encode()


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and (len(sys.argv) < 2 or sys.argv[1] in name):
            fn()
            print("ok", name)
