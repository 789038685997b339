/* SPDX-License-Identifier: Apache-2.0 */
#include "load_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_disturb.h"
#include "load_prefix.h"
#include "load_prefix_use.h"
#include "load_session.h"
#include "load_turns.h"
#include "load_prompts.h"
#include "load_trace.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A figure, or "-" where undefined, in a column of width w. */
static void cell(FILE *f, double v, int w, int dec)
{
	if (isfinite(v))
		fprintf(f, " %*.*f", w, dec, v);
	else
		fprintf(f, " %*s", w, "-");
}

size_t load_report_error_statuses(const struct load_level *lv,
    struct load_status_count v[LOAD_REPORT_STATUSES])
{
	size_t n = 0;

	for (size_t i = 0; i < lv->st.n; i++) {
		const struct load_sample *x = &lv->st.v[i];
		size_t k;
		if (!loadstats_counted(x) || x->outcome == OUTCOME_OK || x->status == 0)
			continue;
		for (k = 0; k < n && v[k].status != x->status; k++)
			;
		if (k == n) {
			if (n == LOAD_REPORT_STATUSES)
				continue;
			/* in order */
			for (k = n++; k > 0 && v[k - 1].status > x->status; k--)
				v[k] = v[k - 1];
			v[k].status = x->status;
			v[k].n = 0;
		}
		v[k].n++;
	}
	return n;
}

double load_report_read_late_limit(const struct load_result *r, int *target)
{
	double lim = 1;

	*target = -1;
	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_target *t = &r->slo.v[i];
		if (t->metric == LOAD_SLO_ERROR_RATE)
			continue;
		if (*target < 0 || t->limit < r->slo.v[*target].limit)
			*target = (int)i;
	}
	if (*target >= 0 && 0.05 * r->slo.v[*target].limit > lim)
		lim = 0.05 * r->slo.v[*target].limit;
	return lim;
}

int load_report_read_late(const struct load_result *r, const struct load_level *lv)
{
	int t;

	return lv->info.read_late_p99_ms > load_report_read_late_limit(r, &t);
}

double load_report_lag_p99(const struct load_result *r, const struct load_level *lv)
{
	double *v, q;
	size_t n = 0;

	for (size_t i = 0; i < r->pcts.n; i++)
		if (r->pcts.p[i] == 99)
			return lv->sum.lag.q[i];
	/* not among the percentiles asked for: from the samples, else the max */
	if (lv->st.n == 0 || (v = malloc(lv->st.n * sizeof(double))) == NULL)
		return lv->sum.lag.max;
	for (size_t i = 0; i < lv->st.n; i++)
		if (loadstats_counted(&lv->st.v[i]))
			v[n++] = (double)lv->st.v[i].lag_us / 1e3;
	if (n == 0) {
		free(v);
		return lv->sum.lag.max;
	}
	qsort(v, n, sizeof(double), cmp_double);
	q = load_quantile(v, n, 99);
	free(v);
	return q;
}

double load_report_lag_limit(const struct load_result *r, const struct load_level *lv,
    int *target)
{
	double lim = LOAD_REPORT_LAG_MS;

	*target = -1;
	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_target *t = &r->slo.v[i];
		if (t->metric != LOAD_SLO_TTFT && t->metric != LOAD_SLO_TTFO &&
		    t->metric != LOAD_SLO_E2E)
			continue;
		if (*target < 0 || t->limit < r->slo.v[*target].limit)
			*target = (int)i;
	}
	if (*target >= 0)
		return fmax(lim, LOAD_REPORT_LAG_SHARE * r->slo.v[*target].limit);
	if (isfinite(lv->sum.ttft.median))
		lim = fmax(lim, LOAD_REPORT_LAG_SHARE * lv->sum.ttft.median);
	return lim;
}

const struct load_level *load_report_lag_worst(const struct load_result *r)
{
	const struct load_level *w = NULL;
	double worst = 0;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		double p99, lim;
		int t;
		/* a p99 over 1 ms flagged it: nothing to weigh below that */
		if (!lv->sum.gen.lag_bound)
			continue;
		p99 = load_report_lag_p99(r, lv);
		lim = load_report_lag_limit(r, lv, &t);
		if (isfinite(p99) && p99 > lim && p99 / lim > worst) {
			worst = p99 / lim;
			w = lv;
		}
	}
	return w;
}

/* Once per invocation: requests left late, where it matters (its worst
 * level): lag is in every TTFT and E2E, and 1 ms is noise to a 200 ms
 * target. */
