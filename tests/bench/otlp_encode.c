/* SPDX-License-Identifier: Apache-2.0 */
/* The cost of encoding a span as OTLP protobuf, two ways: tokentap's
 * encoder (otel/otlpspan.c on otel/otlpenc.c on stats/pb.c) and Debian's
 * protobuf-c with code generated from tests/e2e/otlp/*.proto, the same
 * span with the same 20 attributes and 2 events, in batches of 512 as the
 * exporter sends them. protobuf-c twice: a message struct allocated per
 * message (as exporters written on it do), and from one arena per batch
 * (its best case). Built and run by tests/bench/otlp_encode.sh; no part
 * of tokentap. Prints ns per span and the encoded sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "otlpenc.h"
#include "otlpspan.h"

#define BATCH 512
#define ROUNDS 40

typedef Opentelemetry__Proto__Common__V1__KeyValue KV;
typedef Opentelemetry__Proto__Common__V1__AnyValue AV;
typedef Opentelemetry__Proto__Trace__V1__Span SPAN;
typedef Opentelemetry__Proto__Trace__V1__Span__Event EV;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void fill(struct span *s, int i)
{
	memset(s, 0, sizeof *s);
	for (int k = 0; k < 16; k++)
		s->trace_id[k] = (uint8_t)(i + k + 1);
	for (int k = 0; k < 8; k++)
		s->span_id[k] = s->parent_id[k] = (uint8_t)(i + k + 7);
	s->flags = 1;
	s->stream = 1;
	s->model_src = MODEL_REQUEST;
	snprintf(s->method, sizeof s->method, "POST");
	s->mono_end_us = 2000000;
	s->wall_end_ns = 1796168286501358673ull;
	s->t0 = 1000000;
	s->t_first_event = 1005000;
	s->t_first_token = 1064000;
	s->t_first_output = 1065000;
	s->reasoning_tokens = 2;
	snprintf(s->response_model, sizeof s->response_model, "gpt-4o-2024-08-06");
	sample_key_set(&s->key, "chat", "acme", "gpt-4o", 6);
	s->key.dialect = DIALECT_OPENAI;
	s->key.op = 1;
	snprintf(s->key.upstream, sizeof s->key.upstream, "http://10.0.0.11:8000");
	s->s.status = 200;
	s->s.ttft_us = 64000;
	s->s.ttfo_us = 65000;
	s->s.tpot_us = 2475;
	s->s.input_tokens = 11;
	s->s.output_tokens = 300;
}

/* ---- protobuf-c ----------------------------------------------------------- */

struct arena {
	char *p;
	size_t n, cap;
	int per_message;           /* malloc each message instead */
	void *owned[200000];
	size_t n_owned;
};

static void *get(struct arena *a, size_t size)
{
	void *p;
	if (a->per_message) {
		p = malloc(size);
		a->owned[a->n_owned++] = p;
		return p;
	}
	size = (size + 15) & ~(size_t)15;
	p = a->p + a->n;
	a->n += size;
	return p;
}

static void arena_reset(struct arena *a)
{
	for (size_t i = 0; i < a->n_owned; i++)
		free(a->owned[i]);
	a->n_owned = 0;
	a->n = 0;
}

static KV *kv(struct arena *a, const char *key)
{
	KV *k = get(a, sizeof *k);
	AV *v = get(a, sizeof *v);
	opentelemetry__proto__common__v1__key_value__init(k);
	opentelemetry__proto__common__v1__any_value__init(v);
	k->key = (char *)key;
	k->value = v;
	return k;
}

static KV *kv_str(struct arena *a, const char *key, const char *s)
{
	KV *k = kv(a, key);
	k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
	k->value->string_value = (char *)s;
	return k;
}

static KV *kv_int(struct arena *a, const char *key, int64_t i)
{
	KV *k = kv(a, key);
	k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	k->value->int_value = i;
	return k;
}

static KV *kv_dbl(struct arena *a, const char *key, double d)
{
	KV *k = kv(a, key);
	k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
	k->value->double_value = d;
	return k;
}

static KV *kv_bool(struct arena *a, const char *key, int b)
{
	KV *k = kv(a, key);
	k->value->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
	k->value->bool_value = b;
	return k;
}

