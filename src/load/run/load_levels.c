/* SPDX-License-Identifier: Apache-2.0 */
#include "load_levels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "load_capfit.h"
#include "load_disturb.h"
#include "load_settle.h"
#include "log.h"
#include "util.h"

/* Open loop without -c: at most this many connections (load_run.c's). */
#define OPEN_MAX_CONNS 1024
#define TT_TIMEOUT_MS 5000
/* tokentap's main thread takes its workers' records every 50 ms, and a
 * client has a stream's last byte a moment before its record is made: the
 * level's /stats is read again, 50 ms apart, until it counts the level's
 * requests, for at most TT_SETTLE_TRIES reads (a request that never
 * reached tokentap is never counted) */
#define TT_SETTLE_TRIES 20

void load_plan_init(struct load_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->stop_on_saturation = 1;
	p->saturation = 0.10;
	p->stop_error_rate = 0.10;
	p->factor = 2;
	p->resolution = 0.05;
	p->repeats = 3;
	p->max_levels = 24;
	p->cap_max[0] = 10000;
	p->cap_max[1] = 100000;
}

enum load_key load_plan_key(const char *s, const char **hint)
{
	static const char *const names[] = {"concurrency", "rate", "prompt-tokens"};
	size_t best = 4;

	if (hint != NULL)
		*hint = NULL;
	if (strcmp(s, "concurrency") == 0)
		return LOAD_KEY_CONCURRENCY;
	if (strcmp(s, "rate") == 0)
		return LOAD_KEY_RATE;
	if (strcmp(s, "prompt-tokens") == 0 || strcmp(s, "prompt_tokens") == 0)
		return LOAD_KEY_PROMPT_TOKENS;
	for (size_t i = 0; i < UTIL_ARRAY_LEN(names) && hint != NULL; i++) {
		size_t d = util_edit_distance(s, names[i]);
		if (d < best) {
			best = d;
			*hint = names[i];
		}
	}
	return LOAD_KEY_NONE;
}

static int positive(const char *s, char **end, double *v)
{
	*v = strtod(s, end);
	return *end != s && isfinite(*v) && *v > 0 ? 0 : -1;
}

int load_plan_levels(struct load_plan *p, const char *s, const char **err)
{
	const char *dots = strstr(s, "..");
	char *end;
	double v;

	p->n = 0;
	p->geometric = 0;
	if (dots != NULL) {
		*err = "expected FROM..TO, FROM..TOxFACTOR or FROM.. (geometric, doubling "
		    "by default), each above 0, FROM <= TO, FACTOR above 1";
		char from[32];
		size_t n = (size_t)(dots - s);
		if (n == 0 || n >= sizeof(from))
			return -1;
		memcpy(from, s, n);
		from[n] = '\0';
		/* "1..8": strtod would read "1." */
		if (positive(from, &end, &p->from) < 0 || *end != '\0')
			return -1;
		p->to = INFINITY;
		p->factor = 2;
		s = dots + 2;
		if (*s != '\0' && *s != 'x') {
			if (positive(s, &end, &p->to) < 0 || p->to < p->from)
				return -1;
			s = end;
		}
		if (*s == 'x') {
			if (positive(s + 1, &end, &p->factor) < 0 || p->factor <= 1 || *end != '\0')
				return -1;
			s = end;
		}
		if (*s != '\0')
			return -1;
		p->geometric = 1;
		return 0;
	}
	*err = "expected levels in ascending order, comma-separated (1,2,4,8), each "
	    "above 0, at most 64";
	while (*s != '\0') {
		if (positive(s, &end, &v) < 0 || p->n == LOAD_MAX_LEVELS ||
		    (p->n > 0 && v <= p->levels[p->n - 1]))
			return -1;
		p->levels[p->n++] = v;
		if (*end == ',' && end[1] != '\0')
			end++;
		else if (*end != '\0')
			return -1;
		s = end;
	}
	return p->n > 0 ? 0 : -1;
}

int load_levels_saturated(const struct load_summary *prev, double v_prev,
    const struct load_summary *cur, double v_cur, double gain)
{
	double grew = v_prev > 0 ? v_cur / v_prev - 1 : 0;
	double x0 = prev->output_tokens_per_s, x1 = cur->output_tokens_per_s;
	double l0 = prev->e2e.median, l1 = cur->e2e.median;

	if (grew <= 0 || !(x0 > 0))
		return 0;
	return x1 / x0 - 1 < gain * grew && !isnan(l0) && !isnan(l1) &&
	    l1 / l0 - 1 > gain * grew;
}