static void lag_warning(FILE *f, const struct load_result *r)
{
	const struct load_level *w = load_report_lag_worst(r);
	double p99;
	int t;

	if (w == NULL)
		return;
	p99 = load_report_lag_p99(r, w);
	(void)load_report_lag_limit(r, w, &t);
	fprintf(f, "warning      requests left late: dispatch lag %.2f ms at p99, %.2f ms at "
	    "most (%s%s), ", p99, w->sum.lag.max, r->nlevels > 1 ? "the worst level: " : "",
	    r->nlevels > 1 ? w->label : "the run");
	if (t >= 0)
		fprintf(f, "%.0f %% of the target %s <= %.4g ms", 100 * p99 / r->slo.v[t].limit,
		    r->slo.v[t].name, r->slo.v[t].limit);
	else
		fprintf(f, "%.0f %% of its TTFT p50", 100 * p99 / w->sum.ttft.median);
	fprintf(f, ": the generator fell behind and its latencies include it\n");
}

/* Once per invocation: runs of a search set aside, or levels left
 * undecided, because the generator itself ran late (load_disturb.h). */
static void disturbed_warning(FILE *f, const struct load_result *r)
{
	unsigned runs = 0, levels = 0, kept = 0;
	double worst = NAN;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		runs += lv->disturbed_runs;
		levels += lv->disturbed_runs > 0 || lv->disturbed;
		kept += lv->disturbed;
		if (!(lv->disturbed_late_ms <= worst))
			worst = lv->disturbed_late_ms;
	}
	if (levels == 0)
		return;
	fprintf(f, "warning      the generator ran late (%.1f ms at p95 at worst, over "
	    "%.3g ms: %.0f %% of the tightest latency target) in %zu level%s: %u run%s "
	    "set aside and run again", worst, load_disturb_bound(&r->slo),
	    100 * LOAD_DISTURB_SHARE, (size_t)levels, levels > 1 ? "s" : "", runs,
	    runs == 1 ? "" : "s");
	if (kept > 0)
		fprintf(f, ", %u level%s left undecided (disturbed in every run)", kept,
		    kept > 1 ? "s" : "");
	fprintf(f, "; give it a CPU of its own\n");
}

/* Once per invocation: the generator read late (the worst level). */
static void read_late_warning(FILE *f, const struct load_result *r)
{
	const struct load_level *w = NULL;
	double lim;
	int t;

	for (size_t i = 0; i < r->nlevels; i++)
		if (load_report_read_late(r, &r->levels[i]) && (w == NULL ||
		    r->levels[i].info.read_late_p99_ms > w->info.read_late_p99_ms))
			w = &r->levels[i];
	if (w == NULL)
		return;
	lim = load_report_read_late_limit(r, &t);
	fprintf(f, "warning      the generator read late: %.2f ms at p99, %.2f ms at most "
	    "(%s%s, %s)", w->info.read_late_p99_ms, w->info.read_late_max_ms,
	    r->nlevels > 1 ? "the worst level: " : "", r->nlevels > 1 ? w->label : "the run",
	    w->info.read_late_stamps ? "tokentap-mock's stamps" : "its own loop's timer");
	if (t >= 0)
		fprintf(f, ", %.0f %% of the target %s <= %.4g ms", 100 *
		    w->info.read_late_p99_ms / r->slo.v[t].limit, r->slo.v[t].name,
		    r->slo.v[t].limit);
	else
		fprintf(f, ", over %.3g ms", lim);
	fprintf(f, ": its figures include it; give it a CPU of its own, or split the "
	    "users among generators\n");
}

/* A token count's range: "100", or "100-200". */
static void range(FILE *f, const char *what, const struct load_range *r)
{
	if (r->min == r->max)
		fprintf(f, ", %s %u tokens", what, r->min);
	else
		fprintf(f, ", %s %u-%u tokens", what, r->min, r->max);
}

/* Conversations: their turns (or their file) and think time. */
static void talk_mode(FILE *f, const struct load_conf *c)
{
	char think[64];

	if (c->turns.min == 0 && c->sessions == NULL)
		return;
	load_think_name(&c->think, think, sizeof think);
	if (c->sessions != NULL)
		fprintf(f, " replaying %s (%zu sessions, %zu turns)", c->sessions->path,
		    c->sessions->n, c->sessions->turns);
	else if (c->turns.min == c->turns.max)
		fprintf(f, " holding conversations of %u turns", c->turns.min);
	else
		fprintf(f, " holding conversations of %u-%u turns", c->turns.min, c->turns.max);
	fprintf(f, ", think time %s", think);
}

