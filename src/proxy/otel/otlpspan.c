/* SPDX-License-Identifier: Apache-2.0 */
#include "otlpspan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect_names.h"
#include "meter.h"
#include "metrics.h"
#include "url.h"
#include "util.h"

/* the models go unchecked (attributes()): no buffer on their way cuts them */
_Static_assert(SAMPLE_MODEL_MAX == METER_MODEL_MAX &&
    sizeof ((struct span *)0)->response_model == METER_MODEL_MAX,
    "a model is copied whole from the meter to the span");

/* Span.SpanKind, Status.StatusCode (trace.proto) */
enum { KIND_SERVER = 2, KIND_CLIENT = 3 };
enum { STATUS_UNSET = 0, STATUS_ERROR = 2 };

void otlp_resource(struct otlpenc *e, unsigned field, const struct otlp_kv *res,
    size_t n_res)
{
	size_t m = otlpenc_open(e, field, "resource", 0);
	for (size_t i = 0; i < n_res; i++)
		otlpenc_attr_str(e, 1, res[i].key, res[i].value);
	otlpenc_close(e, m);
}

void otlp_scope(struct otlpenc *e, unsigned field)
{
	size_t m = otlpenc_open(e, field, "scope", 0);
	otlpenc_str(e, 1, "name", "tokentap", 8);
	otlpenc_str(e, 2, "version", TOKENTAP_VERSION, strlen(TOKENTAP_VERSION));
	otlpenc_close(e, m);
}

/* The model the request named (body or path): gen_ai.request.model; a
 * model only the response named is gen_ai.response.model alone. */
static int request_model(const struct span *s)
{
	return s->model_src == MODEL_REQUEST || s->model_src == MODEL_PATH;
}

/* a + " " + b (b NULL: a alone) into buf, cut to len - 1 */
static void join(char *buf, size_t len, const char *a, const char *b)
{
	size_t n = strnlen(a, len - 1), m;

	memcpy(buf, a, n);
	if (b != NULL && n + 1 < len) {
		buf[n++] = ' ';
		m = strnlen(b, len - 1 - n);
		memcpy(buf + n, b, m);
		n += m;
	}
	buf[n] = '\0';
}

void otlpspan_name(const struct span *s, char *buf, size_t len)
{
	const char *op = dialect_op_names[s->key.op < DIALECT_OP_COUNT ? s->key.op : 0];

	/* a request that is no GenAI operation is named as HTTP names it */
	if (strcmp(op, "_other") == 0)
		join(buf, len, s->method, NULL);
	else if (request_model(s) || s->model_src == MODEL_RESPONSE)
		join(buf, len, op, s->key.model);
	else
		join(buf, len, op, NULL);
}

/* A monotonic moment as Unix nanoseconds: the end was read on both. */
static uint64_t wall_of(const struct span *s, uint64_t mono_us)
{
	if (mono_us >= s->mono_end_us)
		return s->wall_end_ns;
	return s->wall_end_ns - (s->mono_end_us - mono_us) * 1000;
}

static double seconds(int64_t us)
{
	return (double)us / 1e6;
}

/* The client's errors are the client's: the model's call did not fail
 * (docs/alerts-and-metrics.md: status from the outcome). */
static unsigned status_of(unsigned outcome)
{
	switch (outcome) {
	case OUTCOME_OK:
	case OUTCOME_CLIENT_ABORT:
	case OUTCOME_CLIENT_TIMEOUT:
		return STATUS_UNSET;
	default:
		return STATUS_ERROR;
	}
}

/* server.address and server.port of the replica that answered, its name
 * parsed once for the spans that follow (most go to the replica before). */
static void server_attrs(struct otlpenc *e, const struct span *s)
{
	static char last[SAMPLE_UPSTREAM_MAX], host[URL_HOST_LEN];
	static unsigned port;
	struct url u;

	if (strcmp(s->key.upstream, "-") == 0)
		return;
	if (strcmp(s->key.upstream, last) != 0) {
		if (url_parse(s->key.upstream, &u) != NULL)
			return;
		snprintf(host, sizeof host, "%s", u.host);
		port = u.port;
		url_free(&u);
		snprintf(last, sizeof last, "%s", s->key.upstream);
	}
	otlpenc_attr_clean(e, 9, "server.address", host);
	otlpenc_attr_int(e, 9, "server.port", port);
}

