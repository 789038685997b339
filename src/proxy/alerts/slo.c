/* SPDX-License-Identifier: Apache-2.0 */
#include "slo.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "promout.h"
#include "stats.h"
#include "util.h"

#define WIN_SLICES  6          /* a /stats window: the last 6 of its sixths */
#define MAX_WINDOWS 8
#define MIN_BUCKET_US 100000ull
#define MAX_BUCKET_US 300000000ull
#define PERIOD_BUCKETS 8064     /* 5 min buckets over 28 days */
#define STATE_MAGIC "tokentap-slo-state 1"

/* ---- rings of buckets ------------------------------------------------------ */

struct count {
	uint32_t good, bad;
};

struct sums {
	uint64_t good, bad;
};

/* Bucket i holds [i * bucket_us, (i + 1) * bucket_us); the newest is head,
 * the ring holds head - n + 1 .. head, slot i % n. */
struct ring {
	uint64_t bucket_us;
	size_t n;
	uint64_t head;
	struct count *c;
};

static int ring_init(struct ring *r, uint64_t bucket_us, size_t n)
{
	r->bucket_us = bucket_us;
	r->n = n;
	r->head = 0;
	r->c = calloc(n, sizeof *r->c);
	return r->c == NULL ? -1 : 0;
}

static void ring_free(struct ring *r)
{
	free(r->c);
	r->c = NULL;
}

/* Makes idx the newest bucket, emptying those it passes. */
static void ring_advance(struct ring *r, uint64_t idx)
{
	if (idx <= r->head)
		return;
	if (idx - r->head >= r->n)
		memset(r->c, 0, r->n * sizeof *r->c);
	else
		for (uint64_t i = r->head + 1; i <= idx; i++)
			r->c[i % r->n] = (struct count){ 0, 0 };
	r->head = idx;
}

/* Adds counts at time t; 0, or -1 when t is older than the ring holds. */
static int ring_add(struct ring *r, uint64_t t_us, uint32_t good, uint32_t bad)
{
	uint64_t idx = t_us / r->bucket_us;
	struct count *c;

	ring_advance(r, idx);
	if (idx + r->n <= r->head)
		return -1;
	c = &r->c[idx % r->n];
	c->good = UINT32_MAX - c->good < good ? UINT32_MAX : c->good + good;
	c->bad = UINT32_MAX - c->bad < bad ? UINT32_MAX : c->bad + bad;
	return 0;
}

/* The counts of the last window_us at now: the bucket of now and those
 * before it, as many as the window spans. After the wall clock was
 * stepped back the head may be ahead of now: the buckets after now are
 * not in the window (summed from the head, they would blind every window
 * until the clock caught up with it). */
static struct sums ring_sum(struct ring *r, uint64_t now_us, uint64_t window_us)
{
	uint64_t now = now_us / r->bucket_us;
	uint64_t k = (window_us + r->bucket_us - 1) / r->bucket_us;
	struct sums s = { 0, 0 };

	ring_advance(r, now);
	if (k > r->n)
		k = r->n;
	for (uint64_t i = 0; i < k && i <= now; i++) {
		const struct count *c;
		if (now - i + r->n <= r->head)
			break;                  /* older than the ring holds */
		c = &r->c[(now - i) % r->n];
		s.good += c->good;
		s.bad += c->bad;
	}
	return s;
}

/* The counts of from, into the buckets of to (emptied first). */
static void ring_rebucket(struct ring *to, const struct ring *from)
{
	memset(to->c, 0, to->n * sizeof *to->c);
	to->head = from->head * from->bucket_us / to->bucket_us;
	for (size_t i = 0; i < from->n && i <= from->head; i++) {
		uint64_t idx = from->head - i;
		const struct count *c = &from->c[idx % from->n];
		if (c->good || c->bad)
			ring_add(to, idx * from->bucket_us, c->good, c->bad);
	}
}

/* ---- the set ------------------------------------------------------------- */

struct pair {
	struct conf_burn p;
	int firing;
	uint64_t since_ms, starts_at_ms;
	double long_burn, short_burn;   /* < 0: no request in the window */
	uint64_t long_n, short_n;
};

/* An SLO's two rings of counts: the budget's over the period (5 min
 * buckets over 28 days), the burn rates' over the longest pair window in
 * buckets a fifth of the shortest. */
enum { RING_BUDGET, RING_BURN, RINGS };
static const char *const ring_names[RINGS] = { "budget", "burn" };