static void table_mode(FILE *f, const struct load_conf *c)
{
	if (c->trace != NULL) {
		fprintf(f, "load         open loop, replaying %s (%zu requests", c->trace->path,
		    c->trace->n);
		if (c->trace_speed != 1)
			fprintf(f, ", speed x%.3g", c->trace_speed);
		fputc(')', f);
	} else if (c->rate > 0) {
		/* a rate is a plain number, 10000 and not 1e+04 */
		fprintf(f, c->rate < 1e4 ? "load         open loop, %.4g req/s %s arrivals" :
		    "load         open loop, %.0f req/s %s arrivals", c->rate,
		    load_conf_arrivals_name(c));
	}
	else
		fprintf(f, "load         closed loop, %u users", c->concurrency);
	talk_mode(f, c);
	if (c->arrivals == LOAD_ARR_GAMMA && c->rate > 0 && c->trace == NULL)
		fprintf(f, " (burstiness %.3g)", c->burstiness);
	if (c->warmup_us > 0)
		fprintf(f, ", warm-up %.3g s", (double)c->warmup_us / 1e6);
	if (c->warmup_count > 0)
		fprintf(f, ", warm-up %" PRIu64 " requests", c->warmup_count);
	if (c->cooldown)
		fprintf(f, ", cool-down");
	if (c->duration_us > 0)
		fprintf(f, ", %.3g s", (double)c->duration_us / 1e6);
	if (c->count > 0)
		fprintf(f, ", %" PRIu64 " requests", c->count);
	if (c->prompts != NULL)
		fprintf(f, ", prompts of %s (%zu)", c->prompts->path, c->prompts->n);
	else if (c->trace == NULL)
		range(f, "prompt", &c->prompt_tokens);
	if (c->prefixes > 0) {
		char dist[32];
		load_prefix_dist_name(c->prefix_zipf, dist, sizeof dist);
		fprintf(f, " after one of %u shared prefixes of %u tokens (%s)",
		    c->prefixes, c->prefix_tokens, dist);
	}
	if (c->trace != NULL)
		fprintf(f, ", %s tokens as the trace has them\n", c->prompts != NULL ?
		    "output" : "prompt and output");
	else
		range(f, "max", &c->max_tokens), fputc('\n', f);
}

/* How synthetic prompts were sized (load_psize.h) and the target's count
 * of the prompts sent: over lv, or every level (lv NULL). */
static void prompt_lines(FILE *f, const struct load_result *r,
    const struct load_level *lv)
{
	const struct load_psize *p = &r->psize;
	struct load_psize_check k;
	uint64_t ok = 0;
	char bpt[80];

	memset(&k, 0, sizeof(k));
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *l = lv != NULL ? lv : &r->levels[i];
		ok += l->sum.ok;
		load_psize_check_add(&k, &l->sum.prompt);
		if (lv != NULL)
			break;
	}
	load_psize_format(p, bpt, sizeof bpt);
	fprintf(f, "prompts      sized at %s, %s", bpt,
	    p->rule == LOAD_PSIZE_RULE_CALIBRATED ? "calibrated on the target" :
	    p->rule == LOAD_PSIZE_RULE_GIVEN ? "as given" : "an estimate");
	if (k.requests > 0)
		fprintf(f, "; %.1f tokens asked, %.1f reported by the target (x%.3f, "
		    "%" PRIu64 " requests)", k.asked_mean, k.reported_mean, k.ratio_mean,
		    k.requests);
	fputc('\n', f);
	if (p->estimate && p->requests > 0)
		fprintf(f, "warning      prompt sizes are estimates: --calibrate's %" PRIu64
		    " requests got %s\n", p->requests, p->reported == 0 ?
		    "no prompt token count from the target" : "counts no tokenizer gives");
	else if (p->estimate && k.requests == 0 && ok > 0)
		fprintf(f, "warning      prompt sizes are estimates: the target reported no "
		    "prompt token counts\n");
}

static void dist_row(FILE *f, const char *label, const struct load_dist *d,
    const struct load_pcts *p)
{
	fprintf(f, "%-16s %8zu", label, d->count);
	for (size_t i = 0; i < p->n; i++)
		cell(f, d->q[i], 9, 2);
	cell(f, d->mean, 9, 2);
	cell(f, d->std, 9, 2);
	cell(f, d->max, 9, 2);
	fputc('\n', f);
}

static void gen_warnings(FILE *f, const struct load_level *lv)
{
	const struct load_gen *g = &lv->sum.gen;

	if (g->cpu_bound)
		fprintf(f, "warning      the generator used %.0f %% of a CPU: it was the "
		    "bottleneck, not the target; give it a CPU of its own or less load\n",
		    100 * g->cpu_share);
	if (g->conn_bound)
		fprintf(f, "warning      %" PRIu64 " requests waited for one of the -c %u "
		    "connections; their latency includes the wait (raise -c)\n",
		    g->queued, lv->conf.concurrency);
}

void load_report_goodput_line(FILE *f, const struct load_level *lv)
{
	const struct load_summary *s = &lv->sum;
	char targets[160];
	size_t n = 0;

	if (!goodput_any(&s->goodput))
		return;
	targets[0] = '\0';
	for (int i = 0; i < GOODPUT_TARGETS && n < sizeof targets; i++)
		if (s->goodput.us[i] > 0)
			n += (size_t)snprintf(targets + n, sizeof targets - n, "%s%s <= %.6g ms",
			    n ? ", " : "", goodput_target_name((enum goodput_target)i),
			    (double)s->goodput.us[i] / 1e3);
	fprintf(f, "  %-18s %8.2f req/s  attainment %.2f %% (%" PRIu64 " of %" PRIu64
	    " ok within %s)\n", "goodput", s->goodput_per_s,
	    s->judged ? 100.0 * (double)s->good / (double)s->judged : 0.0, s->good,
	    s->judged, targets);
}

