/* SPDX-License-Identifier: Apache-2.0 */
#include "promout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <zlib.h>

#include "jsonw.h"
#include "promtext.h"

struct promout {
	struct evbuffer *out;
	int protobuf;
	const char *name;            /* the family being written */
	enum promproto_type type;
	struct pb pb;
	size_t family;               /* its mark in pb */
	size_t samples;              /* in the family */
	char clean[PROMOUT_LABELS_MAX][512];          /* label values made valid UTF-8 */
	const struct promout_sink *sink;
	void *sink_arg;
};

struct promout *promout_new(struct evbuffer *out, int protobuf)
{
	struct promout *o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	o->out = out;
	o->protobuf = protobuf;
	return o;
}

struct promout *promout_new_sink(const struct promout_sink *sink, void *arg)
{
	struct promout *o = calloc(1, sizeof *o);
	if (o == NULL)
		return NULL;
	o->sink = sink;
	o->sink_arg = arg;
	return o;
}

int promout_every_family(const struct promout *o)
{
	return o->sink != NULL;
}

/* A protobuf family goes out once complete; an empty one not at all. */
static void family_end(struct promout *o)
{
	if (!o->protobuf || o->name == NULL)
		return;
	if (o->samples > 0) {
		pb_close(&o->pb, o->family);
		if (!o->pb.oom)
			evbuffer_add(o->out, o->pb.p, o->pb.n);
	}
	o->pb.n = 0;
	o->name = NULL;
}

void promout_family(struct promout *o, const char *name, const char *help,
    enum promproto_type type)
{
	static const char *const types[] = { "counter", "gauge", "summary", "untyped",
		"histogram" };
	if (o->sink != NULL) {
		o->sink->family(o->sink_arg, name, help, type);
		return;
	}
	family_end(o);
	o->name = name;
	o->type = type;
	o->samples = 0;
	if (o->protobuf)
		o->family = promproto_family(&o->pb, name, help, type);
	else
		evbuffer_add_printf(o->out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
		    name, types[type]);
}

void promout_label(struct promout_labels *l, const char *name, const char *value)
{
	if (l->n < PROMOUT_LABELS_MAX) {
		l->names[l->n] = name;
		l->values[l->n++] = value;
	}
}

/* ill-formed UTF-8 as U+FFFD, cut to fit (on a character boundary) */
static const char *utf8_clean(char *dst, size_t cap, const char *v)
{
	size_t n = strlen(v), i = 0, o = 0, in;
	int valid;

	while (i < n) {
		const char *rep = NULL;
		size_t len;
		in = 1;
		if ((unsigned char)v[i] >= 0x80) {
			in = jsonw_utf8_seq(v + i, n - i, &valid);
			if (!valid)
				rep = JSONW_REPLACEMENT;
		}
		len = rep != NULL ? strlen(rep) : in;
		if (o + len >= cap)
			break;
		memcpy(dst + o, rep != NULL ? rep : v + i, len);
		o += len;
		i += in;
	}
	dst[o] = '\0';
	return dst;
}

static size_t proto_metric(struct promout *o, const struct promout_labels *l)
{
	const char *values[PROMOUT_LABELS_MAX];
	for (size_t i = 0; i < l->n; i++)
		values[i] = utf8_clean(o->clean[i], sizeof o->clean[i], l->values[i]);
	return promproto_metric(&o->pb, l->names, values, l->n);
}

/* name{a="x",b="y"  (the caller closes) */
static void text_labels(struct promout *o, const char *suffix,
    const struct promout_labels *l)
{
	evbuffer_add_printf(o->out, "%s%s", o->name, suffix);
	if (l->n == 0)
		return;
	evbuffer_add(o->out, "{", 1);
	for (size_t i = 0; i < l->n; i++) {
		if (i)
			evbuffer_add(o->out, ",", 1);
		promtext_label(o->out, l->names[i], l->values[i]);
	}
}

/* The shortest text that reads back as v (0.9, not 0.90000000000000002). */
static void text_value(struct promout *o, double v)
{
	char t[32];

	if (v == floor(v) && fabs(v) < 1e15) {
		evbuffer_add_printf(o->out, " %.0f\n", v);
		return;
	}
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(t, sizeof t, "%.*g", digits, v);
		if (strtod(t, NULL) == v)
			break;
	}
	evbuffer_add_printf(o->out, " %s\n", t);
}

void promout_sample(struct promout *o, const struct promout_labels *l, double v)
{
	if (o->sink != NULL) {
		o->sink->sample(o->sink_arg, l, v);
		return;
	}
	o->samples++;
	if (o->protobuf) {
		size_t m = proto_metric(o, l);
		if (o->type == PROMPROTO_COUNTER)
			promproto_counter(&o->pb, v);
		else
			promproto_gauge(&o->pb, v);
		pb_close(&o->pb, m);
		return;
	}
	text_labels(o, "", l);
	if (l->n)
		evbuffer_add(o->out, "}", 1);
	text_value(o, v);
}

static void text_unit(struct evbuffer *out, uint64_t v, uint64_t div)
{
	if (div == 1000000)
		evbuffer_add_printf(out, "%llu.%06llu", (unsigned long long)(v / div),
		    (unsigned long long)(v % div));
	else
		evbuffer_add_printf(out, "%llu", (unsigned long long)v);
}

