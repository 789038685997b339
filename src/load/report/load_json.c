/* SPDX-License-Identifier: Apache-2.0 */
#include "load_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "load_prefix.h"
#include "load_prefix_use.h"
#include "load_session.h"
#include "load_turns.h"
#include "load_prompts.h"
#include "load_report.h"
#include "load_trace.h"
#include "util.h"

/* ---- a small emitter: commas, indentation, one-line containers ------- */

#define MAX_DEPTH 16

struct emit {
	FILE *f;
	int depth;
	int first[MAX_DEPTH];
	int flat[MAX_DEPTH];         /* a container written on one line */
};

/* Before a value or a member: the comma and the line break it needs. */
static void sep(struct emit *e)
{
	int d = e->depth;

	if (d == 0)
		return;
	if (!e->first[d])
		fputc(',', e->f);
	if (e->flat[d])
		fputs(e->first[d] ? "" : " ", e->f);
	else
		fprintf(e->f, "\n%*s", 2 * d, "");
	e->first[d] = 0;
}

static void key(struct emit *e, const char *k)
{
	sep(e);
	if (k != NULL)
		fprintf(e->f, "\"%s\": ", k);
}

static void open_(struct emit *e, const char *k, char c, int flat)
{
	key(e, k);
	fputc(c, e->f);
	if (e->depth + 1 < MAX_DEPTH)
		e->depth++;
	e->first[e->depth] = 1;
	/* inside a flat container everything is flat */
	e->flat[e->depth] = flat || e->flat[e->depth - 1];
}

static void close_(struct emit *e, char c)
{
	int empty = e->first[e->depth], flat = e->flat[e->depth];

	e->depth--;
	if (!empty && !flat)
		fprintf(e->f, "\n%*s", 2 * e->depth, "");
	fputc(c, e->f);
}

static void obj(struct emit *e, const char *k, int flat)
{
	open_(e, k, '{', flat);
}

static void arr(struct emit *e, const char *k, int flat)
{
	open_(e, k, '[', flat);
}

static void end_obj(struct emit *e)
{
	close_(e, '}');
}

static void end_arr(struct emit *e)
{
	close_(e, ']');
}

/* A number with dec decimals, null when not finite. */
static void num(struct emit *e, const char *k, double v, int dec)
{
	key(e, k);
	if (!isfinite(v))
		fputs("null", e->f);
	else
		fprintf(e->f, "%.*f", dec, v);
}

static void u64(struct emit *e, const char *k, uint64_t v)
{
	key(e, k);
	fprintf(e->f, "%" PRIu64, v);
}

/* An integer, null when negative (undefined). */
static void i64(struct emit *e, const char *k, int64_t v)
{
	key(e, k);
	if (v < 0)
		fputs("null", e->f);
	else
		fprintf(e->f, "%" PRId64, v);
}

/* µs as ms, null when negative. */
static void ms(struct emit *e, const char *k, double us)
{
	num(e, k, us < 0 ? NAN : us / 1e3, 3);
}

static void str(struct emit *e, const char *k, const char *s)
{
	key(e, k);
	jsonw_file_str(e->f, s);
}

static void boolean(struct emit *e, const char *k, int v)
{
	key(e, k);
	fputs(v ? "true" : "false", e->f);
}

static void null(struct emit *e, const char *k)
{
	key(e, k);
	fputs("null", e->f);
}

/* ---- the pieces ---------------------------------------------------------- */

static void dist(struct emit *e, const char *k, const struct load_dist *d,
    const struct load_pcts *p, int dec)
{
	char name[32];

	obj(e, k, 1);
	u64(e, "count", d->count);
	num(e, "mean", d->mean, dec);
	num(e, "std", d->std, dec);
	num(e, "min", d->min, dec);
	num(e, "max", d->max, dec);
	for (size_t i = 0; i < p->n; i++) {
		load_pcts_name(p->p[i], name, sizeof name);
		num(e, name, d->q[i], dec);
	}
	end_obj(e);
}

static void fit(struct emit *e, const char *k, const struct load_fit *f,
    const char *slope, const char *intercept)
{
	obj(e, k, 1);
	num(e, slope, f->slope, 4);
	num(e, intercept, f->intercept, 3);
	num(e, "r2", f->r2, 4);
	u64(e, "n", f->n);
	end_obj(e);
}

/* --turns, --sessions, --sharegpt: how the users hold conversations. */
static void conversation(struct emit *e, const struct load_conf *c)
{
	char think[64];

	if (c->turns.min == 0 && c->sessions == NULL) {
		null(e, "conversation");
		return;
	}
	obj(e, "conversation", 1);
	if (c->sessions != NULL) {
		null(e, "turns");
		str(e, "file", c->sessions->path);
		str(e, "format", c->sessions->sharegpt ? "sharegpt" : "sessions");
		u64(e, "sessions", c->sessions->n);
		num(e, "speed", c->trace_speed, 4);
	} else {
		arr(e, "turns", 1);
		u64(e, NULL, c->turns.min);
		u64(e, NULL, c->turns.max);
		end_arr(e);
		null(e, "file");
		null(e, "format");
		null(e, "sessions");
		null(e, "speed");
	}
	load_think_name(&c->think, think, sizeof think);
	str(e, "think_time", think);
	end_obj(e);
}