/* The p95 of a distribution at the percentiles p, NaN when not asked. */
static double p95_of(const struct load_dist *d, const struct load_pcts *p)
{
	for (size_t k = 0; k < p->n; k++)
		if (p->p[k] == 95)
			return d->q[k];
	return NAN;
}

/* Conversations: each turn's figures, the first 8 and the last 2 of
 * longer ones. */
static void turns_table(FILE *f, const struct load_level *lv, const struct load_pcts *p)
{
	struct load_turns t;
	char name[24];

	if (load_turns_of(lv, p, &t) < 0 || t.n == 0)
		return;
	fprintf(f, "\n%-14s %8s %8s %10s %10s %10s %10s %10s\n", "by turn", "requests",
	    "ok", "prompt tok", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95");
	for (size_t i = 0; i < t.n; i++) {
		const struct load_turns_row *w = &t.v[i];
		if (t.n > 10 && i == 8)
			fprintf(f, "%-14s\n", "...");
		if (t.n > 10 && i >= 8 && i < t.n - 2)
			continue;
		snprintf(name, sizeof name, "turn %u", w->turn);
		fprintf(f, "%-14s %8" PRIu64 " %8" PRIu64, name, w->requests, w->ok);
		cell(f, w->prompt_tokens, 10, 1);
		cell(f, w->ttft.median, 10, 2);
		cell(f, p95_of(&w->ttft, p), 10, 2);
		cell(f, w->tpot.median, 10, 2);
		cell(f, p95_of(&w->tpot, p), 10, 2);
		fputc('\n', f);
	}
	fprintf(f, "%-14s %8" PRIu64 "\n", "sessions", t.sessions);
	load_turns_free(&t);
}

static void slices_table(FILE *f, const struct load_summary *s)
{
	fprintf(f, "\n%-14s %8s %8s %12s %10s %10s %10s %10s\n", "slice s", "requests",
	    "errors", "out tok/s", "TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95");
	for (size_t i = 0; i < s->nslices; i++) {
		const struct load_slice *x = &s->slices[i];
		char span[32];

		snprintf(span, sizeof span, "%.1f-%.1f", x->start_s, x->end_s);
		fprintf(f, "%-14s %8" PRIu64 " %8" PRIu64, span, x->requests, x->errors);
		cell(f, x->output_tokens_per_s, 12, 1);
		cell(f, x->ttft_p50, 10, 2);
		cell(f, x->ttft_p95, 10, 2);
		cell(f, x->tpot_p50, 10, 2);
		cell(f, x->tpot_p95, 10, 2);
		fputc('\n', f);
	}
	if (s->drift.n >= 2 && isfinite(s->drift.slope))
		fprintf(f, "drift        TTFT %+.3f ms per minute over the run (R² %.2f)%s\n",
		    s->drift.slope, s->drift.r2, s->drift.r2 < LOAD_REPORT_TREND_R2 ? ": no trend" : "");
}

/* A level's SLO: each target's figure, its interval, its limit. */
static void slo_lines(FILE *f, const struct load_result *r, const struct load_level *lv)
{
	fprintf(f, "\nSLO          %s%s\n", lv->slo.met ? "met" : "MISSED",
	    lv->slo.noisy ? " (a figure within noise of its limit)" : "");
	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_target *t = &r->slo.v[i];
		const struct load_slo_eval *x = &lv->slo.v[i];
		double k = t->metric == LOAD_SLO_ERROR_RATE ? 100 : 1;
		const char *u = t->metric == LOAD_SLO_ERROR_RATE ? " %" : " ms";

		fprintf(f, "  %-18s", t->name);
		cell(f, x->value * k, 10, 3);
		fprintf(f, "%s  95 %% interval", u);
		cell(f, x->lo * k, 9, 3);
		cell(f, x->hi * k, 9, 3);
		fprintf(f, "  limit %.4g%s  %s\n", t->limit * k, u, x->met ? "met" : "MISSED");
	}
	load_report_goodput_line(f, lv);
}

