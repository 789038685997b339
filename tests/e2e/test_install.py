# SPDX-License-Identifier: Apache-2.0
"""Running tokentap as a service: `make install` into a DESTDIR, the systemd
unit (systemd-analyze verify and security), the logrotate snippet (a real
rotation with a SIGUSR1 reopen), the man pages (lint, every config key
documented, and each program's options as its --help prints them),
sd_notify readiness, and the Docker image's config and
libraries (the image itself: make test-docker)."""
import gzip
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

from harness import ROOT, Proc, Tokentap, binary, free_port, raw_request, until

# Packaging does not change under a sanitizer; the sanitized binaries are
# still installed and run by test_install_tree and test_sd_notify.
SANITIZER_SKIP = {"test_install_local_prefix", "test_unit_verifies", "test_unit_security",
                  "test_logrotate_rotates_and_reopens", "test_man_pages",
                  "test_man_pages_match_help", "test_docker_config_and_libraries"}
# make check leaves out the two that build and install again (a minute and
# a half of its five)
CHECK_SKIP = {"test_install_local_prefix", "test_docker_config_and_libraries"}

BINS = ("tokentap", "tokentap-mock", "tokentap-load")
# the man pages, by where make install puts them
MAN_PAGES = ("man8/tokentap.8", "man5/tokentap.yaml.5", "man1/tokentap-mock.1",
             "man1/tokentap-load.1")
UNIT = os.path.join(ROOT, "systemd", "tokentap.service")
MINIMAL_CONF = ("listen:\n  - address: 127.0.0.1:8080\nroutes:\n  - name: default\n"
                "    upstream: http://127.0.0.1:8000\n"
                "access_log: /var/log/tokentap/access.jsonl\n")


def need(tool, package):
    path = shutil.which(tool)
    assert path, f"{tool} is missing: add the Debian package {package} to tests/deps.sh"
    return path