struct slo {
	char *name, *route, *tenant, *model;   /* match: NULL is any */
	struct goodput_targets targets;
	double objective;
	uint64_t period_us;
	struct ring rings[RINGS];
	struct ring win[MAX_WINDOWS];
	uint64_t total_good, total_bad;        /* since start: the counters */
	struct pair *pairs;
	size_t n_pairs;
	int keep;
};

struct slo_set {
	struct slo **v;
	size_t n;
	size_t n_windows;
	uint64_t window_us[MAX_WINDOWS];
	uint64_t min_requests;
	int dirty;
};

struct slo_set *slo_new(void)
{
	struct slo_set *s = calloc(1, sizeof *s);
	if (s != NULL)
		s->min_requests = 1;
	return s;
}

static void slo_one_free(struct slo *o)
{
	if (o == NULL)
		return;
	free(o->name);
	free(o->route);
	free(o->tenant);
	free(o->model);
	for (int k = 0; k < RINGS; k++)
		ring_free(&o->rings[k]);
	for (size_t w = 0; w < MAX_WINDOWS; w++)
		ring_free(&o->win[w]);
	free(o->pairs);
	free(o);
}

void slo_free(struct slo_set *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		slo_one_free(s->v[i]);
	free(s->v);
	free(s);
}

size_t slo_count(const struct slo_set *s)
{
	return s->n;
}

/* Whole ms, and never so short that cover needs more than SLO_MAX_BUCKETS. */
static uint64_t bucket_fit(uint64_t b, uint64_t cover_us)
{
	if (cover_us / b + 2 > SLO_MAX_BUCKETS)
		b = cover_us / (SLO_MAX_BUCKETS - 2) + 1;
	return (b + 999) / 1000 * 1000;
}

/* The burn ring: a fifth of the shortest window (a 5m window is then
 * summed over 5 buckets, the newest one filling), 100 ms to 5 min; over
 * the longest window. */
static void burn_geometry(const struct conf *c, uint64_t *b, uint64_t *cover)
{
	uint64_t min_short = UINT64_MAX;

	*b = 60000000;
	*cover = 0;
	for (size_t i = 0; i < c->n_burn_rates; i++) {
		if (c->burn_rates[i].short_us < min_short)
			min_short = c->burn_rates[i].short_us;
		if (c->burn_rates[i].long_us > *cover)
			*cover = c->burn_rates[i].long_us;
	}
	if (min_short != UINT64_MAX)
		*b = min_short / 5;
	if (*b < MIN_BUCKET_US)
		*b = MIN_BUCKET_US;
	if (*b > MAX_BUCKET_US)
		*b = MAX_BUCKET_US;
	*b = bucket_fit(*b, *cover);
}

static int rings_init(struct slo *o, const struct conf *c)
{
	uint64_t bb, bcover, pb;

	burn_geometry(c, &bb, &bcover);
	pb = o->period_us / PERIOD_BUCKETS;
	pb = bucket_fit(pb > bb ? pb : bb, o->period_us);
	if (ring_init(&o->rings[RING_BURN], bb, (size_t)(bcover / bb + 2)) < 0 ||
	    ring_init(&o->rings[RING_BUDGET], pb, (size_t)(o->period_us / pb + 2)) < 0)
		return -1;
	return 0;
}

static char *dup_cut(const char *s, size_t max)
{
	return s == NULL ? NULL : strndup(s, max);
}

static int same_str(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

static struct slo *find(const struct slo_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i]->name, name) == 0)
			return s->v[i];
	return NULL;
}

/* A new SLO of cs, its rings empty, its pairs those of c. */
static struct slo *slo_make(const struct conf *c, const struct conf_slo *cs)
{
	struct slo *o = calloc(1, sizeof *o);
	int bad = 0;

	if (o == NULL)
		return NULL;
	o->name = strdup(cs->name);
	/* the statistics' keys are cut so; compare alike */
	o->route = dup_cut(cs->match_route, SAMPLE_ROUTE_MAX - 1);
	o->tenant = dup_cut(cs->match_tenant, SAMPLE_TENANT_MAX - 1);
	o->model = dup_cut(cs->match_model, SAMPLE_MODEL_MAX - 1);
	o->targets = cs->targets;
	o->objective = cs->objective;
	o->period_us = cs->period_us;
	bad |= o->name == NULL || (cs->match_route && !o->route) ||
	    (cs->match_tenant && !o->tenant) || (cs->match_model && !o->model);
	bad |= rings_init(o, c) < 0;
	for (size_t w = 0; w < c->n_stats_windows && w < MAX_WINDOWS; w++) {
		uint64_t slice = c->stats_windows_us[w] / WIN_SLICES;
		bad |= ring_init(&o->win[w], slice ? slice : 1, WIN_SLICES) < 0;
	}
	o->n_pairs = c->n_burn_rates;
	o->pairs = calloc(o->n_pairs ? o->n_pairs : 1, sizeof *o->pairs);
	bad |= o->pairs == NULL;
	for (size_t i = 0; !bad && i < o->n_pairs; i++) {
		o->pairs[i].p = c->burn_rates[i];
		o->pairs[i].long_burn = o->pairs[i].short_burn = -1;
	}
	if (bad) {
		slo_one_free(o);
		return NULL;
	}
	return o;
}