/* The client's text was cleaned where it came in (meter.c, tenant.c) and
 * the models are copied whole since (the meter's, the key's and the
 * span's buffers are one size); the tenant may be cut short inside a
 * character by the key's smaller buffer: it alone is checked. The rest
 * is clean by its making: tokens, the configuration's names, tokentap's. */
/* What a span has in common with every span of its statistics group:
 * the operation, the provider, the model the request named, the replica,
 * the route and the tenant. */
static void group_attrs(struct otlpenc *e, const struct span *s)
{
	const char *op = dialect_op_names[s->key.op < DIALECT_OP_COUNT ? s->key.op : 0];

	otlpenc_attr_clean(e, 9, "gen_ai.operation.name", op);
	otlpenc_attr_clean(e, 9, "gen_ai.provider.name", metrics_provider_name(s->key.dialect));
	if (request_model(s))
		otlpenc_attr_clean(e, 9, "gen_ai.request.model", s->key.model);
	server_attrs(e, s);
	otlpenc_attr_clean(e, 9, "tokentap.route", s->key.route);
	otlpenc_attr_str(e, 9, "tokentap.tenant", s->key.tenant);
}

/* Those, in protobuf, encoded once per group and copied into each span
 * (about a third of a span's encoding); a few dozen groups kept, the
 * slot of a hash taken by the newest. The main thread's. */
#define GROUP_SLOTS 64
#define GROUP_BYTES 1024

struct group_block {
	uint64_t hash;
	struct sample_key key;
	uint8_t named;            /* request_model() */
	size_t n;                 /* 0: empty */
	uint8_t bytes[GROUP_BYTES];
};

static struct group_block *groups;

static uint64_t group_hash(const struct span *s)
{
	uint64_t h = UTIL_FNV_INIT;
	h = util_fnv_str(h, s->key.route);
	h = util_fnv_str(h, s->key.tenant);
	h = util_fnv_str(h, s->key.model);
	h = util_fnv_str(h, s->key.upstream);
	return util_fnv_byte(util_fnv_byte(util_fnv_byte(h, s->key.dialect), s->key.op),
	    (unsigned)request_model(s));
}

static int group_same(const struct group_block *g, const struct span *s)
{
	return g->key.dialect == s->key.dialect && g->key.op == s->key.op &&
	    g->named == request_model(s) && strcmp(g->key.route, s->key.route) == 0 &&
	    strcmp(g->key.tenant, s->key.tenant) == 0 &&
	    strcmp(g->key.model, s->key.model) == 0 &&
	    strcmp(g->key.upstream, s->key.upstream) == 0;
}

static void group_cached(struct otlpenc *e, const struct span *s)
{
	uint64_t h;
	struct group_block *g;
	struct otlpenc tmp;

	if (e->json || (groups == NULL &&
	    (groups = calloc(GROUP_SLOTS, sizeof *groups)) == NULL)) {
		group_attrs(e, s);
		return;
	}
	h = group_hash(s);
	g = &groups[h % GROUP_SLOTS];
	if (g->n == 0 || g->hash != h || !group_same(g, s)) {
		memset(&tmp, 0, sizeof tmp);        /* protobuf, a buffer of its own */
		group_attrs(&tmp, s);
		g->n = 0;
		if (!tmp.pb.oom && tmp.pb.n <= GROUP_BYTES) {
			memcpy(g->bytes, tmp.pb.p, tmp.pb.n);
			g->n = tmp.pb.n;
			g->hash = h;
			g->key = s->key;
			g->named = (uint8_t)request_model(s);
		}
		if (g->n == 0) {
			/* too long to keep: written as it is */
			if (pb_reserve(&e->pb, tmp.pb.n) == 0)
				pb_put_bytes(&e->pb, tmp.pb.p, tmp.pb.n);
			pb_free(&tmp.pb);
			return;
		}
		pb_free(&tmp.pb);
	}
	if (pb_reserve(&e->pb, g->n) == 0)
		pb_put_bytes(&e->pb, g->bytes, g->n);
}