/* Conversations: the sessions, each turn's figures (turn 1 beside K). */
static void turns(struct emit *e, const struct load_turns *t, const struct load_pcts *p)
{
	if (t->n == 0) {
		null(e, "conversations");
		return;
	}
	obj(e, "conversations", 0);
	u64(e, "sessions", t->sessions);
	arr(e, "turns", 0);
	for (size_t i = 0; i < t->n; i++) {
		const struct load_turns_row *w = &t->v[i];
		obj(e, NULL, 0);
		u64(e, "turn", w->turn);
		u64(e, "requests", w->requests);
		u64(e, "ok", w->ok);
		num(e, "prompt_tokens_mean", w->prompt_tokens, 1);
		dist(e, "ttft_ms", &w->ttft, p, 3);
		dist(e, "tpot_ms", &w->tpot, p, 3);
		end_obj(e);
	}
	end_arr(e);
	end_obj(e);
}

static void conf(struct emit *e, const struct load_conf *c)
{
	int open = c->rate > 0 || c->trace != NULL;

	obj(e, "config", 0);
	str(e, "mode", open ? "open" : "closed");
	u64(e, "concurrency", c->concurrency);
	if (c->rate > 0)
		num(e, "rate", c->rate, 4);
	else
		null(e, "rate");
	if (open && c->trace == NULL) {
		str(e, "arrivals", load_conf_arrivals_name(c));
		num(e, "burstiness", c->arrivals == LOAD_ARR_GAMMA ? c->burstiness :
		    c->arrivals == LOAD_ARR_POISSON ? 1 : NAN, 4);
	} else {
		null(e, "arrivals");
		null(e, "burstiness");
	}
	num(e, "duration_s", c->duration_us ? (double)c->duration_us / 1e6 : NAN, 3);
	i64(e, "count", c->count ? (int64_t)c->count : -1);
	num(e, "warmup_s", (double)c->warmup_us / 1e6, 3);
	u64(e, "warmup_requests", c->warmup_count);
	boolean(e, "cooldown", c->cooldown);
	arr(e, "prompt_tokens", 1);
	u64(e, NULL, c->prompt_tokens.min);
	u64(e, NULL, c->prompt_tokens.max);
	end_arr(e);
	arr(e, "max_tokens", 1);
	u64(e, NULL, c->max_tokens.min);
	u64(e, NULL, c->max_tokens.max);
	end_arr(e);
	if (c->prompts != NULL)
		str(e, "prompts", c->prompts->path);
	else
		null(e, "prompts");
	if (c->trace != NULL) {
		obj(e, "trace", 1);
		str(e, "path", c->trace->path);
		str(e, "format", c->trace->access_log ? "access_log" : "trace");
		u64(e, "requests", c->trace->n);
		num(e, "speed", c->trace_speed, 4);
		end_obj(e);
	} else {
		null(e, "trace");
	}
	num(e, "timeout_s", (double)c->timeout_us / 1e6, 3);
	u64(e, "seed", c->seed);
	boolean(e, "continuous_usage", c->continuous_usage);
	num(e, "ramp_s", c->ramp_us ? (double)c->ramp_us / 1e6 : NAN, 3);
	if (c->prefixes > 0) {
		char name[32];
		load_prefix_dist_name(c->prefix_zipf, name, sizeof name);
		obj(e, "prefixes", 1);
		u64(e, "count", c->prefixes);
		u64(e, "tokens", c->prefix_tokens);
		str(e, "dist", name);
		end_obj(e);
	} else {
		null(e, "prefixes");
	}
	conversation(e, c);
	end_obj(e);
}

static void goodput(struct emit *e, const struct load_summary *s)
{
	char name[32];

	if (!goodput_any(&s->goodput)) {
		null(e, "goodput");
		return;
	}
	obj(e, "goodput", 1);
	obj(e, "targets", 1);
	for (int i = 0; i < GOODPUT_TARGETS; i++)
		if (s->goodput.us[i] > 0) {
			snprintf(name, sizeof name, "%s_ms",
			    goodput_target_name((enum goodput_target)i));
			num(e, name, (double)s->goodput.us[i] / 1e3, 3);
		}
	end_obj(e);
	u64(e, "good", s->good);
	u64(e, "judged", s->judged);
	num(e, "attainment", s->attainment, 6);
	num(e, "per_s", s->goodput_per_s, 6);
	end_obj(e);
}