static void transition(const struct slo *o, const struct pair *p, int firing,
    uint64_t wall_ms, struct alert_transition *t)
{
	memset(t, 0, sizeof *t);
	t->firing = firing;
	t->metric = ALERT_BURN_RATE;
	t->severity = p->p.critical ? ALERT_CRITICAL : ALERT_WARNING;
	t->slo = o->name;
	t->value = p->long_burn;
	t->short_value = p->short_burn;
	t->threshold = p->p.rate;
	t->samples = p->long_n;
	t->short_samples = p->short_n;
	t->window_us = p->p.long_us;
	t->short_window_us = p->p.short_us;
	t->objective = o->objective;
	t->at_ms = wall_ms;
	t->starts_at_ms = p->starts_at_ms;
	t->ends_at_ms = firing ? 0 : wall_ms;
}

static const struct pair *old_pair(const struct slo *o, const struct conf_burn *b)
{
	for (size_t i = 0; o != NULL && i < o->n_pairs; i++) {
		const struct conf_burn *x = &o->pairs[i].p;
		if (x->critical == b->critical && x->long_us == b->long_us &&
		    x->short_us == b->short_us)
			return &o->pairs[i];
	}
	return NULL;
}

/* What the new SLO n takes over from the old one of its name: counts that
 * fit its rings, pair states. */
static void carry(struct slo *n, struct slo *old, const struct slo_set *s,
    const struct conf *c, int windows_same)
{
	n->total_good = old->total_good;
	n->total_bad = old->total_bad;
	for (int k = 0; k < RINGS; k++)
		ring_rebucket(&n->rings[k], &old->rings[k]);
	for (size_t w = 0; windows_same && w < s->n_windows; w++) {
		struct ring tmp = n->win[w];
		n->win[w] = old->win[w];
		old->win[w] = tmp;
	}
	for (size_t i = 0; i < n->n_pairs; i++) {
		const struct pair *p = old_pair(old, &c->burn_rates[i]);
		if (p != NULL) {
			struct conf_burn keep = n->pairs[i].p;
			n->pairs[i] = *p;
			n->pairs[i].p = keep;
		}
	}
}

int slo_configure(struct slo_set *s, const struct conf *c, uint64_t now_us,
    void (*fn)(void *arg, const struct alert_transition *t), void *arg)
{
	struct slo **nv = calloc(c->n_slos ? c->n_slos : 1, sizeof *nv);
	size_t nw = c->n_stats_windows < MAX_WINDOWS ? c->n_stats_windows : MAX_WINDOWS;
	int windows_same = nw == s->n_windows;

	for (size_t w = 0; windows_same && w < nw; w++)
		windows_same = c->stats_windows_us[w] == s->window_us[w];
	for (size_t i = 0; nv != NULL && i < c->n_slos; i++)
		if ((nv[i] = slo_make(c, &c->slos[i])) == NULL) {
			for (size_t k = 0; k < i; k++)
				slo_one_free(nv[k]);
			free(nv);
			nv = NULL;
		}
	if (nv == NULL)
		return -1;
	/* past the last failure: the old set may change */
	for (size_t i = 0; i < c->n_slos; i++) {
		struct slo *old = find(s, nv[i]->name);
		if (old != NULL)
			carry(nv[i], old, s, c, windows_same);
	}
	for (size_t i = 0; i < s->n; i++) {
		struct slo *old = s->v[i];
		struct slo *kept = NULL;
		for (size_t k = 0; k < c->n_slos && kept == NULL; k++)
			if (strcmp(nv[k]->name, old->name) == 0)
				kept = nv[k];
		for (size_t k = 0; k < old->n_pairs; k++) {
			struct alert_transition t;
			if (!old->pairs[k].firing || (kept && old_pair(kept, &old->pairs[k].p)))
				continue;
			transition(old, &old->pairs[k], 0, now_us / 1000, &t);
			if (fn != NULL)
				fn(arg, &t);
		}
		slo_one_free(old);
	}
	free(s->v);
	s->v = nv;
	s->n = c->n_slos;
	s->n_windows = nw;
	memcpy(s->window_us, c->stats_windows_us, nw * sizeof *s->window_us);
	s->min_requests = c->burn_min_requests;
	return 0;
}