void load_report_level(FILE *f, const struct load_result *r,
    const struct load_level *lv)
{
	const struct load_summary *s = &lv->sum;
	const struct load_conf *c = &lv->conf;
	const struct load_pcts *p = &r->pcts;
	char pn[32];
	int sep = 0;

	fprintf(f, "target       %s (%s, model %s)\n", c->url,
	    dialect_names[load_conf_dialect(c)], c->model);
	table_mode(f, c);
	fprintf(f, "requests     %" PRIu64 " in a %.2f s window: %" PRIu64 " ok, %" PRIu64
	    " errors, error rate %.2f %%%s", s->requests, s->window_s, s->ok, s->errors,
	    100.0 * s->error_rate, lv->info.interrupted ? " (interrupted)" : "");
	if (lv->info.warmup_requests > 0)
		fprintf(f, "; %" PRIu64 " warm-up requests not counted",
		    lv->info.warmup_requests);
	if (lv->info.cooldown_requests > 0)
		fprintf(f, "; %" PRIu64 " cool-down requests not counted",
		    lv->info.cooldown_requests);
	fputc('\n', f);
	for (int o = OUTCOME_OK + 1; o < OUTCOME_COUNT; o++) {
		if (s->outcomes[o] == 0)
			continue;
		fprintf(f, "%s%s %" PRIu64, sep ? ", " : "errors       ",
		    meter_outcome_name((enum meter_outcome)o), s->outcomes[o]);
		sep = 1;
	}
	if (sep)
		fputc('\n', f);
	{
		struct load_status_count st[LOAD_REPORT_STATUSES];
		size_t n = load_report_error_statuses(lv, st);
		for (size_t i = 0; i < n; i++)
			fprintf(f, "%sHTTP %u %" PRIu64, i ? ", " : "by status    ", st[i].status,
			    st[i].n);
		if (n > 0)
			fputc('\n', f);
	}
	fprintf(f, "throughput   %.2f req/s, output %.1f tokens/s, total %.1f tokens/s "
	    "(%" PRIu64 " connections, at most %" PRIu64 " in flight)\n",
	    s->requests_per_s, s->output_tokens_per_s, s->total_tokens_per_s,
	    lv->info.connections, lv->info.max_in_flight);
	if (s->tokens_per_chunk.count > 0)
		fprintf(f, "chunks       %.1f events, %.1f token chunks, %.2f tokens per "
		    "chunk per request (mean)%s", s->events.mean, s->token_chunks.mean,
		    s->tokens_per_chunk.mean, s->first_chunk_tokens.count ? "" : "\n");
	/* the first chunk's tokens, where the stream told them */
	if (s->first_chunk_tokens.count > 0)
		fprintf(f, "; first chunk %.2f tokens\n", s->first_chunk_tokens.mean);
	prompt_lines(f, r, lv);
	fprintf(f, "generator    %.2f s CPU (%.0f %% of one), %.2f us per event; "
	    "dispatch lag p50 %.3f ms, max %.3f ms\n", s->gen.cpu_s, 100 * s->gen.cpu_share,
	    isfinite(s->gen.cpu_us_per_event) ? s->gen.cpu_us_per_event : 0.0,
	    isfinite(s->lag.median) ? s->lag.median : 0.0,
	    isfinite(s->lag.max) ? s->lag.max : 0.0);
	gen_warnings(f, lv);
	if (r->kind != LOAD_KIND_RUN)
		;                    /* a sweep's or a search's: once, after its levels */
	else if (lv == load_report_lag_worst(r))
		lag_warning(f, r);
	fprintf(f, "\n%-16s %8s", "", "count");
	for (size_t i = 0; i < p->n; i++) {
		load_pcts_name(p->p[i], pn, sizeof pn);
		fprintf(f, " %9s", pn);
	}
	fprintf(f, " %9s %9s %9s\n", "mean", "std", "max");
	dist_row(f, "TTFT ms", &s->ttft, p);
	if (c->prefixes > 0) {
		/* the first use of each prefix, then the requests that repeat one */
		struct load_prefix_use u;
		(void)load_prefix_use_of(lv, p, &u);
		dist_row(f, " prefix first", &u.ttft[0], p);
		dist_row(f, " prefix repeat", &u.ttft[1], p);
		load_prefix_use_free(&u);
	}
	dist_row(f, "TTFO ms", &s->ttfo, p);
	dist_row(f, "TPOT ms", &s->tpot, p);
	dist_row(f, "ITL ms", &s->itl, p);
	dist_row(f, "E2E latency ms", &s->e2e, p);
	dist_row(f, "speed tok/s", &s->speed, p);
	if (c->lag)
		dist_row(f, "event lag ms", &s->event_lag, p);
	if (c->lag && s->event_lag.count == 0)
		fprintf(f, "%-16s no event was stamped: start tokentap-mock with --stamp on "
		    "(or send -H 'X-Mock-Stamp: on'); --lag times only those\n", "");
	if (lv->has_slo)
		slo_lines(f, r, lv);
	turns_table(f, lv, p);
	if (s->nslices > 1)
		slices_table(f, s);
}