static void text_histogram(struct promout *o, const struct promout_labels *l,
    const struct promout_hist *h)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= h->n_bounds; i++) {
		cum += h->counts[i];
		text_labels(o, "_bucket", l);
		evbuffer_add(o->out, l->n ? ",le=\"" : "{le=\"", 5);
		if (i < h->n_bounds)
			text_unit(o->out, h->bounds[i], h->div);
		else
			evbuffer_add(o->out, "+Inf", 4);
		evbuffer_add_printf(o->out, "\"} %llu\n", (unsigned long long)cum);
	}
	text_labels(o, "_sum", l);
	evbuffer_add(o->out, l->n ? "} " : " ", l->n ? 2 : 1);
	text_unit(o->out, h->sum, h->div);
	evbuffer_add(o->out, "\n", 1);
	text_labels(o, "_count", l);
	evbuffer_add_printf(o->out, "%s %llu\n", l->n ? "}" : "",
	    (unsigned long long)h->count);
}

void promout_histogram(struct promout *o, const struct promout_labels *l,
    const struct promout_hist *h)
{
	double bounds[128];
	struct promproto_hist ph;
	size_t m;

	if (o->sink != NULL) {
		o->sink->histogram(o->sink_arg, l, h);
		return;
	}
	o->samples++;
	if (!o->protobuf) {
		text_histogram(o, l, h);
		return;
	}
	ph.count = h->count;
	ph.sum = (double)h->sum / (double)h->div;
	ph.n_bounds = h->n_bounds < 128 ? h->n_bounds : 128;
	for (size_t i = 0; i < ph.n_bounds; i++)
		bounds[i] = (double)h->bounds[i] / (double)h->div;
	ph.bounds = bounds;
	ph.counts = h->counts;
	ph.native = h->native;
	m = proto_metric(o, l);
	promproto_histogram(&o->pb, &ph);
	pb_close(&o->pb, m);
}

int promout_finish(struct promout *o)
{
	int oom;
	if (o == NULL)
		return -1;
	family_end(o);
	oom = o->pb.oom;
	pb_free(&o->pb);
	free(o);
	return oom ? -1 : 0;
}

/* ---- what the scraper asked for ------------------------------------------ */

/* The q of one media range or coding ("...;q=0.5"), 1 without one. */
static double q_of(const char *params, size_t n)
{
	for (size_t i = 0; i + 2 < n; i++)
		if ((params[i] == ';' || params[i] == ' ') &&
		    (params[i + 1] == 'q' || params[i + 1] == 'Q') && params[i + 2] == '=')
			return strtod(params + i + 3, NULL);
	return 1;
}

static int has_param(const char *p, size_t n, const char *want)
{
	size_t w = strlen(want);
	for (size_t i = 0; i + w <= n; i++)
		if (strncasecmp(p + i, want, w) == 0 &&
		    (i + w == n || p[i + w] == ';' || p[i + w] == ' '))
			return 1;
	return 0;
}

/* Calls fn for each comma-separated element (leading spaces skipped). */
static void each_element(const char *s, void (*fn)(void *, const char *, size_t),
    void *arg)
{
	while (s != NULL && *s) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		while (n > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			n--;
		}
		fn(arg, s, n);
		s = end ? end + 1 : NULL;
	}
}

struct accept_q {
	double proto, text;
};

static int starts(const char *s, size_t n, const char *type)
{
	size_t t = strlen(type);
	return n >= t && strncasecmp(s, type, t) == 0 &&
	    (n == t || s[t] == ';' || s[t] == ' ');
}

static void accept_element(void *arg, const char *s, size_t n)
{
	struct accept_q *q = arg;
	double v = q_of(s, n);

	if (starts(s, n, "application/vnd.google.protobuf") &&
	    has_param(s, n, "proto=io.prometheus.client.MetricFamily") &&
	    has_param(s, n, "encoding=delimited")) {
		if (v > q->proto)
			q->proto = v;
	} else if (starts(s, n, "text/plain") || starts(s, n, "text/*") ||
	    starts(s, n, "*/*")) {
		if (v > q->text)
			q->text = v;
	}
}

int promout_wants_protobuf(const char *accept)
{
	struct accept_q q = { 0, 0 };
	each_element(accept, accept_element, &q);
	return q.proto > 0 && q.proto >= q.text;
}

static void coding_element(void *arg, const char *s, size_t n)
{
	int *yes = arg;
	if ((starts(s, n, "gzip") || starts(s, n, "x-gzip")) && q_of(s, n) > 0)
		*yes = 1;
}

int promout_accepts_gzip(const char *accept_encoding)
{
	int yes = 0;
	each_element(accept_encoding, coding_element, &yes);
	return yes;
}

int promout_gzip(struct evbuffer *in, struct evbuffer *out)
{
	z_stream z;
	unsigned char buf[65536];
	struct evbuffer_iovec v[1];
	int rc = Z_OK;
	size_t before;

	memset(&z, 0, sizeof z);
	/* 15 + 16: a gzip wrapper; level 1: the scrape waits for it, and text
	 * this repetitive shrinks about tenfold at any level */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	while (rc == Z_OK) {
		int flush = Z_NO_FLUSH;
		if (z.avail_in == 0) {
			if (evbuffer_get_length(in) == 0) {
				flush = Z_FINISH;
			} else if (evbuffer_peek(in, -1, NULL, v, 1) >= 1) {
				z.next_in = v[0].iov_base;
				z.avail_in = (uInt)v[0].iov_len;
			}
		}
		before = z.avail_in;
		z.next_out = buf;
		z.avail_out = sizeof buf;
		rc = deflate(&z, flush);
		evbuffer_add(out, buf, sizeof buf - z.avail_out);
		evbuffer_drain(in, before - z.avail_in);
	}
	deflateEnd(&z);
	return rc == Z_STREAM_END ? 0 : -1;
}
