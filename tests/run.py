#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every test of tokentap and ends with one line: "N passed, N failed".

  1. builds the programs and the unit tests, plain and with ASan+UBSan;
  2. runs the cmocka unit tests of both builds (TAP output, one line a test);
  3. runs the end-to-end tests (tests/e2e/test_*.py) and the framing corpus
     (tests/conformance) against both builds;
  4. runs the fuzzer for a bounded time.

  python3 tests/run.py [-k SUBSTRING] [--fast | --check] [--serial]
     -k       only tests whose name contains SUBSTRING
     --fast   plain build only, no fuzzing
     --check  make check: the plain build's unit tests and the e2e tests
              that need no browser, no bench, no demo and no valgrind
              (a module's CHECK_SKIP names the tests left out, "*" all)
     --serial the plain and the sanitizer passes' e2e tests (make check: the
              two halves of the plain pass) one after the other; by default
              they run side by side, each in a process of its own with
              ports of its own (TOKENTAP_TEST_PORTS)

Every e2e test runs under a time limit (TIME_LIMIT seconds, or a module's
TIME_LIMITS[name]): a test that hangs fails with what it was doing, and
the run goes on.
"""
import argparse
import glob
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAN = "address,undefined"
passed = 0
failed = 0
failures = []
# seconds an e2e test may take; a module's TIME_LIMITS = {name: s} says more
TIME_LIMIT = 120


def result(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}", flush=True)
    else:
        failed += 1
        failures.append(name)
        print(f"FAIL {name}", flush=True)
        if detail:
            print("     " + detail.rstrip().replace("\n", "\n     "), flush=True)


class TestTimeout(BaseException):
    """Not an Exception: a test's own "except Exception" must not swallow it."""


def _alarm(signum, frame):
    raise TestTimeout("the test's time limit passed")