int load_levels_open_saturated(const struct load_summary *s, double share)
{
	double sent = s->window_s > 0 ? (double)s->requests / s->window_s : 0;
	const struct load_fit *d = &s->drift;
	double t, rise;

	if (s->requests == 0 || !(sent > 0))
		return 0;
	if (s->requests_per_s < share * sent)
		return 1;
	/* the trend: the slope's t statistic, sqrt(r2 (n - 2) / (1 - r2)) */
	if (d->n < 10 || !(d->slope > 0) || !isfinite(d->r2))
		return 0;
	t = d->r2 >= 1 ? INFINITY : sqrt(d->r2 * (double)(d->n - 2) / (1 - d->r2));
	rise = d->slope * s->window_s / 60;
	return t > LOAD_TREND_T && !isnan(s->ttft.median) &&
	    rise > LOAD_TREND_RISE * s->ttft.median;
}

/* ---- one level ------------------------------------------------------- */

uint64_t load_levels_seed(uint64_t seed, unsigned run)
{
	/* splitmix64's increment and finaliser: runs far apart */
	uint64_t z = seed + (uint64_t)run * 0x9E3779B97F4A7C15ull;

	if (run == 0)
		return seed;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* Moves a repeat's times after the runs before it: one timeline. */
static void shift(struct loadstats *st, uint64_t by)
{
	for (size_t i = 0; i < st->n; i++) {
		struct load_sample *s = &st->v[i];
		s->start_us += by;
		if (s->first_token_us >= 0)
			s->first_token_us += (int64_t)by;
		if (s->last_token_us >= 0)
			s->last_token_us += (int64_t)by;
	}
}

/* The line a terminal gets after each level. */
static void level_line(const struct load_result *r, const struct load_level *lv)
{
	const struct load_summary *s = &lv->sum;

	fprintf(stderr, "%s: %llu requests, %.2f req/s, %.1f output tok/s, TTFT p50 "
	    "%.1f ms, TPOT p50 %.2f ms, errors %.2f %%%s%s\n", lv->label,
	    (unsigned long long)s->requests, s->requests_per_s, s->output_tokens_per_s,
	    s->ttft.median, s->tpot.median, 100 * s->error_rate,
	    lv->has_slo ? (lv->slo.met ? ", SLO met" : ", SLO missed") : "",
	    lv->has_slo && !lv->slo.decided ? " (undecided: by its figures)" : "");
	(void)r;
}

/* The level's figures from tokentap once it counts the n requests the level
 * ended (or has been asked TT_SETTLE_TRIES times). */
static void tt_read_settled(struct load_tt_conf *c, struct load_tt *out, size_t n)
{
	for (int i = 1;; i++) {
		load_tt_read(c, out, TT_TIMEOUT_MS);
		if (!out->ok || out->requests >= n || i == TT_SETTLE_TRIES)
			return;
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
	}
}

/* Whether a search's run is set aside (load_disturb.h): the generator was
 * late over it, and the level may still run again (it sets aside at most
 * LOAD_DISTURB_MAX_ASIDE runs, over all the calls that run it); past that
 * the run is kept and the level is left undecided. */
static int set_aside(const struct load_result *r, struct load_level *lv,
    const struct loadstats *st, const struct load_run_info *info)
{
	struct load_slo_result one;
	double late;

	if (lv->search == LOAD_KEY_NONE || !(load_disturb_bound(&r->slo) > 0) ||
	    load_slo_eval(&r->slo, st, &one) < 0)
		return 0;
	late = load_disturb_late(st, info->read_late_p95_ms);
	if (!load_disturb_run(&r->slo, &one, late))
		return 0;
	if (!(late <= lv->disturbed_late_ms))
		lv->disturbed_late_ms = late;
	if (lv->disturbed_runs < LOAD_DISTURB_MAX_ASIDE && lv->attempts < LOAD_MAX_RUNS) {
		lv->disturbed_runs++;
		return 1;
	}
	lv->disturbed = 1;
	return 0;
}

/* Runs lv's runs from (0: its first) to at most upto, each an
 * independent replication; stops once the level is decided unless force. */
static int run_runs(struct load_env *e, struct load_result *r, struct load_level *lv,
    unsigned from, unsigned upto, int force)
{
	struct load_run_opts o;
	struct load_conf conf;
	char id[48], label[120];
	uint64_t offset = from > 0 ? lv->info.elapsed_us : 0, now;

	if (from == 0)
		lv->started_s = (double)(util_now_us() - r->mono_start_us) / 1e6;
	/* k: the runs kept; a run set aside is not one of them */
	for (unsigned k = from; k < upto && k < LOAD_MAX_RUNS && lv->attempts < LOAD_MAX_RUNS;) {
		struct loadstats st;
		struct load_run_info info;
		unsigned a = lv->attempts++;
		int rc;

		now = util_now_us();
		if (e->tt != NULL && e->tt_ready_at > now) {
			if (e->progress)
				fprintf(stderr, "waiting %.1f s for tokentap's %s window to clear\n",
				    (double)(e->tt_ready_at - now) / 1e6, lv->tt.window[0] ?
				    lv->tt.window : "stats");
			load_run_wait(e->base, e->tt_ready_at - now);
		}
		if (load_run_interrupted() > 0)
			break;
		snprintf(id, sizeof(id), "%s-%zu%s", r->run_id, lv->index, a ? "r" : "");
		if (a > 0)
			snprintf(id + strlen(id), sizeof(id) - strlen(id), "%u", a);
		snprintf(label, sizeof(label), "%s%s", lv->label, a ? " (again)" : "");
		memset(&o, 0, sizeof(o));
		o.progress = e->progress;
		o.label = label;
		o.tls = e->tls;
		o.id_prefix = id;
		loadstats_init(&st);
		/* each run an independent replication: a seed of its own, not
		 * the same arrivals and sizes replayed */
		conf = lv->conf;
		/* a search's levels each draw their own arrivals too: its
		 * levels are independent, not one schedule at every rate */
		conf.seed = load_levels_seed(lv->conf.seed, a + (lv->search != LOAD_KEY_NONE ?
		    (unsigned)lv->index * LOAD_MAX_RUNS : 0));
		rc = load_run(e->base, e->dns, &conf, &o, &st, &info);
		if (rc < 0 && st.n == 0) {
			loadstats_free(&st);
			r->failed = 1;
			return -1;
		}
		if (rc == 0 && !info.interrupted && set_aside(r, lv, &st, &info)) {
			if (e->progress)
				fprintf(stderr, "%s: disturbed (the generator ran %.1f ms late at "
				    "p95): set aside, run again\n", label, lv->disturbed_late_ms);
			loadstats_free(&st);
			/* its requests are in tokentap's window too */
			if (e->tt != NULL)
				e->tt_ready_at = util_now_us() + load_tt_settle_us(e->tt);
			continue;
		}
		if (lv->has_slo || r->slo.n > 0) {
			struct load_slo_result one;
			if (k < LOAD_MAX_RUNS && load_slo_eval(&r->slo, &st, &one) == 0)
				for (size_t i = 0; i < r->slo.n; i++)
					lv->run_value[k][i] = one.v[i].value;
		}
		if (e->tt != NULL) {
			tt_read_settled(e->tt, &lv->tt, st.n);
			lv->tt.window_short = e->tt->window_us > 0 &&
			    info.elapsed_us > load_tt_span_us(e->tt);
			e->tt_ready_at = util_now_us() + load_tt_settle_us(e->tt);
		}
		shift(&st, offset);
		if (loadstats_merge(&lv->st, &st) < 0) {
			loadstats_free(&st);
			r->failed = 1;
			return -1;
		}
		if (k == 0) {
			lv->info = info;
		} else {
			lv->info.window_end_us = offset + info.window_end_us;
			lv->info.elapsed_us = offset + info.elapsed_us;
			lv->info.cpu_s += info.cpu_s;
			lv->info.connections += info.connections;
			lv->info.queued += info.queued;
			lv->info.warmup_requests += info.warmup_requests;
			lv->info.cooldown_requests += info.cooldown_requests;
			if (info.max_in_flight > lv->info.max_in_flight)
				lv->info.max_in_flight = info.max_in_flight;
			lv->info.interrupted = info.interrupted;
		}
		if (lv->nwindows < LOAD_LEVEL_WINDOWS) {
			lv->windows[lv->nwindows][0] = offset + info.window_start_us;
			lv->windows[lv->nwindows++][1] = offset + info.window_end_us;
		}
		offset = lv->info.elapsed_us;
		lv->runs = ++k;
		if (load_result_summarise(r, lv) < 0 || rc < 0) {
			r->failed = 1;
			return -1;
		}
		/* a disturbed run's figures decide nothing (load_disturb.h) */
		if (lv->disturbed && lv->has_slo) {
			lv->slo.decided = 0;
			lv->slo.noisy = 1;
		}
		/* undecided (too few requests to bound a figure, or its
		 * interval holds the limit): run on, up to the limit */
		if (info.interrupted || !lv->has_slo || (lv->slo.decided && !force))
			break;
	}
	if (load_run_interrupted() > 0)
		r->interrupted = lv->info.interrupted = 1;
	if (e->progress)
		level_line(r, lv);
	return 0;
}

static int run_level(struct load_env *e, struct load_result *r, struct load_level *lv,
    unsigned repeats)
{
	return run_runs(e, r, lv, 0, repeats + 1, 0);
}

/* The parameters of a level of key at value v. */
static void conf_for(struct load_conf *c, enum load_key key, double v)
{
	switch (key) {
	case LOAD_KEY_CONCURRENCY:
		c->concurrency = (unsigned)v;
		c->concurrency_set = 1;
		c->rate = 0;
		break;
	case LOAD_KEY_RATE:
		c->rate = v;
		if (!c->concurrency_set)
			c->concurrency = OPEN_MAX_CONNS;
		break;
	case LOAD_KEY_PROMPT_TOKENS:
		c->prompt_tokens.min = c->prompt_tokens.max = (uint32_t)v;
		break;
	default:
		break;
	}
}

static struct load_level *new_level(struct load_result *r, enum load_key key, double v)
{
	struct load_conf c = *r->conf;    /* shallow: copied deep by load_result_add */

	conf_for(&c, key, v);
	return load_result_add(r, key, v, &c);
}

int load_levels_single(struct load_env *e, struct load_result *r)
{
	struct load_level *lv = load_result_add(r, LOAD_KEY_NONE, 0, r->conf);

	if (lv == NULL) {
		r->failed = 1;
		return -1;
	}
	return run_level(e, r, lv, 0);
}

/* ---- sweeps ------------------------------------------------------------ */

static double level_value(const struct load_plan *p, size_t i)
{
	double v;

	if (!p->geometric)
		return i < p->n ? p->levels[i] : NAN;
	v = p->from * pow(p->factor, (double)i);
	if (p->key != LOAD_KEY_RATE)
		v = round(v);
	return v <= p->to * (1 + 1e-9) ? v : NAN;
}

int load_levels_sweep(struct load_env *e, const struct load_plan *p,
    struct load_result *r)
{
	double prev_v = NAN;
	int saturated;

	r->sweep_key = p->key;
	r->stop_reason = "levels";
	for (size_t i = 0; i < LOAD_MAX_LEVELS; i++) {
		double v = level_value(p, i);
		struct load_level *lv;

		if (isnan(v))
			break;
		/* a geometric integer sweep may round to the same level twice */
		if (!isnan(prev_v) && v <= prev_v)
			continue;
		lv = new_level(r, p->key, v);
		if (lv == NULL || run_level(e, r, lv, 0) < 0) {
			r->failed = 1;
			r->stop_reason = "failed";
			return -1;
		}
		if (r->interrupted) {
			r->stop_reason = "interrupted";
			break;
		}
		if (lv->sum.requests > 0 && lv->sum.error_rate > p->stop_error_rate) {
			r->stop_reason = "error_rate";
			break;
		}
		/* an open loop's level is saturated on its own (it did not
		 * carry its load, or its queue grew); a closed loop's against
		 * the level before it */
		if (p->key == LOAD_KEY_RATE)
			saturated = load_levels_open_saturated(&lv->sum, LOAD_CARRIED_SHARE);
		else
			saturated = p->key != LOAD_KEY_PROMPT_TOKENS && r->nlevels >= 2 &&
			    load_levels_saturated(&r->levels[r->nlevels - 2].sum, prev_v,
			    &lv->sum, v, p->saturation);
		if (saturated && r->saturated_at < 0) {
			r->saturated_at = (int)lv->index;
			r->knee = (int)lv->index - 1;
		}
		if (saturated && p->stop_on_saturation) {
			r->stop_reason = "saturation";
			break;
		}
		prev_v = v;
	}
	if (p->key == LOAD_KEY_PROMPT_TOKENS)
		load_result_input_fit(r);
	return 0;
}

/* ---- capacity ------------------------------------------------------------ */

/* The next level up or down from v, and the midpoint of an interval. */
static double step(enum load_key k, double v, int up)
{
	if (k == LOAD_KEY_CONCURRENCY)
		return up ? v * 2 : floor(v / 2);
	return up ? v * 2 : v / 2;
}

static int resolved(enum load_key k, double lo, double hi, double res)
{
	if (k == LOAD_KEY_CONCURRENCY)
		return hi - lo <= 1;
	return hi / lo - 1 <= res;
}

static double midpoint(enum load_key k, double lo, double hi)
{
	if (k == LOAD_KEY_CONCURRENCY)
		return floor((lo + hi) / 2);
	return (lo + hi) / 2;
}

/* Where the rate search starts: half the rate the concurrency capacity
 * carried (Little's law: requests / s = concurrency / latency), else 1/s. */
static double rate_start(const struct load_result *r)
{
	const struct load_capacity *c = &r->capacity[0];

	if (c->key != LOAD_KEY_CONCURRENCY || !c->found)
		return 1;
	for (size_t i = r->nlevels; i > 0; i--) {
		const struct load_level *lv = &r->levels[i - 1];
		if (lv->search == LOAD_KEY_CONCURRENCY && lv->value == c->lo &&
		    lv->sum.e2e.count > 0 && lv->sum.e2e.mean > 0)
			return fmax(0.01, round(c->lo / (lv->sum.e2e.mean / 1e3) / 2 * 100) / 100);
	}
	return 1;
}

/* The worst target's figure over its limit at a level (1: on the limit). */
static double worst_ratio(const struct load_result *r, const struct load_level *lv)
{
	double w = -INFINITY;

	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_eval *x = &lv->slo.v[i];
		double lim = r->slo.v[i].limit;
		double q = isnan(x->value) ? INFINITY : lim > 0 ? x->value / lim :
		    (x->value > 0 ? INFINITY : 0);
		if (q > w)
			w = q;
	}
	return w;
}

