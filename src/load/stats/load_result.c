/* SPDX-License-Identifier: Apache-2.0 */
#include "load_result.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_slo.h"
#include "load_summary.h"
#include "rng.h"
#include "util.h"

void load_result_init(struct load_result *r, enum load_kind kind,
    const struct load_conf *conf, int argc, char **argv)
{
	uint64_t seed = rng_seed();

	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->conf = conf;
	r->argc = argc;
	r->argv = argv;
	r->wall_start_ms = util_wall_ms();
	r->mono_start_us = util_now_us();
	/* short, and random: two runs' request ids never meet in one log */
	snprintf(r->run_id, sizeof(r->run_id), "tl%08llx",
	    (unsigned long long)(rng_next(&seed) & 0xffffffffull));
	load_pcts_default(&r->pcts);
	load_psize_init(&r->psize);
	r->knee = r->saturated_at = -1;
	r->input_fit.slope = r->input_fit.intercept = r->input_fit.r2 = NAN;
	for (size_t i = 0; i < 2; i++) {
		r->capacity[i].binding = -1;
		r->capacity[i].lo = r->capacity[i].hi = r->capacity[i].capacity = NAN;
	}
}

struct load_level *load_result_add(struct load_result *r, enum load_key key,
    double value, const struct load_conf *conf)
{
	struct load_level *lv;

	if (r->nlevels == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct load_level *v = realloc(r->levels, cap * sizeof(*v));
		if (v == NULL)
			return NULL;
		r->levels = v;
		r->cap = cap;
	}
	lv = &r->levels[r->nlevels];
	memset(lv, 0, sizeof(*lv));
	if (load_conf_copy(&lv->conf, conf) < 0)
		return NULL;
	lv->index = r->nlevels++;
	lv->key = key;
	lv->value = value;
	lv->disturbed_late_ms = NAN;
	loadstats_init(&lv->st);
	if (key == LOAD_KEY_NONE)
		snprintf(lv->label, sizeof(lv->label), "run");
	else if (key == LOAD_KEY_RATE)
		/* 10000, not 1e+04 */
		snprintf(lv->label, sizeof(lv->label), value < 1e4 ? "rate %.4g/s" :
		    "rate %.0f/s", value);
	else
		snprintf(lv->label, sizeof(lv->label), "%s %.0f", load_key_name(key), value);
	return lv;
}

void load_result_free(struct load_result *r)
{
	for (size_t i = 0; i < r->nlevels; i++) {
		load_conf_free(&r->levels[i].conf);
		loadstats_free(&r->levels[i].st);
		load_summary_free(&r->levels[i].sum);
	}
	free(r->levels);
	r->levels = NULL;
	r->nlevels = r->cap = 0;
}

const char *load_key_name(enum load_key k)
{
	switch (k) {
	case LOAD_KEY_CONCURRENCY:
		return "concurrency";
	case LOAD_KEY_RATE:
		return "rate";
	case LOAD_KEY_PROMPT_TOKENS:
		return "prompt_tokens";
	default:
		return "none";
	}
}

int load_result_summarise(const struct load_result *r, struct load_level *lv)
{
	struct load_sum_in in;
	struct goodput_targets g;

	memset(&in, 0, sizeof(in));
	load_slo_goodput(&r->slo, &g);
	in.st = &lv->st;
	in.pcts = &r->pcts;
	in.goodput = r->slo.n ? &g : NULL;
	in.window_start_us = lv->info.window_start_us;
	in.window_end_us = lv->info.window_end_us;
	if (lv->nwindows > 1) {
		in.windows = (const uint64_t (*)[2])lv->windows;
		in.nwindows = lv->nwindows;
	}
	in.slice_us = r->slice_us;
	in.cpu_s = lv->info.cpu_s;
	in.wall_s = (double)lv->info.elapsed_us / 1e6;
	in.queued = lv->info.queued;
	load_summary_free(&lv->sum);
	if (load_summary(&in, &lv->sum) < 0)
		return -1;
	lv->has_slo = r->slo.n > 0;
	if (lv->has_slo && load_slo_eval(&r->slo, &lv->st, &lv->slo) < 0)
		return -1;
	return 0;
}

void load_result_input_fit(struct load_result *r)
{
	size_t n = 0, cap = 0;
	double *x, *y;

	for (size_t i = 0; i < r->nlevels; i++)
		cap += r->levels[i].st.n;
	x = calloc(cap + 1, sizeof(*x));
	y = calloc(cap + 1, sizeof(*y));
	if (x != NULL && y != NULL) {
		for (size_t i = 0; i < r->nlevels; i++)
			n += load_input_points(&r->levels[i].st, x + n, y + n);
		load_fit_of(x, y, n, &r->input_fit);
	}
	free(x);
	free(y);
}
