# SPDX-License-Identifier: Apache-2.0
"""An OTLP/HTTP collector stand-in for the tests, on loopback.

Every export tokentap sends is kept and decoded two ways, as a real
collector would take it: a protobuf body with `protoc --decode` against
the messages of tests/e2e/otlp/ (written from the OTLP specification's
field numbers; a field protoc does not know fails the decode), a JSON body
with Python's JSON parser. Both become the same plain shapes (spans(),
metrics()), so a test reads one. The collector can be made slow, down, or
to answer a status (with Retry-After), garbage, or a partial success.
"""
import codecs
import gzip
import json
import os
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import free_port

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "otlp")
MESSAGES = {
    "/v1/traces": ("opentelemetry/proto/collector/trace/v1/trace_service.proto",
                   "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"),
    "/v1/metrics": ("opentelemetry/proto/collector/metrics/v1/metrics_service.proto",
                    "opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest"),
}


def protoc_decode(path, body):
    """The text format protoc makes of body, as a tree of dicts whose
    values are lists (every field may repeat); strings stay bytes."""
    proto, message = MESSAGES[path]
    r = subprocess.run(["protoc", f"-I{PROTO_DIR}", f"--decode={message}", proto],
                       input=body, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    text = r.stdout.decode()
    stack = [{}]
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        # a field protoc does not know shows as its number: written wrong
        assert not s[0].isdigit(), f"unknown field in {message}: {s}\n{text[:3000]}"
        if s == "}":
            stack.pop()
        elif s.endswith("{"):
            d = {}
            stack[-1].setdefault(s[:-1].strip(), []).append(d)
            stack.append(d)
        else:
            name, _, val = s.partition(": ")
            stack[-1].setdefault(name, []).append(_value(val))
    assert len(stack) == 1, text[:2000]
    return stack[0]


def _value(v):
    if v.startswith('"'):
        return codecs.escape_decode(v[1:-1].encode())[0]
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v in ("true", "false"):
        return v == "true"
    return v                         # an enum's name


def _one(d, k, default=None):
    v = d.get(k)
    return v[0] if v else default


def _text(b):
    return b.decode() if isinstance(b, bytes) else b


def _any_pb(v):
    for k in ("string_value", "bool_value", "int_value", "double_value"):
        if k in v:
            x = _one(v, k)
            return _text(x) if k == "string_value" else x
    if "array_value" in v:
        return [_any_pb(x) for x in _one(v, "array_value").get("values", [])]
    return None


def _attrs_pb(d, key="attributes"):
    return {_text(_one(kv, "key")): _any_pb(_one(kv, "value", {}))
            for kv in d.get(key, [])}


def _any_json(v):
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_any_json(x) for x in v["arrayValue"].get("values", [])]
    return None


def _attrs_json(d):
    return {kv["key"]: _any_json(kv.get("value", {})) for kv in d.get("attributes", [])}


KINDS = {"SPAN_KIND_CLIENT": 3, "SPAN_KIND_SERVER": 2, "SPAN_KIND_INTERNAL": 1}
SERVER, CLIENT = 2, 3
STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


def spans_of(export):
    """The spans of one decoded export, as plain dicts: ids as hex."""
    out = []
    if export["json"]:
        for rs in export["data"].get("resourceSpans", []):
            res = _attrs_json(rs.get("resource", {}))
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    out.append({
                        "trace_id": s["traceId"], "span_id": s["spanId"],
                        "parent": s.get("parentSpanId", ""), "name": s["name"],
                        "kind": s.get("kind", 0), "trace_state": s.get("traceState", ""),
                        "start": int(s["startTimeUnixNano"]),
                        "end": int(s["endTimeUnixNano"]),
                        "attrs": _attrs_json(s),
                        "events": [{"name": e["name"], "time": int(e["timeUnixNano"]),
                                    "attrs": _attrs_json(e)} for e in s.get("events", [])],
                        "status": s.get("status", {}).get("code", 0),
                        "resource": res, "scope": ss.get("scope", {}).get("name"),
                        "schema_url": ss.get("schemaUrl")})
        return out
    for rs in export["data"].get("resource_spans", []):
        res = _attrs_pb(_one(rs, "resource", {}))
        for ss in rs.get("scope_spans", []):
            for s in ss.get("spans", []):
                out.append({
                    "trace_id": _one(s, "trace_id", b"").hex(),
                    "span_id": _one(s, "span_id", b"").hex(),
                    "parent": _one(s, "parent_span_id", b"").hex(),
                    "name": _text(_one(s, "name")), "kind": KINDS.get(_one(s, "kind"), 0),
                    "trace_state": _text(_one(s, "trace_state", b"")),
                    "start": _one(s, "start_time_unix_nano"),
                    "end": _one(s, "end_time_unix_nano"),
                    "attrs": _attrs_pb(s),
                    "events": [{"name": _text(_one(e, "name")),
                                "time": _one(e, "time_unix_nano"), "attrs": _attrs_pb(e)}
                               for e in s.get("events", [])],
                    "status": STATUS.get(_one(_one(s, "status", {}), "code"), 0),
                    "resource": res,
                    "scope": _text(_one(_one(ss, "scope", {}), "name")),
                    "schema_url": _text(_one(ss, "schema_url"))})
    return out