def run(args, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    return subprocess.run(args, **kw)


def make(target, destdir, prefix, tmp):
    """make TARGET DESTDIR= PREFIX= for the build under test; a stand-in
    config when the repository has none yet."""
    args = ["make", "-s", target, f"DESTDIR={destdir}", f"PREFIX={prefix}"]
    if os.path.basename(os.path.dirname(binary("tokentap"))) == "san":
        args.append("SANITIZER=address,undefined")
    if not os.path.exists(os.path.join(ROOT, "conf", "tokentap.yaml")):
        conf = os.path.join(tmp, "minimal.yaml")
        with open(conf, "w") as f:
            f.write(MINIMAL_CONF)
        args.append(f"INSTALL_CONF={conf}")
    r = run(args, cwd=ROOT)
    assert r.returncode == 0, f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    return r.stdout + r.stderr


def tree(root):
    """Every file and symlink under root, relative, with its mode."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def unit_settings(text):
    """{key: [values]} of a unit file (comments and sections dropped)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;[":
            continue
        k, _, v = line.partition("=")
        out.setdefault(k, []).append(v)
    return out


def test_install_tree():
    tmp = tempfile.mkdtemp(prefix="tt-install-")
    dest = os.path.join(tmp, "root")
    try:
        make("install", dest, "/usr", tmp)
        files = tree(dest)
        expected = {f"usr/bin/{b}": 0o755 for b in BINS}
        expected.update({f"usr/share/man/{m}": 0o644 for m in MAN_PAGES})
        expected.update({
            "lib/systemd/system/tokentap.service": 0o644,
            "etc/logrotate.d/tokentap": 0o644,
            "etc/tokentap/tokentap.yaml": 0o644,
        })
        assert files == expected, f"installed tree:\n{files}\nexpected:\n{expected}"
        for b in BINS:
            with open(os.path.join(dest, "usr/bin", b), "rb") as got, \
                    open(binary(b), "rb") as built:
                assert got.read() == built.read(), f"{b} is not {binary(b)}"
        with open(os.path.join(dest, "lib/systemd/system/tokentap.service")) as f:
            unit = unit_settings(f.read())
        assert unit["ExecStart"] == ["/usr/bin/tokentap -c /etc/tokentap/tokentap.yaml"], unit
        assert unit["ExecStartPre"] == ["/usr/bin/tokentap -t -c /etc/tokentap/tokentap.yaml"]

        tt = os.path.join(dest, "usr/bin/tokentap")
        conf = os.path.join(dest, "etc/tokentap/tokentap.yaml")
        r = run([tt, "-V"])
        assert r.returncode == 0 and r.stdout.startswith("tokentap "), r
        r = run([tt, "-t", "-c", conf])
        if os.path.isdir("/var/log/tokentap"):
            assert (r.returncode, r.stdout) == (0, "configuration OK\n"), \
                f"the installed config does not load: {r.stdout}{r.stderr}"
        else:
            # the service's log directory is systemd's to make (LogsDirectory=):
            # -t says so, and nothing else is wrong
            assert r.returncode == 1 and r.stderr.endswith(
                "access_log /var/log/tokentap/access.jsonl: the directory "
                "/var/log/tokentap does not exist\n") and r.stderr.count("\n") == 1, r.stderr

        # an operator's edit survives the next install
        with open(conf, "a") as f:
            f.write("# edited by the operator\n")
        with open(conf) as f:
            edited = f.read()
        out = make("install", dest, "/usr", tmp)
        with open(conf) as f:
            assert f.read() == edited, "make install overwrote the installed config"
        assert "keeping" in out, out
        assert tree(dest) == expected
    finally:
        shutil.rmtree(tmp)


def test_install_local_prefix():
    tmp = tempfile.mkdtemp(prefix="tt-install-")
    dest = os.path.join(tmp, "root")
    try:
        make("install", dest, "/usr/local", tmp)
        files = tree(dest)
        for b in BINS:
            assert files.get(f"usr/local/bin/{b}") == 0o755, files
        for m in MAN_PAGES:
            assert files.get(f"usr/local/share/man/{m}") == 0o644, (m, files)
        with open(os.path.join(dest, "usr/local/lib/systemd/system/tokentap.service")) as f:
            unit = unit_settings(f.read())
        assert unit["ExecStart"] == ["/usr/local/bin/tokentap -c /etc/tokentap/tokentap.yaml"]
        assert unit["ExecStartPre"][0].startswith("/usr/local/bin/tokentap -t ")
        make("uninstall", dest, "/usr/local", tmp)
        assert sorted(tree(dest)) == ["etc/tokentap/tokentap.yaml"], tree(dest)
    finally:
        shutil.rmtree(tmp)


def installed_unit_copy(tmp):
    """Installs into tmp/root and returns (unit path, MANPATH) for checks on
    this machine: the unit's binaries point into the tree, as no tokentap
    is installed in /usr/bin here."""
    dest = os.path.join(tmp, "root")
    make("install", dest, "/usr", tmp)
    with open(os.path.join(dest, "lib/systemd/system/tokentap.service")) as f:
        text = f.read().replace("/usr/bin/tokentap", os.path.join(dest, "usr/bin/tokentap"))
    os.makedirs(os.path.join(tmp, "units"))
    path = os.path.join(tmp, "units", "tokentap.service")
    with open(path, "w") as f:
        f.write(text)
    return path, os.path.join(dest, "usr/share/man")


def test_unit_verifies():
    analyze = need("systemd-analyze", "systemd")
    with open(UNIT) as f:
        unit = unit_settings(f.read())
    # a rejected config fails `systemctl reload` (the check runs first),
    # a good one is signalled
    assert unit["ExecReload"] == ["/usr/bin/tokentap -t -c /etc/tokentap/tokentap.yaml",
                                  "/bin/kill -HUP $MAINPID"], unit["ExecReload"]
    want = {"Type": "notify", "KillSignal": "SIGTERM",
            "DynamicUser": "yes", "StateDirectory": "tokentap", "LogsDirectory": "tokentap",
            "ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes",
            "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
            "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX", "UMask": "0077",
            "SystemCallArchitectures": "native", "LimitNOFILE": "65536",
            "MemoryDenyWriteExecute": "yes"}
    for k, v in want.items():
        assert v in unit.get(k, []), f"{k}={v} missing from the unit: {unit.get(k)}"
    assert "@system-service" in unit["SystemCallFilter"]
    # drain (timeouts.shutdown, 30 s by default) must end before SIGKILL
    stop = int(unit["TimeoutStopSec"][0].rstrip("s"))
    assert 30 < stop <= 60, stop

    tmp = tempfile.mkdtemp(prefix="tt-unit-")
    try:
        path, manpath = installed_unit_copy(tmp)
        env = dict(os.environ, MANPATH=manpath, SYSTEMD_LOG_LEVEL="notice")
        # verify exits 0 on unknown keys and bad values, so its words count too
        r = run([analyze, "verify", path], env=env)
        assert r.returncode == 0 and r.stdout + r.stderr == "", \
            f"systemd-analyze verify:\n{r.stdout}{r.stderr}"
        # and it does read the file here: a misspelt key is reported
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("ProtectSystem=", "ProtectSystm="))
        r = run([analyze, "verify", path], env=env)
        assert "ProtectSystm" in r.stderr, f"verify missed a bad key: {r.stderr}"
    finally:
        shutil.rmtree(tmp)


def test_unit_security():
    analyze = need("systemd-analyze", "systemd")
    r = run([analyze, "security", "--offline=yes", "--no-pager", UNIT])
    m = re.search(r"Overall exposure level for tokentap.service: ([\d.]+) (\w+)", r.stdout)
    assert m, f"no score:\n{r.stdout}{r.stderr}"
    # 1.2 when written; "OK" is below 2.0 on systemd's 0-10 scale
    assert float(m.group(1)) <= 2.0, f"exposure {m.group(1)} {m.group(2)}:\n{r.stdout}"


def test_logrotate_rotates_and_reopens():
    """The snippet as `make install` lays it down: logrotate refuses a
    group-writable config, and the checkout's modes follow its umask."""
    logrotate = need("logrotate", "logrotate")
    with tempfile.TemporaryDirectory(prefix="tt-logrotate-") as dest:
        make("install", dest, "/usr", dest)
        installed = os.path.join(dest, "etc", "logrotate.d", "tokentap")
        assert stat.S_IMODE(os.stat(installed).st_mode) == 0o644
        with open(installed) as f:
            snippet = f.read()
        r = run([logrotate, "-d", installed])
        assert r.returncode == 0 and "error" not in r.stderr.lower(), r.stderr
    for directive in ("daily", "rotate 14", "compress", "delaycompress", "missingok",
                      "notifempty", "postrotate"):
        assert re.search(rf"^\s*{directive}\s*$", snippet, re.M), directive
    assert "/var/log/tokentap/" in snippet and "SIGUSR1" in snippet

    # the same snippet over a running tokentap's access log, with the
    # postrotate signal sent by pid: systemctl has no manager here
    with Tokentap("routes:\n  - name: chat\n    match: {path_prefix: /v1/}\n"
                  "    upstream: http://127.0.0.1:9\n") as tt:
        conf = os.path.join(tt.dir, "logrotate.conf")
        text = snippet.replace("/var/log/tokentap/", tt.dir + "/").replace(
            "/var/lib/tokentap/", tt.dir + "/lib/")
        text = re.sub(r"systemctl kill [^\n]*", f"kill -USR1 {tt.p.pid}", text)
        with open(conf, "w") as f:
            f.write(text)
        os.chmod(conf, 0o644)
        state = os.path.join(tt.dir, "state")

        def request(n):
            raw_request(tt.port, b"GET /none/%d HTTP/1.1\r\nHost: x\r\nConnection: close"
                        b"\r\n\r\n" % n)

        def paths(name):
            with (gzip.open if name.endswith(".gz") else open)(
                    os.path.join(tt.dir, name), "rt") as f:
                return [json.loads(line)["path"] for line in f]

        def rotate(k):
            """The k-th rotation, once tokentap has reopened its logs: the
            signal is handled by its main thread, and a request logged
            before that still goes to the renamed file."""
            r = run([logrotate, "-f", "-s", state, conf])
            assert r.returncode == 0, r.stderr
            until(lambda: tt.stderr().count("logs reopened") >= k, 5, f"reopen {k}")

        request(1)
        assert len(tt.access(1)) == 1
        rotate(1)
        assert paths("access.jsonl.1") == ["/none/1"]
        request(2)
        assert [r["path"] for r in tt.access(1)] == ["/none/2"]
        rotate(2)
        request(3)
        assert [r["path"] for r in tt.access(1)] == ["/none/3"]
        assert paths("access.jsonl.1") == ["/none/2"]
        assert paths("access.jsonl.2.gz") == ["/none/1"]
        assert tt.stop() == 0


def man_text(page):
    """The page as man-db renders it, with every groff warning on
    (--warnings=w: groff -ww): a warning is a failure."""
    r = run(["man", "-l", "--warnings=w", page],
            env=dict(os.environ, MANWIDTH="80", MAN_KEEP_FORMATTING=""))
    assert r.returncode == 0 and r.stderr == "", f"man -l --warnings=w {page}: {r.stderr}"
    return r.stdout


def test_man_pages():
    need("man", "man-db")
    groff = need("groff", "groff-base")
    pages = [os.path.join(ROOT, "man", os.path.basename(m)) for m in MAN_PAGES]
    for page in pages:
        r = run([groff, "-mandoc", "-ww", "-z", page])
        assert r.returncode == 0 and r.stderr == "", f"groff {page}: {r.stderr}"
        mandoc = shutil.which("mandoc")
        if mandoc:
            r = run([mandoc, "-Tlint", "-W", "warning", page])
            assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr
        assert "SEE ALSO" in man_text(page)

    # every key of the schema (config_otel.c has otel:'s) is documented in
    # tokentap.yaml(5)
    keys = set()
    for src in ("config_schema.c", "config_otel.c"):
        with open(os.path.join(ROOT, "src", "proxy", "conf", src)) as f:
            keys |= set(re.findall(r'\b(?:DUR|SIZE|UINT|FLOAT|BOOL|STR|MAP|SECTION|FUNC|KEY)'
                                   r'\("(\w+)"|\.name = "(\w+)"', f.read()))
    keys = {k for pair in keys for k in pair if k}
    assert len(keys) > 40, keys
    with open(pages[1]) as f:
        documented = set()
        for words in re.findall(r"(?:^\.|\s)Cm ([\w. ]+)", f.read(), re.M):
            for w in words.split():
                documented.update(w.split("."))
    assert keys <= documented, f"undocumented keys: {sorted(keys - documented)}"

    # every flag of tokentap is in tokentap(8)
    with open(os.path.join(ROOT, "src", "proxy", "main.c")) as f:
        flags = re.search(r'getopt(?:_long)?\(argc, argv, "([^"]+)"', f.read()).group(1)
    with open(pages[0]) as f:
        page8 = f.read()
    for flag in flags.replace(":", ""):
        assert re.search(rf"^\.It Fl {flag}\b", page8, re.M), f"-{flag} not in tokentap.8"


def help_options(text):
    """{long: short or None} of a --help text: its option lines (a short
    option, then the long one, indented by at most 8 columns; a second
    long option on the same line too), and the options of its first line
    (`usage: ... [--html FILE]`, for a command that lists no others)."""
    out = {}
    lines = text.splitlines()
    for line in lines:
        m = re.match(r" {1,8}(?:-(\w), )?--([a-z][\w-]*)", line)
        if m:
            out[m.group(2)] = m.group(1)
            for extra in re.findall(r", --([a-z][\w-]*)", line[m.end():]):
                out.setdefault(extra, None)
    for name in re.findall(r"\[--([a-z][\w-]*)", lines[0]):
        out.setdefault(name, None)
    return out


def page_options(text):
    """{long: short or None} of the .It lines of a piece of an mdoc page:
    `.It Fl c Ar n , Fl -concurrency Ar n`, `.It Fl -max-concurrency Ar n ,
    Fl -max-rate Ar r`."""
    out = {}
    for line in re.findall(r"^\.It Fl .*$", text, re.M):
        shorts = re.findall(r"\bFl (\w)\b(?! *-)", line)
        longs = re.findall(r"\bFl -([a-z][\w-]*)", line)
        for name in longs:
            out[name] = shorts[0] if len(shorts) == 1 and len(longs) == 1 else None
    return out


def page_sections(text):
    """{heading: text} of an mdoc page, by .Sh and by .Ss (a .Sh's text
    holds its .Ss ones)."""
    out = {}
    marks = [(m.start(), m.group(1), m.group(2).strip())
             for m in re.finditer(r"^\.(Sh|Ss) (.*)$", text, re.M)]
    for i, (at, kind, title) in enumerate(marks):
        end = len(text)
        for at2, kind2, _ in marks[i + 1:]:
            if kind == "Ss" or kind2 == "Sh":
                end = at2
                break
        out[title] = text[at:end]
    return out


def test_man_pages_match_help():
    """Each program's man page documents exactly the options its --help
    prints (and the commands': tokentap-load report, compare and merge), each
    under its short option too; so a flag added to one and not the other
    fails here, saying where."""
    def help_of(*args):
        r = run([binary(args[0])] + list(args[1:]) + ["--help"])
        assert r.returncode == 0 and r.stdout.startswith("usage:"), (args, r.stderr)
        return r.stdout

    def page(name):
        with open(os.path.join(ROOT, "man", name)) as f:
            return f.read()

    load = page_sections(page("tokentap-load.1"))
    checks = [
        # (what, its --help, the page's part that documents it)
        ("tokentap --help", help_of("tokentap"), page("tokentap.8")),
        ("tokentap-mock --help", help_of("tokentap-mock"), page("tokentap-mock.1")),
        ("tokentap-load --help", help_of("tokentap-load"), load["OPTIONS"]),
        ("tokentap-load report --help", help_of("tokentap-load", "report"),
         load["tokentap-load report"]),
        ("tokentap-load compare --help", help_of("tokentap-load", "compare"),
         load["tokentap-load compare"]),
        ("tokentap-load merge --help", help_of("tokentap-load", "merge"),
         load["tokentap-load merge"]),
    ]
    for what, text, doc in checks:
        helped, documented = help_options(text), page_options(doc)
        assert len(helped) >= 2, (what, helped)
        missing = sorted(set(helped) - set(documented))
        assert not missing, f"{what} prints --{', --'.join(missing)}: not in its man page"
        extra = sorted(set(documented) - set(helped))
        assert not extra, f"the man page documents --{', --'.join(extra)}: not in {what}"
        for name, short in helped.items():
            if short:
                assert documented[name] == short, \
                    f"{what}: -{short}, --{name}; the man page has -{documented[name]}"

    # every knob of tokentap-mock (its options but the server-wide ones)
    # is a header
    mock = page("tokentap-mock.1")
    knobs = set(help_options(help_of("tokentap-mock"))) - {
        "listen", "workers", "log", "slots", "prefix-cache", "prefix-cache-cost",
        "help", "version"}
    headers = {h.lower() for h in re.findall(r"X-Mock-([A-Za-z-]+)", mock)}
    assert knobs <= headers, f"knobs without their X-Mock- header: {sorted(knobs - headers)}"


def recv_states(sock, timeout):
    """The next sd_notify datagram as {key: value}."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(4096).decode()
    except socket.timeout:
        raise AssertionError(f"no sd_notify message within {timeout}s: "
                             "does src/proxy/main.c call sdnotify_*?") from None
    return dict(line.split("=", 1) for line in data.split("\n") if line)


def test_sd_notify():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    name = f"@tt-notify-{os.getpid()}-{time.monotonic_ns()}"
    sock.bind("\0" + name[1:])
    port, admin = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="tt-notify-")
    conf = os.path.join(tmp, "tokentap.yaml")
    with open(conf, "w") as f:
        f.write(f"listen:\n  - address: 127.0.0.1:{port}\n"
                f"admin:\n  address: 127.0.0.1:{admin}\n")
    proc = Proc([binary("tokentap"), "-c", conf], env={"NOTIFY_SOCKET": name})
    try:
        ready = recv_states(sock, 10)
        assert ready.get("READY") == "1", ready
        # READY means bound: a connection succeeds at once
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        socket.create_connection(("127.0.0.1", admin), timeout=1).close()

        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        proc.p.send_signal(signal.SIGHUP)
        reloading = recv_states(sock, 5)
        assert reloading.get("RELOADING") == "1", reloading
        assert int(reloading["MONOTONIC_USEC"]) >= before, reloading
        assert recv_states(sock, 5).get("READY") == "1"

        # a failed reload ends the reload too, or systemd waits for it
        with open(conf, "a") as f:
            f.write("no_such_key: 1\n")
        proc.p.send_signal(signal.SIGHUP)
        assert recv_states(sock, 5).get("RELOADING") == "1"
        assert recv_states(sock, 5).get("READY") == "1"
        socket.create_connection(("127.0.0.1", port), timeout=1).close()

        proc.p.send_signal(signal.SIGTERM)
        assert recv_states(sock, 5).get("STOPPING") == "1"
        assert proc.stop() == 0
    finally:
        proc.stop()
        sock.close()
        shutil.rmtree(tmp)
    # and nothing is sent without NOTIFY_SOCKET (the plain tests run so)
    assert "sdnotify" not in proc.stderr()


def package_of(lib):
    for path in (lib, "/usr" + lib, os.path.realpath(lib)):
        r = run(["dpkg", "-S", path])
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    raise AssertionError(f"no Debian package owns {lib}")


def test_docker_config_and_libraries():
    """What make test-docker would find late: the image's config must load,
    and every library the programs link must come from a package the
    runtime stage installs (or one of their dependencies, or the base)."""
    conf = os.path.join(ROOT, "docker", "tokentap.yaml")
    tt = binary("tokentap")
    r = run([tt, "-t", "-c", conf], env=dict(os.environ, TOKENTAP_UPSTREAM="http://127.0.0.1:8000"))
    assert (r.returncode, r.stdout) == (0, "configuration OK\n"), r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k != "TOKENTAP_UPSTREAM"}
    r = run([tt, "-t", "-c", conf], env=env)
    assert r.returncode != 0 and "TOKENTAP_UPSTREAM" in r.stderr, r.stderr
    # admin on the container's loopback, unless a token guards it
    with open(conf) as f:
        assert "  address: 127.0.0.1:9464\n" in f.read()
    admin = os.path.join(ROOT, "docker", "tokentap-admin.yaml")
    with open(admin) as f:
        text = f.read()
    assert "address: 0.0.0.0:9464\n  token: ${TOKENTAP_ADMIN_TOKEN}\n" in text, text
    r = run([tt, "-t", "-c", admin], env=dict(os.environ, TOKENTAP_UPSTREAM="http://x:1",
                                               TOKENTAP_ADMIN_TOKEN="t0k"))
    assert (r.returncode, r.stdout) == (0, "configuration OK\n"), r.stdout + r.stderr
    # the entrypoint chooses by the token, and passes arguments through
    entry = os.path.join(ROOT, "docker", "entrypoint.sh")
    fake = tempfile.mkdtemp(prefix="tt-entry-")
    try:
        with open(entry) as f:
            script = f.read().replace("/usr/bin/tokentap", "echo")
        with open(os.path.join(fake, "e.sh"), "w") as f:
            f.write(script)
        sh = ["sh", os.path.join(fake, "e.sh")]
        r = run(sh, env={"PATH": "/usr/bin:/bin"})
        assert r.stdout == "-c /etc/tokentap/tokentap.yaml\n"
        # without a token, a published admin port reaches nothing: it says so
        assert "TOKENTAP_ADMIN_TOKEN" in r.stderr and "loopback" in r.stderr, r.stderr
        r = run(sh, env={"PATH": "/usr/bin:/bin", "TOKENTAP_ADMIN_TOKEN": "x"})
        assert (r.stdout, r.stderr) == ("-c /etc/tokentap/tokentap-admin.yaml\n", ""), r
        # and the documented docker run (docs/operating.md, "Deployment"),
        # which publishes 9464, sets the token
        with open(os.path.join(ROOT, "docs", "operating.md")) as f:
            readme = f.read()
        run_line = readme[readme.index("`docker run"):][:300]
        assert "-p 9464:9464" in run_line and "TOKENTAP_ADMIN_TOKEN=" in run_line, run_line
        assert run(sh + ["-t", "-c", "/x.yaml"], env={"PATH": "/usr/bin:/bin"}).stdout == \
            "-t -c /x.yaml\n"
    finally:
        shutil.rmtree(fake)

    with open(os.path.join(ROOT, "docker", "Dockerfile")) as f:
        runtime = f.read().split("FROM ${BASE}:bookworm-slim", 1)[1]
    installed = set(re.findall(r"\b(lib[\w.+-]+|zlib1g|ca-certificates)\b", runtime.split("&&")[1]))
    allowed = set(installed)
    for pkg in installed:
        deps = run(["dpkg-query", "-W", "-f=${Depends}", pkg]).stdout
        allowed.update(d.split()[0].split(":")[0] for d in deps.split(",") if d.strip())
    for b in BINS:
        out = run(["ldd", binary(b)]).stdout
        for lib in re.findall(r"=> (/\S+)", out):
            pkg = package_of(lib)
            prio = run(["dpkg-query", "-W", "-f=${Priority}", pkg]).stdout
            assert pkg in allowed or prio == "required", \
                f"{b} needs {lib} from {pkg}, which the image's runtime stage lacks"
