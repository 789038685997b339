/* SPDX-License-Identifier: Apache-2.0 */
#include "alert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "promout.h"
#include "util.h"

#define RULES_PER_SUBJECT (ALERT_METRIC_COUNT * ALERT_SEVERITY_COUNT)
#define BUCKETS 1024

struct rule {
	int configured;
	double threshold;          /* µs, or a fraction for the error rate */
	enum alert_state state;
	uint64_t pending_since_us;
	uint64_t since_ms;         /* wall clock: when it entered its state */
	uint64_t starts_at_ms;     /* when it fired */
	double value;              /* the last one seen, raw unit; < 0: none */
	uint64_t samples;
};

/* One route, or one (route, tenant): its six rules. */
struct subject {
	struct subject *hnext;
	char *route;
	char *tenant;              /* NULL: every tenant of the route */
	int seen;                  /* given figures in this evaluation */
	int keep;                  /* used while reconfiguring */
	struct rule rules[RULES_PER_SUBJECT];
};

struct ring_entry {
	struct alert_transition t;
	char route[128];
	char tenant[128];
	char slo[64];
};

struct alert_set {
	void (*on_transition)(void *arg, const struct alert_transition *t);
	void *arg;

	struct subject **v;        /* in the order /alerts lists them */
	size_t n, cap;
	struct subject *table[BUCKETS];

	uint64_t window_us;
	uint64_t for_us;
	uint64_t min_samples;
	double quantile;
	double hysteresis;
	int per_tenant;

	uint64_t now_us;
	uint64_t wall_ms;

	struct ring_entry ring[ALERT_TRANSITIONS_MAX];
	size_t ring_next;          /* the slot the next transition takes */
	size_t ring_n;

	/* rules kept elsewhere (alert_set_outside) */
	void (*outside_json)(void *arg, struct evbuffer *out, int *first);
	void (*outside_prom)(void *arg, struct promout *out);
	void *outside_arg;
};

static const char *const names[ALERT_METRIC_COUNT] = {
	"TTFTHigh", "TPOTHigh", "ErrorRateHigh", "TTFOHigh", "StreamStalled", "PoolUnhealthy",
	"TTFTUncertain"
};
static const char *const metric_names[ALERT_METRIC_COUNT] = {
	"ttft", "tpot", "error_rate", "ttfo", "stalled", "healthy", "ttft_uncertain_share"
};
static const char *const severity_names[ALERT_SEVERITY_COUNT] = {
	"warning", "critical"
};
static const char *const state_names[] = { "ok", "pending", "firing" };

int alert_metric_is_time(enum alert_metric m)
{
	return m != ALERT_ERROR_RATE && m != ALERT_STALLED && m != ALERT_HEALTHY &&
	    m != ALERT_UNCERTAIN;
}

void alert_json_value(struct evbuffer *out, double v, enum alert_metric m)
{
	double scale = m == ALERT_ERROR_RATE || m == ALERT_BURN_RATE ||
	    m == ALERT_UNCERTAIN ? 1e6 : 1e3;
	if (v < 0 || !isfinite(v)) {
		evbuffer_add(out, "null", 4);
		return;
	}
	evbuffer_add_printf(out, "%.15g", round(v * scale) / scale);
}

const char *alert_name(enum alert_metric m)
{
	return m == ALERT_BURN_RATE ? "SLOBurnRate" : names[m];
}

const char *alert_metric_name(enum alert_metric m)
{
	return m == ALERT_BURN_RATE ? "burn_rate" : metric_names[m];
}

const char *alert_severity_name(enum alert_severity s)
{
	return severity_names[s];
}

static enum alert_metric rule_metric(size_t i)
{
	return (enum alert_metric)(i / ALERT_SEVERITY_COUNT);
}

static enum alert_severity rule_severity(size_t i)
{
	return (enum alert_severity)(i % ALERT_SEVERITY_COUNT);
}

/* Raw values (µs, fractions, counts) to what people read (ms, fractions,
 * counts). */
static double shown(enum alert_metric m, double raw)
{
	if (raw < 0)
		return -1;
	return alert_metric_is_time(m) ? raw / 1000.0 : raw;
}

/* ---- subjects ----------------------------------------------------------- */

