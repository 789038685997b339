#!/usr/bin/env python3
"""The framing corpus through nginx, for information: where nginx answers
another status than tokentap must, or lets the backend see other requests.

  python3 tests/conformance/nginx_diff.py [--all]

Prints one table row per differing vector (every vector with --all). Not a
test: nginx is the reference we compare with, not the judge; the corpus's
own expectations are tokentap's contract. Needs nginx on the PATH."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import corpus
import peer
import vectors

CONF = """daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log crit;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    client_max_body_size {maxbody};
    upstream backend {{ server 127.0.0.1:{upstream}; keepalive 4; }}
    server {{
        listen 127.0.0.1:{port};
        location {prefix_path} {{
            proxy_pass http://backend{base};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 2s;
        }}
    }}
}}
"""


class NginxProxy:
    """nginx set up as tokentap is for the vector (prefix, base path, body
    limit), in the foreground with its own prefix."""
    name = "nginx"

    def __init__(self, backend, v):
        self.dir = tempfile.mkdtemp(prefix="tt-nginx-")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        route = dict(path_prefix="/", strip_prefix="false", base="")
        route.update(getattr(v, "route", None) or {})
        strip = route["strip_prefix"] == "true"
        small = "max_body_bytes: 1k" in (getattr(v, "conf", None) or "")
        conf = CONF.format(prefix=self.dir, upstream=backend.port, port=self.port,
                           maxbody="1k" if small else "16m",
                           prefix_path=route["path_prefix"],
                           base=(route["base"] + "/") if strip else "")
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(conf)
        self.p = subprocess.Popen(["nginx", "-p", self.dir + "/", "-c",
                                   os.path.join(self.dir, "nginx.conf")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.01)

    def close(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


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