/* Within this factor of the bracket's estimate, a level's runs are points
 * of the fit. */
#define FIT_SPAN 1.5

/* The rate's estimate and interval fitted on the runs near it: each run an
 * independent replication, y its binding figure over the limit, logged. */
static void fit(const struct load_result *r, struct load_capacity *c, double mu,
    double missed)
{
	size_t n = 0, cap = 0, b = (size_t)c->binding;
	double *x, *y, est, lo, hi, lim = r->slo.v[b].limit, e0 = c->estimate;

	if (!(lim > 0))
		return;
	for (size_t i = 0; i < r->nlevels; i++)
		cap += r->levels[i].runs;
	x = calloc(cap + 1, sizeof(*x));
	y = calloc(cap + 1, sizeof(*y));
	for (size_t i = 0; x != NULL && y != NULL && i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (lv->search != c->key || !lv->has_slo || lv->unsustained != NULL ||
		    lv->value < e0 / FIT_SPAN || lv->value > e0 * FIT_SPAN)
			continue;
		for (unsigned k = 0; k < lv->runs && k < LOAD_MAX_RUNS; k++) {
			double v = lv->run_value[k][b];
			if (!(v > 0) || !isfinite(v))
				continue;
			x[n] = lv->value;
			y[n++] = log(v / lim);
		}
	}
	/* an unbounded interval (no significant slope) leaves the levels' */
	/* no rate at or over the served one is sustained (mu NaN: none
	 * fell behind): a line crossing there extrapolates */
	if (n > 0 && load_capfit(x, y, n, r->slo.confidence, &est, &lo, &hi) == 0 &&
	    isfinite(lo) && isfinite(hi) && est >= e0 / FIT_SPAN && est <= e0 * FIT_SPAN &&
	    !(est >= mu)) {
		/* a line through a convex curve (a queue's percentile against
		 * its rate) can cross the limit off the levels measured there:
		 * the fit refines the estimate within the bracket; one outside
		 * it would overrule the levels met and missed at its ends (at
		 * 4 slots the line said 31.4/s beside a level missed at 29.06;
		 * the model 28.98), so the levels' own interpolation stands,
		 * inside the interval the runs give */
		if (est > c->lo && est < c->hi)
			c->estimate = est;
		c->ci_lo = fmin(lo, c->estimate);
		/* never past a level decided missed above the estimate: a queue's
		 * percentile there is well over its limit, where a line through
		 * the runs near the crossing (levels run to close the lower
		 * end among them) can reach far up (at 4 slots [32.07, 40.00]
		 * beside 34.69 and 35.62 decided missed) */
		c->ci_hi = fmin(fmax(isnan(mu) || hi < mu ? hi : mu, c->estimate),
		    isnan(missed) ? INFINITY : missed);
		c->replications = n;
	}
	free(x);
	free(y);
}