void otlpspan_release(void)
{
	free(groups);
	groups = NULL;
}

static void attributes(struct otlpenc *e, const struct span *s)
{
	const struct sample *o = &s->s;

	group_cached(e, s);
	if (s->response_model[0] != '\0')
		otlpenc_attr_clean(e, 9, "gen_ai.response.model", s->response_model);
	if (s->n_finish > 0) {
		const char *r[METER_FINISH_MAX];
		for (unsigned i = 0; i < s->n_finish && i < METER_FINISH_MAX; i++)
			r[i] = s->finish[i];
		otlpenc_attr_strs(e, 9, "gen_ai.response.finish_reasons", r,
		    s->n_finish < METER_FINISH_MAX ? s->n_finish : METER_FINISH_MAX);
	}
	otlpenc_attr_bool(e, 9, "gen_ai.request.stream", s->stream_asked);
	/* from the request's issuance by tokentap (its end sent to the
	 * replica that answered) to the first chunk that carries content
	 * (a token: not a role-only chunk, a ping or a message_start) */
	if (o->ttfc_us >= 0)
		otlpenc_attr_double(e, 9, "gen_ai.response.time_to_first_chunk",
		    seconds(o->ttfc_us));
	if (o->input_tokens >= 0)
		otlpenc_attr_int(e, 9, "gen_ai.usage.input_tokens", o->input_tokens);
	if (o->output_tokens >= 0)
		otlpenc_attr_int(e, 9, "gen_ai.usage.output_tokens", o->output_tokens);
	if (s->reasoning_tokens >= 0)
		otlpenc_attr_int(e, 9, "gen_ai.usage.reasoning.output_tokens",
		    s->reasoning_tokens);
	if (o->status != 0)
		otlpenc_attr_int(e, 9, "http.response.status_code", o->status);
	if (status_of(o->outcome) == STATUS_ERROR)
		otlpenc_attr_clean(e, 9, "error.type", meter_outcome_name(o->outcome));
	otlpenc_attr_clean(e, 9, "tokentap.outcome", meter_outcome_name(o->outcome));
	otlpenc_attr_int(e, 9, "tokentap.attempts", (int64_t)s->n_attempts + 1);
	if (o->ttft_us >= 0)
		otlpenc_attr_double(e, 9, "tokentap.time_to_first_token", seconds(o->ttft_us));
	if (o->ttfo_us >= 0)
		otlpenc_attr_double(e, 9, "tokentap.time_to_first_output_token",
		    seconds(o->ttfo_us));
	if (o->tpot_us >= 0)
		otlpenc_attr_double(e, 9, "tokentap.time_per_output_token", seconds(o->tpot_us));
	if (s->stream)
		otlpenc_attr_int(e, 9, "tokentap.stalls", (int64_t)s->stalls);
}

static size_t event_open(struct otlpenc *e, const struct span *s, uint64_t t,
    const char *name)
{
	size_t m = otlpenc_open(e, 11, "events", 1);
	otlpenc_fixed64(e, 1, "timeUnixNano", wall_of(s, t));
	otlpenc_str(e, 2, "name", name, strlen(name));
	return m;
}

static void event(struct otlpenc *e, const struct span *s, uint64_t t, const char *name)
{
	otlpenc_close(e, event_open(e, s, t, name));
}

/* Events in time order: the first token, the first output token, each
 * stall's start and end, each attempt left for another replica. */
