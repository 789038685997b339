# SPDX-License-Identifier: Apache-2.0
"""The access log and the stats file when the file system says no.

A log that runs out of room (a full tmpfs: ENOSPC; a file-size limit set
on the running tokentap with prlimit: a short write, then EFBIG, the same
two outcomes of write(2) and the same code path) loses whole lines, never
a torn one: every request is still proxied, the lines lost are counted in
/metrics and /stats, the warning comes once (not once a line), and when
room comes back every line of the file is valid JSON and the lines written
plus the lines counted lost are the requests made. A FIFO as the access log
that no process reads fails the start at once, said, where it hung; one
that is read works. `tokentap -t` names a log path whose "directory" is a
file or which is a directory."""
import json
import os
import resource
import subprocess
import tempfile
import threading
import time

from harness import Mock, Tokentap, build_request, conf, conf_file, metric, pipeline, report, \
    run, until

REQUEST = build_request("/v1/chat/completions", {"model": "m", "stream": True},
                        {"X-Mock-TTFT": "0ms", "X-Mock-TPOT": "0ms", "X-Mock-Tokens": "2"})


def lost(t, what="lines", log="access"):
    return metric(t, f"tokentap_log_{what}_lost_total", log=log)


def whole_json_lines(path):
    """The file's lines, each parsed: the file ends with a newline and every
    line is one JSON document (a torn line glued to the next is not)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data == b"" or data.endswith(b"\n"), data[-200:]
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def warnings(t, what):
    return [x for x in t.stderr().splitlines() if x.startswith(f"warning: {what} ")]


def run_out_of_room(t, log, stats, fill, free, n):
    """n requests while the logs have no room (fill() takes it), then 20
    once free() gives it back; checks the counts and the lines."""
    fill()
    assert pipeline(t.port, [REQUEST] * n, 1) == [200] * n
    # every line written or counted lost, and a stats snapshot lost too
    until(lambda: len(whole_json_lines(log)) + lost(t) == n and lost(t, log="stats") >= 1,
          15, f"the {n} lines written or counted")
    during = len(whole_json_lines(log))
    lines_lost, bytes_lost = lost(t), lost(t, "bytes")
    assert during + lines_lost == n, (during, lines_lost, n)
    assert during < n // 2 and lines_lost > n // 2, (during, lines_lost)
    sizes = [len(json.dumps(x)) for x in whole_json_lines(log)]
    # escaping aside, a lost line is as long as a written one
    assert min(sizes) * 0.8 * lines_lost <= bytes_lost <= max(sizes) * 1.2 * lines_lost, \
        (bytes_lost, lines_lost, min(sizes), max(sizes))
    s = t.stats()["logs"]
    assert s["access"] == {"lines_lost": lines_lost, "bytes_lost": bytes_lost}, s
    # one warning per file, not one a line (the next comes 10 s on at the earliest)
    w = warnings(t, "access log")
    assert len(w) == 1 and "lost; lost lines are counted in /metrics" in w[0], w
    assert len(warnings(t, "stats file")) == 1, t.stderr()[-2000:]
    free()
    assert pipeline(t.port, [REQUEST] * 20, 1) == [200] * 20
    until(lambda: len(whole_json_lines(log)) == during + 20, 15, "the 20 lines once there is room")
    assert lost(t) == lines_lost
    # the stats file's own snapshot, once it has room, says what it lost
    snaps = until(lambda: (x := whole_json_lines(stats)) and
                  x[-1]["logs"]["stats"]["lines_lost"] >= 1 and x, 15, "a snapshot after")
    assert all("groups" in x for x in snaps)


def test_full_tmpfs_loses_whole_lines_counted():
    """A full file system: a 64 KiB tmpfs (root mounts it; without the
    right to mount, skipped with a REPORT saying so)."""
    d = tempfile.mkdtemp(prefix="tt-fulldisk-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        report(f"full tmpfs skipped: cannot mount a tmpfs ({r.stderr.strip()}); "
               "test_file_size_limit_loses_whole_lines_counted covers the same path")
        return
    try:
        log, stats = os.path.join(d, "access.jsonl"), os.path.join(d, "stats.jsonl")
        filler = os.path.join(d, "filler")

        def fill():
            # all the room but 6 KiB: a few lines fit, then one is cut short
            with open(filler, "wb") as f:
                try:
                    f.write(b"x" * 65536)
                except OSError:
                    pass
            os.truncate(filler, os.path.getsize(filler) - 6000 - os.path.getsize(log))

        with Mock() as m, Tokentap(conf(m, top=f"access_log: {log}\n"
                                                f"stats: {{file: {stats}, interval: 100ms}}\n")) as t:
            run_out_of_room(t, log, stats, fill, lambda: os.unlink(filler), 300)
            assert "No space left on device" in warnings(t, "access log")[0]
    finally:
        subprocess.run(["umount", d])


def test_file_size_limit_loses_whole_lines_counted():
    """RLIMIT_FSIZE set on the running tokentap (prlimit): the write that
    crosses it is short, those after it fail with EFBIG, as a disk that
    fills gives a short write, then ENOSPC. Works without root. SIGXFSZ,
    which ended tokentap at the first write past the limit, is ignored."""
    d = tempfile.mkdtemp(prefix="tt-fsize-")
    log, stats = os.path.join(d, "access.jsonl"), os.path.join(d, "stats.jsonl")
    with Mock() as m, Tokentap(conf(m, top=f"access_log: {log}\n"
                                            f"stats: {{file: {stats}, interval: 100ms}}\n")) as t:
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

        def fill():
            # room for the stats file's snapshots so far and about 8 lines
            limit = max(os.path.getsize(stats), os.path.getsize(log)) + 6000 + 7
            resource.prlimit(t.p.pid, resource.RLIMIT_FSIZE, (limit, hard))

        run_out_of_room(t, log, stats, fill,
                        lambda: resource.prlimit(t.p.pid, resource.RLIMIT_FSIZE, (hard, hard)),
                        300)
        assert "File too large" in warnings(t, "access log")[0]
        assert t.p.poll() is None


def test_access_log_fifo():
    """A FIFO that no process reads held the start before the listeners,
    with no word; one that is read takes the lines."""
    d = tempfile.mkdtemp(prefix="tt-fifo-")
    fifo = os.path.join(d, "access.fifo")
    os.mkfifo(fifo)
    path = conf_file(f"access_log: {fifo}\nroutes:\n  - name: llm\n"
                     f"    upstream: http://127.0.0.1:9\n")
    r = run("tokentap", "-c", path, timeout=5)
    assert r.returncode == 1 and f"access log {fifo}: a FIFO that no process reads" in \
        r.stderr, (r.returncode, r.stderr)
    # a reader (opened without waiting for a writer): the start goes on
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    buf, done = bytearray(), threading.Event()

    def reader():
        while True:
            try:
                b = os.read(rfd, 65536)
            except BlockingIOError:
                b = None
            if b:
                buf.extend(b)
            elif done.is_set():
                break
            else:
                time.sleep(0.02)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        with Mock() as m, Tokentap(conf(m, top=f"access_log: {fifo}\n")) as t:
            assert pipeline(t.port, [REQUEST] * 3, 1) == [200] * 3
            until(lambda: buf.count(b"\n") >= 3, 10, "three lines through the FIFO")
    finally:
        done.set()
        th.join(5)
        os.close(rfd)
    got = bytes(buf).splitlines()
    assert len(got) == 3 and all(json.loads(x)["status"] == 200 for x in got), got


def check_t(conf_text, key, want):
    """tokentap -t fails and names key's FILE:LINE:COL with want."""
    path = conf_file("routes:\n  - name: llm\n    upstream: http://127.0.0.1:9\n" + conf_text)
    with open(path) as f:
        text = f.read()
    no = next(i for i, x in enumerate(text.splitlines(), 1) if x.lstrip().startswith(key + ":"))
    col = text.splitlines()[no - 1].index(key) + len(key) + 3
    r = run("tokentap", "-t", "-c", path)
    assert r.returncode == 1 and f"{path}:{no}:{col}: {want}" in r.stderr, (r.returncode,
                                                                            r.stderr, want)


def test_t_names_a_log_directory_that_is_a_file():
    """-t said OK where the start failed: a log whose "directory" is a file
    (an executable one passed access(2) for root), or a directory as the
    log."""
    d = tempfile.mkdtemp(prefix="tt-logpath-")
    exe = os.path.join(d, "tool")
    with open(exe, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    plain = os.path.join(d, "plain")
    with open(plain, "w") as f:
        f.write("x\n")
    check_t(f"access_log: {exe}/access.jsonl\n", "access_log",
            f"access_log {exe}/access.jsonl: {exe} is a file, not a directory")
    check_t(f"access_log: {plain}/sub/access.jsonl\n", "access_log",
            f"access_log {plain}/sub/access.jsonl: {plain} is a file, not a directory")
    check_t(f"stats:\n  file: {exe}/stats.jsonl\n", "file",
            f"stats.file {exe}/stats.jsonl: {exe} is a file, not a directory")
    check_t(f"access_log: {d}\n", "access_log", f"access_log {d}: a directory, not a file")
    check_t(f"access_log: {d}/none/access.jsonl\n", "access_log",
            f"access_log {d}/none/access.jsonl: the directory {d}/none does not exist")
