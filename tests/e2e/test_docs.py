# SPDX-License-Identifier: Apache-2.0
"""The documents that ship: the front door (README.md), docs/*.md,
CONTRIBUTING.md and deploy/README.md.

- every relative link and image resolves to a file in the repository, and
  a #anchor to a heading of that file (GitHub's anchors: the heading's
  text, lowercase, punctuation but '-' and '_' dropped, spaces to '-', a
  repeat gets -1, -2, ...);
- the old contract's citations ("SPEC" and a section sign) are gone from
  every tracked file: the contract is docs/contract.md, and only its own
  history paragraph, before its §1, may name the old form;
- every "docs/X.md §N" anywhere in the tree names an existing file with a
  "## N." heading, and every `docs/X.md, "Name"` a file holding that name;
- README.md stays a front door: at most 420 lines.

Needs no process of ours: it reads files (and asks git which are
tracked, when git is there)."""
import os
import re
import subprocess

from harness import ROOT

OLD = "SPEC" + " "             # so that this file does not name it itself
OLD_REF = re.compile(re.escape(OLD) + r"(?:§|section )")
README_MAX_LINES = 420

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^(#{1,6}) +(.*?) *#* *$")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMG_TAG = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")
DOC_REF = re.compile(r"\bdocs/([\w.-]+\.md) §(\d+)")
DOC_NAME_REF = re.compile(r"\bdocs/([\w.-]+\.md),? \(?\"([^\"\n]+)\"")


def docs():
    """The Markdown documents whose links must hold."""
    out = ["README.md", "CONTRIBUTING.md"]
    if os.path.exists(os.path.join(ROOT, "deploy", "README.md")):
        out.append("deploy/README.md")
    out += sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs"))
                  if f.endswith(".md"))
    return out


def split(text):
    """(prose lines, headings) of a Markdown text: fenced code is neither
    ("# ..." in a shell block is no heading), inline code is dropped."""
    prose, heads, fence = [], [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
            prose.append("")
            continue
        if fence is not None:
            prose.append("")
            continue
        h = HEADING.match(line)
        if h:
            heads.append(h.group(2))
        prose.append(line)
    body = re.sub(r"`[^`]*`", "", "\n".join(prose))
    return body, heads


def slug(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(heads):
    seen, out = {}, set()
    for h in heads:
        base = slug(h)
        n = seen.get(base, 0)
        out.add(base if n == 0 else "%s-%d" % (base, n))
        seen[base] = n + 1
    return out


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def broken_links(paths):
    """'FILE: target (why)' for every link of PATHS that does not hold."""
    bad, cache = [], {}

    def anchors_of(path):
        if path not in cache:
            cache[path] = anchors(split(read(path))[1])
        return cache[path]

    for path in paths:
        body, _ = split(read(path))
        targets = LINK.findall(body) + IMG_TAG.findall(body)
        for t in targets:
            if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) or t.startswith("//"):
                continue
            if t.startswith("/"):
                bad.append("%s: %s (absolute path)" % (path, t))
                continue
            file, sep, frag = t.partition("#")
            dest = path if not file else os.path.normpath(
                os.path.join(os.path.dirname(path), file))
            if dest.startswith(".."):
                bad.append("%s: %s (outside the repository)" % (path, t))
                continue
            if not os.path.exists(os.path.join(ROOT, dest)):
                bad.append("%s: %s (no file %s)" % (path, t, dest))
                continue
            if sep and dest.endswith(".md") and frag not in anchors_of(dest):
                bad.append("%s: %s (no heading #%s in %s)" % (path, t, frag, dest))
    return bad


def tracked():
    """The repository's tracked files, or every file when git cannot say."""
    try:
        r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"],
                           capture_output=True, check=True)
        files = [f for f in r.stdout.decode().split("\0") if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    out = []
    for d, dirs, fs in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in (".git", "build", "__pycache__",
                                                "node_modules")]
        out += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    return out


def texts():
    """(path, text) of every tracked text file."""
    for path in tracked():
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue
        yield path, data.decode("utf-8", "replace")