static void slo(struct emit *e, const struct load_result *r, const struct load_level *lv)
{
	if (!lv->has_slo) {
		null(e, "slo");
		return;
	}
	obj(e, "slo", 0);
	boolean(e, "met", lv->slo.met);
	boolean(e, "noisy", lv->slo.noisy);
	boolean(e, "decided", !lv->slo.noisy);
	num(e, "confidence", r->slo.confidence > 0 ? r->slo.confidence : NAN, 4);
	if (lv->slo.binding >= 0)
		str(e, "binding", r->slo.v[lv->slo.binding].name);
	else
		null(e, "binding");
	arr(e, "targets", 0);
	for (size_t i = 0; i < r->slo.n; i++) {
		const struct load_slo_eval *x = &lv->slo.v[i];
		int frac = r->slo.v[i].metric == LOAD_SLO_ERROR_RATE;

		obj(e, NULL, 1);
		str(e, "name", r->slo.v[i].name);
		num(e, "value", x->value, frac ? 6 : 3);
		arr(e, "ci", 1);
		num(e, NULL, x->lo, frac ? 6 : 3);
		num(e, NULL, x->hi, frac ? 6 : 3);
		end_arr(e);
		num(e, "limit", r->slo.v[i].limit, frac ? 6 : 3);
		str(e, "unit", load_slo_unit(&r->slo.v[i]));
		boolean(e, "met", x->met);
		boolean(e, "noisy", x->noisy);
		boolean(e, "decided", !x->noisy);
		u64(e, "n", x->n);
		num(e, "inflation", x->inflation >= 1 ? x->inflation : NAN, 3);
		end_obj(e);
	}
	end_arr(e);
	end_obj(e);
}

static void slices(struct emit *e, const struct load_summary *s)
{
	arr(e, "slices", 0);
	for (size_t i = 0; i < s->nslices; i++) {
		const struct load_slice *x = &s->slices[i];

		obj(e, NULL, 1);
		u64(e, "run", x->run);
		num(e, "start_s", x->start_s, 3);
		num(e, "end_s", x->end_s, 3);
		u64(e, "requests", x->requests);
		u64(e, "ok", x->ok);
		u64(e, "errors", x->errors);
		u64(e, "output_tokens", x->output_tokens);
		num(e, "output_tokens_per_s", x->output_tokens_per_s, 3);
		num(e, "ttft_p50_ms", x->ttft_p50, 3);
		num(e, "ttft_p95_ms", x->ttft_p95, 3);
		num(e, "tpot_p50_ms", x->tpot_p50, 3);
		num(e, "tpot_p95_ms", x->tpot_p95, 3);
		end_obj(e);
	}
	end_arr(e);
}

static void generator(struct emit *e, const struct load_result *r,
    const struct load_level *lv)
{
	const struct load_gen *g = &lv->sum.gen;

	obj(e, "generator", 0);
	num(e, "cpu_s", g->cpu_s, 3);
	num(e, "cpu_share", g->cpu_share, 4);
	num(e, "cpu_us_per_event", g->cpu_us_per_event, 3);
	u64(e, "events", g->events);
	u64(e, "connections", lv->info.connections);
	u64(e, "max_in_flight", lv->info.max_in_flight);
	u64(e, "queued", g->queued);
	num(e, "read_late_p99_ms", lv->info.read_late_p99_ms, 3);
	num(e, "read_late_max_ms", lv->info.read_late_max_ms, 3);
	str(e, "read_late_source", isnan(lv->info.read_late_p99_ms) ? NULL :
	    lv->info.read_late_stamps ? "stamps" : "timer");
	arr(e, "warnings", 1);
	if (load_report_read_late(r, lv))
		str(e, NULL, "read_late");
	if (g->cpu_bound)
		str(e, NULL, "cpu");
	if (g->lag_bound)
		str(e, NULL, "dispatch_lag");
	if (g->conn_bound)
		str(e, NULL, "connections");
	end_arr(e);
	end_obj(e);
}

static void tt_quant(struct emit *e, const char *k, const double q[6])
{
	static const char *const names[] = {"mean", "p50", "p90", "p95", "p99", "max"};

	obj(e, k, 1);
	for (int i = 0; i < 6; i++)
		num(e, names[i], q[i], 3);
	end_obj(e);
}

/* The client's figure minus tokentap's (ms): what the network and the
 * proxy add between them. */
static double client_q(const struct load_result *r, const struct load_dist *d, double p)
{
	for (size_t i = 0; i < r->pcts.n; i++)
		if (r->pcts.p[i] == p)
			return d->q[i];
	return p == 50 ? d->median : NAN;
}