def _point_pb(p, exp):
    d = {"attrs": _attrs_pb(p), "start": _one(p, "start_time_unix_nano"),
         "time": _one(p, "time_unix_nano")}
    if exp is None:
        d["value"] = _one(p, "as_double", _one(p, "as_int"))
        return d
    d["count"] = _one(p, "count", 0)
    d["sum"] = _one(p, "sum", 0.0)
    if exp:
        pos = _one(p, "positive", {})
        d.update(scale=_one(p, "scale", 0), zero_count=_one(p, "zero_count", 0),
                 offset=_one(pos, "offset", 0), counts=pos.get("bucket_counts", []))
    else:
        d.update(counts=p.get("bucket_counts", []), bounds=p.get("explicit_bounds", []))
    return d


def _point_json(p, exp):
    d = {"attrs": _attrs_json(p), "start": int(p.get("startTimeUnixNano", 0)),
         "time": int(p["timeUnixNano"])}
    if exp is None:
        d["value"] = float(p.get("asDouble", p.get("asInt", 0)))
        return d
    d["count"] = int(p.get("count", 0))
    d["sum"] = float(p.get("sum", 0))
    if exp:
        pos = p.get("positive", {})
        d.update(scale=p.get("scale", 0), zero_count=int(p.get("zeroCount", 0)),
                 offset=pos.get("offset", 0),
                 counts=[int(c) for c in pos.get("bucketCounts", [])])
    else:
        d.update(counts=[int(c) for c in p.get("bucketCounts", [])],
                 bounds=p.get("explicitBounds", []))
    return d


def metrics_of(export):
    """{name: {"type", "unit", "temporality", "points": [...]}} of one export."""
    out = {}
    if export["json"]:
        for rm in export["data"].get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    for typ, exp in (("gauge", None), ("sum", None), ("histogram", False),
                                     ("exponentialHistogram", True)):
                        if typ in m:
                            out[m["name"]] = {
                                "type": typ, "unit": m.get("unit", ""),
                                "temporality": m[typ].get("aggregationTemporality", 0),
                                "points": [_point_json(p, exp)
                                           for p in m[typ].get("dataPoints", [])]}
        return out
    temp = {"AGGREGATION_TEMPORALITY_DELTA": 1, "AGGREGATION_TEMPORALITY_CUMULATIVE": 2}
    for rm in export["data"].get("resource_metrics", []):
        for sm in rm.get("scope_metrics", []):
            for m in sm.get("metrics", []):
                for typ, key, exp in (("gauge", "gauge", None), ("sum", "sum", None),
                                      ("histogram", "histogram", False),
                                      ("exponentialHistogram", "exponential_histogram",
                                       True)):
                    if key in m:
                        body = _one(m, key)
                        out[_text(_one(m, "name"))] = {
                            "type": typ, "unit": _text(_one(m, "unit", b"")),
                            "temporality": temp.get(_one(body, "aggregation_temporality"), 0),
                            "points": [_point_pb(p, exp) for p in body.get("data_points", [])]}
    return out


