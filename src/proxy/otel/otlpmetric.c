/* SPDX-License-Identifier: Apache-2.0 */
#include "otlpmetric.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nhist.h"
#include "util.h"

/* AggregationTemporality (metrics.proto) */
enum { TEMP_DELTA = 1, TEMP_CUMULATIVE = 2 };

/* ---- names ------------------------------------------------------------------ */

/* Families with a GenAI name: the same data under either /metrics name
 * (metrics.names), one OTLP metric. The conventions' client metrics:
 * tokentap is the model's client (its span is a CLIENT span), so its
 * figures are what a client measures of the model, never the model
 * server's own gen_ai.server.* (docs/alerts-and-metrics.md, "OpenTelemetry"). The rest
 * (TTFT from the client's first byte, TPOT per request, ...) are
 * tokentap.* below. */
static const struct {
	const char *prom, *otel, *unit;
} genai[] = {
	{ "gen_ai_client_operation_time_to_first_chunk_seconds",
	  "gen_ai.client.operation.time_to_first_chunk", "s" },
	{ "tokentap_inter_token_latency_seconds",
	  "gen_ai.client.operation.time_per_output_chunk", "s" },
	{ "gen_ai_client_operation_time_per_output_chunk_seconds",
	  "gen_ai.client.operation.time_per_output_chunk", "s" },
	{ "tokentap_request_duration_seconds", "gen_ai.client.operation.duration", "s" },
	{ "gen_ai_client_operation_duration_seconds", "gen_ai.client.operation.duration", "s" },
	{ "gen_ai_client_token_usage", "gen_ai.client.token.usage", "{token}" },
};

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

const char *otlpmetric_name(const char *prom, char *buf, size_t len, const char **unit)
{
	size_t n;

	for (size_t i = 0; i < UTIL_ARRAY_LEN(genai); i++)
		if (strcmp(prom, genai[i].prom) == 0) {
			*unit = genai[i].unit;
			snprintf(buf, len, "%s", genai[i].otel);
			return buf;
		}
	if (strncmp(prom, "tokentap_", 9) != 0)
		return NULL;
	prom += 9;
	n = strlen(prom);
	*unit = "";
	/* the unit is the metric's, not its name's (OTel's naming rules) */
	if (ends_with(prom, n, "_total"))
		n -= 6;
	if (ends_with(prom, n, "_seconds")) {
		n -= 8;
		*unit = "s";
	} else if (ends_with(prom, n, "_bytes")) {
		n -= 6;
		*unit = "By";
	}
	snprintf(buf, len, "tokentap.%.*s", (int)n, prom);
	return buf;
}

/* A label's attribute name: the GenAI ones as the conventions spell them,
 * the rest under tokentap. */
static const char *attr_name(const char *label, char *buf, size_t len)
{
	static const struct {
		const char *label, *attr;
	} map[] = {
		{ "model", "gen_ai.request.model" },
		{ "gen_ai_request_model", "gen_ai.request.model" },
		{ "gen_ai_operation_name", "gen_ai.operation.name" },
		{ "gen_ai_provider_name", "gen_ai.provider.name" },
		{ "gen_ai_token_type", "gen_ai.token.type" },
	};
	for (size_t i = 0; i < UTIL_ARRAY_LEN(map); i++)
		if (strcmp(label, map[i].label) == 0)
			return map[i].attr;
	snprintf(buf, len, "tokentap.%s", label);
	return buf;
}

/* ---- the state of delta temporality ------------------------------------------ */

#define STATE_BUCKETS 4096
#define STATE_MISSES  10        /* exports a series may miss before it goes */

struct prev {
	struct prev *next;
	uint64_t hash;
	unsigned missed;
	uint64_t last_ns;          /* the export it was last in */
	double value;              /* a sum's */
	uint64_t count;
	double sum;
	uint64_t zero;
	int32_t offset;            /* exponential buckets, dense, cumulative */
	size_t n;
	uint64_t *b;
	size_t nc;                 /* explicit buckets, cumulative */
	uint64_t *c;
};

struct otlpmetric_state {
	struct prev *table[STATE_BUCKETS];
};

struct otlpmetric_state *otlpmetric_state_new(void)
{
	return calloc(1, sizeof(struct otlpmetric_state));
}

static void prev_free(struct prev *p)
{
	free(p->b);
	free(p->c);
	free(p);
}

void otlpmetric_state_free(struct otlpmetric_state *st)
{
	if (st == NULL)
		return;
	for (size_t i = 0; i < STATE_BUCKETS; i++)
		for (struct prev *p = st->table[i], *next; p != NULL; p = next) {
			next = p->next;
			prev_free(p);
		}
	free(st);
}