static void tokentap(struct emit *e, const struct load_result *r,
    const struct load_level *lv)
{
	const struct load_tt *t = &lv->tt;

	if (!t->asked) {
		null(e, "tokentap");
		return;
	}
	obj(e, "tokentap", 0);
	boolean(e, "ok", t->ok);
	if (t->ok)
		null(e, "error");
	else
		str(e, "error", t->error);
	str(e, "window", t->window[0] ? t->window : NULL);
	str(e, "route", t->ok ? t->group : NULL);
	boolean(e, "window_short", t->window_short);
	if (t->ok) {
		u64(e, "requests", t->requests);
		u64(e, "errors", t->errors);
		num(e, "output_tokens_per_s", t->output_tokens_per_s, 3);
		tt_quant(e, "ttft_ms", t->ttft);
		tt_quant(e, "tpot_ms", t->tpot);
		tt_quant(e, "itl_ms", t->itl);
		obj(e, "client_minus_tokentap_ms", 1);
		num(e, "ttft_mean", lv->sum.ttft.mean - t->ttft[LOAD_TT_MEAN], 3);
		num(e, "ttft_p50", client_q(r, &lv->sum.ttft, 50) - t->ttft[LOAD_TT_P50], 3);
		num(e, "ttft_p95", client_q(r, &lv->sum.ttft, 95) - t->ttft[LOAD_TT_P95], 3);
		num(e, "tpot_mean", lv->sum.tpot.mean - t->tpot[LOAD_TT_MEAN], 3);
		num(e, "tpot_p50", client_q(r, &lv->sum.tpot, 50) - t->tpot[LOAD_TT_P50], 3);
		num(e, "tpot_p95", client_q(r, &lv->sum.tpot, 95) - t->tpot[LOAD_TT_P95], 3);
		end_obj(e);
	}
	end_obj(e);
}

/* --tokentap-log: client - tokentap per request. */
static void tokentap_paired(struct emit *e, const struct load_level *lv)
{
	const struct load_tt_pairs *p = &lv->pairs;
	static const char *const names[] = {"p50", "p95", "max"};

	if (!p->asked) {
		null(e, "tokentap_paired");
		return;
	}
	obj(e, "tokentap_paired", 1);
	u64(e, "requests", p->paired);
	u64(e, "missing", p->missing);
	obj(e, "client_minus_tokentap_ttft_ms", 1);
	u64(e, "count", p->ttft_n);
	for (int i = 0; i < 3; i++)
		num(e, names[i], p->ttft[i], 3);
	end_obj(e);
	obj(e, "client_minus_tokentap_tpot_ms", 1);
	u64(e, "count", p->tpot_n);
	for (int i = 0; i < 3; i++)
		num(e, names[i], p->tpot[i], 3);
	end_obj(e);
	end_obj(e);
}

/* How synthetic prompts were sized (load_psize.h). */
static void prompt_sizing(struct emit *e, const struct load_psize *p)
{
	obj(e, "prompt_sizing", 1);
	str(e, "rule", load_psize_rule_name(p->rule));
	num(e, "bytes_per_token", p->bytes_per_token, 4);
	num(e, "spread", p->spread, 4);
	u64(e, "calibration_requests", p->requests);
	u64(e, "calibration_reported", p->reported);
	boolean(e, "estimate", p->estimate);
	end_obj(e);
}

/* A level's prompt tokens asked beside the target's count; null: none
 * counted. */
static void prompt_reported(struct emit *e, const struct load_psize_check *c)
{
	if (c->requests == 0) {
		null(e, "prompt_tokens_reported");
		return;
	}
	obj(e, "prompt_tokens_reported", 1);
	u64(e, "requests", c->requests);
	num(e, "asked_mean", c->asked_mean, 2);
	num(e, "reported_mean", c->reported_mean, 2);
	num(e, "ratio_mean", c->ratio_mean, 4);
	end_obj(e);
}

static void sample(struct emit *e, const struct loadstats *st,
    const struct load_sample *s, int itl, const struct load_prefix_use *u, size_t i)
{
	obj(e, NULL, 1);
	u64(e, "seq", s->seq);
	num(e, "start_ms", (double)s->start_us / 1e3, 3);
	boolean(e, "warmup", s->warmup);
	boolean(e, "cooldown", s->cooldown);
	str(e, "outcome", meter_outcome_name(s->outcome));
	i64(e, "status", s->status ? (int64_t)s->status : -1);
	ms(e, "ttft_ms", (double)s->ttft_us);
	ms(e, "ttfo_ms", (double)s->ttfo_us);
	ms(e, "tpot_ms", s->tpot_us);
	ms(e, "itl_max_ms", (double)s->itl_max_us);
	ms(e, "e2el_ms", (double)s->duration_us);
	ms(e, "dispatch_lag_ms", (double)s->lag_us);
	boolean(e, "queued", s->queued);
	ms(e, "connect_ms", (double)s->connect_us);
	ms(e, "first_token_ms", (double)s->first_token_us);
	ms(e, "last_token_ms", (double)s->last_token_us);
	i64(e, "output_tokens", s->output_tokens);
	if (s->output_tokens >= 0)
		str(e, "token_source", s->tokens_from_usage ? "usage" : "events");
	else
		null(e, "token_source");
	i64(e, "input_tokens", s->input_tokens);
	i64(e, "reasoning_tokens", s->reasoning_tokens);
	/* undefined (< 0: no token, or one) is null, as the schema says */
	num(e, "output_speed", s->output_speed >= 0 ? s->output_speed : NAN, 3);
	u64(e, "events", s->events);
	u64(e, "token_chunks", s->token_chunks);
	i64(e, "first_chunk_tokens", s->first_chunk_tokens);
	u64(e, "prompt_tokens", s->prompt_tokens);
	u64(e, "max_tokens", s->max_tokens);
	if (s->turn > 0) {
		u64(e, "session", s->session);
		u64(e, "turn", s->turn);
	}
	if (u->n > 0) {
		u64(e, "prefix", u->prefix[i]);
		boolean(e, "prefix_first", u->first[i]);
	}
	if (itl) {
		arr(e, "itl_ms", 1);
		for (uint32_t k = 0; k < s->itl_n; k++)
			num(e, NULL, (double)st->itl[s->itl_off + k] / 1e3, 3);
		end_arr(e);
	}
	end_obj(e);
}

