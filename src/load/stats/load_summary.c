/* SPDX-License-Identifier: Apache-2.0 */
#include "load_summary.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The generator warns (load_gen) when, over a level, its event loop used
 * this share of a CPU (one thread: it was the bottleneck, not the target),
 * or requests left this late after their intended send time at p99. */
#define GEN_CPU_SHARE 0.90
#define GEN_LAG_P99_MS 1.0

void load_pcts_default(struct load_pcts *p)
{
	static const double d[] = {50, 90, 95, 99};

	p->n = 4;
	memcpy(p->p, d, sizeof(d));
}

int load_pcts_parse(const char *s, struct load_pcts *p, const char **err)
{
	struct load_pcts out = { 0 };
	const char *at = s;

	*err = "expected percentiles in (0, 100], ascending, comma-separated "
	    "(e.g. 50,90,95,99,99.9), at most 16";
	while (*at != '\0') {
		char *end;
		double v;

		errno = 0;
		v = strtod(at, &end);
		if (end == at || errno != 0 || !(v > 0 && v <= 100) ||
		    out.n == LOAD_MAX_PCTS || (out.n > 0 && v <= out.p[out.n - 1]))
			return -1;
		out.p[out.n++] = v;
		if (*end == ',' && end[1] != '\0')
			end++;
		else if (*end != '\0')
			return -1;
		at = end;
	}
	if (out.n == 0)
		return -1;
	*p = out;
	return 0;
}

void load_pcts_name(double p, char *buf, size_t len)
{
	snprintf(buf, len, "p%.10g", p);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double load_quantile(const double *v, size_t n, double pct)
{
	double rank, frac;
	size_t lo;

	if (n == 0)
		return NAN;
	rank = pct / 100.0 * (double)(n - 1);
	lo = (size_t)rank;
	if (lo >= n - 1)
		return v[n - 1];
	frac = rank - (double)lo;
	return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

void load_dist_of(double *v, size_t n, const struct load_pcts *p,
    struct load_dist *d)
{
	double sum = 0, ss = 0, mean;

	memset(d, 0, sizeof(*d));
	d->count = n;
	if (n == 0) {
		d->mean = d->std = d->min = d->max = d->median = NAN;
		for (size_t i = 0; i < LOAD_MAX_PCTS; i++)
			d->q[i] = NAN;
		return;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	mean = sum / (double)n;
	/* two passes: the deviations are small beside the values */
	for (size_t i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	d->mean = mean;
	d->std = sqrt(ss / (double)n);
	d->min = v[0];
	d->max = v[n - 1];
	d->median = load_quantile(v, n, 50);
	for (size_t i = 0; i < LOAD_MAX_PCTS; i++)
		d->q[i] = i < p->n ? load_quantile(v, n, p->p[i]) : NAN;
}

void load_fit_of(const double *x, const double *y, size_t n, struct load_fit *f)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;
	int varies = 0;

	f->n = n;
	f->slope = f->intercept = f->r2 = NAN;
	if (n < 2)
		return;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
		varies |= x[i] != x[0];
	}
	/* the rounding of the mean of a constant x leaves sxx a hair above
	 * 0 and a line of any slope (R² 1e-31): a constant x has no fit */
	if (!varies)
		return;
	mx /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	if (sxx <= 0)
		return;
	f->slope = sxy / sxx;
	f->intercept = my - f->slope * mx;
	/* a constant y is fitted perfectly */
	f->r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 1.0;
}

/* ---- the level ------------------------------------------------------ */

static int measured(const struct load_sample *s)
{
	return loadstats_counted(s);
}

static int ok(const struct load_sample *s)
{
	return loadstats_counted(s) && s->outcome == OUTCOME_OK;
}

/* The tokens of s emitted in [a, b) (µs from the level's start), its
 * output tokens spread evenly from its first token to its last. */
static double tokens_in(const struct load_sample *s, double a, double b)
{
	double f, l, lo, hi, n = (double)s->output_tokens;

	if (s->output_tokens <= 0 || s->first_token_us < 0)
		return 0;
	f = (double)s->first_token_us;
	l = (double)s->last_token_us;
	if (l <= f)
		return f >= a && f < b ? n : 0;
	lo = f > a ? f : a;
	hi = l < b ? l : b;
	return hi > lo ? n * (hi - lo) / (l - f) : 0;
}

/* The share of a request's span (its intended send to its end) inside
 * [a, b): summed over the requests, the completions of the window
 * without the quantisation of counting whole ones (Little's law). */
static double request_in(const struct load_sample *s, double a, double b)
{
	double lo = (double)s->start_us, hi = lo + (s->duration_us > 0 ?
	    (double)s->duration_us : 0), x, y;

	if (hi <= lo)
		return lo >= a && lo < b ? 1 : 0;
	x = lo > a ? lo : a;
	y = hi < b ? hi : b;
	return y > x ? (y - x) / (hi - lo) : 0;
}

/* Fills one distribution from the samples that pass keep, by get. */
static void dist(const struct loadstats *st, double *buf, int (*keep)(const struct load_sample *),
    double (*get)(const struct load_sample *), const struct load_pcts *p,
    struct load_dist *d)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		double v;
		if (!keep(s))
			continue;
		v = get(s);
		if (v >= 0)
			buf[n++] = v;
	}
	load_dist_of(buf, n, p, d);
}