/* Series not written for STATE_MISSES exports go (a label set that
 * expired); each export counts a miss that a write takes back. */
static void state_age(struct otlpmetric_state *st)
{
	for (size_t i = 0; i < STATE_BUCKETS; i++)
		for (struct prev **pp = &st->table[i]; *pp != NULL;) {
			struct prev *p = *pp;
			if (++p->missed > STATE_MISSES) {
				*pp = p->next;
				prev_free(p);
			} else {
				pp = &p->next;
			}
		}
}

/* The series' state, new (zeroed, last_ns 0) when first seen; NULL when
 * memory ran out (the point then goes out cumulative's way). */
static struct prev *state_get(struct otlpmetric_state *st, uint64_t hash)
{
	struct prev **head = &st->table[hash % STATE_BUCKETS], *p;

	for (p = *head; p != NULL; p = p->next)
		if (p->hash == hash) {
			p->missed = 0;
			return p;
		}
	if ((p = calloc(1, sizeof *p)) == NULL)
		return NULL;
	p->hash = hash;
	p->next = *head;
	*head = p;
	return p;
}

/* ---- the writer ----------------------------------------------------------------- */

#define SEEN_MAX 128

struct otlpmetric {
	struct otlpenc *e;
	struct otlpmetric_state *st;
	struct promout *o;
	int delta, explicit_b;
	uint64_t start_ns, now_ns;
	size_t rm, sm;
	/* the family being written */
	char name[128];
	const char *unit, *help;
	enum promproto_type type;
	int skip, open;
	size_t mm, dm;
	/* the OTLP names written: /metrics' two names of one family are one */
	char *seen[SEEN_MAX];
	size_t n_seen;
	long points;
	uint64_t *dense;
	size_t dense_cap;
	int oom;
};

static int was_seen(const struct otlpmetric *m, const char *name)
{
	for (size_t i = 0; i < m->n_seen; i++)
		if (strcmp(m->seen[i], name) == 0)
			return 1;
	return 0;
}

static void metric_close(struct otlpmetric *m)
{
	if (!m->open)
		return;
	if (m->type == PROMPROTO_COUNTER || m->type == PROMPROTO_HISTOGRAM)
		otlpenc_enum(m->e, 2, "aggregationTemporality",
		    m->delta ? TEMP_DELTA : TEMP_CUMULATIVE);
	if (m->type == PROMPROTO_COUNTER)
		otlpenc_bool(m->e, 3, "isMonotonic", 1);
	otlpenc_close(m->e, m->dm);
	otlpenc_close(m->e, m->mm);
	m->open = 0;
}

/* The Metric is opened at its first point: a family without any is left
 * out, as /metrics' protobuf leaves it. */
static void metric_open(struct otlpmetric *m)
{
	struct otlpenc *e = m->e;

	if (m->open)
		return;
	if (m->n_seen < SEEN_MAX && (m->seen[m->n_seen] = strdup(m->name)) != NULL)
		m->n_seen++;
	m->mm = otlpenc_open(e, 2, "metrics", 1);
	otlpenc_str(e, 1, "name", m->name, strlen(m->name));
	otlpenc_str(e, 2, "description", m->help, strlen(m->help));
	if (m->unit[0] != '\0')
		otlpenc_str(e, 3, "unit", m->unit, strlen(m->unit));
	if (m->type == PROMPROTO_GAUGE)
		m->dm = otlpenc_open(e, 5, "gauge", 0);
	else if (m->type == PROMPROTO_COUNTER)
		m->dm = otlpenc_open(e, 7, "sum", 0);
	else if (m->explicit_b)
		m->dm = otlpenc_open(e, 9, "histogram", 0);
	else
		m->dm = otlpenc_open(e, 10, "exponentialHistogram", 0);
	m->open = 1;
}

static void on_family(void *arg, const char *name, const char *help,
    enum promproto_type type)
{
	struct otlpmetric *m = arg;

	metric_close(m);
	m->help = help;
	m->type = type;
	m->skip = otlpmetric_name(name, m->name, sizeof m->name, &m->unit) == NULL ||
	    was_seen(m, m->name);
}

/* The series' identity: its metric and attributes. */
static uint64_t series_hash(const struct otlpmetric *m, const struct promout_labels *l)
{
	uint64_t h = util_fnv_str(UTIL_FNV_INIT, m->name);
	for (size_t i = 0; i < l->n; i++)
		h = util_fnv_str(util_fnv_str(h, l->names[i]), l->values[i]);
	return h;
}