static void level_members(struct emit *e, const struct load_result *r,
    const struct load_level *lv, const struct load_json_opts *o)
{
	const struct load_summary *s = &lv->sum;
	const struct load_pcts *p = &r->pcts;
	struct load_prefix_use u;

	u64(e, "index", lv->index);
	str(e, "label", lv->label);
	if (lv->key != LOAD_KEY_NONE) {
		str(e, "key", load_key_name(lv->key));
		num(e, "value", lv->value, lv->key == LOAD_KEY_RATE ? 4 : 0);
	} else {
		null(e, "key");
		null(e, "value");
	}
	if (lv->search != LOAD_KEY_NONE)
		str(e, "search", load_key_name(lv->search));
	else
		null(e, "search");
	str(e, "phase", lv->phase);
	str(e, "unsustained", lv->unsustained);
	u64(e, "runs", lv->runs);
	boolean(e, "disturbed", lv->disturbed);
	u64(e, "disturbed_runs", lv->disturbed_runs);
	num(e, "disturbed_late_ms", lv->disturbed_late_ms, 3);
	num(e, "started_s", lv->started_s, 3);
	u64(e, "monotonic_start_us", lv->info.start_us);
	conf(e, &lv->conf);
	num(e, "elapsed_s", (double)lv->info.elapsed_us / 1e6, 3);
	obj(e, "window", 1);
	num(e, "start_s", (double)lv->info.window_start_us / 1e6, 3);
	num(e, "end_s", (double)lv->info.window_end_us / 1e6, 3);
	num(e, "length_s", s->window_s, 3);
	end_obj(e);
	boolean(e, "interrupted", lv->info.interrupted);
	u64(e, "requests", s->requests);
	u64(e, "ok", s->ok);
	u64(e, "errors", s->errors);
	num(e, "error_rate", s->error_rate, 6);
	obj(e, "outcomes", 1);
	for (int i = 0; i < OUTCOME_COUNT; i++)
		u64(e, meter_outcome_name((enum meter_outcome)i), s->outcomes[i]);
	end_obj(e);
	{
		struct load_status_count st[LOAD_REPORT_STATUSES];
		size_t n = load_report_error_statuses(lv, st);
		char code[16];
		obj(e, "errors_by_status", 1);
		for (size_t i = 0; i < n; i++) {
			snprintf(code, sizeof code, "%u", st[i].status);
			u64(e, code, st[i].n);
		}
		end_obj(e);
	}
	u64(e, "warmup_requests", lv->info.warmup_requests);
	u64(e, "cooldown_requests", lv->info.cooldown_requests);
	u64(e, "completed", s->completed);
	u64(e, "output_tokens", s->output_tokens);
	u64(e, "input_tokens", s->input_tokens);
	prompt_reported(e, &s->prompt);
	/* vLLM's and AIPerf's names, then ours of old */
	num(e, "request_throughput", s->requests_per_s, 3);
	num(e, "output_throughput", s->output_tokens_per_s, 3);
	num(e, "input_throughput", s->input_tokens_per_s, 3);
	num(e, "total_token_throughput", s->total_tokens_per_s, 3);
	num(e, "requests_per_s", s->requests_per_s, 3);
	num(e, "output_tokens_per_s", s->output_tokens_per_s, 3);
	u64(e, "connections", lv->info.connections);
	u64(e, "max_in_flight", lv->info.max_in_flight);
	dist(e, "ttft_ms", &s->ttft, p, 3);
	dist(e, "ttfo_ms", &s->ttfo, p, 3);
	dist(e, "tpot_ms", &s->tpot, p, 3);
	dist(e, "itl_ms", &s->itl, p, 3);
	arr(e, "itl_cdf_ms", 1);
	for (size_t i = 0; i < LOAD_CDF_POINTS; i++)
		num(e, NULL, s->itl_cdf[i], 3);
	end_arr(e);
	dist(e, "e2el_ms", &s->e2e, p, 3);
	dist(e, "output_speed", &s->speed, p, 3);
	dist(e, "dispatch_lag_ms", &s->lag, p, 3);
	if (lv->conf.lag)
		dist(e, "lag_ms", &s->event_lag, p, 3);
	obj(e, "chunks", 0);
	dist(e, "events", &s->events, p, 3);
	dist(e, "token_chunks", &s->token_chunks, p, 3);
	dist(e, "tokens_per_chunk", &s->tokens_per_chunk, p, 3);
	dist(e, "first_chunk_tokens", &s->first_chunk_tokens, p, 3);
	end_obj(e);
	goodput(e, s);
	slo(e, r, lv);
	fit(e, "drift", &s->drift, "ttft_slope_ms_per_min", "ttft_intercept_ms");
	fit(e, "input_fit", &s->input_fit, "slope_ms_per_1k_tokens", "intercept_ms");
	slices(e, s);
	generator(e, r, lv);
	tokentap(e, r, lv);
	tokentap_paired(e, lv);
	/* --prefixes: TTFT of each prefix's first use, and of the repeats */
	/* out of memory: counts of 0, no sample's prefix */
	(void)load_prefix_use_of(lv, p, &u);
	if (lv->conf.prefixes > 0) {
		obj(e, "prefix_ttft_ms", 0);
		u64(e, "prefixes_used", u.used);
		dist(e, "first", &u.ttft[0], p, 3);
		dist(e, "repeat", &u.ttft[1], p, 3);
		end_obj(e);
	} else {
		null(e, "prefix_ttft_ms");
	}
	{
		struct load_turns t;
		if (load_turns_of(lv, p, &t) < 0)
			t.n = 0;
		turns(e, &t, p);
		load_turns_free(&t);
	}
	if (o->samples) {
		arr(e, "samples", 0);
		for (size_t i = 0; i < lv->st.n; i++)
			sample(e, &lv->st, &lv->st.v[i], o->itl_samples, &u, i);
		end_arr(e);
	}
	load_prefix_use_free(&u);
}

