/* SPDX-License-Identifier: Apache-2.0 */
#include "load_read.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "load_jsonl.h"
#include "load_prefix.h"
#include "load_shard.h"
#include "load_session.h"
#include "util.h"

/* Past this many problems a document is not worth reading on. */
#define MAX_PROBLEMS 20
/* A saved document is read whole: past this it is not one of ours. */
#define MAX_DOC_BYTES (1ull << 30)
/* What a document's numbers can mean, so that no figure read back
 * overflows an integer, a sum or a chart's scale (a span of 1e308 s made
 * no tick): any number within +-1e15; a count an integer up to 1e15 (a
 * thousand of them still sum in an int64); a time in a level up to 1e9 s
 * (31 years) and a request's up to 1e10 ms (115 days). */
#define MAX_NUM 1e15
#define MAX_COUNT 1e15
#define MAX_SECS 1e9
#define MAX_MS 1e10

/* The members of the objects being read, indexed once each: a sample's
 * thirty members are then found by name without a walk of the document's
 * tokens each (a level, a sample and its gaps are open at once). */
#define IDX_SLOTS 4
#define IDX_MAX 96

struct idx {
	int obj;                     /* -1: empty */
	int n;
	int keys[IDX_MAX];
};

struct rd {
	struct idx idx[IDX_SLOTS];
	unsigned next_idx;
	const char *path;
	char *s;
	size_t len;
	struct load_jl j;
	FILE *err;
	int problems;
	char where[96];              /* "levels[3].samples[12]" */
	struct load_doc *d;
};

/* ---- problems ------------------------------------------------------------ */

static void line_col(const struct rd *c, size_t off, size_t *line, size_t *col)
{
	const char *nl;

	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < c->len; i = (size_t)(nl - c->s) + 1) {
		nl = memchr(c->s + i, '\n', off - i);
		if (nl == NULL) {
			*col = off - i + 1;
			return;
		}
		(*line)++;
	}
}

static void problem_at(struct rd *c, size_t off, const char *member, const char *what)
{
	size_t line, col;

	line_col(c, off, &line, &col);
	if (c->problems++ < MAX_PROBLEMS)
		fprintf(c->err, "%s:%zu:%zu: %s%s%s%s%s\n", c->path, line, col, c->where,
		    c->where[0] && member ? "." : "", member ? member : "",
		    c->where[0] || member ? ": " : "", what);
}

static void bad(struct rd *c, int tok, const char *member, const char *what)
{
	problem_at(c, load_jl_off(&c->j, tok), member, what);
}

/* ---- members --------------------------------------------------------------- */

static int get(struct rd *c, int obj, const char *key)
{
	struct idx *x = NULL;
	int k = -1;

	if (obj < 0)
		return -1;
	for (size_t i = 0; i < IDX_SLOTS && x == NULL; i++)
		if (c->idx[i].obj == obj)
			x = &c->idx[i];
	if (x == NULL) {
		x = &c->idx[c->next_idx++ % IDX_SLOTS];
		x->obj = obj;
		x->n = 0;
		while (load_jl_next(&c->j, obj, &k)) {
			if (x->n == IDX_MAX) {
				x->obj = -1;         /* not one of ours: read it the long way */
				return load_jl_get(&c->j, obj, key);
			}
			x->keys[x->n++] = k;
		}
	}
	for (int i = 0; i < x->n; i++)
		if (load_jl_is(&c->j, x->keys[i], key))
			return x->keys[i] + 1;
	return -1;
}

static int present(struct rd *c, int tok)
{
	return tok >= 0 && !load_jl_null(&c->j, tok);
}

/* A number from lo to hi; NaN when missing or null (or out of range,
 * reported). */
static double num_tok_in(struct rd *c, int t, const char *key, double lo, double hi)
{
	char why[80];
	double v;

	if (!present(c, t))
		return NAN;
	if (load_jl_num(&c->j, t, &v) < 0) {
		bad(c, t, key, "a number expected");
		return NAN;
	}
	if (!(v >= lo && v <= hi)) {
		snprintf(why, sizeof why, "expected a number from %g to %g", lo, hi);
		bad(c, t, key, why);
		return NAN;
	}
	return v;
}

static double num_tok(struct rd *c, int t, const char *key)
{
	return num_tok_in(c, t, key, -MAX_NUM, MAX_NUM);
}

static double num_in(struct rd *c, int obj, const char *key, double lo, double hi)
{
	return num_tok_in(c, get(c, obj, key), key, lo, hi);
}

static double num(struct rd *c, int obj, const char *key)
{
	return num_tok(c, get(c, obj, key), key);
}

/* A count up to max: 0 when missing or null. */
static uint64_t cnt_max(struct rd *c, int obj, const char *key, double max)
{
	int t = get(c, obj, key);
	char why[80];
	double v;

	if (!present(c, t))
		return 0;
	if (load_jl_num(&c->j, t, &v) < 0) {
		bad(c, t, key, "a number expected");
		return 0;
	}
	if (!(v >= 0 && v <= max) || v != floor(v)) {
		snprintf(why, sizeof why, "a count (an integer from 0 to %.0f) expected", max);
		bad(c, t, key, why);
		return 0;
	}
	return (uint64_t)v;
}

static uint64_t cnt(struct rd *c, int obj, const char *key)
{
	return cnt_max(c, obj, key, MAX_COUNT);
}

/* A count that fits 32 bits. */
static uint32_t cnt32(struct rd *c, int obj, const char *key)
{
	return (uint32_t)cnt_max(c, obj, key, UINT32_MAX);
}

/* An integer that may be undefined: -1 when missing or null. */
static int64_t opt(struct rd *c, int obj, const char *key)
{
	return present(c, get(c, obj, key)) ? (int64_t)cnt(c, obj, key) : -1;
}

/* An integer up to max that may be undefined: -1 when missing or null. */
static int64_t opt_max(struct rd *c, int obj, const char *key, double max)
{
	return present(c, get(c, obj, key)) ? (int64_t)cnt_max(c, obj, key, max) : -1;
}

