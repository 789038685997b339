# SPDX-License-Identifier: Apache-2.0
"""The house: the folders are the architecture, and the compiler keeps it.

tokentap (src/proxy/) is two thread planes and what they stand on:

  conf/    the configuration, read-only once loaded        (below both)
  wire/    what both planes stand on: TLS, HTTP heads, the framing rules,
           the replicas and their dialing, tenants, the workers' records
           (sample, ring), the process gauges, the log files  (below both)
  conn/    the worker threads: connections, exchanges, upstream pools,
           the access log                                   (data plane)
  stats/   statistics, metrics, the history                 (main plane)
  export/  /metrics' exposition: text, protobuf, gzip      (main plane)
  alerts/  alert rules, notifiers, SLOs                     (main plane)
  pool/    the replica pools' daemons: DNS, active checks   (main plane)
  otel/    the OTLP export of spans and metrics              (main plane)
  .        the program shell: main, admin, ui; it sees everything

tokentap-load (src/load/) is folders by role:

  conf/    what to send: the parameters, prompts, traces, JSONL
  stats/   the figures: samples, the exact summary, SLO, bootstrap, results
  run/     the engine: connections, a level, sweeps, searches, /stats
  report/  what is written and read back: table, JSON, CSV, HTML, compare
  .        the program shell: options, commands, scenario files

run/ and report/ both stand on stats/ and conf/ and do not see each other.

A folder may include the core, itself and what its program's rules list
(FOLDER_RULES, LOAD_RULES); the Makefile gives each folder exactly that
include path, so a worker-side file that includes a main-thread header
does not build (checked here by compiling one), and this test states the
same rule over the sources. Within the core and each folder, the modules'
includes form no cycle: layers call down. A module is a .c/.h pair; a
second file of the same module (config_schema, stats_out, stats_int,
stats_group, history_file, proxy_client, proxy_upstream) counts as that
module: files that call each other both ways through a private header
(stats_int.h, proxy_int.h) are one module; counted apart, they would pass
for layers above it while they call each other.

src/mock/ is left out of the cycle check: its connection and the stream it
carries (mock_conn.c, mock_stream.c) still call each other."""
import os
import re
import subprocess
import tempfile

from harness import ROOT

SRC = os.path.join(ROOT, "src")
PROXY = os.path.join(SRC, "proxy")
FOLDED = re.compile(r"_(schema|out|int|group|file|client|upstream)$")
MAIN_PLANE = {"stats", "export", "alerts", "pool", "otel"}
FOLDER_RULES = {
    "conf": {"conf"},
    "wire": {"conf", "wire"},
    "conn": {"conf", "wire", "conn"},
    **{d: {"conf", "wire"} | MAIN_PLANE for d in MAIN_PLANE},
    "": {"conf", "wire", "conn", "", *MAIN_PLANE},
}
LOAD = os.path.join(SRC, "load")
LOAD_RULES = {
    "conf": {"conf"},
    "stats": {"conf", "stats"},
    "run": {"conf", "stats", "run"},
    "report": {"conf", "stats", "report"},
    "": {"conf", "stats", "run", "report", ""},
}
# The checks read the sources, not a build, and plant files in the source
# tree: run once (make test's sanitizer pass, side by side with the plain
# one, planted the same zz_planted.c at the same moment and each pass saw
# the other's, or lost its own: FileNotFoundError once)
SANITIZER_SKIP = {"*"}
MAX_MODULES = 11        # "about ten" a folder
# a program's folders: (its path, its rules)
PROGRAMS = {"proxy": (PROXY, FOLDER_RULES), "load": (LOAD, LOAD_RULES)}


def sources(folder, program="proxy"):
    path = os.path.join(PROGRAMS[program][0], folder)
    return sorted(f for f in os.listdir(path) if f.endswith((".c", ".h")))


def includes(path):
    with open(path) as fh:
        return re.findall(r'^\s*#\s*include\s+"([\w/]+)\.h"', fh.read(), re.M)


def home_of(header, folders, program="proxy"):
    """The folder of the program's src/ folder (or "core") that holds
    header, searched in the order given; None: none of them."""
    for d in folders:
        base = os.path.join(SRC, "core") if d == "core" else \
            os.path.join(PROGRAMS[program][0], d)
        if os.path.exists(os.path.join(base, header + ".h")):
            return d
    return None


def folders_of(program="proxy"):
    top = PROGRAMS[program][0]
    return [""] + sorted(d for d in os.listdir(top)
                         if os.path.isdir(os.path.join(top, d)) and d != "ui")


def proxy_folders():
    return folders_of("proxy")


def violations(program="proxy"):
    """Every include of the program that reaches a folder its rule leaves
    out."""
    out = []
    top, rules = PROGRAMS[program]
    everything = folders_of(program)
    for d in everything:
        allowed = rules.get(d)
        if allowed is None:
            out.append(f"src/{program}/{d}/: a folder no rule names")
            continue
        for f in sources(d, program):
            for inc in includes(os.path.join(top, d, f)):
                if home_of(inc, ["core"]) is not None:
                    continue
                home = home_of(inc, [d] + sorted(allowed - {d}), program)
                if home is None:
                    where = home_of(inc, everything, program)
                    if where is not None:
                        out.append(f"src/{program}/{d}/{f} includes {inc}.h of "
                                   f"{where or 'the shell'}/")
    return out


def module_count(folder, program="proxy"):
    """Modules are .c files (a header alone, such as loop.h, declares)."""
    return len({FOLDED.sub("", f.rsplit(".", 1)[0]) for f in sources(folder, program)
                if f.endswith(".c")})