void load_json_level_members(FILE *f, const struct load_result *r,
    const struct load_level *lv, const struct load_json_opts *o, int indent)
{
	struct emit e;

	memset(&e, 0, sizeof(e));
	e.f = f;
	e.depth = indent / 2;
	e.first[e.depth] = 0;
	level_members(&e, r, lv, o);
}

/* The plan's digest (FNV-1a, 64 bits, in hex): every level's parameters
 * as the document writes them, the target, dialect, model, the names of
 * the headers sent and the prompts' and trace's paths, so that `merge`
 * tells shards of one plan from unlike ones where the document's members
 * alone would not (a prompts file of another name, a header missing). */
void load_json_plan(const struct load_result *r, char out[20])
{
	const struct load_conf *c = r->conf;
	uint64_t h = 0xcbf29ce484222325ull;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct emit e;

	if (f != NULL) {
		memset(&e, 0, sizeof(e));
		e.f = f;
		/* the prompts' sizing too: shards sized at other ratios send
		 * other bytes (load_psize.h) */
		fprintf(f, "%d\n%s\n%s\n%s\n%.17g\n", (int)r->kind, c->url ? c->url : "",
		    dialect_names[load_conf_dialect(c)], c->model ? c->model : "",
		    c->bytes_per_token);
		for (size_t i = 0; i < c->nheaders; i++)
			fprintf(f, "%s\n", c->headers[i].name);
		for (size_t i = 0; i < r->nlevels; i++) {
			const struct load_level *lv = &r->levels[i];
			fprintf(f, "%d %.17g\n", (int)lv->key, lv->value);
			conf(&e, &lv->conf);
		}
		fclose(f);
	}
	for (size_t i = 0; buf != NULL && i < len; i++)
		h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ull;
	free(buf);
	snprintf(out, 20, "%016" PRIx64, h);
}

static const char *kind_name(enum load_kind k)
{
	return k == LOAD_KIND_SWEEP ? "sweep" : k == LOAD_KIND_CAPACITY ? "capacity" : "run";
}