static size_t bucket_of(const char *route, const char *tenant)
{
	return (size_t)(util_fnv_str(util_fnv_str(UTIL_FNV_INIT, route), tenant) % BUCKETS);
}

static int same_tenant(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static struct subject *find(const struct alert_set *s, const char *route,
    const char *tenant)
{
	struct subject *x = s->table[bucket_of(route, tenant)];
	for (; x != NULL; x = x->hnext)
		if (strcmp(x->route, route) == 0 && same_tenant(x->tenant, tenant))
			return x;
	return NULL;
}

static void subject_free(struct subject *x)
{
	if (x == NULL)
		return;
	free(x->route);
	free(x->tenant);
	free(x);
}

static struct subject *subject_new(const char *route, const char *tenant,
    uint64_t wall_ms)
{
	struct subject *x = calloc(1, sizeof *x);
	if (x == NULL)
		return NULL;
	x->route = strdup(route);
	x->tenant = tenant ? strdup(tenant) : NULL;
	if (x->route == NULL || (tenant != NULL && x->tenant == NULL)) {
		subject_free(x);
		return NULL;
	}
	for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
		x->rules[i].value = -1;
		x->rules[i].since_ms = wall_ms;
	}
	return x;
}

/* Appends x to the list v. Returns 0 or -1. */
static int list_add(struct subject ***v, size_t *n, size_t *cap, struct subject *x)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct subject **nv = realloc(*v, nc * sizeof *nv);
		if (nv == NULL)
			return -1;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static void table_add(struct alert_set *s, struct subject *x)
{
	size_t b = bucket_of(x->route, x->tenant);
	x->hnext = s->table[b];
	s->table[b] = x;
}

static void rehash(struct alert_set *s)
{
	memset(s->table, 0, sizeof s->table);
	for (size_t i = 0; i < s->n; i++)
		table_add(s, s->v[i]);
}

/* The thresholds of t, raw, by rule index; configured where set. */
static void set_thresholds(struct subject *x, const struct conf_thresholds *t,
    uint64_t wall_ms)
{
	/* StreamStalled: a warning while stall detection is on, per route */
	const double thr[RULES_PER_SUBJECT] = {
		(double)t->ttft_warning_us, (double)t->ttft_critical_us,
		(double)t->tpot_warning_us, (double)t->tpot_critical_us,
		t->error_rate_warning, t->error_rate_critical,
		(double)t->ttfo_warning_us, (double)t->ttfo_critical_us,
		t->stall_us && x->tenant == NULL ? (double)t->min_stalled : 0, 0,
		0, (double)t->min_healthy,     /* a pool below min_healthy: critical */
		t->ttft_uncertain_warning, 0   /* a route's worker behind: a warning */
	};
	for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
		struct rule *r = &x->rules[i];
		int on = rule_metric(i) == ALERT_ERROR_RATE ? thr[i] >= 0 :
		    rule_metric(i) == ALERT_HEALTHY || rule_metric(i) == ALERT_UNCERTAIN ?
		    thr[i] > 0 && x->tenant == NULL : thr[i] > 0;
		if (on && !r->configured) {
			r->state = ALERT_OK;
			r->since_ms = wall_ms;
		}
		r->configured = on;
		r->threshold = thr[i];
	}
}

/* ---- transitions -------------------------------------------------------- */

/* Takes the ring's next slot for a transition. */
static struct ring_entry *ring_take(struct alert_set *s)
{
	struct ring_entry *e = &s->ring[s->ring_next];
	s->ring_next = (s->ring_next + 1) % ALERT_TRANSITIONS_MAX;
	if (s->ring_n < ALERT_TRANSITIONS_MAX)
		s->ring_n++;
	return e;
}

void alert_report_outside(struct alert_set *s, const struct alert_transition *t)
{
	struct ring_entry *e = ring_take(s);

	e->t = *t;
	e->t.route = e->t.tenant = e->t.slo = NULL;
	if (t->route != NULL) {
		snprintf(e->route, sizeof e->route, "%s", t->route);
		e->t.route = e->route;
	}
	if (t->tenant != NULL) {
		snprintf(e->tenant, sizeof e->tenant, "%s", t->tenant);
		e->t.tenant = e->tenant;
	}
	if (t->slo != NULL) {
		snprintf(e->slo, sizeof e->slo, "%s", t->slo);
		e->t.slo = e->slo;
	}
	if (s->on_transition != NULL)
		s->on_transition(s->arg, &e->t);
}