static void attributes(struct otlpmetric *m, unsigned field, const struct promout_labels *l)
{
	char buf[96];
	for (size_t i = 0; i < l->n; i++)
		otlpenc_attr_str(m->e, field, attr_name(l->names[i], buf, sizeof buf),
		    l->values[i]);
}

/* The point's start: the process's (cumulative), or the export before
 * (delta; the process's for a series first seen). */
static uint64_t start_of(const struct otlpmetric *m, const struct prev *p)
{
	return m->delta && p != NULL && p->last_ns != 0 ? p->last_ns : m->start_ns;
}

static void on_sample(void *arg, const struct promout_labels *l, double v)
{
	struct otlpmetric *m = arg;
	struct prev *p = NULL;
	size_t dp;
	double out = v;

	if (m->skip)
		return;
	metric_open(m);
	if (m->delta && m->type == PROMPROTO_COUNTER &&
	    (p = state_get(m->st, series_hash(m, l))) != NULL) {
		/* a counter below its last value started again (a label set that
		 * expired and came back): all of it is new */
		out = v >= p->value ? v - p->value : v;
	}
	dp = otlpenc_open(m->e, 1, "dataPoints", 1);
	attributes(m, 7, l);
	if (m->type == PROMPROTO_COUNTER)
		otlpenc_fixed64(m->e, 2, "startTimeUnixNano", start_of(m, p));
	otlpenc_fixed64(m->e, 3, "timeUnixNano", m->now_ns);
	otlpenc_double(m->e, 4, "asDouble", out);
	otlpenc_close(m->e, dp);
	if (p != NULL) {
		p->value = v;
		p->last_ns = m->now_ns;
	}
	m->points++;
}

static uint64_t *dense_buf(struct otlpmetric *m, size_t n)
{
	uint64_t *d;

	if (n <= m->dense_cap)
		return m->dense;
	if ((d = realloc(m->dense, n * sizeof *d)) == NULL) {
		m->oom = 1;
		return NULL;
	}
	m->dense = d;
	m->dense_cap = n;
	return d;
}

/* Prometheus' native bucket i holds (2^((i-1)/64), 2^(i/64)]; OTLP's
 * exponential bucket k at scale 6 holds (2^(k/64), 2^((k+1)/64)]: the
 * same buckets, k = i - 1. The sparse buckets become a dense run from
 * the first to the last (OTLP's form); with delta, less what the last
 * export sent, bucket by bucket. */
static void exponential(struct otlpmetric *m, const struct promout_hist *h,
    struct prev *p)
{
	const struct nhist *nh = h->native;
	int32_t lo, hi;
	uint64_t *d, zero = nh->zero_count;
	size_t n, b;

	otlpenc_sint(m->e, 6, "scale", NHIST_SCHEMA);
	if (nh->n == 0) {
		otlpenc_fixed64(m->e, 7, "zeroCount", p != NULL ? zero - p->zero : zero);
		if (p != NULL)
			p->zero = zero;
		return;
	}
	lo = nh->b[0].idx - 1;
	hi = nh->b[nh->n - 1].idx - 1;
	n = (size_t)(hi - lo) + 1;
	if ((d = dense_buf(m, n)) == NULL)
		return;
	memset(d, 0, n * sizeof *d);
	for (uint32_t i = 0; i < nh->n; i++)
		d[nh->b[i].idx - 1 - lo] = nh->b[i].count;
	if (p != NULL) {
		uint64_t *keep = malloc(n * sizeof *keep);
		if (keep != NULL)
			memcpy(keep, d, n * sizeof *d);
		for (size_t k = 0; k < p->n; k++) {
			int64_t at = (int64_t)p->offset + (int64_t)k - lo;
			if (at >= 0 && (size_t)at < n && d[at] >= p->b[k])
				d[at] -= p->b[k];
		}
		free(p->b);
		p->b = keep;
		p->n = keep != NULL ? n : 0;
		p->offset = lo;
		otlpenc_fixed64(m->e, 7, "zeroCount", zero >= p->zero ? zero - p->zero : zero);
		p->zero = zero;
	} else {
		otlpenc_fixed64(m->e, 7, "zeroCount", zero);
	}
	b = otlpenc_open(m->e, 8, "positive", 0);
	otlpenc_sint(m->e, 1, "offset", lo);
	otlpenc_u64s(m->e, 2, "bucketCounts", d, n, 0);
	otlpenc_close(m->e, b);
}