/* ---- counting --------------------------------------------------------------- */

static int matches(const struct slo *o, const struct slo_request *q)
{
	return (o->route == NULL || same_str(o->route, q->route)) &&
	    (o->tenant == NULL || same_str(o->tenant, q->tenant)) &&
	    (o->model == NULL || same_str(o->model, q->model));
}

void slo_record(struct slo_set *s, const struct slo_request *q)
{
	for (size_t i = 0; i < s->n; i++) {
		struct slo *o = s->v[i];
		enum goodput_verdict v;
		int bad;
		if (!matches(o, q))
			continue;
		v = goodput_judge(&o->targets, &q->r);
		if (v == GOODPUT_UNCOUNTED)
			continue;
		bad = v == GOODPUT_BAD;
		if (ring_add(&o->rings[RING_BUDGET], q->t_us, !bad, bad) == 0)
			s->dirty = 1;
		if (ring_add(&o->rings[RING_BURN], q->t_us, !bad, bad) == 0)
			s->dirty = 1;
		for (size_t w = 0; w < s->n_windows; w++)
			ring_add(&o->win[w], q->t_us, !bad, bad);
		if (bad)
			o->total_bad++;
		else
			o->total_good++;
	}
}

void slo_each_total(const struct slo_set *s,
    void (*fn)(void *arg, const char *name, uint64_t good, uint64_t bad), void *arg)
{
	for (size_t i = 0; i < s->n; i++)
		fn(arg, s->v[i]->name, s->v[i]->total_good, s->v[i]->total_bad);
}

int slo_dirty(const struct slo_set *s)
{
	return s->dirty;
}

/* Bad over all, against the budget's share; < 0 without a request. */
static double burn(const struct slo *o, struct sums x)
{
	uint64_t n = x.good + x.bad;
	if (n == 0)
		return -1;
	return (double)x.bad / (double)n / (1.0 - o->objective);
}

void slo_evaluate(struct slo_set *s, uint64_t now_us,
    void (*fn)(void *arg, const struct alert_transition *t), void *arg)
{
	uint64_t wall_ms = now_us / 1000;

	for (size_t i = 0; i < s->n; i++) {
		struct slo *o = s->v[i];
		for (size_t k = 0; k < o->n_pairs; k++) {
			struct pair *p = &o->pairs[k];
			struct sums l = ring_sum(&o->rings[RING_BURN], now_us, p->p.long_us);
			struct sums sh = ring_sum(&o->rings[RING_BURN], now_us, p->p.short_us);
			struct alert_transition t;
			int over;

			p->long_burn = burn(o, l);
			p->short_burn = burn(o, sh);
			p->long_n = l.good + l.bad;
			p->short_n = sh.good + sh.bad;
			over = p->long_n >= s->min_requests && p->short_n >= s->min_requests &&
			    p->long_burn > p->p.rate && p->short_burn > p->p.rate;
			if (over == p->firing)
				continue;
			p->firing = over;
			p->since_ms = wall_ms;
			if (over)
				p->starts_at_ms = wall_ms;
			transition(o, p, over, wall_ms, &t);
			if (fn != NULL)
				fn(arg, &t);
		}
	}
}

/* ---- JSON and Prometheus ------------------------------------------------------ */

#define ADD(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

static void json_ratio(struct evbuffer *out, uint64_t num, uint64_t den)
{
	if (den == 0)
		ADD(out, "null");
	else
		jsonw_fixed(out, (double)num / (double)den, 6);
}

static void json_counts(struct evbuffer *out, struct sums x)
{
	evbuffer_add_printf(out, "\"eligible\":%" PRIu64 ",\"good\":%" PRIu64 ",\"bad\":%"
	    PRIu64 ",\"attainment\":", x.good + x.bad, x.good, x.bad);
	json_ratio(out, x.good, x.good + x.bad);
}