static void events(struct otlpenc *e, const struct span *s)
{
	for (unsigned i = 0; i < s->n_attempts; i++) {
		const struct span_attempt *a = &s->attempts[i];
		size_t m = event_open(e, s, a->t_us, "tokentap.failover");
		otlpenc_attr_clean(e, 3, "tokentap.upstream", a->upstream);
		otlpenc_attr_clean(e, 3, "tokentap.failover.reason", a->reason);
		if (a->status != 0)
			otlpenc_attr_int(e, 3, "http.response.status_code", a->status);
		otlpenc_attr_double(e, 3, "tokentap.attempt.duration", seconds((int64_t)a->us));
		otlpenc_close(e, m);
	}
	if (s->t_first_token != 0)
		event(e, s, s->t_first_token, "tokentap.first_token");
	if (s->t_first_output != 0)
		event(e, s, s->t_first_output, "tokentap.first_output_token");
	for (unsigned i = 0; i < s->n_stalls && i < SPAN_STALLS_MAX; i++) {
		event(e, s, s->stall_start[i], "tokentap.stall.start");
		if (s->stall_end[i] != 0)
			event(e, s, s->stall_end[i], "tokentap.stall.end");
	}
}

static const uint8_t none[8];

/* traceId, spanId, traceState and parentSpanId of one of the two spans */
static void ids(struct otlpenc *e, const struct span *s, const uint8_t *id,
    const uint8_t *parent)
{
	otlpenc_id(e, 1, "traceId", s->trace_id, 16);
	otlpenc_id(e, 2, "spanId", id, 8);
	if (s->tracestate_len > 0)
		otlpenc_str(e, 3, "traceState", s->tracestate, s->tracestate_len);
	if (memcmp(parent, none, 8) != 0)
		otlpenc_id(e, 4, "parentSpanId", parent, 8);
}

/* host[:port] of a Host header into host (brackets of an IPv6 literal
 * kept off) and its port (0: none given) */
static unsigned host_port(const char *v, char *host, size_t len)
{
	const char *colon = v[0] == '[' ? strchr(v, ']') : strrchr(v, ':');
	size_t n = strlen(v);
	unsigned port = 0;

	if (v[0] == '[' && colon != NULL) {
		n = (size_t)(colon - v - 1);
		v++;
		colon = colon[1] == ':' ? colon + 1 : NULL;
	} else if (colon != NULL) {
		n = (size_t)(colon - v);
	}
	if (colon != NULL) {
		const char *p = colon + 1;
		while (*p >= '0' && *p <= '9' && port <= 65535)
			port = port * 10 + (unsigned)(*p++ - '0');
		if (*p != '\0' || p == colon + 1 || port > 65535)
			port = 0;
	}
	if (n >= len)
		n = len - 1;
	memcpy(host, v, n);
	host[n] = '\0';
	return port;
}

/* The SERVER span: the request tokentap received, as the HTTP server
 * conventions name it ("{method} {http.route}"), from the request's first
 * byte to its end; the client's span is its parent, the CLIENT span its
 * child. Status ERROR where the client got a 5xx, or no response for a
 * fault not the client's. The client's bytes (method, path, Host) are
 * checked as they are written. */