void load_json_write(FILE *f, const struct load_result *r,
    const struct load_json_opts *o)
{
	struct emit e;
	char ts[32];
	const struct load_conf *c = r->conf;

	memset(&e, 0, sizeof(e));
	e.f = f;
	util_rfc3339_ms(r->wall_start_ms, ts);
	obj(&e, NULL, 0);
	u64(&e, "schema_version", LOAD_SCHEMA_VERSION);
	str(&e, "tool", "tokentap-load");
	str(&e, "version", TOKENTAP_VERSION);
	str(&e, "kind", kind_name(r->kind));
	str(&e, "run_id", r->run_id);
	str(&e, "started_at", ts);
	obj(&e, "clock", 1);
	u64(&e, "monotonic_start_us", r->mono_start_us);
	end_obj(&e);
	arr(&e, "command", 1);
	for (int i = 0; i < r->argc; i++)
		str(&e, NULL, r->argv[i]);
	end_arr(&e);
	str(&e, "target", c->url);
	str(&e, "dialect", dialect_names[load_conf_dialect(c)]);
	str(&e, "model", c->model);
	arr(&e, "percentiles", 1);
	for (size_t i = 0; i < r->pcts.n; i++)
		num(&e, NULL, r->pcts.p[i], r->pcts.p[i] == floor(r->pcts.p[i]) ? 0 : 3);
	end_arr(&e);
	num(&e, "slice_s", (double)r->slice_us / 1e6, 3);
	prompt_sizing(&e, &r->psize);
	if (r->slo.n > 0) {
		obj(&e, "slo", 0);
		arr(&e, "targets", 0);
		for (size_t i = 0; i < r->slo.n; i++) {
			obj(&e, NULL, 1);
			str(&e, "name", r->slo.v[i].name);
			num(&e, "limit", r->slo.v[i].limit,
			    r->slo.v[i].metric == LOAD_SLO_ERROR_RATE ? 6 : 3);
			str(&e, "unit", load_slo_unit(&r->slo.v[i]));
			end_obj(&e);
		}
		end_arr(&e);
		end_obj(&e);
	} else {
		null(&e, "slo");
	}
	boolean(&e, "interrupted", r->interrupted);
	if (c->shards > 0) {
		char plan[20];
		load_json_plan(r, plan);
		obj(&e, "shard", 1);
		u64(&e, "index", c->shard);
		u64(&e, "count", c->shards);
		str(&e, "plan", plan);
		end_obj(&e);
	} else {
		null(&e, "shard");
	}
	if (r->merged > 0) {
		obj(&e, "merged", 1);
		u64(&e, "shards", r->merged);
		str(&e, "plan", r->plan);
		num(&e, "skew_s", r->merged_skew_s, 3);
		end_obj(&e);
	} else {
		null(&e, "merged");
	}
	str(&e, "tokentap_pairing", r->tt_pairing);
	str(&e, "tokentap_pairing_reason", r->tt_pairing_reason);
	if (r->kind == LOAD_KIND_SWEEP) {
		obj(&e, "sweep", 0);
		str(&e, "key", load_key_name(r->sweep_key));
		str(&e, "stop_reason", r->stop_reason);
		i64(&e, "knee_level", r->knee);
		i64(&e, "saturated_level", r->saturated_at);
		if (r->sweep_key == LOAD_KEY_PROMPT_TOKENS)
			fit(&e, "input_fit", &r->input_fit, "slope_ms_per_1k_tokens",
			    "intercept_ms");
		else
			null(&e, "input_fit");
		end_obj(&e);
	} else {
		null(&e, "sweep");
	}
	if (r->kind == LOAD_KIND_CAPACITY) {
		arr(&e, "capacity", 0);
		for (size_t i = 0; i < r->ncapacity; i++) {
			const struct load_capacity *cp = &r->capacity[i];
			int dec = cp->key == LOAD_KEY_RATE ? 4 : 0;
			if (!cp->ran)
				continue;
			obj(&e, NULL, 1);
			str(&e, "key", load_key_name(cp->key));
			boolean(&e, "found", cp->found);
			num(&e, "capacity", cp->capacity, dec);
			arr(&e, "interval", 1);
			num(&e, NULL, cp->lo, dec);
			num(&e, NULL, cp->hi, dec);
			end_arr(&e);
			arr(&e, "bracket", 1);
			num(&e, NULL, cp->lo, dec);
			num(&e, NULL, cp->hi, dec);
			end_arr(&e);
			num(&e, "estimate", cp->estimate, dec);
			arr(&e, "ci", 1);
			num(&e, NULL, cp->ci_lo, dec);
			num(&e, NULL, cp->ci_hi, dec);
			end_arr(&e);
			num(&e, "confidence", cp->confidence > 0 ? cp->confidence : NAN, 4);
			u64(&e, "replications", cp->replications);
			if (cp->binding >= 0)
				str(&e, "binding", r->slo.v[cp->binding].name);
			else
				null(&e, "binding");
			u64(&e, "levels", cp->levels);
			str(&e, "stopped", cp->stopped);
			num(&e, "knee", cp->knee, dec);
			num(&e, "knee_past", cp->knee_past, dec);
			end_obj(&e);
		}
		end_arr(&e);
	} else {
		null(&e, "capacity");
	}
	arr(&e, "levels", 0);
	for (size_t i = 0; i < r->nlevels; i++) {
		obj(&e, NULL, 0);
		level_members(&e, r, &r->levels[i], o);
		end_obj(&e);
	}
	end_arr(&e);
	end_obj(&e);
	fputc('\n', f);
}

/* ---- CSV -------------------------------------------------------------------- */

static void csv_num(FILE *f, double v, int dec)
{
	if (isfinite(v))
		fprintf(f, ",%.*f", dec, v);
	else
		fputc(',', f);
}

/* A text field: quoted, its quotes doubled (RFC 4180). */
static void csv_str(FILE *f, const char *s, int first)
{
	if (!first)
		fputc(',', f);
	fputc('"', f);
	for (; s != NULL && *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
	}
	fputc('"', f);
}

static const char *const csv_metrics[] = {"ttft", "ttfo", "tpot", "itl", "e2el"};