void alert_set_outside(struct alert_set *s,
    void (*json)(void *arg, struct evbuffer *out, int *first),
    void (*prom)(void *arg, struct promout *out), void *arg)
{
	s->outside_json = json;
	s->outside_prom = prom;
	s->outside_arg = arg;
}

static void report(struct alert_set *s, const struct subject *x, size_t i,
    int firing)
{
	const struct rule *r = &x->rules[i];
	struct ring_entry *e = ring_take(s);
	struct alert_transition *t = &e->t;

	memset(t, 0, sizeof *t);
	t->firing = firing;
	t->metric = rule_metric(i);
	t->severity = rule_severity(i);
	snprintf(e->route, sizeof e->route, "%s", x->route);
	t->route = e->route;
	if (x->tenant != NULL) {
		snprintf(e->tenant, sizeof e->tenant, "%s", x->tenant);
		t->tenant = e->tenant;
	}
	t->value = shown(t->metric, r->value);
	t->threshold = shown(t->metric, r->threshold);
	t->samples = r->samples;
	t->quantile = s->quantile;
	t->window_us = s->window_us;
	t->at_ms = s->wall_ms;
	t->starts_at_ms = r->starts_at_ms;
	t->ends_at_ms = firing ? 0 : s->wall_ms;
	if (s->on_transition != NULL)
		s->on_transition(s->arg, t);
}

static void fire(struct alert_set *s, struct subject *x, size_t i)
{
	struct rule *r = &x->rules[i];
	r->state = ALERT_FIRING;
	r->since_ms = s->wall_ms;
	r->starts_at_ms = s->wall_ms;
	report(s, x, i, 1);
}

static void resolve(struct alert_set *s, struct subject *x, size_t i)
{
	struct rule *r = &x->rules[i];
	r->state = ALERT_OK;
	r->since_ms = s->wall_ms;
	report(s, x, i, 0);
}

/* The state machine of one rule for this evaluation's value: over its
 * threshold, or clear of it (below the hysteresis band, or no sample). */
static void step(struct alert_set *s, struct subject *x, size_t i, double value,
    uint64_t samples, int over, int clear)
{
	struct rule *r = &x->rules[i];

	/* a count of replicas: under its threshold is bad, no sample size
	 * applies, and reaching it again resolves (no hysteresis to a count) */
	if (rule_metric(i) == ALERT_HEALTHY) {
		over = value >= 0 && value < r->threshold;
		clear = !over;
		if (r->state == ALERT_FIRING && !over) {
			r->value = value;
			resolve(s, x, i);
			return;
		}
	}
	r->value = value;
	r->samples = samples;
	switch (r->state) {
	case ALERT_OK:
		if (!over)
			break;
		r->state = ALERT_PENDING;
		r->pending_since_us = s->now_us;
		r->since_ms = s->wall_ms;
		/* with for: 0 it fires in this same evaluation */
		/* fall through */
	case ALERT_PENDING:
		if (!over) {
			r->state = ALERT_OK;
			r->since_ms = s->wall_ms;
		} else if (s->now_us - r->pending_since_us >= s->for_us) {
			fire(s, x, i);
		}
		break;
	case ALERT_FIRING:
		if (clear)
			resolve(s, x, i);
		break;
	}
}

/* A quantile or rate rule: over with min_samples samples, clear below
 * threshold * (1 - hysteresis) or on an empty window. */
static void step_window(struct alert_set *s, struct subject *x, size_t i,
    double value, uint64_t samples)
{
	double thr = x->rules[i].threshold;

	step(s, x, i, value, samples,
	    value >= 0 && samples >= s->min_samples && value > thr,
	    samples == 0 || (value >= 0 && value < thr * (1.0 - s->hysteresis)));
}