static double g_ttft(const struct load_sample *s)
{
	return s->ttft_us < 0 ? -1 : (double)s->ttft_us / 1e3;
}

static double g_ttfo(const struct load_sample *s)
{
	return s->ttfo_us < 0 ? -1 : (double)s->ttfo_us / 1e3;
}

static double g_tpot(const struct load_sample *s)
{
	return s->tpot_us < 0 ? -1 : s->tpot_us / 1e3;
}

static double g_e2e(const struct load_sample *s)
{
	return s->duration_us < 0 ? -1 : (double)s->duration_us / 1e3;
}

static double g_speed(const struct load_sample *s)
{
	return s->output_speed;
}

static double g_lag(const struct load_sample *s)
{
	return s->lag_us < 0 ? -1 : (double)s->lag_us / 1e3;
}

static double g_events(const struct load_sample *s)
{
	return (double)s->events;
}

static double g_chunks(const struct load_sample *s)
{
	return (double)s->token_chunks;
}

static double g_per_chunk(const struct load_sample *s)
{
	if (s->token_chunks == 0 || s->output_tokens < 0)
		return -1;
	return (double)s->output_tokens / (double)s->token_chunks;
}

static double g_first_chunk(const struct load_sample *s)
{
	return s->first_chunk_tokens < 0 ? -1 : (double)s->first_chunk_tokens;
}

static int any(const struct load_sample *s)
{
	return measured(s);
}

static void judge(struct load_summary *sum, const struct load_sample *s)
{
	struct goodput_request r;
	enum goodput_verdict v;

	memset(&r, 0, sizeof(r));
	r.outcome = s->outcome;
	r.value_us[GOODPUT_TTFT] = s->ttft_us;
	r.value_us[GOODPUT_TPOT] = s->tpot_us < 0 ? -1 : (int64_t)ceil(s->tpot_us);
	r.value_us[GOODPUT_TTFO] = s->ttfo_us;
	r.duration_us = s->duration_us;
	v = goodput_judge(&sum->goodput, &r);
	sum->judged += v != GOODPUT_UNCOUNTED;
	sum->good += v == GOODPUT_GOOD;
}

