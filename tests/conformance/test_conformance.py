# SPDX-License-Identifier: Apache-2.0
"""The framing corpus (vectors.py) as tests: one test per vector, each
against a fresh tokentap in front of the recording backend."""
import atexit
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus                   # noqa: E402
import peer                     # noqa: E402
import vectors                  # noqa: E402

_backend = []


def backend():
    if not _backend:
        _backend.append(peer.Backend())
        atexit.register(_backend[0].close)
    return _backend[0]


def _make(run, v):
    def test():
        ok, detail, _ = run(v, backend())
        assert ok, f"{v.name} ({v.rfc}): {detail}"
    return test


for _v in vectors.REQUEST:
    globals()[f"test_request_{_v.name}"] = _make(corpus.run_request, _v)
for _v in vectors.RESPONSE:
    globals()[f"test_response_{_v.name}"] = _make(corpus.run_response, _v)


def test_pool_a_smuggled_request_never_reaches_the_next_client():
    """The API-key theft of issue 20, end to end on one pooled upstream
    connection: an attacker's request carries a capture request in its body
    (once as a plain body, once behind `Connection: content-length`); the
    victim's request that follows must reach the backend as a request of its
    own, and the victim must get the answer to it."""
    b = backend()

    def respond(c, i):
        body = ("%s #%d on connection %d" % (c.requests[i], i, c.cid)).encode()
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    capture = (b"POST /v1/files/capture HTTP/1.1\r\nHost: h\r\n"
               b"Content-Length: 180\r\n\r\n")
    victim = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n"
              b"Authorization: Bearer sk-victim\r\nContent-Length: 2\r\n\r\n{}")
    for framing in (b"", b"Connection: content-length\r\n"):
        b.reset(respond)
        proxy = corpus.TokentapProxy(b, vectors.Req("pool", "", b"", 200))
        try:
            attack = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n" + framing
                      + b"Content-Length: %d\r\n\r\n" % len(capture) + capture)
            got, _, _ = peer.exchange(proxy.port, attack, 1)
            want = 400 if framing else 200
            assert got and got[0][0] == want, (framing, got)
            got, _, _ = peer.exchange(proxy.port, victim, 1)
            assert got and got[0][0] == 200, got
            parsed = b.parsed()
            assert parsed[-1] == "POST /v1/chat/completions HTTP/1.1", parsed
            assert "POST /v1/files/capture HTTP/1.1" not in parsed, parsed
            assert got[0][2].startswith(b"POST /v1/chat/completions HTTP/1.1 #"), got
            raw = b"".join(b.raw())
            assert raw.count(b"Authorization: Bearer sk-victim") == 1, raw
            if not framing:
                # the attacker's bytes were its own body, on the same pooled
                # connection the victim's request then used
                assert len(b.raw()) == 1 and b.raw()[0].count(capture) == 1, b.raw()
        finally:
            proxy.close()