def module_graph():
    """{module: modules it includes} for the core and each folder of
    tokentap and tokentap-load; a header resolves as the compiler would
    find it."""
    graph = {}
    units = [("core", "core", os.path.join(SRC, "core"), ["core"])]
    for program, (top, rules) in PROGRAMS.items():
        for d in folders_of(program):
            units.append((program, f"{program}/{d}".rstrip("/"), os.path.join(top, d),
                          [d] + sorted(rules.get(d, set()) - {d}) + ["core"]))
    for program, name, path, search in units:
        for f in os.listdir(path):
            if not f.endswith((".c", ".h")):
                continue
            mod = f"{name}/{FOLDED.sub('', f.rsplit('.', 1)[0])}"
            for inc in includes(os.path.join(path, f)):
                home = home_of(inc, search, program)
                tgt = None if home is None else \
                    f"{'core' if home == 'core' else (program + '/' + home).rstrip('/')}/" \
                    f"{FOLDED.sub('', inc)}"
                if tgt is not None and tgt != mod:
                    graph.setdefault(mod, set()).add(tgt)
    return graph


def cycles(graph):
    """The strongly connected components of more than one module."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_folders_keep_their_planes():
    assert violations() == [], "\n".join(violations())
    for d in proxy_folders():
        assert module_count(d) <= MAX_MODULES, (d, module_count(d))
    assert violations("load") == [], "\n".join(violations("load"))
    for d in folders_of("load"):
        assert module_count(d, "load") <= MAX_MODULES, (d, module_count(d, "load"))
    assert not [f for f in os.listdir(PROXY) if f.endswith(".c") and
                f[:-2] not in ("main", "admin", "ui", "sdnotify")], \
        "only the program shell lives at src/proxy/'s root"


def test_layers_call_down():
    graph = module_graph()
    assert cycles(graph) == [], cycles(graph)
    # the seams: the exchange is below the proxy, the upstream pool below
    # the worker; the core reaches into no program
    assert "proxy/conn/proxy" not in graph.get("proxy/conn/exchange", set())
    assert "proxy/conn/worker" not in graph.get("proxy/conn/upstream", set())
    for mod, deps in graph.items():
        if mod.startswith("core/"):
            assert all(d.startswith("core/") for d in deps), (mod, deps)


def test_the_checks_see_what_they_guard():
    """Both checks on planted faults: a two-module cycle is found, and a
    worker-side file that includes a main-thread header is named."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    path = os.path.join(PROXY, "conn", "zz_planted.c")
    with open(path, "w") as f:
        f.write('#include "alert.h"\n#include "stats.h"\n')
    try:
        found = violations()
    finally:
        os.unlink(path)
    assert "src/proxy/conn/zz_planted.c includes alert.h of alerts/" in found, found
    assert "src/proxy/conn/zz_planted.c includes stats.h of stats/" in found, found
    # tokentap-load: a report that reaches the engine, the figures the shell
    path = os.path.join(LOAD, "report", "zz_planted.c")
    with open(path, "w") as f:
        f.write('#include "load_run.h"\n#include "load_summary.h"\n')
    with open(os.path.join(LOAD, "stats", "zz_planted.h"), "w") as f:
        f.write('#include "load_scen.h"\n')
    try:
        found = violations("load")
    finally:
        os.unlink(path)
        os.unlink(os.path.join(LOAD, "stats", "zz_planted.h"))
    assert found == ["src/load/report/zz_planted.c includes load_run.h of run/",
                     "src/load/stats/zz_planted.h includes load_scen.h of the shell/"], found


def compiles(folder, source, include_line, program="proxy"):
    """Does src/<program>/<folder>/<source>, with include_line on top,
    compile with the include path the Makefile gives that folder?"""
    flags = subprocess.run(["make", "-s", "--no-print-directory",
                            f"print-INC_{program}_{folder}", "print-PKG_CFLAGS",
                            "print-LLHTTP_H"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert flags.returncode == 0, flags.stderr
    inc, pkg, llhttp = flags.stdout.splitlines()[:3]
    top = PROGRAMS[program][0]
    with open(os.path.join(top, folder, source)) as f:
        text = f.read()
    with tempfile.NamedTemporaryFile("w", suffix=".c", dir=os.path.join(top, folder),
                                     delete=False) as tmp:
        tmp.write(include_line + "\n" + text)
    try:
        r = subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-fsyntax-only",
                            "-DTOKENTAP_VERSION=\"0\"", f"-I{llhttp}", *inc.split(),
                            *pkg.split(), tmp.name],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(tmp.name)
    return r.returncode == 0, r.stderr


def test_the_compiler_refuses_a_crossing():
    """The rule is the compiler's: exchange.c builds as it is with the
    worker plane's include path, and not with a main-thread header added;
    stats.c likewise not with a worker-side one."""
    ok, err = compiles("conn", "exchange.c", "")
    assert ok, err
    ok, err = compiles("conn", "exchange.c", '#include "alert.h"')
    assert not ok and "alert.h" in err, err
    ok, err = compiles("stats", "stats.c", '#include "proxy.h"')
    assert not ok and "proxy.h" in err, err
    # tokentap-load: a report is written from the results, never from the
    # engine; the figures know neither
    ok, err = compiles("report", "load_json.c", "", "load")
    assert ok, err
    ok, err = compiles("report", "load_json.c", '#include "load_levels.h"', "load")
    assert not ok and "load_levels.h" in err, err
    ok, err = compiles("stats", "load_summary.c", '#include "load_json.h"', "load")
    assert not ok and "load_json.h" in err, err
