# SPDX-License-Identifier: Apache-2.0
"""The instruction-count guard (tests/bench/instructions_guard.py): the
proxy's user-space instructions per forwarded event in its workers, under
callgrind, at one read an event, may not rise more than 3% over
tests/bench/instructions.baseline. Re-baseline a cost taken on purpose
with `python3 tests/bench/instructions_guard.py --write`."""
import os
import sys

from harness import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
import instructions_guard as guard  # noqa: E402

# valgrind cannot run an AddressSanitizer build; make check leaves out
# what needs valgrind
SANITIZER_SKIP = {"test_instructions_per_event_within_baseline"}
CHECK_SKIP = {"*"}
# five callgrind runs of about 4 s each, and valgrind's start
TIME_LIMITS = {"test_instructions_per_event_within_baseline": 90}


def test_instructions_per_event_within_baseline():
    assert guard.available(), "valgrind missing: make deps installs it (tests/deps/test.list)"
    base, per_read = guard.read_baseline()
    figures = guard.measure()
    assert all(f["events"] > 0 and f["reads"] > 0 for f in figures), figures
    ok, line = guard.verdict(guard.figure(figures, per_read), base)
    print(line)
    assert ok, line