/* Seconds (0 to 31 years) as µs, 0 when undefined. */
static uint64_t secs(struct rd *c, int obj, const char *key)
{
	double v = num_in(c, obj, key, 0, MAX_SECS);

	return isnan(v) ? 0 : (uint64_t)llround(v * 1e6);
}

/* ms as µs (0 to 115 days; from -115 days where neg), -1 when undefined
 * (the document's 3 decimals are whole µs). */
static int64_t us_in(struct rd *c, int obj, const char *key, int neg)
{
	double v = num_in(c, obj, key, neg ? -MAX_MS : 0, MAX_MS);

	return isnan(v) ? -1 : (int64_t)llround(v * 1e3);
}

static int64_t us(struct rd *c, int obj, const char *key)
{
	return us_in(c, obj, key, 0);
}

static int flag(struct rd *c, int obj, const char *key)
{
	int t = get(c, obj, key);
	char ch;

	if (!present(c, t))
		return 0;
	ch = c->s[load_jl_off(&c->j, t)];
	if (load_jl_type(&c->j, t) != LOAD_JL_OTHER || (ch != 't' && ch != 'f')) {
		bad(c, t, key, "true or false expected");
		return 0;
	}
	return ch == 't';
}

/* A string, malloc'd; NULL when missing or null. */
static char *text(struct rd *c, int obj, const char *key)
{
	int t = get(c, obj, key);
	char *s;

	if (!present(c, t))
		return NULL;
	s = load_jl_str(&c->j, t, NULL);
	if (s == NULL)
		bad(c, t, key, load_jl_type(&c->j, t) == LOAD_JL_STRING ? "out of memory" :
		    "a string expected");
	return s;
}

static void text_to(struct rd *c, int obj, const char *key, char *buf, size_t cap)
{
	char *s = text(c, obj, key);

	snprintf(buf, cap, "%s", s ? s : "");
	free(s);
}

/* One of names (static), or a copy kept by the document (a newer minor
 * version's word), or NULL when missing. */
static const char *word(struct rd *c, int obj, const char *key,
    const char *const *names, size_t n)
{
	char *s = text(c, obj, key);

	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0) {
			free(s);
			return names[i];
		}
	if (c->d->nown == LOAD_DOC_STRINGS) {
		free(s);
		return "unknown";
	}
	c->d->own[c->d->nown++] = s;
	return s;
}

static int container(struct rd *c, int obj, const char *key, enum load_jl_type type)
{
	int t = get(c, obj, key);

	if (!present(c, t))
		return -1;
	if (load_jl_type(&c->j, t) != type) {
		bad(c, t, key, type == LOAD_JL_ARRAY ? "an array expected" :
		    "an object expected");
		return -1;
	}
	return t;
}

static int object(struct rd *c, int obj, const char *key)
{
	return container(c, obj, key, LOAD_JL_OBJECT);
}

static int array(struct rd *c, int obj, const char *key)
{
	return container(c, obj, key, LOAD_JL_ARRAY);
}

static size_t count_elems(struct rd *c, int arr)
{
	size_t n = 0;
	int el = -1;

	while (arr >= 0 && load_jl_elem(&c->j, arr, &el))
		n++;
	return n;
}

static enum load_key key_of(struct rd *c, int obj, const char *member)
{
	static const char *const names[] = {"concurrency", "rate", "prompt_tokens"};
	static const enum load_key keys[] = {LOAD_KEY_CONCURRENCY, LOAD_KEY_RATE,
		LOAD_KEY_PROMPT_TOKENS};
	int t = get(c, obj, member);
	char *s;

	if (!present(c, t))
		return LOAD_KEY_NONE;
	s = text(c, obj, member);
	for (size_t i = 0; s != NULL && i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			free(s);
			return keys[i];
		}
	if (s != NULL)
		bad(c, t, member, "concurrency, rate or prompt_tokens expected");
	free(s);
	return LOAD_KEY_NONE;
}

/* ---- the pieces ------------------------------------------------------------ */

static void dist(struct rd *c, int obj, const char *key, const struct load_pcts *p,
    struct load_dist *d)
{
	int t = object(c, obj, key);
	char name[32];

	d->count = (size_t)cnt(c, t, "count");
	d->mean = num(c, t, "mean");
	d->std = num(c, t, "std");
	d->min = num(c, t, "min");
	d->max = num(c, t, "max");
	d->median = num(c, t, "p50");
	for (size_t i = 0; i < LOAD_MAX_PCTS; i++) {
		d->q[i] = NAN;
		if (i < p->n) {
			load_pcts_name(p->p[i], name, sizeof name);
			d->q[i] = num(c, t, name);
		}
	}
}

static void fit(struct rd *c, int obj, const char *key, const char *slope,
    const char *intercept, struct load_fit *f)
{
	int t = object(c, obj, key);

	f->slope = num(c, t, slope);
	f->intercept = num(c, t, intercept);
	f->r2 = num(c, t, "r2");
	f->n = (size_t)cnt(c, t, "n");
}

/* --turns and --think-time, for compare's workload check; a file's
 * sessions are not read back (their samples carry the turns). */
static void conversation(struct rd *c, int cfg, struct load_conf *k)
{
	int t = object(c, cfg, "conversation"), a, el = -1;
	const char *err;
	double lo, hi;
	char *s;

	if (t < 0)
		return;
	if ((a = array(c, t, "turns")) >= 0 && load_jl_elem(&c->j, a, &el)) {
		lo = num_tok(c, el, "turns");
		hi = load_jl_elem(&c->j, a, &el) ? num_tok(c, el, "turns") : lo;
		if (!(lo >= 1 && hi >= lo && hi <= LOAD_SESSION_MAX_TURNS))
			bad(c, a, "turns", "[min, max] from 1 to 1000 expected");
		else
			k->turns = (struct load_range){ (uint32_t)lo, (uint32_t)hi };
	}
	s = text(c, t, "think_time");
	if (s != NULL && load_think_parse(s, &k->think, &err) < 0)
		bad(c, t, "think_time", err);
	free(s);
}