def old_refs(files):
    """'FILE:LINE' of every citation of the old contract, but in
    docs/contract.md's history (before its §1)."""
    bad = []
    for path, text in files:
        if path == "docs/contract.md":
            text = text[text.find("\n## 1."):] if "\n## 1." in text else text
        for n, line in enumerate(text.split("\n"), 1):
            if OLD_REF.search(line):
                bad.append("%s:%d: %s" % (path, n, line.strip()))
    return bad


def bad_doc_refs(files):
    """'FILE:LINE: ref (why)' for every docs/X.md §N or docs/X.md, "Name"
    that names no file, no § heading or no such name."""
    bad, cache = [], {}

    def sections(doc):
        if doc not in cache:
            p = os.path.join(ROOT, "docs", doc)
            if not os.path.exists(p):
                cache[doc] = None
            else:
                text = read("docs/" + doc)
                nums = set(re.findall(r"^#{1,6} +§?(\d+)[.: ]", text, re.M))
                cache[doc] = (nums, re.sub(r"\s+", " ", text))
        return cache[doc]

    for path, text in files:
        for n, line in enumerate(text.split("\n"), 1):
            for doc, num in DOC_REF.findall(line):
                s = sections(doc)
                if s is None:
                    bad.append("%s:%d: docs/%s §%s (no such file)" % (path, n, doc, num))
                elif num not in s[0]:
                    bad.append("%s:%d: docs/%s §%s (no '## %s.' heading)"
                               % (path, n, doc, num, num))
            for doc, name in DOC_NAME_REF.findall(line):
                s = sections(doc)
                if s is None:
                    bad.append("%s:%d: docs/%s (no such file)" % (path, n, doc))
                elif name not in s[1]:
                    bad.append("%s:%d: docs/%s, \"%s\" (not in it)" % (path, n, doc, name))
    return bad


def test_links_resolve():
    """Every relative link and image of the shipped documents resolves,
    anchors included; and the checker finds a broken one."""
    bad = broken_links(docs())
    assert not bad, "\n".join(bad)
    # the checker itself: a missing file, a missing anchor, a fenced '#'
    body, heads = split("# T\n\n```sh\n# not a heading\n```\n## A b: `c`\n"
                        "## A b: `c`\n[x](#a-b-c-1) [y](nowhere.md)\n")
    assert heads == ["T", "A b: `c`", "A b: `c`"], heads
    assert anchors(heads) == {"t", "a-b-c", "a-b-c-1"}
    assert slug("The memory: `/stats/history`") == "the-memory-statshistory"
    assert slug("SLOs: goodput, error budgets, burn-rate alerts") == \
        "slos-goodput-error-budgets-burn-rate-alerts"


def test_no_old_contract_refs():
    """The contract is docs/contract.md: no tracked file cites the old one."""
    bad = old_refs(texts())
    assert not bad, "\n".join(bad)
    assert old_refs([("x.c", "/* as " + OLD + "§4 says */")]) == \
        ["x.c:1: /* as " + OLD + "§4 says */"]


def test_doc_section_refs():
    """Every "docs/X.md §N" in the tree names a file with a § heading N,
    and every `docs/X.md, "Name"` a file that holds the name."""
    here = os.path.relpath(os.path.abspath(__file__), ROOT)
    files = [(p, t) for p, t in texts() if p != here]   # its own examples
    refs = sum(len(DOC_REF.findall(t)) for _, t in files)
    assert refs > 50, refs          # the code cites the contract
    bad = bad_doc_refs(files)
    assert not bad, "\n".join(bad)
    assert bad_doc_refs([("x.c", "docs/contract.md §42")])
    assert bad_doc_refs([("x.c", "docs/nowhere.md §1")])


def test_readme_is_a_front_door():
    """README.md: at most 420 lines, and a map naming every docs file."""
    text = read("README.md")
    assert text.count("\n") <= README_MAX_LINES, text.count("\n")
    for f in os.listdir(os.path.join(ROOT, "docs")):
        if f.endswith(".md"):
            assert "(docs/%s)" % f in text, f