/* The search's estimate and its confidence interval, from its levels: each
 * an independent replication (or several, pooled) decided at the SLO's
 * confidence. The interval's ends are the largest level decided met and
 * the smallest decided missed around the estimate; between them every
 * level was within noise of a limit. mu: the rate the target served while
 * a level fell behind (NaN: none did), over which no fit may put it. */
static void estimate(const struct load_result *r, struct load_capacity *c, double mu)
{
	const struct load_level *llo = NULL, *lhi = NULL;

	c->confidence = r->slo.confidence;
	c->estimate = c->lo;
	c->ci_lo = c->ci_hi = NAN;
	if (!c->found)
		return;
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (lv->search != c->key || !lv->has_slo)
			continue;
		if (lv->value == c->lo && lv->unsustained == NULL)
			llo = lv;
		if (lv->value == c->hi)
			lhi = lv;
	}
	/* a level not sustained has no figure to interpolate by: the
	 * estimate stays the largest level met */
	if (c->key == LOAD_KEY_RATE && llo != NULL && lhi != NULL && lhi->unsustained == NULL) {
		double a = worst_ratio(r, llo), b = worst_ratio(r, lhi);
		if (isfinite(a) && isfinite(b) && b > a && a <= 1 && b >= 1)
			c->estimate = c->lo + (c->hi - c->lo) * (1 - a) / (b - a);
	}
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		/* met but measured again with a longer warm-up: not by it */
		if (lv->search != c->key || !lv->has_slo || !lv->slo.decided ||
		    (lv->slo.met && lv->unsustained != NULL))
			continue;
		if (lv->slo.met && lv->value <= c->estimate &&
		    (isnan(c->ci_lo) || lv->value > c->ci_lo))
			c->ci_lo = lv->value;
		if (!lv->slo.met && lv->value > c->estimate &&
		    (isnan(c->ci_hi) || lv->value < c->ci_hi))
			c->ci_hi = lv->value;
	}
	/* past a top not sustained a line through the runs below would
	 * extrapolate beyond every figure there is */
	if (c->key == LOAD_KEY_RATE && c->binding >= 0 && isfinite(c->hi) &&
	    (lhi == NULL || lhi->unsustained == NULL))
		fit(r, c, mu, c->ci_hi);
}