static void evaluate(struct alert_set *s, struct subject *x,
    const struct alert_figures *f)
{
	for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
		double v;
		uint64_t n;
		if (!x->rules[i].configured)
			continue;
		switch (rule_metric(i)) {
		case ALERT_TTFT:
			n = f->ttft_count;
			v = n ? f->ttft_us : -1;
			break;
		case ALERT_TPOT:
			n = f->tpot_count;
			v = n ? f->tpot_us : -1;
			break;
		case ALERT_TTFO:
			n = f->ttfo_count;
			v = n ? f->ttfo_us : -1;
			break;
		case ALERT_STALLED:
			continue;     /* alert_observe_stalled's */
		case ALERT_HEALTHY:
			n = 1;
			v = f->healthy;
			break;
		case ALERT_UNCERTAIN:
			n = f->ttft_stamped;
			v = n ? (double)f->ttft_uncertain / (double)n : -1;
			break;
		default:
			n = f->requests;
			v = n ? (double)f->errors / (double)n : -1;
			break;
		}
		step_window(s, x, i, v < 0 ? -1 : v, n);
	}
	x->seen = 1;
}

/* ---- the set ------------------------------------------------------------ */

struct alert_set *alert_new(void (*on_transition)(void *arg,
    const struct alert_transition *t), void *arg)
{
	struct alert_set *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	s->on_transition = on_transition;
	s->arg = arg;
	s->quantile = 0.95;
	s->min_samples = 1;
	return s;
}

void alert_free(struct alert_set *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		subject_free(s->v[i]);
	free(s->v);
	free(s);
}

static const struct conf_thresholds *route_thresholds(const struct conf *c,
    const char *route)
{
	for (size_t i = 0; i < c->n_routes; i++)
		if (strcmp(c->routes[i].name, route) == 0)
			return &c->routes[i].thresholds;
	return NULL;
}

/* Takes the subject of (route, tenant) out of the old table for reuse, or
 * makes a new one. */
static struct subject *carry_over(struct alert_set *s, const char *route,
    const char *tenant)
{
	struct subject *x = find(s, route, tenant);
	if (x != NULL) {
		x->keep = 1;
		return x;
	}
	return subject_new(route, tenant, s->wall_ms);
}

/* Reports the firing rules of x that the new config no longer has. */
static void resolve_dropped(struct alert_set *s, struct subject *x,
    const struct conf_thresholds *t)
{
	struct subject probe;
	memset(&probe, 0, sizeof probe);
	if (t != NULL)
		set_thresholds(&probe, t, s->wall_ms);
	for (size_t i = 0; i < RULES_PER_SUBJECT; i++)
		if (x->rules[i].configured && x->rules[i].state == ALERT_FIRING &&
		    !probe.rules[i].configured)
			resolve(s, x, i);
}

int alert_configure(struct alert_set *s, const struct conf *c, uint64_t now_us,
    uint64_t wall_ms)
{
	struct subject **nv = NULL;
	size_t nn = 0, ncap = 0;

	s->now_us = now_us;
	s->wall_ms = wall_ms;
	for (size_t i = 0; i < s->n; i++)
		s->v[i]->keep = 0;
	for (size_t i = 0; i < c->n_routes; i++) {
		struct subject *x = carry_over(s, c->routes[i].name, NULL);
		if (x == NULL || list_add(&nv, &nn, &ncap, x) < 0) {
			if (x != NULL && !x->keep)
				subject_free(x);
			goto fail;
		}
	}
	for (size_t i = 0; c->alerts_per_tenant && i < s->n; i++) {
		struct subject *x = s->v[i];
		if (x->tenant != NULL && route_thresholds(c, x->route) != NULL) {
			x->keep = 1;
			if (list_add(&nv, &nn, &ncap, x) < 0)
				goto fail;
		}
	}
	/* Past the last failure point: now the old set may change. */
	for (size_t i = 0; i < s->n; i++) {
		struct subject *x = s->v[i];
		resolve_dropped(s, x, x->keep ? route_thresholds(c, x->route) : NULL);
		if (!x->keep)
			subject_free(x);
	}
	for (size_t i = 0; i < nn; i++)
		set_thresholds(nv[i], route_thresholds(c, nv[i]->route), wall_ms);
	free(s->v);
	s->v = nv;
	s->n = nn;
	s->cap = ncap;
	rehash(s);
	s->window_us = c->alerts_window_us;   /* the statistics keep it */
	s->for_us = c->alerts_for_us;
	s->min_samples = c->alerts_min_samples;
	s->quantile = c->alerts_quantile;
	s->hysteresis = c->alerts_hysteresis;
	s->per_tenant = c->alerts_per_tenant;
	return 0;
fail:
	for (size_t i = 0; i < nn; i++)
		if (!nv[i]->keep)
			subject_free(nv[i]);
	free(nv);
	return -1;
}