def call_limited(fn, seconds):
    """fn() under a time limit: SIGALRM raises TestTimeout in it, wherever
    it waits (sockets, subprocess, sleep), and its with/finally clauses
    stop what it started."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def build(sanitizer):
    args = ["make", "-s", "-j2", "all", "test-unit"]
    if sanitizer:
        args.append(f"SANITIZER={sanitizer}")
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    label = f"build ({sanitizer or 'plain'})"
    result(label, r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:])
    return r.returncode == 0


def run_unit(bdir, tag, only, env=None):
    env = dict(env or os.environ, CMOCKA_MESSAGE_OUTPUT="TAP")
    for binary in sorted(glob.glob(os.path.join(ROOT, bdir, "tests", "test_*"))):
        if binary.endswith(".d"):
            continue
        name = os.path.basename(binary)
        if only and only not in name:
            continue
        try:
            r = subprocess.run([binary], cwd=ROOT, capture_output=True, text=True,
                               env=env, timeout=300)
            out, rc = r.stdout + r.stderr, r.returncode
        except subprocess.TimeoutExpired:
            result(f"unit/{tag}/{name}", False, "timed out")
            continue
        seen = 0
        for line in out.splitlines():
            if line.startswith("ok ") or line.startswith("not ok "):
                seen += 1
                ok = line.startswith("ok ")
                tname = line.split(" - ", 1)[-1].strip()
                result(f"unit/{tag}/{name}/{tname}", ok, "" if ok else out[-4000:])
        if seen == 0 or (rc != 0 and "not ok" not in out):
            result(f"unit/{tag}/{name}", False, f"exit {rc}\n{out[-4000:]}")


def load_module(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_e2e(bdir, tag, only, check=False, shard=(0, 1)):
    """The e2e tests against the build in bdir; shard (i, n): the i-th of
    every n modules."""
    os.environ["TOKENTAP_BUILD"] = bdir
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "e2e", "test_*.py")))
    paths += sorted(glob.glob(os.path.join(ROOT, "tests", "conformance", "test_*.py")))
    paths = paths[shard[0]::shard[1]]
    for path in paths:
        try:
            mod = load_module(path)
        except Exception:
            result(f"e2e/{tag}/{os.path.basename(path)}", False, traceback.format_exc())
            continue
        skip = set(getattr(mod, "SANITIZER_SKIP", set())) if tag == "san" else set()
        if check:
            skip |= set(getattr(mod, "CHECK_SKIP", set()))
        limits = getattr(mod, "TIME_LIMITS", {})
        for name in sorted(n for n in dir(mod) if n.startswith("test_")):
            full = f"e2e/{tag}/{os.path.basename(path)[:-3]}/{name}"
            if (only and only not in full) or name in skip or "*" in skip:
                continue
            t = time.monotonic()
            try:
                call_limited(getattr(mod, name), limits.get(name, TIME_LIMIT))
                ok, detail = True, ""
            except (Exception, TestTimeout):
                ok, detail = False, traceback.format_exc()[-1500:]
            result(full + f" ({time.monotonic() - t:.1f}s)", ok, detail)


def nginx_report():
    """Where nginx treats the framing corpus otherwise: printed, not counted."""
    script = os.path.join(ROOT, "tests", "conformance", "nginx_diff.py")
    r = subprocess.run([sys.executable, script], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    print("# the framing corpus through nginx, for information:")
    for line in (r.stdout + r.stderr).splitlines():
        print("#   " + line, flush=True)


def run_fuzz():
    script = os.path.join(ROOT, "tests", "fuzz", "run.sh")
    if not os.path.exists(script):
        return
    r = subprocess.run(["sh", script, os.environ.get("FUZZ_SECONDS", "20")],
                       cwd=ROOT, capture_output=True, text=True)
    result("fuzz/stream", r.returncode == 0, (r.stdout + r.stderr)[-3000:])


# the sanitizers' settings for the san pass: leaks and UB end the process
# with a report, which the harness looks for
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=66",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=66"}
# each side-by-side process's own ports (harness.free_port), below the
# kernel's ephemeral range (32768 and up), so neither takes the other's
# $TOKENTAP_TEST_PORT_BASE moves both ranges (1,500 ports each from there):
# several runs at once on one machine, each with a base of its own
_base = int(os.environ.get("TOKENTAP_TEST_PORT_BASE", "0"))
PORTS = ((f"{_base}-{_base + 1499}", f"{_base + 1500}-{_base + 2999}") if _base
         else ("20000-25999", "26000-31999"))


def e2e_pass(tag, only, check, counts, job):
    """One pass's end-to-end tests (or one shard of them: make check), in a
    process of its own (--pass): its lines as they come, its counts into
    the file counts. job "i/n": the i-th of n processes side by side."""
    i, n = (int(x) for x in job.split("/"))
    os.environ["TOKENTAP_TEST_PORTS"] = PORTS[i]
    if tag == "san":
        os.environ.update(SAN_ENV)
    # make test: a pass each; make check: the plain pass in n shards
    shard = (i, n) if check else (0, 1)
    run_e2e("build" if tag == "plain" else "build/san", tag, only, check, shard)
    with open(counts, "w") as f:
        json.dump({"passed": passed, "failed": failed, "failures": failures}, f)


def e2e_side_by_side(tags, only, check):
    """Two processes at once: make test's plain and sanitizer passes, or
    make check's plain pass in two halves. Most of an e2e test's time is
    waiting (for a schedule, a timer, a peer), so two on two cores take
    little more than the longer one. The first one's lines come as they
    are written, the second's after it."""
    global passed, failed
    procs = []
    for i, tag in enumerate(tags):
        counts = os.path.join(ROOT, "build", f"e2e-{i}.json")
        out = open(os.path.join(ROOT, "build", f"e2e-{i}.log"), "w+")
        cmd = [sys.executable, os.path.abspath(__file__), "--pass", tag, "--counts", counts,
               "--job", f"{i}/{len(tags)}", "-k", only] + (["--check"] if check else [])
        p = subprocess.Popen(cmd, cwd=ROOT, text=True, stderr=subprocess.STDOUT,
                             stdout=subprocess.PIPE if i == 0 else out)
        procs.append((tag, p, counts, out))
    for tag, p, counts, out in procs:
        if p.stdout is not None:
            for line in p.stdout:
                print(line, end="", flush=True)
        p.wait()
        out.seek(0)
        sys.stdout.write(out.read())
        sys.stdout.flush()
        out.close()
        try:
            with open(counts) as f:
                c = json.load(f)
        except (OSError, ValueError):
            result(f"e2e/{tag}", False, f"the pass ended ({p.returncode}) without its counts")
            continue
        passed += c["passed"]
        failed += c["failed"]
        failures.extend(c["failures"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="")
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--serial", action="store_true",
                    help="the two passes one after the other ($TOKENTAP_TEST_SERIAL too)")
    ap.add_argument("--pass", dest="one_pass", choices=("plain", "san"), help=argparse.SUPPRESS)
    ap.add_argument("--counts", help=argparse.SUPPRESS)
    ap.add_argument("--job", default="0/1", help=argparse.SUPPRESS)
    a = ap.parse_args()
    start = time.monotonic()
    # warnings are errors here (and in CI); a plain make leaves them
    # warnings. In the environment, so that every make a test runs (make
    # install, make demo) builds with the same flags and rebuilds nothing.
    os.environ["WERROR"] = "-Werror"
    if a.one_pass:
        e2e_pass(a.one_pass, a.k, a.check, a.counts, a.job)
        return 0
    quick = a.fast or a.check
    builds = [("build", "plain", "")] + ([] if quick else [("build/san", "san", SAN)])
    built = []
    for bdir, tag, san in builds:
        if not a.no_build and not build(san):
            continue
        built.append((bdir, tag, san))
        env = dict(os.environ, **SAN_ENV) if tag == "san" else None
        run_unit(bdir, tag, a.k, env)
    serial = a.serial or os.environ.get("TOKENTAP_TEST_SERIAL")
    if len(built) == 2 and not serial:
        e2e_side_by_side(("plain", "san"), a.k, False)
    elif built and a.check and not serial:
        e2e_side_by_side(("plain", "plain"), a.k, True)
    else:
        for bdir, tag, _ in built:
            if tag == "san":
                os.environ.update(SAN_ENV)
            run_e2e(bdir, tag, a.k, a.check)
    if built and built[0][1] == "plain" and not a.k and not a.check:
        nginx_report()
    if not quick and not a.k:
        run_fuzz()
    print(f"# {time.monotonic() - start:.0f}s; failed: {', '.join(failures) or 'none'}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