static void counts(const struct load_sum_in *in, struct load_summary *sum)
{
	const struct loadstats *st = in->st;
	double a = (double)in->window_start_us, b = (double)in->window_end_us;
	double out_tokens = 0, in_tokens = 0, reqs = 0, span = 0;
	/* the windows: the level's, or each run's of a repeated level (the
	 * gaps between runs, their warm-ups and drains, in none) */
	uint64_t one[1][2] = {{in->window_start_us, in->window_end_us}};
	const uint64_t (*win)[2] = in->nwindows > 0 ? in->windows : one;
	size_t nwin = in->nwindows > 0 ? in->nwindows : 1;

	for (size_t w = 0; w < nwin; w++)
		if (win[w][1] > win[w][0])
			span += (double)(win[w][1] - win[w][0]);
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		double end = (double)(s->start_us + (s->duration_us > 0 ?
		    (uint64_t)s->duration_us : 0));

		/* throughput: every request's work inside the window, warm-up
		 * ones included: they load the target too */
		for (size_t w = 0; w < nwin; w++) {
			a = (double)win[w][0];
			b = (double)win[w][1];
			out_tokens += tokens_in(s, a, b);
			reqs += request_in(s, a, b);
			if (end >= a && end <= b) {
				sum->completed++;
				if (s->input_tokens > 0)
					in_tokens += (double)s->input_tokens;
			}
		}
		if (!measured(s))
			continue;
		sum->requests++;
		sum->outcomes[s->outcome < OUTCOME_COUNT ? s->outcome : OUTCOME_UPSTREAM_ABORT]++;
		if (s->output_tokens > 0)
			sum->output_tokens += (uint64_t)s->output_tokens;
		if (s->input_tokens > 0)
			sum->input_tokens += (uint64_t)s->input_tokens;
		if (goodput_any(&sum->goodput))
			judge(sum, s);
	}
	sum->ok = sum->outcomes[OUTCOME_OK];
	sum->errors = sum->requests - sum->ok;
	sum->error_rate = sum->requests ? (double)sum->errors / (double)sum->requests : 0;
	sum->window_s = span / 1e6;
	if (sum->window_s > 0) {
		sum->requests_per_s = reqs / sum->window_s;
		sum->output_tokens_per_s = out_tokens / sum->window_s;
		sum->input_tokens_per_s = in_tokens / sum->window_s;
		sum->total_tokens_per_s = sum->output_tokens_per_s + sum->input_tokens_per_s;
		sum->goodput_per_s = (double)sum->good / sum->window_s;
	}
	sum->attainment = sum->judged ? (double)sum->good / (double)sum->judged : NAN;
}

static void itl(const struct loadstats *st, double *buf, const struct load_pcts *p,
    struct load_dist *d, double cdf[LOAD_CDF_POINTS])
{
	size_t n = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		if (!ok(s))
			continue;
		for (uint32_t k = 0; k < s->itl_n; k++)
			buf[n++] = (double)st->itl[s->itl_off + k] / 1e3;
	}
	load_dist_of(buf, n, p, d);
	/* buf is sorted now */
	for (size_t i = 0; i < LOAD_CDF_POINTS; i++)
		cdf[i] = load_quantile(buf, n, 100.0 * (double)i / (LOAD_CDF_POINTS - 1));
}

/* A value of the slice k, for the slices' quantiles. */
struct kv {
	size_t k;
	double v;
};

static int cmp_kv(const void *a, const void *b)
{
	const struct kv *x = a, *y = b;

	if (x->k != y->k)
		return x->k < y->k ? -1 : 1;
	return x->v < y->v ? -1 : x->v > y->v;
}

/* Sets p50 and p95 of each slice from the (k, v) pairs, sorted here. */
static void slice_q(struct kv *kv, size_t n, double *vals, struct load_slice *sl,
    size_t ns, int tpot)
{
	size_t i = 0;

	for (size_t k = 0; k < ns; k++) {
		if (tpot)
			sl[k].tpot_p50 = sl[k].tpot_p95 = NAN;
		else
			sl[k].ttft_p50 = sl[k].ttft_p95 = NAN;
	}
	qsort(kv, n, sizeof(*kv), cmp_kv);
	while (i < n) {
		size_t j = i, m = 0;
		while (j < n && kv[j].k == kv[i].k)
			vals[m++] = kv[j++].v;
		if (tpot) {
			sl[kv[i].k].tpot_p50 = load_quantile(vals, m, 50);
			sl[kv[i].k].tpot_p95 = load_quantile(vals, m, 95);
		} else {
			sl[kv[i].k].ttft_p50 = load_quantile(vals, m, 50);
			sl[kv[i].k].ttft_p95 = load_quantile(vals, m, 95);
		}
		i = j;
	}
}

/* The windows of a level's runs (independent replications, one after
 * the other on the level's timeline): the given ones, or its one window.
 * Returns how many, at most LOAD_SUM_RUNS. */
static size_t runs_of(const struct load_sum_in *in, uint64_t (*win)[2])
{
	size_t n = 0;

	if (in->nwindows > 1) {
		for (; n < in->nwindows && n < LOAD_SUM_RUNS; n++) {
			win[n][0] = in->windows[n][0];
			win[n][1] = in->windows[n][1];
		}
		return n;
	}
	win[0][0] = in->window_start_us;
	win[0][1] = in->window_end_us;
	return 1;
}

/* The run whose time holds t: the last to start at or before it. */
static size_t run_at(uint64_t (*win)[2], size_t nw, uint64_t t)
{
	size_t j = 0;

	while (j + 1 < nw && win[j + 1][0] <= t)
		j++;
	return j;
}

