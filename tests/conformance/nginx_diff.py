#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The framing corpus through nginx, for information: where nginx answers
another status than tokentap must, or lets the backend see other requests.

  python3 tests/conformance/nginx_diff.py [--all]

Prints one table row per differing vector (every vector with --all). Not a
test: nginx is the reference we compare with, not the judge; the corpus's
own expectations are tokentap's contract. Needs nginx on the PATH."""
import re
import shutil
import subprocess
import sys

import corpus
import peer
import vectors
from peers import Nginx

class NginxProxy:
    """nginx set up as tokentap is for the vector (prefix, base path, body
    limit): the harness's Nginx with the corpus's settings."""
    name = "nginx"

    def __init__(self, backend, v):
        route = dict(path_prefix="/", strip_prefix="false", base="")
        route.update(getattr(v, "route", None) or {})
        strip = route["strip_prefix"] == "true"
        small = "max_body_bytes: 1k" in (getattr(v, "conf", None) or "")
        self.nginx = Nginx(backend.port, "proxy_set_header Host $http_host; "
                           "proxy_read_timeout 2s;", keepalive=4,
                           http=f"client_max_body_size {'1k' if small else '16m'};",
                           path=route["path_prefix"],
                           proxy_pass="http://up" + ((route["base"] + "/") if strip else ""))
        self.port = self.nginx.port

    def close(self):
        self.nginx.__exit__(None, None, None)


def main():
    if shutil.which("nginx") is None:
        print("nginx is not installed: no differential report")
        return 0
    show_all = "--all" in sys.argv
    backend = peer.Backend()
    rows = []
    for v in vectors.REQUEST:
        _, _, got = corpus.run_request(v, backend, NginxProxy)
        want = v.status
        parsed = got["parsed"]
        ours = " ".join(map(str, want))
        theirs = " ".join(map(str, got["status"])) or "none"
        saw = "nothing" if not parsed else f"{len(parsed)} request(s)"
        if got["errors"]:
            saw += ", could not parse the rest"
        if show_all or ours != theirs or len(parsed) > len([s for s in want if s == 200]):
            rows.append(("request", v.name, ours, theirs, saw))
    for v in vectors.RESPONSE:
        _, _, got = corpus.run_response(v, backend, NginxProxy)
        # nginx writes heads of its own: compare statuses, and whether the
        # next client got its own answer
        finals = re.findall(rb"HTTP/1\.1 ([2-5]\d\d)", v.client or b"")
        ours = str(v.status or int(finals[0]))
        theirs = str(got["status"]) if got["status"] else "none"
        note = "" if got["next"] == b"next" else f"next client got {got['next']!r}"
        if show_all or ours != theirs or note:
            rows.append(("response", v.name, ours, theirs, note))
    backend.close()
    print(f"| side | vector | tokentap | nginx {nginx_version()} | nginx: backend saw / next client |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"{len(rows)} of {len(vectors.REQUEST) + len(vectors.RESPONSE)} vectors differ")
    return 0


def nginx_version():
    r = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    return r.stderr.strip().split("/")[-1]


if __name__ == "__main__":
    sys.exit(main())
