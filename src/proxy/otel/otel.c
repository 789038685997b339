/* SPDX-License-Identifier: Apache-2.0 */
#include "otel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "jsonw.h"
#include "log.h"
#include "otlpenc.h"
#include "otlphttp.h"
#include "otlpmetric.h"
#include "otlpspan.h"
#include "promout.h"
#include "ring.h"
#include "rng.h"
#include "util.h"

#define TICK_US 100000
#define RES_MAX 40

static struct {
	struct event_base *base;
	struct evdns_base *dns;
	struct conf *conf;              /* own reference */
	void (*series)(struct promout *o);
	struct otlphttp *traces, *metrics;
	struct event *tick, *mtick;
	uint64_t interval_us;
	/* the spans waiting: a ring of cap */
	struct span *q;
	size_t cap, head, n;
	uint64_t oldest_us;             /* when the oldest one came */
	uint64_t spans_dropped;         /* queue full: the workers' and this one */
	uint64_t metrics_skipped;       /* an interval came while one was going */
	struct otlpmetric_state *state;
	uint64_t start_ns;
	char instance[40], host[256];
	struct otlp_kv res[RES_MAX];
	size_t n_res;
} O;

/* ---- the resource ------------------------------------------------------------- */

static void res_set(const char *key, const char *value)
{
	for (size_t i = 0; i < O.n_res; i++)
		if (strcmp(O.res[i].key, key) == 0) {
			O.res[i].value = value;
			return;
		}
	if (O.n_res < RES_MAX) {
		O.res[O.n_res].key = key;
		O.res[O.n_res++].value = value;
	}
}

/* service.name, a service.instance.id for this process's life (a random
 * UUID, as the conventions advise where there is no better one), the
 * version, the host; otel.resource (or OTEL_RESOURCE_ATTRIBUTES) on top. */
static void resource(const struct conf *c)
{
	O.n_res = 0;
	res_set("service.name", c->otel.service_name ? c->otel.service_name : "tokentap");
	res_set("service.instance.id", O.instance);
	res_set("service.version", TOKENTAP_VERSION);
	res_set("host.name", O.host);
	for (size_t i = 0; i < c->otel.n_resource; i++)
		res_set(c->otel.resource[i].name, c->otel.resource[i].value);
}