static void json_head(struct evbuffer *out, const struct slo *o)
{
	char period[32], bucket[32], burn_bucket[32];
	int first = 1;

	ADD(out, "{\"name\":");
	jsonw_str(out, o->name);
	ADD(out, ",\"match\":{\"route\":");
	jsonw_str(out, o->route);
	ADD(out, ",\"tenant\":");
	jsonw_str(out, o->tenant);
	ADD(out, ",\"model\":");
	jsonw_str(out, o->model);
	ADD(out, "},\"targets\":{");
	for (int i = 0; i < GOODPUT_TARGETS; i++) {
		if (o->targets.us[i] == 0)
			continue;
		evbuffer_add_printf(out, "%s\"%s_ms\":%.15g", first ? "" : ",",
		    goodput_target_name((enum goodput_target)i), (double)o->targets.us[i] / 1e3);
		first = 0;
	}
	util_duration_text(o->period_us, period, sizeof period);
	util_duration_text(o->rings[RING_BUDGET].bucket_us, bucket, sizeof bucket);
	util_duration_text(o->rings[RING_BURN].bucket_us, burn_bucket, sizeof burn_bucket);
	evbuffer_add_printf(out, "},\"objective\":%.15g,\"period\":\"%s\",\"bucket\":\"%s\","
	    "\"burn_bucket\":\"%s\"", o->objective, period, bucket, burn_bucket);
}

static void json_budget(struct evbuffer *out, struct slo *o, uint64_t now_us)
{
	struct sums x = ring_sum(&o->rings[RING_BUDGET], now_us, o->period_us);
	double allowed = (1.0 - o->objective) * (double)(x.good + x.bad);

	ADD(out, ",\"budget\":{");
	json_counts(out, x);
	evbuffer_add_printf(out, ",\"allowed_bad\":%.6f,\"remaining\":%.6f}", allowed,
	    allowed > 0 ? 1.0 - (double)x.bad / allowed : 1.0);
}

static void json_burn_value(struct evbuffer *out, double v)
{
	if (v < 0)
		ADD(out, "null");
	else
		jsonw_fixed(out, v, 6);
}

static void json_pairs(struct evbuffer *out, const struct slo *o)
{
	ADD(out, ",\"burn_rates\":[");
	for (size_t k = 0; k < o->n_pairs; k++) {
		const struct pair *p = &o->pairs[k];
		char lw[32], sw[32];
		util_duration_text(p->p.long_us, lw, sizeof lw);
		util_duration_text(p->p.short_us, sw, sizeof sw);
		evbuffer_add_printf(out, "%s{\"severity\":\"%s\",\"long_window\":\"%s\","
		    "\"short_window\":\"%s\",\"rate\":%.15g,\"long_burn\":", k ? "," : "",
		    p->p.critical ? "critical" : "warning", lw, sw, p->p.rate);
		json_burn_value(out, p->long_burn);
		ADD(out, ",\"short_burn\":");
		json_burn_value(out, p->short_burn);
		evbuffer_add_printf(out, ",\"long_requests\":%" PRIu64 ",\"short_requests\":%"
		    PRIu64 ",\"state\":\"%s\",\"since\":", p->long_n, p->short_n,
		    p->firing ? "firing" : "ok");
		jsonw_time(out, p->since_ms);
		ADD(out, "}");
	}
	ADD(out, "]");
}

void slo_json(struct slo_set *s, struct evbuffer *out, uint64_t now_us)
{
	ADD(out, "{\"generated_at\":");
	jsonw_time(out, now_us / 1000);
	evbuffer_add_printf(out, ",\"min_requests\":%" PRIu64 ",\"slos\":[", s->min_requests);
	for (size_t i = 0; i < s->n; i++) {
		struct slo *o = s->v[i];
		if (i > 0)
			ADD(out, ",");
		json_head(out, o);
		ADD(out, ",\"windows\":[");
		for (size_t w = 0; w < s->n_windows; w++) {
			struct sums x = ring_sum(&o->win[w], now_us, s->window_us[w]);
			char wt[32];
			util_duration_text(s->window_us[w], wt, sizeof wt);
			evbuffer_add_printf(out, "%s{\"window\":\"%s\",", w ? "," : "", wt);
			json_counts(out, x);
			ADD(out, ",\"goodput_per_s\":");
			jsonw_fixed(out, (double)x.good * 1e6 / (double)s->window_us[w], 6);
			ADD(out, "}");
		}
		ADD(out, "]");
		json_budget(out, o, now_us);
		json_pairs(out, o);
		ADD(out, "}");
	}
	ADD(out, "]}\n");
}