/* The slices of each run's window [start, end): requests by their
 * intended send time, tokens where they were emitted. A slice never
 * spans the seam between two runs: the gap between them is no load. */
static int slices(const struct load_sum_in *in, struct load_summary *sum, double *buf)
{
	const struct loadstats *st = in->st;
	uint64_t win[LOAD_SUM_RUNS][2], w = in->slice_us, span = 0;
	size_t base[LOAD_SUM_RUNS + 1], nw = runs_of(in, win);
	struct kv *kt, *kp;
	size_t ns = 0, nt = 0, np = 0;
	double *tok;

	for (size_t j = 0; j < nw; j++)
		span += win[j][1] > win[j][0] ? win[j][1] - win[j][0] : 0;
	if (w == 0 || span == 0)
		return 0;
	for (;;) {
		ns = 0;
		for (size_t j = 0; j < nw; j++) {
			base[j] = ns;
			ns += win[j][1] > win[j][0] ? (size_t)((win[j][1] - win[j][0] + w - 1) / w) : 0;
		}
		base[nw] = ns;
		if (ns <= LOAD_MAX_SLICES)
			break;
		/* a longer run gets wider slices, never a cut one */
		w = (span + LOAD_MAX_SLICES - 1) / (LOAD_MAX_SLICES - nw) + 1;
	}
	sum->slices = calloc(ns, sizeof(*sum->slices));
	kt = malloc((st->n + 1) * sizeof(*kt));
	kp = malloc((st->n + 1) * sizeof(*kp));
	tok = calloc(ns, sizeof(*tok));
	if (sum->slices == NULL || kt == NULL || kp == NULL || tok == NULL) {
		free(kt);
		free(kp);
		free(tok);
		return -1;
	}
	sum->nslices = ns;
	sum->slice_s = (double)w / 1e6;
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		size_t k, j = run_at(win, nw, s->start_us);
		uint64_t from = win[j][0], end = win[j][1];

		/* tokens where they were emitted, whichever request's */
		for (size_t r = 0; r < nw && s->first_token_us >= 0 && s->output_tokens > 0; r++) {
			uint64_t f = (uint64_t)s->first_token_us, l = (uint64_t)s->last_token_us;
			uint64_t a = win[r][0], stop = win[r][1];
			size_t k0 = f > a ? (size_t)((f - a) / w) : 0;
			size_t k1 = l > a ? (size_t)((l - a) / w) : 0;
			/* a run's last slice is cut at its window's end: its tokens
			 * are those it spans, as its rate divides by its span */
			for (k = k0; k <= k1 && base[r] + k < base[r + 1]; k++)
				tok[base[r] + k] += tokens_in(s, (double)(a + k * w),
				    (double)(a + (k + 1) * w < stop ? a + (k + 1) * w : stop));
		}
		if (!measured(s) || s->start_us < from || s->start_us >= end)
			continue;
		k = base[j] + (size_t)((s->start_us - from) / w);
		sum->slices[k].requests++;
		if (s->outcome != OUTCOME_OK) {
			sum->slices[k].errors++;
			continue;
		}
		sum->slices[k].ok++;
		if (s->ttft_us >= 0)
			kt[nt++] = (struct kv){ k, (double)s->ttft_us / 1e3 };
		if (s->tpot_us >= 0)
			kp[np++] = (struct kv){ k, s->tpot_us / 1e3 };
	}
	slice_q(kt, nt, buf, sum->slices, ns, 0);
	slice_q(kp, np, buf, sum->slices, ns, 1);
	for (size_t j = 0; j < nw; j++)
		for (size_t k = base[j]; k < base[j + 1]; k++) {
			struct load_slice *sl = &sum->slices[k];
			uint64_t a = win[j][0] + (k - base[j]) * w, b = a + w;

			sl->run = (unsigned)j;
			sl->start_s = (double)a / 1e6;
			sl->end_s = (double)(b < win[j][1] ? b : win[j][1]) / 1e6;
			sl->output_tokens = (uint64_t)(tok[k] + 0.5);
			sl->output_tokens_per_s = sl->end_s > sl->start_s ?
			    tok[k] / (sl->end_s - sl->start_s) : 0;
		}
	free(kt);
	free(kp);
	free(tok);
	return 0;
}