static void make_identity(void)
{
	uint64_t s = rng_seed(), a = rng_next(&s), b = rng_next(&s);

	/* UUID version 4, variant 1 */
	a = (a & ~0xf000ull) | 0x4000ull;
	b = (b & ~(3ull << 62)) | (2ull << 62);
	snprintf(O.instance, sizeof O.instance, "%08x-%04x-%04x-%04x-%012llx",
	    (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffff, (unsigned)a & 0xffff,
	    (unsigned)(b >> 48), (unsigned long long)(b & 0xffffffffffffull));
	if (gethostname(O.host, sizeof O.host) != 0)
		snprintf(O.host, sizeof O.host, "localhost");
	O.host[sizeof O.host - 1] = '\0';
}

/* ---- spans ------------------------------------------------------------------------ */

static int traces_on(const struct conf *c)
{
	return c != NULL && c->otel.traces > 0 && c->otel.traces_url != NULL;
}

static int metrics_on(const struct conf *c)
{
	return c != NULL && c->otel.metrics > 0 && c->otel.metrics_url != NULL;
}

static void take_span(void *arg, const struct span *s)
{
	(void)arg;
	if (O.q == NULL || O.n == O.cap) {      /* full: the spans are dropped */
		O.spans_dropped += OTLPSPAN_PER_REQUEST;
		return;
	}
	if (O.n == 0)
		O.oldest_us = util_now_us();
	O.q[(O.head + O.n++) % O.cap] = *s;
}

/* A batch, when one is due and the last export is done. */
static void flush(uint64_t now)
{
	const struct conf_otel *o = &O.conf->otel;
	const struct span *batch[4096];
	struct otlpenc e;
	struct evbuffer *body;
	size_t k;

	if (O.n == 0 || !otlphttp_idle(O.traces) ||
	    (O.n < o->batch && now - O.oldest_us < o->delay_us))
		return;
	k = O.n < o->batch ? O.n : o->batch;
	if (k > UTIL_ARRAY_LEN(batch))
		k = UTIL_ARRAY_LEN(batch);
	for (size_t i = 0; i < k; i++)
		batch[i] = &O.q[(O.head + i) % O.cap];
	body = evbuffer_new();
	if (body == NULL || otlpenc_begin(&e, o->protocol == OTEL_JSON) < 0) {
		if (body != NULL)
			evbuffer_free(body);
		return;                          /* the spans stay for the next tick */
	}
	otlpspan_request(&e, O.res, O.n_res, batch, k);
	if (otlpenc_finish(&e, body) == 0)
		otlphttp_send(O.traces, body, k * OTLPSPAN_PER_REQUEST, o->protocol == OTEL_JSON);
	else
		O.spans_dropped += k * OTLPSPAN_PER_REQUEST;
	evbuffer_free(body);
	O.head = (O.head + k) % O.cap;
	O.n -= k;
	O.oldest_us = now;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_now_us();
	(void)fd;
	(void)what;
	(void)arg;
	/* every span the workers queued is taken: into the queue, or, past
	 * it, dropped and counted; spans of a config without traces (a
	 * reload turned them off) are let go */
	O.spans_dropped += OTLPSPAN_PER_REQUEST *
	    ring_span_drain(take_span, NULL, UINT64_MAX);
	if (O.q == NULL)
		O.n = 0;
	if (O.traces != NULL && O.q != NULL && traces_on(O.conf))
		flush(now);
	else if (!traces_on(O.conf))
		O.n = 0;                /* a reload turned them off: let go */
}

/* ---- metrics ---------------------------------------------------------------------- */

static void on_metrics(evutil_socket_t fd, short what, void *arg)
{
	const struct conf_otel *o = &O.conf->otel;
	struct otlpmetric *m;
	struct otlpenc e;
	struct evbuffer *body;
	long points;

	(void)fd;
	(void)what;
	(void)arg;
	if (O.metrics == NULL || !metrics_on(O.conf))
		return;
	if (!otlphttp_idle(O.metrics)) {
		O.metrics_skipped++;
		return;
	}
	if ((body = evbuffer_new()) == NULL)
		return;
	if (otlpenc_begin(&e, o->protocol == OTEL_JSON) < 0 ||
	    (m = otlpmetric_begin(&e, O.state, O.res, O.n_res, o->delta, o->explicit_buckets,
	    O.start_ns, util_wall_ns())) == NULL) {
		otlpenc_free(&e);
		evbuffer_free(body);
		return;
	}
	O.series(otlpmetric_out(m));
	points = otlpmetric_end(m);
	if (otlpenc_finish(&e, body) == 0 && points > 0)
		otlphttp_send(O.metrics, body, (uint64_t)points,
		    o->protocol == OTEL_JSON);
	evbuffer_free(body);
}

/* ---- configuration ----------------------------------------------------------------- */

static int sender(struct otlphttp **h, const char *signal, const struct conf *c,
    const char *url)
{
	if (*h == NULL && (*h = otlphttp_new(O.base, O.dns, signal)) == NULL)
		return -1;
	if (otlphttp_configure(*h, c, url) < 0) {
		log_error("otel: %s: cannot set up the export to %s", signal, url);
		return -1;
	}
	return 0;
}

static int configure(const struct conf *c)
{
	const struct conf_otel *o = &c->otel;
	int rc = 0;

	if (O.conf != NULL)
		conf_unref(O.conf);
	O.conf = conf_ref((struct conf *)c);
	resource(c);
	if ((traces_on(c) || metrics_on(c)) && O.dns == NULL) {
		O.dns = evdns_base_new(O.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
		if (O.dns == NULL)
			log_warn("otel: no DNS resolver; use an IP address in otel.endpoint");
	}
	if (traces_on(c)) {
		rc |= sender(&O.traces, "traces", c, o->traces_url);
		/* the queue's size holds until restart: spans waiting stay */
		if (O.q == NULL && (O.q = calloc(o->queue, sizeof *O.q)) != NULL)
			O.cap = o->queue;
	}
	if (metrics_on(c)) {
		struct timeval tv = { (time_t)(o->interval_us / 1000000),
			(suseconds_t)(o->interval_us % 1000000) };
		rc |= sender(&O.metrics, "metrics", c, o->metrics_url);
		if (O.state == NULL)
			O.state = otlpmetric_state_new();
		if (O.mtick == NULL)
			O.mtick = event_new(O.base, -1, EV_PERSIST, on_metrics, NULL);
		if (O.mtick != NULL && O.interval_us != o->interval_us) {
			event_add(O.mtick, &tv);
			O.interval_us = o->interval_us;
		}
	} else if (O.mtick != NULL) {
		event_del(O.mtick);
		O.interval_us = 0;
	}
	if (traces_on(c) || metrics_on(c))
		log_info("otel: exporting%s%s (%s%s)", traces_on(c) ? " traces to " : "",
		    traces_on(c) ? o->traces_url : "", o->protocol == OTEL_JSON ? "json" :
		    "protobuf", o->gzip ? ", gzip" : "");
	return rc ? -1 : 0;
}

int otel_start(struct event_base *base, const struct conf *c,
    void (*series)(struct promout *o))
{
	struct timeval tv = { 0, TICK_US };

	memset(&O, 0, sizeof O);
	O.base = base;
	O.series = series;
	O.start_ns = util_wall_ns();
	make_identity();
	O.tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	if (O.tick == NULL || event_add(O.tick, &tv) < 0)
		return -1;
	configure(c);
	return 0;
}

void otel_reload(const struct conf *c)
{
	configure(c);
}

void otel_stop(void)
{
	if (O.tick != NULL)
		event_free(O.tick);
	if (O.mtick != NULL)
		event_free(O.mtick);
	otlphttp_free(O.traces);
	otlphttp_free(O.metrics);
	otlpmetric_state_free(O.state);
	if (O.dns != NULL)
		evdns_base_free(O.dns, 0);
	if (O.conf != NULL)
		conf_unref(O.conf);
	free(O.q);
	otlpenc_release();
	otlpspan_release();
	memset(&O, 0, sizeof O);
}

/* ---- its own figures ------------------------------------------------------------- */

static void counter(struct promout *o, const char *name, const char *help,
    const char *signal, uint64_t v, int any)
{
	struct promout_labels l = { .n = 0 };
	if (!any)
		return;
	promout_family(o, name, help, PROMPROTO_COUNTER);
	if (signal != NULL)
		promout_label(&l, "signal", signal);
	promout_sample(o, &l, (double)v);
}

/* Each family once, with a sample per signal exported (two families of
 * one name are no exposition: promtool refuses a second HELP line). */
static void sender_series(struct promout *o)
{
	static const char *const items[] = { "sent", "failed", "rejected" };
	const struct otlphttp *hs[2] = { O.traces, O.metrics };
	static const char *const sig[2] = { "traces", "metrics" };
	struct promout_labels l;

	promout_family(o, "tokentap_otel_exports_total",
	    "OTLP export requests by signal and result (ok, failed: given up).",
	    PROMPROTO_COUNTER);
	for (int s = 0; s < 2; s++)
		for (int ok = 1; hs[s] != NULL && ok >= 0; ok--) {
			const struct otlphttp_counts *n = otlphttp_counts(hs[s]);
			l.n = 0;
			promout_label(&l, "signal", sig[s]);
			promout_label(&l, "result", ok ? "ok" : "failed");
			promout_sample(o, &l, (double)(ok ? n->exports_ok : n->exports_failed));
		}
	promout_family(o, "tokentap_otel_export_retries_total",
	    "OTLP exports sent again after 429, 502, 503 or 504.", PROMPROTO_COUNTER);
	for (int s = 0; s < 2; s++)
		if (hs[s] != NULL) {
			l.n = 0;
			promout_label(&l, "signal", sig[s]);
			promout_sample(o, &l, (double)otlphttp_counts(hs[s])->retries);
		}
	promout_family(o, "tokentap_otel_export_failures_total", "OTLP export attempts "
	    "that failed, by reason: deadline (no complete answer within otel.timeout), "
	    "too_large (a body over 64 KiB), invalid (not HTTP, malformed, or a head over "
	    "64 KiB), connection "
	    "(refused, reset, closed early, TLS), status (not 2xx).", PROMPROTO_COUNTER);
	for (int s = 0; s < 2; s++)
		for (int r = 0; hs[s] != NULL && r < OTLPHTTP_REASONS; r++) {
			l.n = 0;
			promout_label(&l, "signal", sig[s]);
			promout_label(&l, "reason", otlphttp_reason_names[r]);
			promout_sample(o, &l, (double)otlphttp_counts(hs[s])->failures[r]);
		}
	promout_family(o, "tokentap_otel_items_total", "Spans (traces) or data points "
	    "(metrics) by what became of them: sent (the collector took them), failed "
	    "(an export given up), rejected (a partial success).", PROMPROTO_COUNTER);
	for (int s = 0; s < 2; s++)
		for (int k = 0; hs[s] != NULL && k < 3; k++) {
			const struct otlphttp_counts *n = otlphttp_counts(hs[s]);
			uint64_t v = k == 0 ? n->items_ok : k == 1 ? n->items_failed :
			    n->items_rejected;
			l.n = 0;
			promout_label(&l, "signal", sig[s]);
			promout_label(&l, "result", items[k]);
			promout_sample(o, &l, (double)v);
		}
}

void otel_prometheus(struct promout *o)
{
	if (O.traces == NULL && O.metrics == NULL)
		return;
	sender_series(o);
	counter(o, "tokentap_otel_spans_dropped_total", "Spans dropped before export: "
	    "the span queues were full (the collector slow or away).", NULL,
	    O.spans_dropped, O.traces != NULL);
	counter(o, "tokentap_otel_metrics_skipped_total", "Metrics exports skipped: the "
	    "last one was still going at the interval.", NULL, O.metrics_skipped,
	    O.metrics != NULL);
}

static void json_sender(struct evbuffer *out, const char *signal,
    const struct otlphttp *h, int *first)
{
	const struct otlphttp_counts *n;

	if (h == NULL)
		return;
	n = otlphttp_counts(h);
	evbuffer_add_printf(out, "%s\"%s\":{\"exports_ok\":%llu,\"exports_failed\":%llu,"
	    "\"retries\":%llu,\"sent\":%llu,\"failed\":%llu,\"rejected\":%llu,"
	    "\"in_flight\":%llu", *first ? "" : ",", signal,
	    (unsigned long long)n->exports_ok, (unsigned long long)n->exports_failed,
	    (unsigned long long)n->retries, (unsigned long long)n->items_ok,
	    (unsigned long long)n->items_failed, (unsigned long long)n->items_rejected,
	    (unsigned long long)otlphttp_in_flight(h));
	/* the attempts that failed, by reason */
	for (int r = 0; r < OTLPHTTP_REASONS; r++)
		evbuffer_add_printf(out, "%s\"%s\":%llu", r ? "," : ",\"failures\":{",
		    otlphttp_reason_names[r], (unsigned long long)n->failures[r]);
	evbuffer_add(out, "}}", 2);
	*first = 0;
}

void otel_json(struct evbuffer *out)
{
	int first = 1;

	if (O.traces == NULL && O.metrics == NULL)
		return;
	evbuffer_add_printf(out, ",\"otel\":{");
	json_sender(out, "traces", O.traces, &first);
	json_sender(out, "metrics", O.metrics, &first);
	evbuffer_add_printf(out, "%s\"spans_queued\":%zu,\"spans_dropped\":%llu,"
	    "\"metrics_skipped\":%llu}", first ? "" : ",", O.n * OTLPSPAN_PER_REQUEST,
	    (unsigned long long)O.spans_dropped, (unsigned long long)O.metrics_skipped);
}
