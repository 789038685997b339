#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs every test of tokentap and ends with one line: "N passed, N failed".

  1. builds the programs and the unit tests, plain and with ASan+UBSan;
  2. queues the rest: the cmocka unit tests of both builds (TAP output, one
     line a test), each e2e module (tests/e2e/test_*.py, and the framing
     corpus, tests/conformance) against each build, and the fuzzer for a
     bounded time; two worker processes take the tasks, the longest first
     (run_queue), while the framing corpus goes through nginx beside them.

  python3 tests/run.py [-k SUBSTRING] [--fast | --check] [--workers N | --serial]
     -k       only tests whose name contains SUBSTRING
     --fast   plain build only, no fuzzing
     --check  make check: the plain build's unit tests and the e2e tests
              that need no browser, no bench, no demo and no valgrind
              (a module's CHECK_SKIP names the tests left out, "*" all)
     --workers N worker processes side by side ($TOKENTAP_TEST_WORKERS;
              default 2, one a core)
     --serial one worker: every task after the other

Every e2e test runs under a time limit (TIME_LIMIT seconds, or a module's
TIME_LIMITS[name]): a test that hangs fails with what it was doing, and
the run goes on. What each test took is kept in build/test-times.json, the
next run's estimates; each worker's lines are in build/e2e-N.log.
"""
import argparse
import glob
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAN = "address,undefined"
passed = 0
failed = 0
failures = []
CTL = None          # a worker's report pipe to the runner
# seconds an e2e test may take; a module's TIME_LIMITS = {name: s} says more
TIME_LIMIT = 120


def result(name, ok, detail=""):
    count(name, ok)
    print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
    if detail and not ok:
        print("     " + detail.rstrip().replace("\n", "\n     "), flush=True)
    if CTL:
        CTL.write(json.dumps([ok, name]) + "\n")
        CTL.flush()


def count(name, ok):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        failures.append(name)


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


BUILDS = {"plain": "build", "san": "build/san"}


def e2e_paths():
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "e2e", "test_*.py")))
    return paths + sorted(glob.glob(os.path.join(ROOT, "tests", "conformance", "test_*.py")))


def module_tag(path):
    return os.path.basename(path)[:-3]


def selected(mod, path, tag, only, check):
    """The names of mod's tests a pass runs: not in its SANITIZER_SKIP (the
    san pass) nor its CHECK_SKIP (make check), and holding -k."""
    skip = set(getattr(mod, "SANITIZER_SKIP", set())) if tag == "san" else set()
    if check:
        skip |= set(getattr(mod, "CHECK_SKIP", set()))
    if "*" in skip:
        return []
    base = f"e2e/{tag}/{module_tag(path)}/"
    return [n for n in sorted(dir(mod)) if n.startswith("test_") and n not in skip and
            (not only or only in base + n)]


def run_module(path, tag, only, check):
    """One module's tests against the build of pass tag, each under its
    time limit: {test: seconds}."""
    os.environ["TOKENTAP_BUILD"] = BUILDS[tag]
    for k, v in SAN_ENV.items():
        if tag == "san":
            os.environ[k] = v
        elif k in ENV_BEFORE:
            os.environ[k] = ENV_BEFORE[k]
        else:
            os.environ.pop(k, None)
    try:
        mod = load_module(path)
    except Exception:
        result(f"e2e/{tag}/{os.path.basename(path)}", False, traceback.format_exc())
        return {}
    limits = getattr(mod, "TIME_LIMITS", {})
    times = {}
    for name in selected(mod, path, tag, only, check):
        full = f"e2e/{tag}/{module_tag(path)}/{name}"
        t = time.monotonic()
        try:
            call_limited(getattr(mod, name), limits.get(name, TIME_LIMIT))
            ok, detail = True, ""
        except (Exception, TestTimeout):
            ok, detail = False, traceback.format_exc()[-1500:]
        times[full] = time.monotonic() - t
        result(full + f" ({times[full]:.1f}s)", ok, detail)
    return times


def nginx_report(out):
    """Where nginx treats the framing corpus otherwise: printed, not counted.
    Its lines go into the list out."""
    script = os.path.join(ROOT, "tests", "conformance", "nginx_diff.py")
    r = subprocess.run([sys.executable, script], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    out.append("# the framing corpus through nginx, for information:\n")
    out.extend("#   " + line + "\n" for line in (r.stdout + r.stderr).splitlines())


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
ENV_BEFORE = {k: os.environ[k] for k in SAN_ENV if k in os.environ}
# each worker's own ports (harness.free_port), below the kernel's
# ephemeral range (32768 and up), so none takes another's: 20000-31999
# shared out, or $TOKENTAP_TEST_PORT_BASE and 1,500 ports a worker from
# there (several runs at once on one machine, each with a base of its own)
_base = int(os.environ.get("TOKENTAP_TEST_PORT_BASE", "0"))


def ports(i, n):
    lo, size = (_base, 1500) if _base else (20000, 12000 // n)
    return f"{lo + i * size}-{lo + (i + 1) * size - 1}"


# what each test and step took in the last run that ran it: the scheduler's
# estimates (not yet timed: a test, a quarter of its own TIME_LIMITS entry
# or GUESS seconds; a step, STEP_GUESS)
TIMES = os.path.join(ROOT, "build", "test-times.json")
GUESS = 1.0
STEP_GUESS = 30.0


def run_task(task, only, check):
    """One task of the queue: {what it timed: seconds}."""
    t = time.monotonic()
    kind, tag = task["kind"], task.get("tag")
    if kind == "e2e":
        return run_module(task["path"], tag, only, check)
    if kind == "unit":
        run_unit(BUILDS[tag], tag, only, dict(os.environ, **SAN_ENV) if tag == "san" else None)
    elif kind == "fuzz":
        run_fuzz()
    return {task["name"]: time.monotonic() - t}


def worker(only, check, fds):
    """--worker TASKS,CTL: the tasks the runner writes on pipe TASKS (a
    JSON line each; not stdin, which a test's child may read), one after
    the other. On pipe CTL, a JSON line for each result as it comes
    (a worker may die in a task: what it said before still counts) and one
    when the task ends: its times, and where its lines are in stdout (the
    worker's log file)."""
    global CTL
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    tasks_fd, ctl_fd = (int(x) for x in fds.split(","))
    CTL = os.fdopen(ctl_fd, "w")
    for line in os.fdopen(tasks_fd):
        task = json.loads(line)
        sys.stdout.flush()
        start = os.fstat(1).st_size
        try:
            times = run_task(task, only, check)
        except Exception:
            times = {}
            result(task["name"], False, traceback.format_exc())
        sys.stdout.flush()
        sys.stderr.flush()
        CTL.write(json.dumps({"times": times, "lines": [start, os.fstat(1).st_size]}) + "\n")
        CTL.flush()


def plan(built, only, check, quick):
    """The tasks after the builds, each with its tag (the pass a worker
    prefers it for) and its estimate in seconds, longest first."""
    try:
        with open(TIMES) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    tasks = []
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    for tag in built:
        tasks.append({"kind": "unit", "tag": tag, "name": f"unit/{tag}"})
        for path in e2e_paths():
            try:
                mod = load_module(path)
                names = selected(mod, path, tag, only, check)
            except Exception:
                tasks.append({"kind": "e2e", "tag": tag, "path": path, "name": path,
                              "estimate": GUESS})
                continue
            limits = getattr(mod, "TIME_LIMITS", {})
            guess = {n: limits[n] / 4 if n in limits else GUESS for n in names}
            est = sum(known.get(f"e2e/{tag}/{module_tag(path)}/{n}", guess[n]) for n in names)
            if names:
                tasks.append({"kind": "e2e", "tag": tag, "path": path, "estimate": est,
                              "name": f"e2e/{tag}/{module_tag(path)}"})
    if not quick and not only:         # a sanitizer build: worker 1's by preference
        tasks.append({"kind": "fuzz", "tag": "san", "name": "fuzz/stream"})
    for t in tasks:
        t.setdefault("estimate", known.get(t["name"], STEP_GUESS))
    return sorted(tasks, key=lambda t: -t["estimate"])


class Worker:
    """A worker process: its log file (build/e2e-I.log, every line it and
    its tests wrote), the pipe its reports come on, the task it runs."""

    def __init__(self, i, n, only, check):
        self.i, self.task, self.buf = i, None, b""
        self.log = os.path.join(ROOT, "build", f"e2e-{i}.log")
        r, w = os.pipe()
        tr, tw = os.pipe()
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{tr},{w}", "-k",
               only] + (["--check"] if check else [])
        with open(self.log, "ab") as out:
            self.p = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                      pass_fds=(tr, w),
                                      env=dict(os.environ, TOKENTAP_TEST_PORTS=ports(i, n)))
        os.close(w)
        os.close(tr)
        self.ctl, self.tasks = r, os.fdopen(tw, "w")

    def give(self, task):
        self.task, self.since = task, time.monotonic()
        self.start = os.path.getsize(self.log)
        self.tasks.write(json.dumps(task) + "\n")
        self.tasks.flush()

    def reports(self):
        """The reports that came (a list), or None: the worker ended."""
        data = os.read(self.ctl, 65536)
        if not data:
            return None
        *lines, self.buf = (self.buf + data).split(b"\n")
        return [json.loads(x) for x in lines]

    def lines(self, start, end=None):
        with open(self.log, "rb") as f:
            f.seek(start)
            return f.read(-1 if end is None else max(0, end - start)).decode(errors="replace")

    def close(self):
        self.tasks.close()
        self.p.wait()
        os.close(self.ctl)


