# SPDX-License-Identifier: Apache-2.0
"""One trace from an app through tokentap to the backend: the openai npm
SDK's app with its own OpenTelemetry tracer (@opentelemetry/sdk-trace-base,
an in-memory exporter, the W3C propagator) calls the model through
tokentap; the collector stand-in gets tokentap's span, the backend
stand-in the traceparent tokentap sent and a span of its own under it.

python3 tests/e2e/test_otel_sdk.py prints the trace tree."""
import json
import os
import secrets
import subprocess

from peers import Backend
from harness import Tokentap, node_modules
from otlp_collector import CLIENT, SERVER, Collector
from test_otel import chat_handler

NODE_SCRIPT = r"""
const OpenAI = require('openai');
const { SpanKind, trace, context, defaultTextMapSetter } = require('@opentelemetry/api');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } =
  require('@opentelemetry/sdk-trace-base');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');

async function main() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('app');
  const client = new OpenAI({ apiKey: 'sk-test', baseURL: process.argv[2], maxRetries: 0 });
  const span = tracer.startSpan('chat gpt-4o', { kind: SpanKind.CLIENT });
  const headers = {};
  new W3CTraceContextPropagator().inject(trace.setSpan(context.active(), span), headers,
    defaultTextMapSetter);
  const stream = await client.chat.completions.create({
    model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: 'hello' }],
  }, { headers });
  let text = '';
  for await (const chunk of stream)
    if (chunk.choices.length) text += chunk.choices[0].delta.content || '';
  span.end();
  await provider.forceFlush();
  const s = exporter.getFinishedSpans()[0];
  console.log(JSON.stringify({ text, traceparent: headers.traceparent,
    trace_id: s.spanContext().traceId, span_id: s.spanContext().spanId,
    parent: s.parentSpanContext ? s.parentSpanContext.spanId : '', name: s.name }));
}
main().catch(e => { console.error(e); process.exit(1); });
"""


def trace_tree():
    """The three hops' spans, each with its parent, and the app's answer."""
    mods = node_modules()
    script = os.path.join(os.path.dirname(mods), "otel_app.js")
    with open(script, "w") as f:
        f.write(NODE_SCRIPT)
    backend_spans = []
    serve = chat_handler(ttft=0.02, n=3)

    def handler(req, c):
        # the backend stand-in's own server span, a child of what it got
        tp = req.header("traceparent").split("-")
        backend_spans.append({"name": "backend POST /v1/chat/completions",
                              "trace_id": tp[1], "span_id": secrets.token_hex(8),
                              "parent": tp[2]})
        return serve(req, c)
    with Collector() as col, Backend(handler) as b, Tokentap(f"""routes:
  - name: chat
    upstream: http://127.0.0.1:{b.port}
otel:
  endpoint: {col.url()}
  traces: {{delay: 100ms}}
""") as t:
        env = dict(os.environ, NODE_PATH=mods)
        r = subprocess.run(["node", script, f"http://127.0.0.1:{t.port}/v1"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        app = json.loads(r.stdout)
        proxy = col.wait_spans(2)
        line = t.access(1)[0]
    return app, proxy, backend_spans, line


def test_one_trace_from_the_app_through_tokentap_to_the_backend():
    app, proxy, backend, line = trace_tree()
    assert app["text"] == "t0 t1 t2 "
    assert len(proxy) == 2 and len(backend) == 1
    srv = [s for s in proxy if s["kind"] == SERVER][0]
    tt = [s for s in proxy if s["kind"] == CLIENT][0]
    be = backend[0]
    # one trace id on every hop; each hop's parent is the hop before: the
    # app's CLIENT span, tokentap's SERVER span (the request it got), its
    # CLIENT span (the call to the model), the backend's
    assert app["trace_id"] == srv["trace_id"] == tt["trace_id"] == be["trace_id"] == \
        line["trace_id"]
    assert app["parent"] == ""
    assert srv["parent"] == app["span_id"]
    assert tt["parent"] == srv["span_id"]
    assert be["parent"] == tt["span_id"] == line["span_id"]
    assert tt["name"] == app["name"] == "chat gpt-4o"
    assert srv["name"] == "POST chat"


if __name__ == "__main__":
    app, proxy, backend, line = trace_tree()
    srv = [s for s in proxy if s["kind"] == SERVER][0]
    tt = [s for s in proxy if s["kind"] == CLIENT][0]
    be = backend[0]
    print(f"trace {app['trace_id']}")
    print(f"└─ {app['name']}  span {app['span_id']}  (the app: openai SDK, its own tracer)")
    print(f"   └─ {srv['name']}  span {srv['span_id']}  parent {srv['parent']}  "
          f"(tokentap, SERVER)")
    print(f"      └─ {tt['name']}  span {tt['span_id']}  parent {tt['parent']}  (tokentap, "
          f"CLIENT, TTFT {tt['attrs']['tokentap.time_to_first_token'] * 1000:.3f} ms)")
    print(f"         └─ {be['name']}  span {be['span_id']}  parent {be['parent']}  "
          f"(the backend stand-in)")