/* The runs the bracket's two ends get at least, for the fit (or all of
 * them, with fewer --repeats). */
#define FIT_RUNS 3

/* The bracket's ends run again, each run with a seed of its own, until
 * each has FIT_RUNS: the replications the rate's interval is fitted on. */
static int refine(struct load_env *e, const struct load_plan *p, struct load_result *r,
    double lo, double hi)
{
	unsigned want = p->repeats + 1 < FIT_RUNS ? p->repeats + 1 : FIT_RUNS;

	for (size_t i = r->nlevels; i > 0; i--) {
		struct load_level *lv = &r->levels[i - 1];
		if (lv->search != LOAD_KEY_RATE || (lv->value != lo && lv->value != hi) ||
		    lv->runs >= want || lv->unsustained != NULL)
			continue;
		if (run_runs(e, r, lv, lv->runs, want, 1) < 0)
			return -1;
		if (r->interrupted)
			break;
	}
	return 0;
}

/* What a rate search knows of the target's service rate (load_settle.h). */
struct settle {
	double mu;                   /* the most a level carried while it fell
	                              * behind; NaN: none did yet */
	double ca2;                  /* the arrivals' */
	double cap_s;                /* the longest warm-up a level may get */
};

/* A level's warm-up may grow to this many times its planned length
 * (warm-up and -d): a rate whose queue needs longer to settle is not
 * shown sustained by the levels asked for. */