static void levels_table(FILE *f, const struct load_result *r)
{
	int slo = r->slo.n > 0, tt = r->nlevels > 0 && r->levels[0].tt.asked;

	fprintf(f, "%-5s %-34s %8s %9s %11s %9s %9s %9s %9s %9s %9s %7s%s\n", "level",
	    "", "requests", "req/s", "out tok/s", "TTFT p50", "TTFT p95", "TPOT p50",
	    "TPOT p95", "E2E p50", "E2E p95", "errors", slo ? "  SLO" : "");
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		const struct load_summary *s = &lv->sum;
		double t95 = NAN, p95 = NAN, e95 = NAN;

		for (size_t k = 0; k < r->pcts.n; k++)
			if (r->pcts.p[k] == 95) {
				t95 = s->ttft.q[k];
				p95 = s->tpot.q[k];
				e95 = s->e2e.q[k];
			}
		fprintf(f, "%-5zu %-34.34s %8" PRIu64, lv->index, lv->label, s->requests);
		cell(f, s->requests_per_s, 9, 2);
		cell(f, s->output_tokens_per_s, 11, 1);
		cell(f, s->ttft.median, 9, 2);
		cell(f, t95, 9, 2);
		cell(f, s->tpot.median, 9, 2);
		cell(f, p95, 9, 2);
		cell(f, s->e2e.median, 9, 1);
		cell(f, e95, 9, 1);
		fprintf(f, " %6.2f%%", 100 * s->error_rate);
		if (slo && lv->disturbed)
			fprintf(f, "  %s (undecided: disturbed)", lv->slo.met ? "met" : "MISSED");
		else if (slo && lv->slo.noisy)
			fprintf(f, "  %s (undecided, %u run%s)", lv->slo.met ? "met" : "MISSED",
			    lv->runs, lv->runs > 1 ? "s" : "");
		else if (slo && lv->unsustained != NULL)
			fprintf(f, "  %s (%s)", lv->slo.met ? "met" : "MISSED",
			    lv->slo.met ? "unsettled" : "not sustained");
		else if (slo)
			fprintf(f, "  %s%s", lv->slo.met ? "met" : "MISSED",
			    lv->runs > 1 ? " (repeated)" : "");
		if (slo && lv->disturbed_runs > 0)
			fprintf(f, ", %u disturbed run%s set aside", lv->disturbed_runs,
			    lv->disturbed_runs > 1 ? "s" : "");
		fputc('\n', f);
	}
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		struct load_prefix_use u;
		if (lv->conf.prefixes == 0 || load_prefix_use_of(lv, &r->pcts, &u) < 0)
			continue;
		fprintf(f, "level %zu: TTFT p50 %.2f ms at a prefix's first use (%zu), "
		    "%.2f ms repeating one (%zu)\n", i, u.ttft[0].median, u.ttft[0].count,
		    u.ttft[1].median, u.ttft[1].count);
		load_prefix_use_free(&u);
	}
	for (size_t i = 0; i < r->nlevels; i++) {
		struct load_turns t;
		if (load_turns_of(&r->levels[i], &r->pcts, &t) < 0 || t.n < 2) {
			load_turns_free(&t);
			continue;
		}
		fprintf(f, "level %zu: TTFT p50 %.2f ms at turn 1 (%" PRIu64 "), %.2f ms "
		    "at turn %u (%" PRIu64 ")\n", i, t.v[0].ttft.median, t.v[0].requests,
		    t.v[t.n - 1].ttft.median, t.v[t.n - 1].turn, t.v[t.n - 1].requests);
		load_turns_free(&t);
	}
	for (size_t i = 0; i < r->nlevels; i++)
		if (r->levels[i].sum.gen.cpu_bound || r->levels[i].sum.gen.conn_bound) {
			fprintf(f, "level %zu: ", i);
			gen_warnings(f, &r->levels[i]);
		}
	if (!tt)
		return;
	fprintf(f, "\nthe client beside tokentap (ms; diff = client - tokentap: the "
	    "network and the proxy)\n");
	fprintf(f, "%-5s %-28s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n", "level", "",
	    "TTFT p50", "tokentap", "diff", "TTFT p95", "tokentap", "diff",
	    "TPOT p50", "tokentap", "diff");
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		const struct load_tt *t = &lv->tt;
		double c95 = NAN;

		for (size_t k = 0; k < r->pcts.n; k++)
			if (r->pcts.p[k] == 95)
				c95 = lv->sum.ttft.q[k];
		fprintf(f, "%-5zu %-28.28s", lv->index, lv->label);
		if (!t->ok) {
			fprintf(f, " tokentap: %s\n", t->error);
			continue;
		}
		cell(f, lv->sum.ttft.median, 9, 3);
		cell(f, t->ttft[LOAD_TT_P50], 9, 3);
		cell(f, lv->sum.ttft.median - t->ttft[LOAD_TT_P50], 9, 3);
		cell(f, c95, 9, 3);
		cell(f, t->ttft[LOAD_TT_P95], 9, 3);
		cell(f, c95 - t->ttft[LOAD_TT_P95], 9, 3);
		cell(f, lv->sum.tpot.median, 9, 3);
		cell(f, t->tpot[LOAD_TT_P50], 9, 3);
		cell(f, lv->sum.tpot.median - t->tpot[LOAD_TT_P50], 9, 3);
		fprintf(f, "%s\n", t->window_short ? "  (level longer than the window)" : "");
	}
	/* --tokentap alone could not pair by id: why, beside the figures */
	if (r->tt_pairing_reason != NULL)
		fprintf(f, "warning      from /stats windows, not paired by request id: %s\n",
		    r->tt_pairing_reason);
}