static void server_span(struct otlpenc *e, const struct span *s)
{
	size_t m = otlpenc_open(e, 2, "spans", 1), st;
	char name[sizeof s->key.route + 24], host[SPAN_HOST_MAX], code[8];
	int routed = strcmp(s->key.route, "-") != 0;
	unsigned status = s->s.status, port;
	int error = status >= 500 || (status == 0 && status_of(s->s.outcome) == STATUS_ERROR);

	ids(e, s, s->server_id, s->parent_id);
	if (routed)
		snprintf(name, sizeof name, "%s %s", s->method, s->key.route);
	else
		snprintf(name, sizeof name, "%s", s->method);
	otlpenc_str(e, 5, "name", name, strlen(name));
	otlpenc_enum(e, 6, "kind", KIND_SERVER);
	otlpenc_fixed64(e, 7, "startTimeUnixNano", wall_of(s, s->t0));
	otlpenc_fixed64(e, 8, "endTimeUnixNano", s->wall_end_ns);
	otlpenc_attr_str(e, 9, "http.request.method", s->method);
	otlpenc_attr_clean(e, 9, "url.scheme", s->https ? "https" : "http");
	otlpenc_attr_str(e, 9, "url.path", s->path);
	otlpenc_attr_clean(e, 9, "network.protocol.version", s->http10 ? "1.0" : "1.1");
	if (routed) {
		otlpenc_attr_clean(e, 9, "http.route", s->key.route);
		otlpenc_attr_clean(e, 9, "tokentap.route", s->key.route);
	}
	if (status != 0)
		otlpenc_attr_int(e, 9, "http.response.status_code", status);
	if (s->client[0] != '\0')
		otlpenc_attr_clean(e, 9, "client.address", s->client);
	if (s->host[0] != '\0') {
		port = host_port(s->host, host, sizeof host);
		otlpenc_attr_str(e, 9, "server.address", host);
		if (port != 0)
			otlpenc_attr_int(e, 9, "server.port", port);
	}
	if (error) {
		if (status != 0)
			snprintf(code, sizeof code, "%u", status);
		otlpenc_attr_clean(e, 9, "error.type", status != 0 ? code :
		    meter_outcome_name(s->s.outcome));
	}
	otlpenc_attr_clean(e, 9, "tokentap.outcome", meter_outcome_name(s->s.outcome));
	st = otlpenc_open(e, 15, "status", 0);
	otlpenc_enum(e, 3, "code", error ? STATUS_ERROR : STATUS_UNSET);
	otlpenc_close(e, st);
	/* W3C trace-flags (the sampled bit), and "the parent is remote" */
	otlpenc_fixed32(e, 16, "flags", (uint32_t)s->flags |
	    (memcmp(s->parent_id, none, 8) != 0 ? 0x300u : 0x100u));
	otlpenc_close(e, m);
}

static void one_span(struct otlpenc *e, const struct span *s)
{
	size_t m = otlpenc_open(e, 2, "spans", 1), st;
	char name[SAMPLE_MODEL_MAX + 64];

	ids(e, s, s->span_id, s->server_id);
	otlpspan_name(s, name, sizeof name);
	otlpenc_str(e, 5, "name", name, strlen(name));
	otlpenc_enum(e, 6, "kind", KIND_CLIENT);
	otlpenc_fixed64(e, 7, "startTimeUnixNano", wall_of(s, s->t0));
	otlpenc_fixed64(e, 8, "endTimeUnixNano", s->wall_end_ns);
	attributes(e, s);
	events(e, s);
	st = otlpenc_open(e, 15, "status", 0);
	if (status_of(s->s.outcome) == STATUS_ERROR) {
		const char *why = meter_outcome_name(s->s.outcome);
		otlpenc_str(e, 2, "message", why, strlen(why));
	}
	otlpenc_enum(e, 3, "code", status_of(s->s.outcome));
	otlpenc_close(e, st);
	/* W3C trace-flags (the sampled bit); the parent, tokentap's SERVER
	 * span, is not remote */
	otlpenc_fixed32(e, 16, "flags", (uint32_t)s->flags | 0x100u);
	otlpenc_close(e, m);
}

void otlpspan_request(struct otlpenc *e, const struct otlp_kv *res, size_t n_res,
    const struct span *const *spans, size_t n)
{
	size_t rs, ss;

	/* a CLIENT span takes about 1 KiB, a SERVER span a quarter of it */
	otlpenc_reserve(e, 1024 + n * 1600);
	rs = otlpenc_open(e, 1, "resourceSpans", 1);

	otlp_resource(e, 1, res, n_res);
	ss = otlpenc_open(e, 2, "scopeSpans", 1);
	otlp_scope(e, 1);
	for (size_t i = 0; i < n; i++) {
		server_span(e, spans[i]);
		one_span(e, spans[i]);
	}
	otlpenc_str(e, 3, "schemaUrl", OTLP_SCHEMA_URL, strlen(OTLP_SCHEMA_URL));
	otlpenc_close(e, ss);
	otlpenc_str(e, 3, "schemaUrl", OTLP_SCHEMA_URL, strlen(OTLP_SCHEMA_URL));
	otlpenc_close(e, rs);
}