#define SETTLE_MAX 2.0

/* The most a rate level of the search served (requests that ended in its
 * window, a second) while it fell behind (served under LOAD_CARRIED_SHARE
 * of what it offered): the target ran flat out. Not the level's request
 * throughput, which counts the queued requests' waiting as work. */
static double served_rate(const struct load_result *r)
{
	double mu = NAN;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_summary *s = &r->levels[i].sum;
		double sent, done;
		if (r->levels[i].search != LOAD_KEY_RATE || !(s->window_s > 0))
			continue;
		sent = (double)s->requests / s->window_s;
		done = (double)s->completed / s->window_s;
		if (s->requests > 0 && done < LOAD_CARRIED_SHARE * sent)
			mu = fmax(mu, done);
	}
	return mu;
}

/* Why a rate level at v can never count as met, or NULL, with *need the
 * warm-up (s) it needs to show its steady state (0: none). */
static const char *unsustainable(const struct settle *st, double v, double *need)
{
	double s = load_settle_s(v, st->mu, st->ca2);

	*need = 0;
	if (isnan(s))
		return NULL;
	if (v >= st->mu)
		return "offered at or over the most the target carried";
	if (s > st->cap_s)
		return "its queue would not settle within the level";
	*need = s;
	return NULL;
}

static const char *judge(const struct settle *st, const struct load_level *lv,
    double *need)
{
	*need = 0;
	return lv->search == LOAD_KEY_RATE ? unsustainable(st, lv->value, need) : NULL;
}

static int settled(const struct load_level *lv, double need)
{
	return (double)lv->conf.warmup_us / 1e6 >= need * (1 - 1e-9);
}

/* The bracket from the search's levels: lo the largest met, sustainable
 * and settled; hi the smallest missed or not sustainable (its binding
 * target into *binding); *pending the largest level met between them whose
 * warm-up was shorter than its queue needs (to run again), NaN: none. */
static void bracket_of(const struct load_result *r, enum load_key k,
    const struct settle *st, double *lo, double *hi, int *binding, double *pending)
{
	double need;

	*lo = *hi = *pending = NAN;
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (lv->search != k || !lv->has_slo)
			continue;
		if (judge(st, lv, &need) != NULL || !lv->slo.met) {
			if (isnan(*hi) || lv->value <= *hi) {
				*hi = lv->value;
				*binding = lv->slo.binding;
			}
		} else if (settled(lv, need) && (isnan(*lo) || lv->value > *lo)) {
			*lo = lv->value;
		}
	}
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (lv->search != k || !lv->has_slo || !lv->slo.met ||
		    judge(st, lv, &need) != NULL || settled(lv, need))
			continue;
		if ((isnan(*lo) || lv->value > *lo) && (isnan(*hi) || lv->value < *hi) &&
		    (isnan(*pending) || lv->value > *pending))
			*pending = lv->value;
	}
}

/* Once the search ends: each level that cannot count as met says why, and
 * one not sustainable is missed, decidedly (whatever its short figures);
 * one met before its warm-up was known short is left as it ran. */
static void mark(struct load_result *r, enum load_key k, const struct settle *st)
{
	double need;

	for (size_t i = 0; i < r->nlevels; i++) {
		struct load_level *lv = &r->levels[i];
		if (lv->search != k || !lv->has_slo)
			continue;
		lv->unsustained = judge(st, lv, &need);
		if (lv->unsustained != NULL) {
			lv->slo.met = 0;
			lv->slo.decided = 1;
			lv->slo.noisy = 0;
		} else if (lv->slo.met && !settled(lv, need)) {
			lv->unsustained = "unsettled: its warm-up was shorter than its queue "
			    "needs (run again)";
		}
	}
}