def take(queue, tag):
    """The longest task of the queue for tag, or else the longest."""
    i = next((i for i, t in enumerate(queue) if t["tag"] == tag), 0)
    return queue.pop(i)


def run_queue(queue, nworkers, only, check):
    """The tasks on nworkers processes side by side, each with ports of
    its own (TOKENTAP_TEST_PORTS). Most of an e2e test's time is waiting
    (for a schedule, a timer, a peer), so two on two cores take little
    more than one. Worker 0 (and 2, ...) prefers the plain pass's tasks,
    worker 1 (3, ...) the sanitizer pass's, and each takes the others'
    when its own are done: the long ones go first, so all end within a
    short task of each other.
    A task's lines are printed when it ends; a worker that dies fails its
    task and another takes its place. Returns {test or step: seconds}."""
    tags = ("plain", "san")
    times = {}
    for i in range(nworkers):
        open(os.path.join(ROOT, "build", f"e2e-{i}.log"), "w").close()
    n = min(nworkers, len(queue))
    workers = [Worker(i, n, only, check) for i in range(n)]
    busy = [0.0] * len(workers)
    for w in workers:
        w.give(take(queue, tags[w.i % 2]))
    while any(w.task for w in workers):
        ready, _, _ = select.select([w.ctl for w in workers if w.task], [], [])
        for w in [w for w in workers if w.ctl in ready]:
            got = w.reports()
            for r in got or []:
                if isinstance(r, list):
                    count(r[1], r[0])
                    continue
                sys.stdout.write(w.lines(*r["lines"]))
                times.update(r["times"])
                busy[w.i] += time.monotonic() - w.since
                w.task = None
            if got is None:
                busy[w.i] += time.monotonic() - w.since
                w.p.wait()
                sys.stdout.write(w.lines(w.start))
                result(w.task["name"], False, f"the worker ended ({w.p.returncode}) in it")
                w.close()
                w = workers[w.i] = Worker(w.i, n, only, check)
            sys.stdout.flush()
            if w.task is None and queue:
                w.give(take(queue, tags[w.i % 2]))
    for w in workers:
        w.close()
    print("# workers busy: " + ", ".join(f"{b:.0f}s" for b in busy))
    return times