/* The classic buckets (explicit bounds; counts per bucket, +Inf last);
 * with delta, less the counts the last export sent. */
static void explicit_buckets(struct otlpmetric *m, const struct promout_hist *h,
    struct prev *p)
{
	double bounds[128];
	size_t nb = h->n_bounds < 128 ? h->n_bounds : 128;
	uint64_t *d = dense_buf(m, nb + 1);

	if (d == NULL)
		return;
	for (size_t i = 0; i < nb; i++)
		bounds[i] = (double)h->bounds[i] / (double)h->div;
	memcpy(d, h->counts, (nb + 1) * sizeof *d);
	if (p != NULL) {
		uint64_t *keep = malloc((nb + 1) * sizeof *keep);
		/* bounds that changed (a reload) start the series again */
		for (size_t i = 0; p->nc == nb + 1 && i <= nb; i++)
			d[i] = d[i] >= p->c[i] ? d[i] - p->c[i] : d[i];
		if (keep != NULL)
			memcpy(keep, h->counts, (nb + 1) * sizeof *keep);
		free(p->c);
		p->c = keep;
		p->nc = keep != NULL ? nb + 1 : 0;
	}
	otlpenc_u64s(m->e, 6, "bucketCounts", d, nb + 1, 1);
	otlpenc_doubles(m->e, 7, "explicitBounds", bounds, nb);
}

static void on_histogram(void *arg, const struct promout_labels *l,
    const struct promout_hist *h)
{
	struct otlpmetric *m = arg;
	struct prev *p = NULL;
	uint64_t count = h->count;
	double sum = (double)h->sum / (double)h->div;
	size_t dp;

	if (m->skip)
		return;
	metric_open(m);
	if (m->delta && (p = state_get(m->st, series_hash(m, l))) != NULL &&
	    count >= p->count) {
		count -= p->count;
		sum -= p->sum;
	}
	dp = otlpenc_open(m->e, 1, "dataPoints", 1);
	attributes(m, m->explicit_b ? 9 : 1, l);
	otlpenc_fixed64(m->e, 2, "startTimeUnixNano", start_of(m, p));
	otlpenc_fixed64(m->e, 3, "timeUnixNano", m->now_ns);
	otlpenc_fixed64(m->e, 4, "count", count);
	otlpenc_double(m->e, 5, "sum", sum);
	if (m->explicit_b)
		explicit_buckets(m, h, p);
	else
		exponential(m, h, p);
	otlpenc_close(m->e, dp);
	if (p != NULL) {
		p->count = h->count;
		p->sum = (double)h->sum / (double)h->div;
		p->last_ns = m->now_ns;
	}
	m->points++;
}

static const struct promout_sink sink = { on_family, on_sample, on_histogram };

struct otlpmetric *otlpmetric_begin(struct otlpenc *e, struct otlpmetric_state *st,
    const struct otlp_kv *res, size_t n_res, int delta, int explicit_b,
    uint64_t start_ns, uint64_t now_ns)
{
	struct otlpmetric *m = calloc(1, sizeof *m);

	if (m == NULL)
		return NULL;
	if ((m->o = promout_new_sink(&sink, m)) == NULL) {
		free(m);
		return NULL;
	}
	m->e = e;
	m->st = st;
	m->delta = delta && st != NULL;
	m->explicit_b = explicit_b;
	m->start_ns = start_ns;
	m->now_ns = now_ns;
	m->skip = 1;
	if (m->delta)
		state_age(st);
	m->rm = otlpenc_open(e, 1, "resourceMetrics", 1);
	otlp_resource(e, 1, res, n_res);
	m->sm = otlpenc_open(e, 2, "scopeMetrics", 1);
	otlp_scope(e, 1);
	return m;
}

struct promout *otlpmetric_out(struct otlpmetric *m)
{
	return m->o;
}

long otlpmetric_end(struct otlpmetric *m)
{
	long points;
	int oom;

	metric_close(m);
	otlpenc_str(m->e, 3, "schemaUrl", OTLP_SCHEMA_URL, strlen(OTLP_SCHEMA_URL));
	otlpenc_close(m->e, m->sm);
	otlpenc_str(m->e, 3, "schemaUrl", OTLP_SCHEMA_URL, strlen(OTLP_SCHEMA_URL));
	otlpenc_close(m->e, m->rm);
	points = m->points;
	oom = m->oom;
	promout_finish(m->o);
	for (size_t i = 0; i < m->n_seen; i++)
		free(m->seen[i]);
	free(m->dense);
	free(m);
	return oom ? -1 : points;
}