/* Runs the level of k at v: a rate level against a known service rate
 * with the warm-up its queue needs, and only once if it is not
 * sustainable (no figure of it can count). */
static struct load_level *search_level(struct load_env *e, const struct load_plan *p,
    struct load_result *r, enum load_key k, double v, const char *phase,
    const struct settle *st)
{
	struct load_level *lv = new_level(r, k, v);
	unsigned repeats = p->repeats;
	double need;

	if (lv == NULL) {
		r->failed = 1;
		return NULL;
	}
	lv->search = k;
	lv->phase = phase;
	snprintf(lv->label + strlen(lv->label), sizeof(lv->label) - strlen(lv->label),
	    " (capacity, %s)", phase);
	if (k == LOAD_KEY_RATE) {
		if (unsustainable(st, v, &need) != NULL)
			repeats = 0;
		else if (need * 1e6 > (double)lv->conf.warmup_us)
			lv->conf.warmup_us = (uint64_t)ceil(need * 1e6);
	}
	return run_level(e, r, lv, repeats) < 0 ? NULL : lv;
}

/* Whether a search's level i was saturated, by a sweep's rule: an open
 * loop's on its own, a closed loop's against the nearest lower level
 * the search tried (its levels are not in order). */
static int search_saturated(const struct load_result *r, size_t i, double gain)
{
	const struct load_level *lv = &r->levels[i], *below = NULL;

	if (lv->key == LOAD_KEY_RATE)
		return load_levels_open_saturated(&lv->sum, LOAD_CARRIED_SHARE);
	for (size_t j = 0; j < r->nlevels; j++) {
		const struct load_level *o = &r->levels[j];
		if (o->key == lv->key && o->value < lv->value &&
		    (below == NULL || o->value > below->value))
			below = o;
	}
	return below != NULL && load_levels_saturated(&below->sum, below->value,
	    &lv->sum, lv->value, gain);
}

/* The knee of a search: a bisection on the SLO tries few levels past it,
 * so it is the knee among those, and the level past it says how close. */
static void capacity_knee(const struct load_result *r, struct load_capacity *c,
    double gain)
{
	c->knee = c->knee_past = NAN;
	for (size_t i = 0; i < r->nlevels; i++)
		if (r->levels[i].key == c->key && r->levels[i].sum.requests > 0 &&
		    !(r->levels[i].value >= c->knee_past) && search_saturated(r, i, gain))
			c->knee_past = r->levels[i].value;
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (lv->key == c->key && lv->sum.requests > 0 && !isnan(c->knee_past) &&
		    lv->value < c->knee_past && !(lv->value <= c->knee))
			c->knee = lv->value;
	}
}

/* Levels a search may run beyond its bracket, each way, to close its
 * interval. */
#define CLOSE_MAX 3

/* The interval's ends are the nearest levels decided around the estimate
 * (or the fit's): a bisection can end with every level on one side of it
 * within noise of the limit, the bracket's end there only "not met" (or
 * met, undecided), and no slope to fit (at 4 slots, seeds 1 and 2 once
 * read 28.95 [28.13, none] and 27.75 [26.25, none]; the model 28.98).
 * "At least 28.1/s" is half an answer, so levels further out run, each
 * step twice the last, until one is decided (missed above, or not
 * sustained: missed, decidedly; met below), CLOSE_MAX a side at most,
 * within --max-levels. */
static int close_side(struct load_env *e, const struct load_plan *p,
    struct load_result *r, struct load_capacity *c, const struct settle *st, int up)
{
	double v = up ? c->hi : c->lo, gap = p->resolution,
	    min = c->key == LOAD_KEY_CONCURRENCY ? 1 : 0.01;
	size_t ki = c->key == LOAD_KEY_RATE;

	for (int i = 0; i < CLOSE_MAX && isnan(up ? c->ci_hi : c->ci_lo) &&
	    !r->interrupted && c->levels < p->max_levels; i++, gap *= 2) {
		if (c->key == LOAD_KEY_CONCURRENCY)
			v = up ? v + fmax(1, ceil(v * gap)) : v - fmax(1, ceil(v * gap));
		else
			v = up ? v * (1 + gap) : v / (1 + gap);
		if (up ? v > p->cap_max[ki] : v < min)
			break;
		if (search_level(e, p, r, c->key, v, "close", st) == NULL)
			return -1;
		c->levels++;
		/* marked by the search's served rate as it was: a new one would
		 * re-label levels run before (unsettled, to run again, when
		 * nothing runs them again) */
		mark(r, c->key, st);
		estimate(r, c, st->mu);
	}
	if (r->interrupted)
		c->stopped = "interrupted";
	else if (isnan(up ? c->ci_hi : c->ci_lo) && c->levels >= p->max_levels)
		c->stopped = "levels";      /* an end left open for want of levels */
	return 0;
}