void load_fit_runs(const double *x, const double *y, const size_t *run, size_t n,
    struct load_fit *f)
{
	double mx[LOAD_SUM_RUNS] = {0}, my[LOAD_SUM_RUNS] = {0}, x0[LOAD_SUM_RUNS];
	double ax = 0, ay = 0, sxx = 0, sxy = 0, syy = 0;
	size_t c[LOAD_SUM_RUNS] = {0};
	int varies = 0;

	f->n = n;
	f->slope = f->intercept = f->r2 = NAN;
	if (n < 2)
		return;
	for (size_t i = 0; i < n; i++) {
		size_t j = run[i] < LOAD_SUM_RUNS ? run[i] : LOAD_SUM_RUNS - 1;
		if (c[j]++ == 0)
			x0[j] = x[i];
		varies |= x[i] != x0[j];
		mx[j] += x[i];
		my[j] += y[i];
		ax += x[i];
		ay += y[i];
	}
	/* see load_fit_of: constant within every run, no fit */
	if (!varies)
		return;
	for (size_t j = 0; j < LOAD_SUM_RUNS; j++)
		if (c[j] > 0) {
			mx[j] /= (double)c[j];
			my[j] /= (double)c[j];
		}
	for (size_t i = 0; i < n; i++) {
		size_t j = run[i] < LOAD_SUM_RUNS ? run[i] : LOAD_SUM_RUNS - 1;
		sxx += (x[i] - mx[j]) * (x[i] - mx[j]);
		sxy += (x[i] - mx[j]) * (y[i] - my[j]);
		syy += (y[i] - my[j]) * (y[i] - my[j]);
	}
	if (sxx <= 0)
		return;
	f->slope = sxy / sxx;
	f->intercept = ay / (double)n - f->slope * ax / (double)n;
	f->r2 = syy > 0 ? sxy * sxy / (sxx * syy) : 1.0;
}

size_t load_input_points(const struct loadstats *st, double *x, double *y)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		if (!ok(s) || s->ttft_us < 0)
			continue;
		x[n] = (s->input_tokens >= 0 ? (double)s->input_tokens :
		    (double)s->prompt_tokens) / 1e3;
		y[n++] = (double)s->ttft_us / 1e3;
	}
	return n;
}

/* TTFT against the start (drift, ms per minute, within each run: each
 * run's times moved onto the first's, so that a seam is no minute) and
 * against the input tokens (ms per thousand), over the ok measured
 * requests. */
static int fits(const struct load_sum_in *in, struct load_summary *sum)
{
	const struct loadstats *st = in->st;
	double *x = calloc(st->n + 1, sizeof(*x)), *y = calloc(st->n + 1, sizeof(*y));
	size_t *run = calloc(st->n + 1, sizeof(*run));
	uint64_t win[LOAD_SUM_RUNS][2];
	size_t n = 0, nw = runs_of(in, win);

	if (x == NULL || y == NULL || run == NULL) {
		free(x);
		free(y);
		free(run);
		return -1;
	}
	for (size_t i = 0; i < st->n; i++) {
		if (ok(&st->v[i]) && st->v[i].ttft_us >= 0) {
			size_t j = run_at(win, nw, st->v[i].start_us);
			x[n] = (double)(st->v[i].start_us - (win[j][0] - win[0][0])) / 60e6;
			run[n] = j;
			y[n++] = (double)st->v[i].ttft_us / 1e3;
		}
	}
	load_fit_runs(x, y, run, n, &sum->drift);
	n = load_input_points(st, x, y);
	load_fit_of(x, y, n, &sum->input_fit);
	free(x);
	free(y);
	free(run);
	return 0;
}

static void generator(const struct load_sum_in *in, struct load_summary *sum,
    double lag_p99)
{
	struct load_gen *g = &sum->gen;

	for (size_t i = 0; i < in->st->n; i++)
		g->events += in->st->v[i].events;
	g->cpu_s = in->cpu_s;
	g->cpu_share = in->wall_s > 0 ? in->cpu_s / in->wall_s : 0;
	g->cpu_us_per_event = g->events ? in->cpu_s * 1e6 / (double)g->events : NAN;
	g->queued = in->queued;
	/* a share of a blink is no bottleneck */
	g->cpu_bound = in->wall_s >= 1 && g->cpu_share >= GEN_CPU_SHARE;
	g->lag_bound = lag_p99 > GEN_LAG_P99_MS;
	g->conn_bound = in->queued > 0;
}