void slo_prometheus(const struct slo_set *s, struct promout *out)
{
	if (s->n == 0)
		return;
	promout_family(out, "tokentap_slo_requests_total", "Requests judged against "
	    "an SLO's targets: good (ok, every target met) or bad.", PROMPROTO_COUNTER);
	for (size_t i = 0; i < s->n; i++)
		for (int bad = 0; bad < 2; bad++) {
			struct promout_labels l = { .n = 0 };
			promout_label(&l, "slo", s->v[i]->name);
			promout_label(&l, "result", bad ? "bad" : "good");
			promout_sample(out, &l, (double)(bad ? s->v[i]->total_bad :
			    s->v[i]->total_good));
		}
	promout_family(out, "tokentap_slo_objective", "The share of an SLO's requests "
	    "that should be good.", PROMPROTO_GAUGE);
	for (size_t i = 0; i < s->n; i++) {
		struct promout_labels l = { .n = 0 };
		promout_label(&l, "slo", s->v[i]->name);
		promout_sample(out, &l, s->v[i]->objective);
	}
}

void slo_alert_json(void *set, struct evbuffer *out, int *first)
{
	const struct slo_set *s = set;

	for (size_t i = 0; i < s->n; i++)
		for (size_t k = 0; k < s->v[i]->n_pairs; k++) {
			const struct pair *p = &s->v[i]->pairs[k];
			struct alert_transition t;
			transition(s->v[i], p, p->firing, p->since_ms, &t);
			evbuffer_add(out, *first ? "{" : ",{", *first ? 1 : 2);
			*first = 0;
			alert_json_burn(out, &t);
			evbuffer_add_printf(out, ",\"state\":\"%s\",\"since\":",
			    p->firing ? "firing" : "ok");
			jsonw_time(out, p->since_ms);
			ADD(out, "}");
		}
}

void slo_alert_prometheus(void *set, struct promout *out)
{
	const struct slo_set *s = set;

	for (size_t i = 0; i < s->n; i++)
		for (size_t k = 0; k < s->v[i]->n_pairs; k++) {
			const struct pair *p = &s->v[i]->pairs[k];
			struct promout_labels l = { .n = 0 };
			char lw[32], sw[32];
			util_duration_text(p->p.long_us, lw, sizeof lw);
			util_duration_text(p->p.short_us, sw, sizeof sw);
			promout_label(&l, "alertname", "SLOBurnRate");
			promout_label(&l, "severity", p->p.critical ? "critical" : "warning");
			promout_label(&l, "slo", s->v[i]->name);
			promout_label(&l, "long_window", lw);
			promout_label(&l, "short_window", sw);
			promout_sample(out, &l, p->firing);
		}
}

/* ---- the state file's text ---------------------------------------------------- */

/* "tokentap-slo-state 1", then per ring of each SLO "slo NAME RING
 * BUCKET_US HEAD N" and N lines "INDEX GOOD BAD" (the buckets that hold
 * any), then "end SECTIONS". */
int slo_state_write(struct slo_set *s, FILE *f)
{
	fprintf(f, "%s\n", STATE_MAGIC);
	for (size_t j = 0; j < s->n * RINGS; j++) {
		const struct ring *r = &s->v[j / RINGS]->rings[j % RINGS];
		size_t n = 0;
		for (size_t k = 0; k < r->n && k <= r->head; k++) {
			const struct count *c = &r->c[(r->head - k) % r->n];
			n += c->good || c->bad;
		}
		fprintf(f, "slo %s %s %" PRIu64 " %" PRIu64 " %zu\n", s->v[j / RINGS]->name,
		    ring_names[j % RINGS], r->bucket_us, r->head, n);
		for (size_t k = r->n; k-- > 0;) {
			const struct count *c;
			if (k > r->head)
				continue;
			c = &r->c[(r->head - k) % r->n];
			if (c->good || c->bad)
				fprintf(f, "%" PRIu64 " %" PRIu32 " %" PRIu32 "\n", r->head - k,
				    c->good, c->bad);
		}
	}
	fprintf(f, "end %zu\n", s->n * RINGS);
	if (ferror(f))
		return -1;
	s->dirty = 0;
	return 0;
}

/* A reader of the text, line by line, that knows where it is. */
struct lines {
	const char *p, *end;
	size_t no;
	char line[256];
};

/* The next line into l->line; 0, or -1 at the end or for a line too long. */
static int next_line(struct lines *l)
{
	const char *nl;
	size_t n;

	if (l->p >= l->end)
		return -1;
	nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
	if (nl == NULL)
		return -1;               /* the last line ends with a newline */
	n = (size_t)(nl - l->p);
	l->no++;
	if (n >= sizeof l->line)
		return -1;
	memcpy(l->line, l->p, n);
	l->line[n] = '\0';
	l->p = nl + 1;
	return 0;
}

