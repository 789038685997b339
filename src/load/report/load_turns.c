/* SPDX-License-Identifier: Apache-2.0 */
#include "load_turns.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One turn's figures from the samples st->v[i] of that turn. */
static void row_of(const struct loadstats *st, uint32_t turn, const struct load_pcts *p,
    double *ttft, double *tpot, struct load_turns_row *w)
{
	size_t nt = 0, np = 0;
	double prompt = 0;

	memset(w, 0, sizeof *w);
	w->turn = turn;
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		if (s->turn != turn || !loadstats_counted(s))
			continue;
		w->requests++;
		prompt += s->prompt_tokens;
		if (s->outcome != OUTCOME_OK)
			continue;
		w->ok++;
		if (s->ttft_us >= 0)
			ttft[nt++] = (double)s->ttft_us / 1e3;
		if (s->tpot_us >= 0)
			tpot[np++] = s->tpot_us / 1e3;
	}
	w->prompt_tokens = w->requests ? prompt / (double)w->requests : NAN;
	load_dist_of(ttft, nt, p, &w->ttft);
	load_dist_of(tpot, np, p, &w->tpot);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Distinct sessions of the measured turns. */
static uint64_t sessions_of(const struct loadstats *st, uint64_t *v)
{
	size_t n = 0;
	uint64_t k = 0;

	for (size_t i = 0; i < st->n; i++)
		if (st->v[i].turn > 0 && loadstats_counted(&st->v[i]))
			v[n++] = st->v[i].session;
	qsort(v, n, sizeof *v, cmp_u64);
	for (size_t i = 0; i < n; i++)
		k += i == 0 || v[i] != v[i - 1];
	return k;
}

int load_turns_of(const struct load_level *lv, const struct load_pcts *p,
    struct load_turns *t)
{
	const struct loadstats *st = &lv->st;
	uint32_t max = 0;
	double *a = NULL, *b = NULL;
	uint64_t *ids = NULL;
	int rc = -1;

	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < st->n; i++)
		if (loadstats_counted(&st->v[i]) && st->v[i].turn > max)
			max = st->v[i].turn;
	if (max == 0)
		return 0;
	t->v = calloc(max, sizeof *t->v);
	a = malloc(st->n * sizeof *a);
	b = malloc(st->n * sizeof *b);
	ids = malloc(st->n * sizeof *ids);
	if (t->v == NULL || a == NULL || b == NULL || ids == NULL)
		goto done;
	/* a pass a turn: turns are few (a conversation of 1000 at most) */
	for (uint32_t k = 1; k <= max; k++)
		row_of(st, k, p, a, b, &t->v[k - 1]);
	t->n = max;
	t->sessions = sessions_of(st, ids);
	rc = 0;
done:
	if (rc < 0)
		load_turns_free(t);
	free(a);
	free(b);
	free(ids);
	return rc;
}

void load_turns_free(struct load_turns *t)
{
	free(t->v);
	memset(t, 0, sizeof *t);
}