void alert_begin(struct alert_set *s, uint64_t now_us, uint64_t wall_ms)
{
	s->now_us = now_us;
	s->wall_ms = wall_ms;
	for (size_t i = 0; i < s->n; i++)
		s->v[i]->seen = 0;
}

static int empty(const struct alert_figures *f)
{
	return f->requests == 0 && f->ttft_count == 0 && f->tpot_count == 0;
}

int alert_observe(struct alert_set *s, const char *route, const char *tenant,
    const struct alert_figures *f)
{
	struct subject *x = find(s, route, tenant);
	struct subject *parent;

	if (x == NULL && tenant != NULL && s->per_tenant &&
	    (parent = find(s, route, NULL)) != NULL) {
		/* a quiet tenant's rules would only say "ok" */
		if (empty(f))
			return 0;
		x = subject_new(route, tenant, s->wall_ms);
		if (x == NULL)
			return -1;
		for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
			/* a stall count and a pool are the route's, not a tenant's */
			x->rules[i].configured = parent->rules[i].configured &&
			    rule_metric(i) != ALERT_STALLED && rule_metric(i) != ALERT_HEALTHY &&
			    rule_metric(i) != ALERT_UNCERTAIN;
			x->rules[i].threshold = parent->rules[i].threshold;
		}
		if (list_add(&s->v, &s->n, &s->cap, x) < 0) {
			subject_free(x);
			return -1;
		}
		table_add(s, x);
	}
	if (x == NULL)
		return -1;
	evaluate(s, x, f);
	return 0;
}

int alert_observe_stalled(struct alert_set *s, const char *route,
    uint64_t stalled, uint64_t now_us, uint64_t wall_ms)
{
	struct subject *x = find(s, route, NULL);
	size_t i = ALERT_STALLED * ALERT_SEVERITY_COUNT + ALERT_WARNING;

	if (x == NULL)
		return -1;
	if (!x->rules[i].configured)
		return 0;
	s->now_us = now_us;
	s->wall_ms = wall_ms;
	step(s, x, i, (double)stalled, stalled,
	    (double)stalled >= x->rules[i].threshold, stalled == 0);
	return 0;
}

static int idle(const struct subject *x)
{
	for (size_t i = 0; i < RULES_PER_SUBJECT; i++)
		if (x->rules[i].state != ALERT_OK || x->rules[i].samples != 0)
			return 0;
	return 1;
}

void alert_end(struct alert_set *s)
{
	static const struct alert_figures none = {
		.ttft_us = -1, .tpot_us = -1, .ttfo_us = -1, .healthy = -1
	};
	size_t kept = 0;

	for (size_t i = 0; i < s->n; i++)
		if (!s->v[i]->seen)
			evaluate(s, s->v[i], &none);
	/* A tenant that went quiet costs nothing until it comes back. */
	for (size_t i = 0; i < s->n; i++) {
		struct subject *x = s->v[i];
		if (x->tenant != NULL && idle(x))
			subject_free(x);
		else
			s->v[kept++] = x;
	}
	if (kept != s->n) {
		s->n = kept;
		rehash(s);
	}
}

/* ---- output ------------------------------------------------------------- */

static void json_labels(struct evbuffer *out, enum alert_metric m,
    enum alert_severity sev, const char *route, const char *tenant)
{
	evbuffer_add_printf(out, "\"alertname\":\"%s\",\"severity\":\"%s\",\"route\":",
	    alert_name(m), severity_names[sev]);
	jsonw_str(out, route);
	evbuffer_add(out, ",\"tenant\":", 10);
	jsonw_str(out, tenant);
	evbuffer_add_printf(out, ",\"metric\":\"%s\"", alert_metric_name(m));
}

static void json_rule(struct evbuffer *out, const struct subject *x, size_t i)
{
	const struct rule *r = &x->rules[i];
	enum alert_metric m = rule_metric(i);

	evbuffer_add(out, "{", 1);
	json_labels(out, m, rule_severity(i), x->route, x->tenant);
	evbuffer_add_printf(out, ",\"state\":\"%s\",\"value\":", state_names[r->state]);
	alert_json_value(out, shown(m, r->value), m);
	evbuffer_add(out, ",\"threshold\":", 13);
	alert_json_value(out, shown(m, r->threshold), m);
	evbuffer_add_printf(out, ",\"samples\":%llu,\"since\":",
	    (unsigned long long)r->samples);
	jsonw_time(out, r->since_ms);
	evbuffer_add(out, "}", 1);
}