int load_summary(const struct load_sum_in *in, struct load_summary *sum)
{
	const struct loadstats *st = in->st;
	const struct load_pcts *p = in->pcts;
	size_t need = st->n > st->nitl ? st->n : st->nitl;
	double *buf, lag_p99;

	memset(sum, 0, sizeof(*sum));
	if (in->goodput != NULL)
		sum->goodput = *in->goodput;
	if (need < st->nlag)
		need = st->nlag;
	buf = malloc((need + 1) * sizeof(*buf));
	if (buf == NULL)
		return -1;
	counts(in, sum);
	dist(st, buf, ok, g_ttft, p, &sum->ttft);
	dist(st, buf, ok, g_ttfo, p, &sum->ttfo);
	dist(st, buf, ok, g_tpot, p, &sum->tpot);
	dist(st, buf, ok, g_e2e, p, &sum->e2e);
	dist(st, buf, ok, g_speed, p, &sum->speed);
	dist(st, buf, any, g_lag, p, &sum->lag);
	lag_p99 = load_quantile(buf, sum->lag.count, 99);
	dist(st, buf, ok, g_events, p, &sum->events);
	dist(st, buf, ok, g_chunks, p, &sum->token_chunks);
	dist(st, buf, ok, g_per_chunk, p, &sum->tokens_per_chunk);
	dist(st, buf, ok, g_first_chunk, p, &sum->first_chunk_tokens);
	itl(st, buf, p, &sum->itl, sum->itl_cdf);
	for (size_t i = 0; i < st->nlag; i++)
		buf[i] = (double)st->lag[i] / 1e3;
	load_dist_of(buf, st->nlag, p, &sum->event_lag);
	if (slices(in, sum, buf) < 0 || fits(in, sum) < 0) {
		free(buf);
		load_summary_free(sum);
		return -1;
	}
	free(buf);
	generator(in, sum, lag_p99);
	load_psize_check_of(st, &sum->prompt);
	return 0;
}

void load_summary_free(struct load_summary *sum)
{
	free(sum->slices);
	sum->slices = NULL;
	sum->nslices = 0;
}

static const struct load_dist *dist_named(const struct load_summary *sum,
    const char *name, size_t len)
{
	static const struct { const char *name; size_t off; } d[] = {
		{"ttft", offsetof(struct load_summary, ttft)},
		{"ttfo", offsetof(struct load_summary, ttfo)},
		{"tpot", offsetof(struct load_summary, tpot)},
		{"itl", offsetof(struct load_summary, itl)},
		{"e2e", offsetof(struct load_summary, e2e)},
	};

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		if (strlen(d[i].name) == len && strncmp(d[i].name, name, len) == 0)
			return (const struct load_dist *)((const char *)sum + d[i].off);
	return NULL;
}

int load_summary_value(const struct load_summary *sum,
    const struct load_pcts *pcts, const char *name, double *v)
{
	const char *us = strchr(name, '_');
	const struct load_dist *d;
	char pn[32];

	if (strcmp(name, "error_rate") == 0)
		*v = sum->error_rate;
	else if (strcmp(name, "requests_per_s") == 0)
		*v = sum->requests_per_s;
	else if (strcmp(name, "output_tokens_per_s") == 0)
		*v = sum->output_tokens_per_s;
	else if (strcmp(name, "total_tokens_per_s") == 0)
		*v = sum->total_tokens_per_s;
	else if (strcmp(name, "goodput_per_s") == 0)
		*v = sum->goodput_per_s;
	else if (us == NULL || (d = dist_named(sum, name, (size_t)(us - name))) == NULL)
		return -1;
	else if (strcmp(us + 1, "mean") == 0)
		*v = d->mean;
	else if (strcmp(us + 1, "std") == 0)
		*v = d->std;
	else if (strcmp(us + 1, "min") == 0)
		*v = d->min;
	else if (strcmp(us + 1, "max") == 0)
		*v = d->max;
	else {
		for (size_t i = 0; i < pcts->n; i++) {
			load_pcts_name(pcts->p[i], pn, sizeof pn);
			if (strcmp(us + 1, pn) == 0) {
				*v = d->q[i];
				return 0;
			}
		}
		return -1;
	}
	return 0;
}