/* A value or "?" (unbounded). */
static const char *bound(char *buf, size_t n, double v, int dec)
{
	if (isfinite(v))
		snprintf(buf, n, "%.*f", dec, v);
	else
		snprintf(buf, n, "?");
	return buf;
}

/* The wall time of a search's levels, s. */
static double search_s(const struct load_result *r, enum load_key k)
{
	double a = NAN, b = NAN;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		double end = lv->started_s + (double)lv->info.elapsed_us / 1e6;
		if (lv->search != k)
			continue;
		if (isnan(a) || lv->started_s < a)
			a = lv->started_s;
		if (isnan(b) || end > b)
			b = end;
	}
	return b - a;
}

int load_report_sweep_all_ran(const struct load_result *r)
{
	return r->stop_reason != NULL && strcmp(r->stop_reason, "levels") == 0;
}

int load_report_sweep_capacity(const struct load_result *r)
{
	int cap = -1;

	for (size_t i = 0; i < r->nlevels && r->levels[i].has_slo && r->levels[i].slo.met; i++)
		cap = (int)i;
	return cap;
}

/* A search's knee among the levels it tried (load_result.h). */
static void knee_line(FILE *f, const struct load_capacity *c)
{
	const char *unit = c->key == LOAD_KEY_RATE ? " req/s" : "";
	int dec = c->key == LOAD_KEY_RATE ? 2 : 0;

	if (isnan(c->knee_past))
		fprintf(f, "knee         %s: none among the levels tried (none saturated)\n",
		    load_key_name(c->key));
	else if (isnan(c->knee))
		fprintf(f, "knee         %s: none, the lowest level tried (%.*f%s) was "
		    "saturated\n", load_key_name(c->key), dec, c->knee_past, unit);
	else
		fprintf(f, "knee         %s %.*f%s: the last level tried %s; %.*f%s, the "
		    "next tried, was not\n", load_key_name(c->key), dec, c->knee, unit,
		    c->key == LOAD_KEY_RATE ? "that carried its offered rate" :
		    "before throughput stopped growing while latency rose", dec,
		    c->knee_past, unit);
}

static void capacity_lines(FILE *f, const struct load_result *r)
{
	for (size_t i = 0; i < r->ncapacity; i++) {
		const struct load_capacity *c = &r->capacity[i];
		const char *unit = c->key == LOAD_KEY_RATE ? " req/s" : "";
		int dec = c->key == LOAD_KEY_RATE ? 2 : 0;

		if (!c->ran)
			continue;
		if (!c->found) {
			fprintf(f, "capacity     %s: no level met the SLO (lowest tried %.*f%s)%s%s\n",
			    load_key_name(c->key), dec, c->hi, unit,
			    c->binding >= 0 ? "; binding: " : "",
			    c->binding >= 0 ? r->slo.v[c->binding].name : "");
			continue;
		}
		if (c->key == LOAD_KEY_RATE && isfinite(c->estimate)) {
			char a[32], b[32];
			fprintf(f, "capacity     rate %.2f req/s, %.0f %% confidence interval "
			    "[%s, %s] (%s); ", c->estimate, 100 * (c->confidence > 0 ?
			    c->confidence : 0.95), bound(a, sizeof a, c->ci_lo, 2),
			    bound(b, sizeof b, c->ci_hi, 2), c->replications > 0 ?
			    "fitted on the runs near it" : "the levels decided met and missed");
		} else {
			fprintf(f, "capacity     %s %.*f%s: ", load_key_name(c->key), dec,
			    c->capacity, unit);
		}
		fprintf(f, "met at %.*f, ", dec, c->lo);
		if (isfinite(c->hi))
			fprintf(f, "missed at %.*f (bisection bracket [%.*f, %.*f])", dec, c->hi,
			    dec, c->lo, dec, c->hi);
		else
			fprintf(f, "never missed up to the search's end (%s)", c->stopped);
		if (c->binding >= 0)
			fprintf(f, "; binding: %s", r->slo.v[c->binding].name);
		fprintf(f, "; %zu levels", c->levels);
		if (isfinite(search_s(r, c->key)))
			fprintf(f, " in %.0f s", search_s(r, c->key));
		fputc('\n', f);
		knee_line(f, c);
	}
}