void alert_json_burn(struct evbuffer *out, const struct alert_transition *t)
{
	char lw[32], sw[32];

	util_duration_text(t->window_us, lw, sizeof lw);
	util_duration_text(t->short_window_us, sw, sizeof sw);
	json_labels(out, ALERT_BURN_RATE, t->severity, t->route, t->tenant);
	evbuffer_add(out, ",\"slo\":", 7);
	jsonw_str(out, t->slo);
	evbuffer_add_printf(out, ",\"long_window\":\"%s\",\"short_window\":\"%s\",\"value\":",
	    lw, sw);
	alert_json_value(out, t->value, ALERT_BURN_RATE);
	evbuffer_add(out, ",\"short_value\":", 15);
	alert_json_value(out, t->short_value, ALERT_BURN_RATE);
	evbuffer_add(out, ",\"threshold\":", 13);
	alert_json_value(out, t->threshold, ALERT_BURN_RATE);
	evbuffer_add(out, ",\"objective\":", 13);
	alert_json_value(out, t->objective, ALERT_BURN_RATE);
	evbuffer_add_printf(out, ",\"samples\":%llu,\"short_samples\":%llu",
	    (unsigned long long)t->samples, (unsigned long long)t->short_samples);
}

static void json_transition(struct evbuffer *out, const struct alert_transition *t)
{
	evbuffer_add(out, "{\"at\":", 6);
	jsonw_time(out, t->at_ms);
	evbuffer_add_printf(out, ",\"status\":\"%s\",", t->firing ? "firing" : "resolved");
	if (t->metric == ALERT_BURN_RATE) {
		alert_json_burn(out, t);
		evbuffer_add(out, "}", 1);
		return;
	}
	json_labels(out, t->metric, t->severity, t->route, t->tenant);
	evbuffer_add(out, ",\"value\":", 9);
	alert_json_value(out, t->value, t->metric);
	evbuffer_add(out, ",\"threshold\":", 13);
	alert_json_value(out, t->threshold, t->metric);
	evbuffer_add_printf(out, ",\"samples\":%llu}", (unsigned long long)t->samples);
}

void alert_json(const struct alert_set *s, struct evbuffer *out)
{
	int first = 1;

	evbuffer_add(out, "{\"rules\":[", 10);
	for (size_t k = 0; k < s->n; k++)
		for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
			if (!s->v[k]->rules[i].configured)
				continue;
			if (!first)
				evbuffer_add(out, ",", 1);
			first = 0;
			json_rule(out, s->v[k], i);
		}
	if (s->outside_json != NULL)
		s->outside_json(s->outside_arg, out, &first);
	evbuffer_add(out, "],\"transitions\":[", 17);
	for (size_t j = 0; j < s->ring_n; j++) {
		size_t at = (s->ring_next + ALERT_TRANSITIONS_MAX - 1 - j) %
		    ALERT_TRANSITIONS_MAX;
		if (j > 0)
			evbuffer_add(out, ",", 1);
		json_transition(out, &s->ring[at].t);
	}
	evbuffer_add(out, "]}\n", 3);
}

void alert_prometheus(const struct alert_set *s, struct promout *out)
{
	promout_family(out, "tokentap_alert_firing", "1 while the alert fires, per rule.",
	    PROMPROTO_GAUGE);
	for (size_t k = 0; k < s->n; k++) {
		const struct subject *x = s->v[k];
		for (size_t i = 0; i < RULES_PER_SUBJECT; i++) {
			struct promout_labels l = { .n = 0 };
			if (!x->rules[i].configured)
				continue;
			promout_label(&l, "alertname", names[rule_metric(i)]);
			promout_label(&l, "severity", severity_names[rule_severity(i)]);
			promout_label(&l, "route", x->route);
			if (x->tenant != NULL)
				promout_label(&l, "tenant", x->tenant);
			promout_sample(out, &l, x->rules[i].state == ALERT_FIRING);
		}
	}
	if (s->outside_prom != NULL)
		s->outside_prom(s->outside_arg, out);
}