static const struct load_dist *csv_dist(const struct load_summary *s, size_t i)
{
	const struct load_dist *d[] = {&s->ttft, &s->ttfo, &s->tpot, &s->itl, &s->e2e};

	return d[i];
}

void load_csv_write(FILE *f, const struct load_result *r)
{
	char pn[32];

	fputs("index,label,key,value,search,phase,runs,requests,ok,errors,error_rate,"
	    "request_throughput,output_throughput,total_token_throughput,"
	    "goodput_per_s,attainment", f);
	for (size_t m = 0; m < UTIL_ARRAY_LEN(csv_metrics); m++) {
		fprintf(f, ",%s_mean_ms,%s_std_ms,%s_min_ms,%s_max_ms", csv_metrics[m],
		    csv_metrics[m], csv_metrics[m], csv_metrics[m]);
		for (size_t i = 0; i < r->pcts.n; i++) {
			load_pcts_name(r->pcts.p[i], pn, sizeof pn);
			fprintf(f, ",%s_%s_ms", csv_metrics[m], pn);
		}
	}
	for (int o = 1; o < OUTCOME_COUNT; o++)
		fprintf(f, ",%s", meter_outcome_name((enum meter_outcome)o));
	fputs(",tokens_per_chunk_mean,first_chunk_tokens_mean,dispatch_lag_max_ms,"
	    "generator_cpu_share,slo_met,tokentap_ttft_p50_ms,tokentap_ttft_p95_ms,"
	    "tokentap_tpot_p50_ms,tokentap_tpot_p95_ms,errors_by_status,"
	    "paired_ttft_diff_p50_ms,paired_ttft_diff_p95_ms,paired_ttft_diff_max_ms,"
	    "paired_tpot_diff_p50_ms,paired_tpot_diff_p95_ms,paired_tpot_diff_max_ms\n", f);
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		const struct load_summary *s = &lv->sum;

		fprintf(f, "%zu", lv->index);
		csv_str(f, lv->label, 0);
		csv_str(f, lv->key != LOAD_KEY_NONE ? load_key_name(lv->key) : "", 0);
		csv_num(f, lv->key != LOAD_KEY_NONE ? lv->value : NAN, 4);
		csv_str(f, lv->search != LOAD_KEY_NONE ? load_key_name(lv->search) : "", 0);
		csv_str(f, lv->phase ? lv->phase : "", 0);
		fprintf(f, ",%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64, lv->runs, s->requests,
		    s->ok, s->errors);
		csv_num(f, s->error_rate, 6);
		csv_num(f, s->requests_per_s, 3);
		csv_num(f, s->output_tokens_per_s, 3);
		csv_num(f, s->total_tokens_per_s, 3);
		csv_num(f, goodput_any(&s->goodput) ? s->goodput_per_s : NAN, 3);
		csv_num(f, s->attainment, 6);
		for (size_t m = 0; m < UTIL_ARRAY_LEN(csv_metrics); m++) {
			const struct load_dist *d = csv_dist(s, m);
			csv_num(f, d->mean, 3);
			csv_num(f, d->std, 3);
			csv_num(f, d->min, 3);
			csv_num(f, d->max, 3);
			for (size_t k = 0; k < r->pcts.n; k++)
				csv_num(f, d->q[k], 3);
		}
		for (int o = 1; o < OUTCOME_COUNT; o++)
			fprintf(f, ",%" PRIu64, s->outcomes[o]);
		csv_num(f, s->tokens_per_chunk.mean, 3);
		csv_num(f, s->first_chunk_tokens.mean, 3);
		csv_num(f, s->lag.max, 3);
		csv_num(f, s->gen.cpu_share, 4);
		if (lv->has_slo)
			fprintf(f, ",%s", lv->slo.met ? "true" : "false");
		else
			fputc(',', f);
		csv_num(f, lv->tt.ok ? lv->tt.ttft[LOAD_TT_P50] : NAN, 3);
		csv_num(f, lv->tt.ok ? lv->tt.ttft[LOAD_TT_P95] : NAN, 3);
		csv_num(f, lv->tt.ok ? lv->tt.tpot[LOAD_TT_P50] : NAN, 3);
		csv_num(f, lv->tt.ok ? lv->tt.tpot[LOAD_TT_P95] : NAN, 3);
		{
			/* "429:58 500:2": the errors that had an answer, by status */
			struct load_status_count st[LOAD_REPORT_STATUSES];
			size_t n = load_report_error_statuses(lv, st);
			fputc(',', f);
			for (size_t k = 0; k < n; k++)
				fprintf(f, "%s%u:%" PRIu64, k ? " " : "", st[k].status, st[k].n);
		}
		/* --tokentap-log: client - tokentap per request */
		for (int k = 0; k < 6; k++)
			csv_num(f, !lv->pairs.asked ? NAN : k < 3 ? lv->pairs.ttft[k] :
			    lv->pairs.tpot[k - 3], 3);
		fputc('\n', f);
	}
}
