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