def save_times(times, whole):
    """The run's times into TIMES: merged with those of the tests it did not
    run, or (whole: it ran them all) in their place."""
    known = {}
    try:
        with open(TIMES) as f:
            known = {} if whole else json.load(f)
    except (OSError, ValueError):
        pass
    known.update({k: round(v, 1) for k, v in times.items()})
    with open(TIMES + ".tmp", "w") as f:
        json.dump(known, f, indent=0, sort_keys=True)
    os.replace(TIMES + ".tmp", TIMES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="")
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--workers", type=int,
                    default=int(os.environ.get("TOKENTAP_TEST_WORKERS", "2")),
                    help="worker processes side by side ($TOKENTAP_TEST_WORKERS; 2)")
    ap.add_argument("--serial", action="store_true",
                    help="one worker, every task after the other ($TOKENTAP_TEST_SERIAL too)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    start = time.monotonic()
    # warnings are errors here (and in CI); a plain make leaves them
    # warnings. In the environment, so that every make a test runs (make
    # install, make demo) builds with the same flags and rebuilds nothing.
    os.environ["WERROR"] = "-Werror"
    if a.worker is not None:
        worker(a.k, a.check, a.worker)
        return 0
    quick = a.fast or a.check
    builds = [("plain", "")] + ([] if quick else [("san", SAN)])
    built = [tag for tag, san in builds if a.no_build or build(san)]
    serial = a.serial or os.environ.get("TOKENTAP_TEST_SERIAL")
    queue = plan(built, a.k, a.check, quick)
    # nginx's differences wait on nginx (35 s, 2 s of CPU): beside the
    # workers, not in their queue
    nginx = []
    aside = threading.Thread(target=nginx_report, args=(nginx,))
    if built and built[0] == "plain" and not a.k and not a.check:
        aside.start()
    times = run_queue(queue, 1 if serial else max(1, a.workers), a.k, a.check)
    if aside.ident:
        aside.join()
        sys.stdout.write("".join(nginx))
    # under -k a step ran in part: its time is no estimate of the whole
    save_times({k: v for k, v in times.items() if k.startswith("e2e/") or not a.k},
               not (a.k or quick))
    print(f"# {time.monotonic() - start:.0f}s; failed: {', '.join(failures) or 'none'}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