static int search(struct load_env *e, const struct load_plan *p, struct load_result *r,
    size_t which)
{
	struct load_capacity *c = &r->capacity[which];
	enum load_key k = p->search[which];
	double lo = NAN, hi = NAN, pending, v, min = k == LOAD_KEY_CONCURRENCY ? 1 : 0.01;
	const char *phase = "bracket";
	const struct load_conf *rc = r->conf;
	struct settle st = { NAN, load_settle_ca2(rc), rc->duration_us > 0 ?
	    SETTLE_MAX * (double)(rc->warmup_us + rc->duration_us) / 1e6 : INFINITY };

	c->key = k;
	c->ran = 1;
	size_t ki = k == LOAD_KEY_RATE;      /* cap_from, cap_max: by key */

	v = p->cap_from[ki] > 0 ? p->cap_from[ki] :
	    k == LOAD_KEY_CONCURRENCY ? 1 : rate_start(r);
	if (k == LOAD_KEY_CONCURRENCY)
		v = fmax(1, round(v));
	for (;;) {
		if (c->levels >= p->max_levels) {
			c->stopped = "levels";
			break;
		}
		if (search_level(e, p, r, k, v, phase, &st) == NULL)
			return -1;
		c->levels++;
		if (r->interrupted) {
			c->stopped = "interrupted";
			break;
		}
		if (k == LOAD_KEY_RATE)
			st.mu = served_rate(r);
		bracket_of(r, k, &st, &lo, &hi, &c->binding, &pending);
		if (!isnan(pending)) {
			/* met, but its queue had not settled: again, longer */
			phase = "settle";
			v = pending;
			continue;
		}
		if (!isnan(lo) && !isnan(hi)) {
			if (resolved(k, lo, hi, p->resolution)) {
				c->stopped = "resolution";
				break;
			}
			phase = "bisect";
			v = midpoint(k, lo, hi);
			continue;
		}
		phase = "bracket";
		if (isnan(hi)) {
			v = step(k, isnan(lo) ? v : lo, 1);
			if (v > p->cap_max[ki]) {
				c->stopped = "max";
				break;
			}
		} else {
			v = step(k, hi, 0);
			if (v < min) {
				c->stopped = "none_met";
				break;
			}
		}
	}
	c->found = !isnan(lo);
	c->lo = lo;
	c->hi = hi;
	c->capacity = lo;
	mark(r, k, &st);
	if (k == LOAD_KEY_RATE && c->found && isfinite(hi) && !r->interrupted &&
	    refine(e, p, r, lo, hi) < 0)
		return -1;
	estimate(r, c, st.mu);
	if (c->found && isfinite(hi) && !r->interrupted &&
	    (close_side(e, p, r, c, &st, 1) < 0 || close_side(e, p, r, c, &st, 0) < 0))
		return -1;
	capacity_knee(r, c, p->saturation);
	return 0;
}

/* How long a search will take, said before it starts: a level is its
 * warm-up and its duration, run up to 1 + repeats times while undecided;
 * a search about 8 levels (bracket by doubling, bisect to the resolution),
 * and up to CLOSE_MAX a side more where an end of its interval is left
 * open (close_side), --max-levels at most. */
static void say_time(const struct load_plan *p, const struct load_result *r)
{
	const struct load_conf *c = r->conf;
	double lvl = (double)(c->warmup_us + c->duration_us) / 1e6;
	double bis = ceil(log2(1 / p->resolution)), n = fmin(3 + bis, (double)p->max_levels);
	double most = (double)p->max_levels * lvl * (1 + p->repeats);

	if (c->duration_us == 0)
		return;
	fprintf(stderr, "capacity: a level is %.3g s (warm-up %.3g s, -d %.3g s), run up "
	    "to %u times while undecided; a search of about %.0f levels takes %.0f s "
	    "to %.0f s, %.0f more a level that closes its interval (at most %.0f s: "
	    "--max-levels %zu)", lvl,
	    (double)c->warmup_us / 1e6, (double)c->duration_us / 1e6, 1 + p->repeats, n,
	    n * lvl, n * lvl * (1 + p->repeats), lvl * (1 + p->repeats), most,
	    p->max_levels);
	if (p->nsearch > 1)
		fprintf(stderr, ", %zu searches", p->nsearch);
	fputc('\n', stderr);
	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_target *t = &r->slo.v[i];
		if (t->stat != LOAD_SLO_PCT || t->pct >= 100)
			continue;
		fprintf(stderr, "capacity: %s needs %zu requests in a level to be bounded at "
		    "%.0f %% confidence, and many more to be decided near its limit\n",
		    t->name, load_slo_min_n(t->pct, r->slo.confidence),
		    100 * r->slo.confidence);
	}
}

int load_levels_capacity(struct load_env *e, const struct load_plan *p,
    struct load_result *r)
{
	say_time(p, r);
	r->ncapacity = p->nsearch;
	for (size_t i = 0; i < p->nsearch; i++) {
		if (search(e, p, r, i) < 0)
			return -1;
		if (r->interrupted)
			break;
	}
	return 0;
}