static void conf(struct rd *c, int obj, struct load_conf *k)
{
	static const char *const arrivals[] = {"poisson", "constant", "gamma"};
	int t = object(c, obj, "config"), a;
	double v;
	char *s;

	k->concurrency = cnt32(c, t, "concurrency");
	k->concurrency_set = 1;
	v = num_in(c, t, "rate", 0, MAX_NUM);
	k->rate = isnan(v) ? 0 : v;
	s = text(c, t, "arrivals");
	for (size_t i = 0; s != NULL && i < 3; i++)
		if (strcmp(s, arrivals[i]) == 0)
			k->arrivals = (enum load_arrivals)i;
	free(s);
	v = num_in(c, t, "burstiness", 0, MAX_NUM);
	k->burstiness = isnan(v) ? 1 : v;
	k->duration_us = secs(c, t, "duration_s");
	k->count = cnt(c, t, "count");
	k->warmup_us = secs(c, t, "warmup_s");
	k->warmup_count = cnt(c, t, "warmup_requests");
	k->cooldown = flag(c, t, "cooldown");
	for (int w = 0; w < 2; w++) {
		struct load_range *r = w ? &k->max_tokens : &k->prompt_tokens;
		int el = -1;
		a = array(c, t, w ? "max_tokens" : "prompt_tokens");
		if (a >= 0 && load_jl_elem(&c->j, a, &el)) {
			r->min = (uint32_t)fmax(0, fmin(num_tok(c, el, "min"), UINT32_MAX));
			r->max = load_jl_elem(&c->j, a, &el) ?
			    (uint32_t)fmax(0, fmin(num_tok(c, el, "max"), UINT32_MAX)) : r->min;
		}
	}
	k->timeout_us = secs(c, t, "timeout_s");
	/* any --seed (to UINT64_MAX / 10), as a double reads it */
	k->seed = cnt_max(c, t, "seed", 18446744073709549568.0);
	k->continuous_usage = flag(c, t, "continuous_usage");
	k->ramp_us = secs(c, t, "ramp_s");
	/* --prefixes: the report recomputes each sample's prefix from them */
	if ((t = object(c, t, "prefixes")) >= 0) {
		const char *err;
		uint64_t n = cnt(c, t, "count"), l = cnt(c, t, "tokens");
		s = text(c, t, "dist");
		if (n < 1 || n > LOAD_PREFIX_MAX || l < 1 || l > LOAD_CONF_MAX_TOKENS ||
		    s == NULL || load_prefix_parse_dist(s, &k->prefix_zipf, &err) < 0) {
			bad(c, t, "prefixes", "{count: 1 to 1000000, tokens: 1 to 1000000, "
			    "dist: uniform or zipf:S} expected");
		} else {
			k->prefixes = (uint32_t)n;
			k->prefix_tokens = (uint32_t)l;
		}
		free(s);
	}
	conversation(c, object(c, obj, "config"), k);
}

static void goodput(struct rd *c, int obj, struct load_summary *s)
{
	int t = object(c, obj, "goodput"), tg = object(c, t, "targets");
	char name[32];

	s->attainment = NAN;
	if (t < 0)
		return;
	for (int i = 0; i < GOODPUT_TARGETS; i++) {
		double v;
		snprintf(name, sizeof name, "%s_ms", goodput_target_name((enum goodput_target)i));
		v = num(c, tg, name);
		s->goodput.us[i] = isnan(v) || v <= 0 ? 0 : (uint64_t)llround(v * 1e3);
	}
	s->good = cnt(c, t, "good");
	s->judged = cnt(c, t, "judged");
	s->attainment = num(c, t, "attainment");
	s->goodput_per_s = num(c, t, "per_s");
}