/* The attributes otlpspan.c writes, from the same record. */
static SPAN *pbc_span(struct arena *a, const struct span *s, char *name)
{
	SPAN *sp = get(a, sizeof *sp);
	KV **at = get(a, 24 * sizeof *at);
	EV **ev = get(a, 2 * sizeof *ev);
	Opentelemetry__Proto__Trace__V1__Status *st = get(a, sizeof *st);
	size_t n = 0;

	opentelemetry__proto__trace__v1__span__init(sp);
	sp->trace_id.data = (uint8_t *)s->trace_id;
	sp->trace_id.len = 16;
	sp->span_id.data = (uint8_t *)s->span_id;
	sp->span_id.len = 8;
	sp->parent_span_id.data = (uint8_t *)s->parent_id;
	sp->parent_span_id.len = 8;
	otlpspan_name(s, name, 200);
	sp->name = name;
	sp->kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_CLIENT;
	sp->start_time_unix_nano = s->wall_end_ns - (s->mono_end_us - s->t0) * 1000;
	sp->end_time_unix_nano = s->wall_end_ns;
	at[n++] = kv_str(a, "gen_ai.operation.name", "chat");
	at[n++] = kv_str(a, "gen_ai.provider.name", "openai");
	at[n++] = kv_str(a, "gen_ai.request.model", s->key.model);
	at[n++] = kv_str(a, "gen_ai.response.model", s->response_model);
	at[n++] = kv_bool(a, "gen_ai.request.stream", 1);
	at[n++] = kv_dbl(a, "gen_ai.response.time_to_first_chunk", 0.005);
	at[n++] = kv_int(a, "gen_ai.usage.input_tokens", s->s.input_tokens);
	at[n++] = kv_int(a, "gen_ai.usage.output_tokens", s->s.output_tokens);
	at[n++] = kv_int(a, "gen_ai.usage.reasoning.output_tokens", s->reasoning_tokens);
	at[n++] = kv_str(a, "server.address", "10.0.0.11");
	at[n++] = kv_int(a, "server.port", 8000);
	at[n++] = kv_int(a, "http.response.status_code", s->s.status);
	at[n++] = kv_str(a, "tokentap.route", s->key.route);
	at[n++] = kv_str(a, "tokentap.tenant", s->key.tenant);
	at[n++] = kv_str(a, "tokentap.outcome", "ok");
	at[n++] = kv_int(a, "tokentap.attempts", 1);
	at[n++] = kv_dbl(a, "tokentap.time_to_first_token", s->s.ttft_us / 1e6);
	at[n++] = kv_dbl(a, "tokentap.time_to_first_output_token", s->s.ttfo_us / 1e6);
	at[n++] = kv_dbl(a, "tokentap.time_per_output_token", s->s.tpot_us / 1e6);
	at[n++] = kv_int(a, "tokentap.stalls", 0);
	sp->attributes = at;
	sp->n_attributes = n;
	for (int i = 0; i < 2; i++) {
		ev[i] = get(a, sizeof *ev[i]);
		opentelemetry__proto__trace__v1__span__event__init(ev[i]);
		ev[i]->name = i ? "tokentap.first_output_token" : "tokentap.first_token";
		ev[i]->time_unix_nano = sp->start_time_unix_nano + 64000000;
	}
	sp->events = ev;
	sp->n_events = 2;
	opentelemetry__proto__trace__v1__status__init(st);
	sp->status = st;
	sp->flags = 0x301;
	return sp;
}

static size_t pbc_batch(struct arena *a, const struct span *spans, size_t n, uint8_t *out)
{
	Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest req;
	Opentelemetry__Proto__Trace__V1__ResourceSpans rs, *rsp = &rs;
	Opentelemetry__Proto__Trace__V1__ScopeSpans ss, *ssp = &ss;
	Opentelemetry__Proto__Resource__V1__Resource res;
	Opentelemetry__Proto__Common__V1__InstrumentationScope scope;
	static char names[BATCH][200];
	SPAN **sp = get(a, n * sizeof *sp);
	KV *ra[4];
	size_t len;

	opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
	opentelemetry__proto__trace__v1__resource_spans__init(&rs);
	opentelemetry__proto__trace__v1__scope_spans__init(&ss);
	opentelemetry__proto__resource__v1__resource__init(&res);
	opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
	ra[0] = kv_str(a, "service.name", "tokentap");
	ra[1] = kv_str(a, "service.instance.id", "baeed696-999d-4e99-bcda-3d32b398a1f3");
	ra[2] = kv_str(a, "service.version", "0.1.0");
	ra[3] = kv_str(a, "host.name", "vm");
	res.attributes = ra;
	res.n_attributes = 4;
	scope.name = "tokentap";
	scope.version = "0.1.0";
	for (size_t i = 0; i < n; i++)
		sp[i] = pbc_span(a, &spans[i], names[i]);
	ss.scope = &scope;
	ss.spans = sp;
	ss.n_spans = n;
	ss.schema_url = OTLP_SCHEMA_URL;
	rs.resource = &res;
	rs.scope_spans = &ssp;
	rs.n_scope_spans = 1;
	rs.schema_url = OTLP_SCHEMA_URL;
	req.resource_spans = &rsp;
	req.n_resource_spans = 1;
	len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
	opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, out);
	return len;
}

int main(void)
{
	static struct span spans[BATCH];
	static struct arena a;
	const struct span *ptr[BATCH];
	struct otlp_kv res[] = { { "service.name", "tokentap" },
		{ "service.instance.id", "baeed696-999d-4e99-bcda-3d32b398a1f3" },
		{ "service.version", "0.1.0" }, { "host.name", "vm" } };
	uint8_t *buf = malloc(4 << 20);
	size_t ours = 0, theirs = 0;
	double t, best[3] = { 1e30, 1e30, 1e30 };

	a.cap = 64 << 20;
	a.p = malloc(a.cap);
	for (int i = 0; i < BATCH; i++) {
		fill(&spans[i], i);
		ptr[i] = &spans[i];
	}
	for (int r = 0; r < ROUNDS; r++) {
		struct otlpenc e;
		struct evbuffer *out = evbuffer_new();

		t = now_ns();
		otlpenc_begin(&e, 0);
		otlpspan_request(&e, res, 4, ptr, BATCH);
		otlpenc_finish(&e, out);
		t = now_ns() - t;
		ours = evbuffer_get_length(out);
		evbuffer_free(out);
		if (t < best[0])
			best[0] = t;
		for (int m = 0; m < 2; m++) {
			a.per_message = m == 0;
			t = now_ns();
			theirs = pbc_batch(&a, spans, BATCH, buf);
			arena_reset(&a);
			t = now_ns() - t;
			if (t < best[1 + m])
				best[1 + m] = t;
		}
	}
	printf("span encode, best of %d batches of %d spans:\n", ROUNDS, BATCH);
	printf("  tokentap (otlpenc on pb.c):           %7.0f ns/span, %zu bytes/batch\n",
	    best[0] / BATCH, ours);
	printf("  protobuf-c, malloc per message:       %7.0f ns/span, %zu bytes/batch\n",
	    best[1] / BATCH, theirs);
	printf("  protobuf-c, one arena per batch:      %7.0f ns/span\n", best[2] / BATCH);
	free(buf);
	free(a.p);
	return 0;
}