def exp_quantile(points, q):
    """The q-quantile of exponential histogram points (merged), as a
    Prometheus-style estimate: the bucket that holds the rank, linear
    between its bounds (base = 2^(2^-scale))."""
    merged, scale, total = {}, None, 0
    for p in points:
        scale = p["scale"]
        total += p["count"]
        for i, c in enumerate(p["counts"]):
            merged[p["offset"] + i] = merged.get(p["offset"] + i, 0) + c
    if total == 0:
        return None
    base = 2 ** (2 ** -scale)
    rank, seen = q * total, sum(p["zero_count"] for p in points)
    for k in sorted(merged):
        c = merged[k]
        if c and seen + c >= rank:
            lo, hi = base ** k, base ** (k + 1)
            return lo + (hi - lo) * (rank - seen) / c
        seen += c
    return base ** (max(merged) + 1)


class Collector:
    """The stand-in on a fresh port. mode: "ok"; ("status", code,
    retry_after or None) for every export; "garbage" (bytes that are no
    HTTP); ("partial", n, message); delay: seconds before each answer."""

    def __init__(self, mode="ok", delay=0.0, port=None, tls=None):
        self.mode = mode
        self.delay = delay
        self.tls = tls               # (cert, key): HTTPS
        self.exports = []            # every decoded export, in order
        self.attempts = []           # (monotonic time, path, status answered[, body's hash])
        self.lock = threading.Lock()
        self.port = port or free_port()
        self.server = None
        self.start()

    def start(self):
        coll = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                if coll.delay:
                    time.sleep(coll.delay)
                mode = coll.mode
                if mode == "garbage":
                    with coll.lock:
                        coll.attempts.append((time.monotonic(), self.path, 0))
                    self.wfile.write(b"\x00\x13garbage, not HTTP\r\n\r\n")
                    self.close_connection = True
                    return
                if isinstance(mode, tuple) and mode[0] == "status":
                    with coll.lock:
                        coll.attempts.append((time.monotonic(), self.path, mode[1],
                                              hash(raw)))
                    self.send_response(mode[1])
                    if mode[2] is not None:
                        self.send_header("Retry-After", str(mode[2]))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == \
                    "gzip" else raw
                is_json = self.headers.get("Content-Type", "").startswith("application/json")
                data = json.loads(body) if is_json else protoc_decode(self.path, body)
                with coll.lock:
                    coll.attempts.append((time.monotonic(), self.path, 200))
                    coll.exports.append({"path": self.path, "json": is_json, "data": data,
                                         "headers": dict(self.headers.items()),
                                         "raw": raw, "at": time.monotonic()})
                reply = b""
                if isinstance(mode, tuple) and mode[0] == "partial":
                    if is_json:
                        key = "rejectedSpans" if self.path == "/v1/traces" else \
                            "rejectedDataPoints"
                        reply = json.dumps({"partialSuccess": {
                            key: str(mode[1]), "errorMessage": mode[2]}}).encode()
                    else:
                        msg = mode[2].encode()
                        inner = bytes([0x08, mode[1], 0x12, len(msg)]) + msg
                        reply = bytes([0x0a, len(inner)]) + inner
                self.send_response(200)
                self.send_header("Content-Type", "application/json" if is_json else
                                 "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass                 # tokentap gave up on a slow answer: expected

        self.server = Server(("127.0.0.1", self.port), Handler)
        if self.tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def url(self):
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def of(self, path):
        with self.lock:
            return [e for e in self.exports if e["path"] == path]

    def spans(self, kind=None):
        """Every span exported so far; kind: those of one kind alone
        (SERVER 2, tokentap's request; CLIENT 3, its call to the model)."""
        return [s for e in self.of("/v1/traces") for s in spans_of(e)
                if kind is None or s["kind"] == kind]

    def wait_spans(self, n, timeout=10.0, kind=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.spans(kind)
            if len(got) >= n:
                return got
            time.sleep(0.05)
        return self.spans(kind)

    def wait_metrics(self, n=1, timeout=10.0):
        """The metrics of the last export once there were n."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.of("/v1/metrics")
            if len(got) >= n:
                return metrics_of(got[-1])
            time.sleep(0.05)
        raise AssertionError(f"{len(self.of('/v1/metrics'))} metrics exports, not {n}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