static void pair_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, " %9.3f", v);
	else
		fprintf(f, " %9s", "-");
}

/* --tokentap-log: client - tokentap per request, a line per level. */
static void pairs_table(FILE *f, const struct load_result *r)
{
	if (r->nlevels == 0 || !r->levels[0].pairs.asked)
		return;
	fprintf(f, "\nclient - tokentap per request (ms), paired by X-Request-Id with "
	    "tokentap's access log\n%-36s %8s %8s %9s %9s %9s %9s %9s %9s\n", "level",
	    "paired", "missing", "TTFT p50", "TTFT p95", "TTFT max", "TPOT p50", "TPOT p95",
	    "TPOT max");
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_tt_pairs *p = &r->levels[i].pairs;
		fprintf(f, "%-36.36s %8llu %8llu", r->levels[i].label,
		    (unsigned long long)p->paired, (unsigned long long)p->missing);
		for (int k = 0; k < 3; k++)
			pair_num(f, p->ttft[k]);
		for (int k = 0; k < 3; k++)
			pair_num(f, p->tpot[k]);
		fputc('\n', f);
	}
}

void load_report_table(FILE *f, const struct load_result *r)
{
	const struct load_conf *c = r->conf;

	if (r->kind == LOAD_KIND_RUN) {
		if (r->nlevels > 0)
			load_report_level(f, r, &r->levels[0]);
		if (r->nlevels > 0 && r->levels[0].tt.asked) {
			fputc('\n', f);
			levels_table(f, r);
		}
		read_late_warning(f, r);
		pairs_table(f, r);
		return;
	}
	fprintf(f, "target       %s (%s, model %s)\n", c->url,
	    dialect_names[load_conf_dialect(c)], c->model);
	if (r->slo.n > 0) {
		fprintf(f, "SLO         ");
		for (size_t i = 0; i < r->slo.n; i++) {
			const struct load_slo_target *t = &r->slo.v[i];
			if (t->metric == LOAD_SLO_ERROR_RATE)
				fprintf(f, " %s<=%.4g%%", t->name, 100 * t->limit);
			else
				fprintf(f, " %s<=%.4gms", t->name, t->limit);
		}
		fputc('\n', f);
	}
	prompt_lines(f, r, NULL);
	fputc('\n', f);
	levels_table(f, r);
	fputc('\n', f);
	if (r->kind == LOAD_KIND_SWEEP) {
		fprintf(f, "sweep        %s, stopped: %s", load_key_name(r->sweep_key),
		    r->stop_reason ? r->stop_reason : "-");
		if (r->knee >= 0 && (size_t)r->knee < r->nlevels &&
		    r->sweep_key == LOAD_KEY_RATE)
			fprintf(f, "; the knee is level %d (%s): the last carried at its "
			    "offered rate", r->knee, r->levels[r->knee].label);
		else if (r->knee >= 0 && (size_t)r->knee < r->nlevels)
			fprintf(f, "; the knee is level %d (%s): past it throughput stopped "
			    "growing while latency rose", r->knee, r->levels[r->knee].label);
		else if (r->saturated_at == 0)
			fprintf(f, "; no knee: the first level was saturated");
		else if (r->nlevels > 1 && r->saturated_at < 0 && load_report_sweep_all_ran(r))
			fprintf(f, "; no knee: throughput grew up to the last level");
		if (r->saturated_at >= 0 && r->sweep_key == LOAD_KEY_RATE) {
			const struct load_summary *x = &r->levels[r->saturated_at].sum;
			fprintf(f, "; level %d carried %.2f of %.2f req/s offered", r->saturated_at,
			    x->requests_per_s, x->window_s > 0 ? (double)x->requests /
			    x->window_s : 0.0);
		}
		fputc('\n', f);
		if (r->slo.n > 0) {
			int cap = load_report_sweep_capacity(r);
			if (cap >= 0)
				fprintf(f, "SLO capacity level %d (%s): the last met before the "
				    "first missed%s\n", cap, r->levels[cap].label,
				    r->levels[cap].slo.noisy ? " (undecided: by its figures)" : "");
			else
				fprintf(f, "SLO capacity none: the first level missed the SLO\n");
		}
		if (r->sweep_key == LOAD_KEY_PROMPT_TOKENS && isfinite(r->input_fit.slope))
			fprintf(f, "input length TTFT = %.3f ms + %.3f ms per 1k input tokens "
			    "(R² %.3f, %zu requests)\n", r->input_fit.intercept,
			    r->input_fit.slope, r->input_fit.r2, r->input_fit.n);
	}
	if (r->kind == LOAD_KIND_CAPACITY)
		capacity_lines(f, r);
	if (r->interrupted)
		fprintf(f, "interrupted: the levels above are those that ran\n");
	lag_warning(f, r);
	read_late_warning(f, r);
	disturbed_warning(f, r);
	pairs_table(f, r);
}