static int fail(char *why, size_t len, const struct lines *l, const char *what)
{
	snprintf(why, len, "line %zu: %s", l->no, what);
	return -1;
}

struct entry {
	uint64_t idx;
	uint32_t good, bad;
};

/* The fields of a line: single spaces between, none after the last. */
static int field_end(const char **p, const char *s)
{
	if (*s == ' ' && s[1] != '\0' && s[1] != ' ')
		s++;
	else if (*s != '\0')
		return -1;
	*p = s;
	return 0;
}

/* A word of at most len - 1 bytes. */
static int field_word(const char **p, char *out, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	while (s[n] != '\0' && s[n] != ' ')
		n++;
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, s, n);
	out[n] = '\0';
	return field_end(p, s + n);
}

/* A number: digits only, at most max. (sscanf's %lu took "-1" for
 * 2^64 - 1 and wrapped what overflowed: a head of -1 froze a budget.) */
static int field_u64(const char **p, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (d > max || x > (max - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*v = x;
	return field_end(p, s);
}

/* One SLO's section: its name, bucket length, newest bucket and entries
 * (*ev, made here), or -1 with why. */
static int read_slo(struct lines *l, char name[64], int *ring, uint64_t *b,
    uint64_t *head, struct entry **ev, size_t *n, char *why, size_t wl)
{
	const char *p = l->line;
	char word[4], kind[16];
	uint64_t count;

	*ev = NULL;
	if (field_word(&p, word, sizeof word) < 0 || strcmp(word, "slo") != 0 ||
	    field_word(&p, name, 64) < 0 || field_word(&p, kind, sizeof kind) < 0 ||
	    field_u64(&p, UINT64_MAX, b) < 0 || field_u64(&p, UINT64_MAX, head) < 0 ||
	    field_u64(&p, SLO_MAX_BUCKETS, &count) < 0 || *p != '\0' || *b == 0)
		return fail(why, wl, l, "expected 'slo NAME RING BUCKET_US HEAD COUNT'");
	*n = (size_t)count;
	for (*ring = 0; *ring < RINGS && strcmp(kind, ring_names[*ring]) != 0; (*ring)++)
		;
	if (*ring == RINGS)
		return fail(why, wl, l, "the ring is budget or burn");
	if ((*ev = calloc(*n ? *n : 1, sizeof **ev)) == NULL)
		return fail(why, wl, l, "out of memory");
	for (size_t i = 0; i < *n; i++) {
		struct entry *e = &(*ev)[i];
		uint64_t good, bad;
		int bad_line = next_line(l) < 0;
		p = l->line;
		if (bad_line || field_u64(&p, *head, &e->idx) < 0 ||
		    field_u64(&p, UINT32_MAX, &good) < 0 || field_u64(&p, UINT32_MAX, &bad) < 0 ||
		    *p != '\0' || (i > 0 && e->idx <= (*ev)[i - 1].idx)) {
			free(*ev);
			*ev = NULL;
			return fail(why, wl, l, "expected 'INDEX GOOD BAD', ascending, at most HEAD");
		}
		e->good = (uint32_t)good;
		e->bad = (uint32_t)bad;
	}
	return 0;
}

/* How far ahead, for people. */
static void ahead_text(double us, char *out, size_t len)
{
	if (us >= 2 * 86400e6)
		snprintf(out, len, "%.0f days", us / 86400e6);
	else if (us >= 2 * 3600e6)
		snprintf(out, len, "%.1f hours", us / 3600e6);
	else if (us >= 120e6)
		snprintf(out, len, "%.0f minutes", us / 60e6);
	else
		snprintf(out, len, "%.0f s", us / 1e6);
}

/* A section written on a clock ahead of this one (another host's, or this
 * one's before it was stepped back), or impossible: its newest bucket
 * begins more than SLO_STATE_AHEAD_US after now. Said; take_section drops
 * the buckets past that. */
static void say_ahead(const struct lines *l, const char *name, int ring, uint64_t b,
    uint64_t head, const struct entry *ev, size_t n, const struct slo_state_clock *clk)
{
	uint64_t limit = (clk->now_us + SLO_STATE_AHEAD_US) / b, requests = 0;
	size_t dropped = 0;
	char msg[400], ahead[32];

	for (size_t k = 0; k < n; k++)
		if (ev[k].idx > limit) {
			dropped++;
			requests += (uint64_t)ev[k].good + ev[k].bad;
		}
	ahead_text((double)head * (double)b - (double)clk->now_us, ahead, sizeof ahead);
	snprintf(msg, sizeof msg, "line %zu: slo %s %s: its newest bucket begins %s after "
	    "this clock's now (the file was written on a clock ahead of this one, or this "
	    "clock was stepped back); its %zu bucket(s) after now (%" PRIu64 " request(s)) "
	    "dropped, the %zu older kept", l->no - n, name, ring_names[ring], ahead, dropped,
	    requests, n - dropped);
	if (clk->note != NULL)
		clk->note(clk->arg, msg);
}

static void rings_free(struct ring *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ring_free(&v[i]);
	free(v);
}

/* The counts of one section into nr (RINGS per SLO), the ring of the SLO
 * of its name (none: skipped). 0 or -1. */
static int take_section(struct slo_set *s, struct ring *nr, struct lines *l,
    const struct slo_state_clock *clk, char *why, size_t wl)
{
	char name[64];
	uint64_t b, head;
	struct entry *ev;
	size_t n, i;
	int ring;

	if (read_slo(l, name, &ring, &b, &head, &ev, &n, why, wl) < 0)
		return -1;
	for (i = 0; i < s->n && strcmp(s->v[i]->name, name) != 0; i++)
		;
	i = i * RINGS + (size_t)ring;
	if (i < s->n * RINGS && nr[i].c != NULL) {
		free(ev);
		return fail(why, wl, l, "a ring given twice");
	}
	if (i < s->n * RINGS) {
		const struct ring *cur = &s->v[i / RINGS]->rings[ring];
		if (ring_init(&nr[i], cur->bucket_us, cur->n) < 0) {
			free(ev);
			return fail(why, wl, l, "out of memory");
		}
		/* The ring's head is never left ahead of now: new requests would
		 * land behind it, unseen by windows summed at now, and dropped
		 * once it was a ring's length ahead (a head years on froze the
		 * budget for good). Buckets up to SLO_STATE_AHEAD_US ahead are
		 * counted as now's; those past it are dropped, said. */
		uint64_t now_b = clk->now_us / b, limit = (clk->now_us + SLO_STATE_AHEAD_US) / b;
		if (head > limit)
			say_ahead(l, name, ring, b, head, ev, n, clk);
		nr[i].head = (head < now_b ? head : now_b) * b / cur->bucket_us;
		for (size_t k = 0; k < n && ev[k].idx <= limit; k++)
			ring_add(&nr[i], (ev[k].idx < now_b ? ev[k].idx : now_b) * b, ev[k].good,
			    ev[k].bad);
	}
	free(ev);
	return 0;
}

int slo_state_read(struct slo_set *s, const char *text, size_t len,
    const struct slo_state_clock *clk, char *why, size_t why_len)
{
	struct lines l = { text, text + len, 0, "" };
	size_t nn = s->n * RINGS;
	struct ring *nr = calloc(nn ? nn : 1, sizeof *nr);
	size_t sections = 0;
	uint64_t end_n;
	const char *p;
	char word[4];

	if (nr == NULL) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	if (next_line(&l) < 0 || strcmp(l.line, STATE_MAGIC) != 0) {
		rings_free(nr, nn);
		return fail(why, why_len, &l, "not a tokentap SLO state file");
	}
	for (;;) {
		if (next_line(&l) < 0) {
			rings_free(nr, nn);
			return fail(why, why_len, &l, "cut short (no 'end' line)");
		}
		if (strncmp(l.line, "end ", 4) == 0)
			break;
		if (take_section(s, nr, &l, clk, why, why_len) < 0) {
			rings_free(nr, nn);
			return -1;
		}
		sections++;
	}
	p = l.line;
	if (field_word(&p, word, sizeof word) < 0 || field_u64(&p, UINT64_MAX, &end_n) < 0 ||
	    *p != '\0' || end_n != sections || l.p != l.end) {
		rings_free(nr, nn);
		return fail(why, why_len, &l, "the 'end' line does not close the file");
	}
	for (size_t i = 0; i < nn; i++)
		if (nr[i].c != NULL) {
			ring_free(&s->v[i / RINGS]->rings[i % RINGS]);
			s->v[i / RINGS]->rings[i % RINGS] = nr[i];
			nr[i].c = NULL;
		}
	rings_free(nr, nn);
	return 0;
}
