"""/metrics size and scrape time at N groups: N requests, each its own
tenant (X-Tenant-Id: tN), through tokentap to tokentap-mock; then the best
of 5 scrapes as text, text with gzip, and protobuf with gzip.

  python3 tests/bench/metrics_scrape.py build/tokentap 1000 [EXTRA_YAML]

TX (environment) is added inside the tenant mapping, e.g.
TX=", header_pattern: 't[0-9]+'" to name every tenant."""
import gzip, os, socket, subprocess, sys, tempfile, time, urllib.request
from concurrent.futures import ThreadPoolExecutor

binary, n, extra = sys.argv[1], int(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "")
mock = os.path.join(os.path.dirname(binary), "tokentap-mock")
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
mp, pp, ap = port(), port(), port()
d = tempfile.mkdtemp()
conf = os.path.join(d, "t.yaml")
with open(conf, "w") as f:
    f.write(f"listen: [{{address: 127.0.0.1:{pp}}}]\nadmin: {{address: 127.0.0.1:{ap}}}\n"
            f"workers: 1\ntenant: {{header: X-Tenant-Id, max_tenants: 100000{os.environ.get('TX', '')}}}\n{extra}"
            f"routes:\n  - {{name: chat, match: {{path_prefix: /v1/}}, upstream: http://127.0.0.1:{mp}}}\n")
m = subprocess.Popen([mock, "-l", f"127.0.0.1:{mp}", "--ttft", "1ms", "--tpot", "1ms", "--tokens", "5"])
t = subprocess.Popen([binary, "-c", conf], stderr=subprocess.DEVNULL)
time.sleep(0.5)
def one(i):
    body = b'{"model":"m1","stream":true}'
    s = socket.create_connection(("127.0.0.1", pp))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
              b"X-Tenant-Id: t%d\r\nContent-Length: %d\r\n\r\n%s" % (i, len(body), body))
    while s.recv(65536): pass
    s.close()
with ThreadPoolExecutor(16) as ex:
    list(ex.map(one, range(n)))
time.sleep(0.5)
def scrape(headers):
    best = None
    for _ in range(5):
        req = urllib.request.Request(f"http://127.0.0.1:{ap}/metrics", headers=headers)
        st = time.monotonic()
        with urllib.request.urlopen(req, timeout=60) as r:
            body = r.read(); enc = r.headers.get("Content-Encoding"); ct = r.headers.get("Content-Type")
        el = time.monotonic() - st
        best = el if best is None or el < best else best
    raw = gzip.decompress(body) if enc == "gzip" else body
    series = sum(1 for l in raw.splitlines() if l and not l.startswith(b"#")) if ct.startswith("text") else None
    return len(body), len(raw), best, series, ct.split(";")[0], enc
rss = [l for l in open(f"/proc/{t.pid}/status") if l.startswith("VmRSS")][0].split()[1]
print(f"{n} groups; RSS {rss} kB")
for h in ({}, {"Accept-Encoding": "gzip"},
          {"Accept": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3", "Accept-Encoding": "gzip"}):
    sent, raw, el, series, ct, enc = scrape(h)
    print(f"  {ct:30s} {enc or '-':5s} sent {sent:>10,} B  body {raw:>10,} B  series {series}  best of 5: {el*1000:.1f} ms")
t.terminate(); m.terminate(); t.wait(); m.wait()