/* The SLO's target named name, or -1. */
static int slo_index(const struct load_result *r, const char *name)
{
	for (size_t i = 0; name != NULL && i < r->slo.n; i++)
		if (strcmp(r->slo.v[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void level_slo(struct rd *c, int obj, struct load_level *lv)
{
	const struct load_result *r = &c->d->r;
	int t = object(c, obj, "slo"), a, el = -1;
	char *s;
	size_t i = 0;

	lv->slo.binding = -1;
	if (t < 0)
		return;
	lv->has_slo = 1;
	lv->slo.met = flag(c, t, "met");
	lv->slo.noisy = flag(c, t, "noisy");
	s = text(c, t, "binding");
	lv->slo.binding = slo_index(r, s);
	free(s);
	a = array(c, t, "targets");
	while (a >= 0 && load_jl_elem(&c->j, a, &el) && i < LOAD_SLO_MAX) {
		struct load_slo_eval *x = &lv->slo.v[i];
		int ci = array(c, el, "ci"), e2 = -1;
		char *name = text(c, el, "name");
		int at = slo_index(r, name);

		free(name);
		if (at < 0) {
			bad(c, el, "name", "a target the document's slo does not list");
			continue;
		}
		x = &lv->slo.v[at];
		x->value = num(c, el, "value");
		x->lo = x->hi = NAN;
		if (ci >= 0 && load_jl_elem(&c->j, ci, &e2)) {
			x->lo = num_tok(c, e2, "ci");
			if (load_jl_elem(&c->j, ci, &e2))
				x->hi = num_tok(c, e2, "ci");
		}
		x->met = flag(c, el, "met");
		x->noisy = flag(c, el, "noisy");
		x->n = (size_t)cnt(c, el, "n");
		i++;
	}
}

static void slices(struct rd *c, int obj, struct load_summary *s)
{
	int a = array(c, obj, "slices"), el = -1;
	size_t n = count_elems(c, a);
	char saved[sizeof c->where];

	if (n == 0)
		return;
	s->slices = calloc(n, sizeof(*s->slices));
	if (s->slices == NULL) {
		bad(c, a, "slices", "out of memory");
		return;
	}
	memcpy(saved, c->where, sizeof saved);
	while (load_jl_elem(&c->j, a, &el)) {
		struct load_slice *x = &s->slices[s->nslices];
		snprintf(c->where, sizeof c->where, "%s.slices[%zu]", saved, s->nslices);
		x->run = (unsigned)cnt_max(c, el, "run", LOAD_MAX_RUNS - 1);
		x->start_s = num_in(c, el, "start_s", 0, MAX_SECS);
		x->end_s = num_in(c, el, "end_s", 0, MAX_SECS);
		x->requests = cnt(c, el, "requests");
		x->ok = cnt(c, el, "ok");
		x->errors = cnt(c, el, "errors");
		x->output_tokens = cnt(c, el, "output_tokens");
		x->output_tokens_per_s = num(c, el, "output_tokens_per_s");
		x->ttft_p50 = num(c, el, "ttft_p50_ms");
		x->ttft_p95 = num(c, el, "ttft_p95_ms");
		x->tpot_p50 = num(c, el, "tpot_p50_ms");
		x->tpot_p95 = num(c, el, "tpot_p95_ms");
		s->nslices++;
	}
	memcpy(c->where, saved, sizeof saved);
}

static void generator(struct rd *c, int obj, struct load_level *lv)
{
	int t = object(c, obj, "generator"), w, el = -1;
	struct load_gen *g = &lv->sum.gen;
	char *src;

	g->cpu_s = num(c, t, "cpu_s");
	g->cpu_share = num(c, t, "cpu_share");
	g->cpu_us_per_event = num(c, t, "cpu_us_per_event");
	g->events = cnt(c, t, "events");
	g->queued = lv->info.queued = cnt(c, t, "queued");
	lv->info.read_late_p99_ms = num(c, t, "read_late_p99_ms");
	lv->info.read_late_max_ms = num(c, t, "read_late_max_ms");
	src = text(c, t, "read_late_source");
	lv->info.read_late_stamps = src != NULL && strcmp(src, "stamps") == 0;
	free(src);
	w = array(c, t, "warnings");
	while (w >= 0 && load_jl_elem(&c->j, w, &el)) {
		char *s = load_jl_str(&c->j, el, NULL);
		if (s != NULL) {
			g->cpu_bound |= strcmp(s, "cpu") == 0;
			g->lag_bound |= strcmp(s, "dispatch_lag") == 0;
			g->conn_bound |= strcmp(s, "connections") == 0;
		}
		free(s);
	}
}

static void tt_quant(struct rd *c, int obj, const char *key, double q[6])
{
	static const char *const names[] = {"mean", "p50", "p90", "p95", "p99", "max"};
	int t = object(c, obj, key);

	for (int i = 0; i < 6; i++)
		q[i] = num(c, t, names[i]);
}

static void tokentap(struct rd *c, int obj, struct load_tt *tt)
{
	int t = object(c, obj, "tokentap");

	if (t < 0)
		return;
	tt->asked = 1;
	tt->ok = flag(c, t, "ok");
	text_to(c, t, "error", tt->error, sizeof tt->error);
	text_to(c, t, "window", tt->window, sizeof tt->window);
	text_to(c, t, "route", tt->group, sizeof tt->group);
	tt->window_short = flag(c, t, "window_short");
	tt->requests = cnt(c, t, "requests");
	tt->errors = cnt(c, t, "errors");
	tt->output_tokens_per_s = num(c, t, "output_tokens_per_s");
	tt_quant(c, t, "ttft_ms", tt->ttft);
	tt_quant(c, t, "tpot_ms", tt->tpot);
	tt_quant(c, t, "itl_ms", tt->itl);
}

static int outcome_of(const char *s)
{
	for (int i = 0; s != NULL && i < OUTCOME_COUNT; i++)
		if (strcmp(s, meter_outcome_name((enum meter_outcome)i)) == 0)
			return i;
	return -1;
}

/* One sample and its gaps into st. */
static void sample(struct rd *c, int el, struct loadstats *st, uint32_t **gaps,
    size_t *gcap, int *has_itl)
{
	struct load_sample s;
	char *o = text(c, el, "outcome"), *src;
	int a = array(c, el, "itl_ms"), e2 = -1, oc = outcome_of(o);
	size_t n = 0;

	free(o);
	memset(&s, 0, sizeof(s));
	if (oc < 0)
		bad(c, get(c, el, "outcome") >= 0 ? get(c, el, "outcome") : el, "outcome",
		    "an outcome of docs/contract.md §4 expected (ok, timeout, "
		    "...)");
	s.outcome = oc < 0 ? OUTCOME_UPSTREAM_ERROR : (enum meter_outcome)oc;
	s.seq = cnt(c, el, "seq");
	s.start_us = (uint64_t)(us(c, el, "start_ms") < 0 ? 0 : us(c, el, "start_ms"));
	s.warmup = (uint8_t)flag(c, el, "warmup");
	s.cooldown = (uint8_t)flag(c, el, "cooldown");
	s.status = (unsigned)cnt_max(c, el, "status", 999);
	s.ttft_us = us(c, el, "ttft_ms");
	s.ttfo_us = us(c, el, "ttfo_ms");
	s.tpot_us = (double)us(c, el, "tpot_ms");
	s.itl_max_us = us(c, el, "itl_max_ms");
	s.duration_us = us(c, el, "e2el_ms");
	s.lag_us = us_in(c, el, "dispatch_lag_ms", 1);
	s.queued = (uint8_t)flag(c, el, "queued");
	s.connect_us = us(c, el, "connect_ms");
	s.first_token_us = us(c, el, "first_token_ms");
	s.last_token_us = us(c, el, "last_token_ms");
	s.output_tokens = opt(c, el, "output_tokens");
	src = text(c, el, "token_source");
	s.tokens_from_usage = src != NULL && strcmp(src, "usage") == 0;
	free(src);
	s.input_tokens = opt(c, el, "input_tokens");
	s.reasoning_tokens = opt(c, el, "reasoning_tokens");
	s.output_speed = num(c, el, "output_speed");
	if (isnan(s.output_speed))
		s.output_speed = -1;
	s.events = cnt32(c, el, "events");
	s.token_chunks = cnt32(c, el, "token_chunks");
	s.first_chunk_tokens = opt(c, el, "first_chunk_tokens");
	s.prompt_tokens = cnt32(c, el, "prompt_tokens");
	s.max_tokens = cnt32(c, el, "max_tokens");
	s.turn = (uint32_t)cnt_max(c, el, "turn", 1000);
	s.session = cnt(c, el, "session");
	if (a < 0)
		*has_itl = 0;
	while (a >= 0 && load_jl_elem(&c->j, a, &e2)) {
		double v = num_tok_in(c, e2, "itl_ms", 0, MAX_MS);
		if (n == *gcap) {
			size_t cap = *gcap ? *gcap * 2 : 256;
			uint32_t *g = realloc(*gaps, cap * sizeof(*g));
			if (g == NULL) {
				bad(c, a, "itl_ms", "out of memory");
				break;
			}
			*gaps = g;
			*gcap = cap;
		}
		(*gaps)[n++] = isnan(v) || v < 0 ? 0 : (uint32_t)fmin(llround(v * 1e3), UINT32_MAX);
	}
	if (loadstats_record(st, &s, *gaps, n) < 0)
		bad(c, el, NULL, "out of memory");
}

static void samples(struct rd *c, int obj, struct load_level *lv)
{
	int a = array(c, obj, "samples"), el = -1, has_itl = 1;
	uint32_t *gaps = NULL;
	size_t gcap = 0, i = 0;
	char saved[sizeof c->where];

	if (a < 0) {
		c->d->has_samples = 0;
		c->d->has_itl = 0;
		return;
	}
	memcpy(saved, c->where, sizeof saved);
	while (load_jl_elem(&c->j, a, &el) && c->problems < MAX_PROBLEMS) {
		snprintf(c->where, sizeof c->where, "%s.samples[%zu]", saved, i++);
		sample(c, el, &lv->st, &gaps, &gcap, &has_itl);
	}
	memcpy(c->where, saved, sizeof saved);
	if (!has_itl || lv->st.n == 0)
		c->d->has_itl = 0;
	free(gaps);
}

static void level(struct rd *c, int obj, struct load_level *lv)
{
	static const char *const phases[] = {"bracket", "bisect", "settle", "close"};
	struct load_summary *s = &lv->sum;
	const struct load_pcts *p = &c->d->r.pcts;
	int t, ch;

	lv->index = (size_t)cnt(c, obj, "index");
	text_to(c, obj, "label", lv->label, sizeof lv->label);
	lv->key = key_of(c, obj, "key");
	lv->value = num_in(c, obj, "value", 0, MAX_NUM);
	lv->search = key_of(c, obj, "search");
	lv->phase = word(c, obj, "phase", phases, 4);
	lv->unsustained = word(c, obj, "unsustained", NULL, 0);
	lv->runs = cnt32(c, obj, "runs");
	lv->disturbed = flag(c, obj, "disturbed");
	lv->disturbed_runs = cnt32(c, obj, "disturbed_runs");
	lv->disturbed_late_ms = num(c, obj, "disturbed_late_ms");
	lv->started_s = num_in(c, obj, "started_s", 0, MAX_SECS);
	lv->info.start_us = cnt(c, obj, "monotonic_start_us");
	conf(c, obj, &lv->conf);
	lv->info.elapsed_us = secs(c, obj, "elapsed_s");
	t = object(c, obj, "window");
	lv->info.window_start_us = secs(c, t, "start_s");
	lv->info.window_end_us = secs(c, t, "end_s");
	s->window_s = num(c, t, "length_s");
	lv->info.interrupted = flag(c, obj, "interrupted");
	s->requests = cnt(c, obj, "requests");
	s->ok = cnt(c, obj, "ok");
	s->errors = cnt(c, obj, "errors");
	s->error_rate = num(c, obj, "error_rate");
	t = object(c, obj, "outcomes");
	for (int i = 0; i < OUTCOME_COUNT; i++)
		s->outcomes[i] = cnt(c, t, meter_outcome_name((enum meter_outcome)i));
	lv->info.warmup_requests = cnt(c, obj, "warmup_requests");
	lv->info.cooldown_requests = cnt(c, obj, "cooldown_requests");
	s->completed = cnt(c, obj, "completed");
	s->output_tokens = cnt(c, obj, "output_tokens");
	s->input_tokens = cnt(c, obj, "input_tokens");
	t = object(c, obj, "prompt_tokens_reported");
	if (t >= 0) {
		s->prompt.requests = cnt(c, t, "requests");
		s->prompt.asked_mean = num(c, t, "asked_mean");
		s->prompt.reported_mean = num(c, t, "reported_mean");
		s->prompt.ratio_mean = num(c, t, "ratio_mean");
	}
	s->requests_per_s = num(c, obj, "request_throughput");
	s->output_tokens_per_s = num(c, obj, "output_throughput");
	s->input_tokens_per_s = num(c, obj, "input_throughput");
	s->total_tokens_per_s = num(c, obj, "total_token_throughput");
	lv->info.connections = cnt(c, obj, "connections");
	lv->info.max_in_flight = cnt(c, obj, "max_in_flight");
	dist(c, obj, "ttft_ms", p, &s->ttft);
	dist(c, obj, "ttfo_ms", p, &s->ttfo);
	dist(c, obj, "tpot_ms", p, &s->tpot);
	dist(c, obj, "itl_ms", p, &s->itl);
	dist(c, obj, "e2el_ms", p, &s->e2e);
	dist(c, obj, "output_speed", p, &s->speed);
	dist(c, obj, "dispatch_lag_ms", p, &s->lag);
	dist(c, obj, "lag_ms", p, &s->event_lag);
	t = array(c, obj, "itl_cdf_ms");
	ch = -1;
	for (size_t i = 0; i < LOAD_CDF_POINTS; i++)
		s->itl_cdf[i] = t >= 0 && load_jl_elem(&c->j, t, &ch) ?
		    num_tok(c, ch, "itl_cdf_ms") : NAN;
	t = object(c, obj, "chunks");
	dist(c, t, "events", p, &s->events);
	dist(c, t, "token_chunks", p, &s->token_chunks);
	dist(c, t, "tokens_per_chunk", p, &s->tokens_per_chunk);
	dist(c, t, "first_chunk_tokens", p, &s->first_chunk_tokens);
	goodput(c, obj, s);
	level_slo(c, obj, lv);
	fit(c, obj, "drift", "ttft_slope_ms_per_min", "ttft_intercept_ms", &s->drift);
	fit(c, obj, "input_fit", "slope_ms_per_1k_tokens", "intercept_ms", &s->input_fit);
	s->slice_s = (double)c->d->r.slice_us / 1e6;
	slices(c, obj, s);
	generator(c, obj, lv);
	tokentap(c, obj, &lv->tt);
	samples(c, obj, lv);
}

/* How synthetic prompts were sized: a document of before says nothing,
 * and was sized at 4 bytes a token. */
static void prompt_sizing(struct rd *c, int root, struct load_psize *p)
{
	int t = object(c, root, "prompt_sizing");
	char *rule;

	load_psize_init(p);
	if (t < 0)
		return;
	rule = text(c, t, "rule");
	if (rule != NULL && load_psize_rule_of(rule, &p->rule) < 0)
		bad(c, get(c, t, "rule"), "rule", "default, given or calibrated expected");
	free(rule);
	p->bytes_per_token = num_in(c, t, "bytes_per_token", LOAD_PSIZE_MIN, LOAD_PSIZE_MAX);
	if (isnan(p->bytes_per_token))
		p->bytes_per_token = LOAD_PSIZE_DEFAULT;
	p->spread = num_in(c, t, "spread", 0, LOAD_PSIZE_MAX);
	p->requests = cnt(c, t, "calibration_requests");
	p->reported = cnt(c, t, "calibration_reported");
	p->estimate = flag(c, t, "estimate");
}

/* ---- the header ------------------------------------------------------------ */

/* A plan's digest: 16 hex digits (load_json_plan), else empty. */
static void plan(struct rd *c, int obj, char out[20])
{
	char buf[20];

	text_to(c, obj, "plan", buf, sizeof buf);
	if (strlen(buf) != 16 || strspn(buf, "0123456789abcdef") != 16) {
		bad(c, get(c, obj, "plan") >= 0 ? get(c, obj, "plan") : obj, "plan",
		    "16 hex digits expected");
		buf[0] = '\0';
	}
	memcpy(out, buf, 20);
}

/* --shard's "shard" (index, count, plan), or a merge's "merged". */
static void shard(struct rd *c, int root)
{
	struct load_result *r = &c->d->r;
	int t = object(c, root, "shard");

	if (t >= 0) {
		uint64_t n = cnt_max(c, t, "count", LOAD_SHARD_MAX);
		uint64_t i = cnt_max(c, t, "index", LOAD_SHARD_MAX);
		if (n == 0 || i >= n)
			bad(c, t, "shard", "{index: 0 to count - 1, count: 1 to 4096} expected");
		else {
			c->d->conf.shard = (uint32_t)i;
			c->d->conf.shards = (uint32_t)n;
		}
		plan(c, t, r->plan);
	}
	t = object(c, root, "merged");
	if (t >= 0) {
		r->merged = (unsigned)cnt_max(c, t, "shards", LOAD_SHARD_MAX);
		plan(c, t, r->plan);
		r->merged_skew_s = num(c, t, "skew_s");
	}
}

static void header(struct rd *c, int root)
{
	struct load_result *r = &c->d->r;
	int t, el = -1;
	char *s;

	t = array(c, root, "percentiles");
	r->pcts.n = 0;
	while (t >= 0 && load_jl_elem(&c->j, t, &el) && r->pcts.n < LOAD_MAX_PCTS) {
		double v = num_tok(c, el, "percentiles");
		if (!(v > 0 && v <= 100) || (r->pcts.n > 0 && v <= r->pcts.p[r->pcts.n - 1]))
			bad(c, el, "percentiles", "ascending percentiles in (0, 100] expected");
		else
			r->pcts.p[r->pcts.n++] = v;
	}
	if (t < 0)
		load_pcts_default(&r->pcts);
	r->slice_us = secs(c, root, "slice_s");
	text_to(c, root, "run_id", r->run_id, sizeof r->run_id);
	s = text(c, root, "started_at");
	if (s != NULL) {
		struct tm tm;
		const char *end;
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
		if (end != NULL) {
			unsigned ms = 0;
			sscanf(end, ".%3u", &ms);
			r->wall_start_ms = (uint64_t)timegm(&tm) * 1000 + ms;
		}
		free(s);
	}
	r->mono_start_us = cnt(c, object(c, root, "clock"), "monotonic_start_us");
	/* the command line: each word a string, else empty */
	t = array(c, root, "command");
	c->d->argv = calloc(count_elems(c, t) + 1, sizeof(char *));
	el = -1;
	while (c->d->argv != NULL && t >= 0 && load_jl_elem(&c->j, t, &el)) {
		char *w = load_jl_str(&c->j, el, NULL);
		if (w == NULL && (w = strdup("")) == NULL)
			break;
		c->d->argv[c->d->argc++] = w;
	}
	r->argv = c->d->argv;
	r->argc = c->d->argc;
	/* the target, as the run named it */
	free(c->d->conf.url);
	c->d->conf.url = text(c, root, "target");
	s = text(c, root, "model");
	if (s != NULL) {
		free(c->d->conf.model);
		c->d->conf.model = s;
	}
	s = text(c, root, "dialect");
	if (s != NULL) {
		const char *err;
		if (load_conf_set_dialect(&c->d->conf, s, &err) < 0)
			bad(c, get(c, root, "dialect"), "dialect", err);
		free(s);
	}
	if (c->d->conf.url == NULL)
		c->d->conf.url = strdup("");
	r->interrupted = flag(c, root, "interrupted");
	prompt_sizing(c, root, &r->psize);
	shard(c, root);
}

/* The SLO's targets, through the one parser (load_slo.h). */
static void slo(struct rd *c, int root)
{
	int t = object(c, root, "slo"), a = array(c, t, "targets"), el = -1;
	char text_[LOAD_SLO_MAX * 48], why[200];
	size_t n = 0;

	if (a < 0)
		return;
	text_[0] = '\0';
	while (load_jl_elem(&c->j, a, &el)) {
		char *name = text(c, el, "name"), *unit = text(c, el, "unit");
		double lim = num(c, el, "limit");
		int frac = unit != NULL && strcmp(unit, "fraction") == 0;
		if (name != NULL && n < sizeof text_ && frac)
			n += (size_t)snprintf(text_ + n, sizeof text_ - n, "%s%s<=%.17g",
			    n ? " " : "", name, lim);
		else if (name != NULL && n < sizeof text_)
			n += (size_t)snprintf(text_ + n, sizeof text_ - n, "%s%s<=%lldus",
			    n ? " " : "", name, isfinite(lim) ? llround(lim * 1e3) : -1);
		free(name);
		free(unit);
	}
	if (n >= sizeof text_ || load_slo_parse(&c->d->r.slo, text_, why, sizeof why) < 0)
		bad(c, t, "slo", n >= sizeof text_ ? "too many targets" : why);
}

static void sweep(struct rd *c, int root)
{
	static const char *const reasons[] = {"levels", "saturation", "error_rate",
		"interrupted", "failed"};
	struct load_result *r = &c->d->r;
	int t = object(c, root, "sweep");

	if (t < 0)
		return;
	r->sweep_key = key_of(c, t, "key");
	r->stop_reason = word(c, t, "stop_reason", reasons, UTIL_ARRAY_LEN(reasons));
	r->knee = (int)opt_max(c, t, "knee_level", INT_MAX);
	r->saturated_at = (int)opt_max(c, t, "saturated_level", INT_MAX);
	fit(c, t, "input_fit", "slope_ms_per_1k_tokens", "intercept_ms", &r->input_fit);
}

static void capacity(struct rd *c, int root)
{
	static const char *const stops[] = {"resolution", "max", "none_met", "interrupted",
		"levels"};
	struct load_result *r = &c->d->r;
	int a = array(c, root, "capacity"), el = -1;

	while (a >= 0 && load_jl_elem(&c->j, a, &el) && r->ncapacity < 2) {
		struct load_capacity *cp = &r->capacity[r->ncapacity++];
		int iv = array(c, el, "interval"), e2 = -1;
		char *b = text(c, el, "binding");

		cp->ran = 1;
		cp->key = key_of(c, el, "key");
		cp->found = flag(c, el, "found");
		cp->capacity = num(c, el, "capacity");
		if (iv >= 0 && load_jl_elem(&c->j, iv, &e2)) {
			cp->lo = num_tok(c, e2, "interval");
			if (load_jl_elem(&c->j, iv, &e2))
				cp->hi = num_tok(c, e2, "interval");
		}
		/* the estimate and its interval (absent before them: the
		 * bracket's lo, no interval) */
		cp->estimate = num(c, el, "estimate");
		if (isnan(cp->estimate))
			cp->estimate = cp->capacity;
		cp->ci_lo = cp->ci_hi = NAN;
		iv = array(c, el, "ci");
		e2 = -1;              /* from its first element, not interval's */
		if (iv >= 0 && load_jl_elem(&c->j, iv, &e2)) {
			cp->ci_lo = num_tok(c, e2, "ci");
			if (load_jl_elem(&c->j, iv, &e2))
				cp->ci_hi = num_tok(c, e2, "ci");
		}
		cp->confidence = num(c, el, "confidence");
		cp->replications = (size_t)cnt(c, el, "replications");
		cp->binding = slo_index(r, b);
		free(b);
		cp->levels = (size_t)cnt(c, el, "levels");
		cp->stopped = word(c, el, "stopped", stops, UTIL_ARRAY_LEN(stops));
		/* NaN when absent (a document of before them) */
		cp->knee = num(c, el, "knee");
		cp->knee_past = num(c, el, "knee_past");
	}
}

static void levels(struct rd *c, int root)
{
	struct load_result *r = &c->d->r;
	int a = array(c, root, "levels"), el = -1;
	size_t n = count_elems(c, a);

	if (a < 0) {
		problem_at(c, 0, "levels", "the document has no levels");
		return;
	}
	r->levels = calloc(n ? n : 1, sizeof(*r->levels));
	if (r->levels == NULL) {
		bad(c, a, "levels", "out of memory");
		return;
	}
	r->cap = n;
	c->d->has_samples = c->d->has_itl = n > 0;
	while (load_jl_elem(&c->j, a, &el) && c->problems < MAX_PROBLEMS) {
		struct load_level *lv = &r->levels[r->nlevels];

		if (load_jl_type(&c->j, el) != LOAD_JL_OBJECT) {
			bad(c, el, "levels", "a level (an object) expected");
			continue;
		}
		/* the table prints each level's target and model */
		load_conf_init(&lv->conf);
		free(lv->conf.model);
		lv->conf.model = strdup(c->d->conf.model);
		lv->conf.url = strdup(c->d->conf.url);
		lv->conf.dialect = c->d->conf.dialect;
		loadstats_init(&lv->st);
		r->nlevels++;
		if (lv->conf.model == NULL || lv->conf.url == NULL) {
			bad(c, el, "levels", "out of memory");
			break;
		}
		snprintf(c->where, sizeof c->where, "levels[%zu]", r->nlevels - 1);
		level(c, el, lv);
	}
	c->where[0] = '\0';
}

/* The sweep's levels are levels of the document. */
static void indices(struct rd *c, int root)
{
	static const char *const names[] = {"knee_level", "saturated_level"};
	struct load_result *r = &c->d->r;
	int *at[] = {&r->knee, &r->saturated_at}, t = object(c, root, "sweep");

	for (int i = 0; i < 2; i++)
		if (*at[i] >= 0 && (size_t)*at[i] >= r->nlevels) {
			snprintf(c->where, sizeof c->where, "sweep");
			bad(c, get(c, t, names[i]), names[i], "a level of the document expected");
			c->where[0] = '\0';
			*at[i] = -1;
		}
}

static const char *kind_word(struct rd *c, int root, enum load_kind *k)
{
	char *s = text(c, root, "kind");
	const char *why = NULL;

	if (s == NULL)
		why = "no kind: not a tokentap-load document";
	else if (strcmp(s, "run") == 0)
		*k = LOAD_KIND_RUN;
	else if (strcmp(s, "sweep") == 0)
		*k = LOAD_KIND_SWEEP;
	else if (strcmp(s, "capacity") == 0)
		*k = LOAD_KIND_CAPACITY;
	else if (strcmp(s, "scenarios") == 0)
		why = "a scenarios document: it keeps no samples and no levels; run the "
		    "scenarios without --scenarios to report or compare them";
	else
		why = "an unknown kind (run, sweep, capacity)";
	free(s);
	return why;
}

/* ---- the document ---------------------------------------------------------- */

static int slurp(struct rd *c)
{
	FILE *f = fopen(c->path, "rb");
	size_t cap = 1 << 16, got, b = 0;

	if (f == NULL) {
		fprintf(c->err, "%s: %s\n", c->path, strerror(errno));
		return -1;
	}
	c->s = malloc(cap);
	while (c->s != NULL && (got = fread(c->s + c->len, 1, cap - c->len, f)) > 0) {
		const char *nul = memchr(c->s + c->len, '\0', got);

		c->len += got;
		/* no JSON text holds a NUL byte, and ours starts with '{': a
		 * device or a binary file is refused at once, not 1 GiB later */
		while (b < c->len && strchr(" \t\r\n", c->s[b]) != NULL && c->s[b] != '\0')
			b++;
		if (nul != NULL || (b < c->len && c->s[b] != '{')) {
			problem_at(c, nul != NULL ? (size_t)(nul - c->s) : b, NULL, nul != NULL ?
			    "a NUL byte: not a JSON document" :
			    "a tokentap-load JSON document (an object) expected");
			fclose(f);
			return -1;
		}
		if (c->len == cap) {
			char *s = cap >= MAX_DOC_BYTES ? NULL : realloc(c->s, cap * 2);
			if (s == NULL) {
				fprintf(c->err, "%s: larger than %llu bytes, or out of memory\n",
				    c->path, MAX_DOC_BYTES);
				fclose(f);
				return -1;
			}
			c->s = s;
			cap *= 2;
		}
	}
	if (c->s == NULL || ferror(f)) {
		fprintf(c->err, "%s: %s\n", c->path, c->s ? "read failed" : "out of memory");
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

int load_read(struct load_doc *d, const char *path, FILE *err)
{
	struct rd c;
	const char *why;
	size_t at;
	double version;
	int root = 0;

	memset(d, 0, sizeof(*d));
	memset(&c, 0, sizeof(c));
	for (size_t i = 0; i < IDX_SLOTS; i++)
		c.idx[i].obj = -1;
	c.path = path;
	c.err = err;
	c.d = d;
	load_jl_init(&c.j);
	load_result_init(&d->r, LOAD_KIND_RUN, &d->conf, 0, NULL);
	d->r.run_id[0] = '\0';
	d->r.wall_start_ms = d->r.mono_start_us = 0;
	if (load_conf_init(&d->conf) < 0 || (d->path = strdup(path)) == NULL) {
		fprintf(err, "%s: out of memory\n", path);
		goto fail;
	}
	if (slurp(&c) < 0)
		goto fail;
	if (load_jl_parse(&c.j, c.s, c.len, &at, &why) < 0) {
		problem_at(&c, at, NULL, why);
		goto fail;
	}
	if (load_jl_type(&c.j, root) != LOAD_JL_OBJECT) {
		problem_at(&c, 0, NULL, "a tokentap-load JSON document (an object) expected");
		goto fail;
	}
	version = num(&c, root, "schema_version");
	if (c.problems == 0 && version != LOAD_SCHEMA_VERSION) {
		problem_at(&c, get(&c, root, "schema_version") >= 0 ?
		    load_jl_off(&c.j, get(&c, root, "schema_version")) : 0, "schema_version",
		    isnan(version) ? "missing: not a tokentap-load document" :
		    "a version this tokentap-load does not read (it reads 1)");
		goto fail;
	}
	if ((why = kind_word(&c, root, &d->r.kind)) != NULL) {
		problem_at(&c, get(&c, root, "kind") >= 0 ?
		    load_jl_off(&c.j, get(&c, root, "kind")) : 0, "kind", why);
		goto fail;
	}
	header(&c, root);
	slo(&c, root);
	sweep(&c, root);
	capacity(&c, root);
	levels(&c, root);
	indices(&c, root);
	if (c.problems > 0)
		goto fail;
	load_jl_free(&c.j);
	free(c.s);
	return 0;
fail:
	if (c.problems > MAX_PROBLEMS)
		fprintf(err, "%s: %d problems, the first %d shown\n", path, c.problems,
		    MAX_PROBLEMS);
	load_jl_free(&c.j);
	free(c.s);
	load_doc_free(d);
	return -1;
}

void load_doc_free(struct load_doc *d)
{
	load_result_free(&d->r);
	load_conf_free(&d->conf);
	for (int i = 0; i < d->argc; i++)
		free(d->argv[i]);
	free(d->argv);
	for (size_t i = 0; i < d->nown; i++)
		free(d->own[i]);
	free(d->path);
	memset(d, 0, sizeof(*d));
}
