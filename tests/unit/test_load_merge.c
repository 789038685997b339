/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_merge.c on documents built here: two shards' TTFTs
 * merged have the percentiles of their union (not the mean of theirs);
 * a shard that started 500 ms later shifts its samples by as much and
 * cuts the common window to the stretch both ran; and a shard missing,
 * a shard twice, another seed, another count and windows apart are
 * refused, each with its reason. */
#include <math.h>

#include "load_merge.h"
#include "load_summary.h"

#include "unit.h"

/* Shard i of n: n_ttft requests of the TTFTs (ms) given, started at wall
 * (ms), its window [0, 2 s). */
static void shard(struct load_doc *d, uint32_t i, uint32_t n, uint64_t wall,
    const double *ttft, size_t n_ttft)
{
	struct load_level *lv;

	memset(d, 0, sizeof(*d));
	assert_int_equal(load_conf_init(&d->conf), 0);
	d->conf.shard = i;
	d->conf.shards = n;
	d->path = strdup(i == 0 ? "s0.json" : i == 1 ? "s1.json" : "s2.json");
	load_result_init(&d->r, LOAD_KIND_RUN, &d->conf, 0, NULL);
	d->r.wall_start_ms = wall;
	snprintf(d->r.plan, sizeof d->r.plan, "0123456789abcdef");
	d->has_samples = 1;
	lv = load_result_add(&d->r, LOAD_KEY_NONE, 0, &d->conf);
	assert_non_null(lv);
	lv->info.window_end_us = 2000000;
	lv->info.elapsed_us = 2000000;
	for (size_t k = 0; k < n_ttft; k++) {
		struct load_sample s;
		memset(&s, 0, sizeof(s));
		s.seq = k * n + i;
		s.start_us = 100000 * k;
		s.ttft_us = (int64_t)(ttft[k] * 1000);
		s.ttfo_us = s.ttft_us;
		s.duration_us = s.ttft_us + 10000;
		s.first_token_us = (int64_t)s.start_us + s.ttft_us;
		s.last_token_us = s.first_token_us + 10000;
		s.output_tokens = 11;
		s.tpot_us = 1000;
		s.outcome = OUTCOME_OK;
		assert_int_equal(loadstats_record(&lv->st, &s, NULL, 0), 0);
	}
}

static int merge(struct load_merged *m, struct load_doc *d, size_t n, char **err)
{
	size_t len;
	FILE *f = open_memstream(err, &len);
	int rc;

	assert_non_null(f);
	rc = load_merge(m, d, n, 0, NULL, f);
	fclose(f);
	return rc;
}

static void test_union(void **state)
{
	/* shard 0 fast, shard 1 slow: the union's p50 is neither's */
	const double a[] = {10, 11, 12, 13, 14}, b[] = {100, 200, 300};
	double all[] = {10, 11, 12, 13, 14, 100, 200, 300};
	struct load_doc d[2];
	struct load_merged m;
	char *err = NULL;

	(void)state;
	shard(&d[0], 0, 2, 1000000, a, 5);
	shard(&d[1], 1, 2, 1000500, b, 3);
	assert_int_equal(merge(&m, d, 2, &err), 0);
	assert_int_equal(m.r.nlevels, 1);
	assert_int_equal(m.r.merged, 2);
	assert_int_equal(m.conf.shards, 0);
	assert_int_equal(m.r.levels[0].sum.requests, 8);
	for (size_t i = 0; i < m.r.pcts.n; i++)
		assert_true(fabs(m.r.levels[0].sum.ttft.q[i] -
		    load_quantile(all, 8, m.r.pcts.p[i])) < 1e-9);
	/* shard 1 started 500 ms later: its samples 500 ms on, the window
	 * the stretch both ran */
	assert_int_equal(m.r.levels[0].st.v[1].seq, 1);
	assert_int_equal(m.r.levels[0].st.v[1].start_us, 500000);
	assert_int_equal(m.r.levels[0].info.window_start_us, 500000);
	assert_int_equal(m.r.levels[0].info.window_end_us, 2000000);
	assert_true(fabs(m.r.levels[0].sum.window_s - 1.5) < 1e-9);
	assert_true(fabs(m.r.merged_skew_s - 0.5) < 1e-9);
	assert_int_equal(m.r.wall_start_ms, 1000000);
	load_merged_free(&m);
	free(err);
	load_doc_free(&d[0]);
	load_doc_free(&d[1]);
}

static void refused(struct load_doc *d, size_t n, const char *why)
{
	struct load_merged m;
	char *err = NULL;

	assert_int_equal(merge(&m, d, n, &err), -1);
	if (strstr(err, why) == NULL)
		fail_msg("wanted \"%s\" in: %s", why, err);
	free(err);
	load_merged_free(&m);
}

static void test_refusals(void **state)
{
	const double a[] = {10, 11};
	struct load_doc d[3];

	(void)state;
	shard(&d[0], 0, 3, 1000000, a, 2);
	shard(&d[1], 1, 3, 1000000, a, 2);
	shard(&d[2], 1, 3, 1000000, a, 2);
	refused(d, 2, "shard 2/3 missing");
	refused(d, 3, "shard 1/3 twice: s1.json and s1.json");
	load_doc_free(&d[2]);
	shard(&d[2], 2, 3, 1000000, a, 2);
	d[2].r.levels[0].conf.seed = 9;
	refused(d, 3, "level 0: seed 1 in the first, 9 in the second");
	d[2].r.levels[0].conf.seed = 1;
	snprintf(d[2].r.plan, sizeof d[2].r.plan, "fedcba9876543210");
	refused(d, 3, "their digests differ");
	load_doc_free(&d[2]);
	shard(&d[2], 2, 4, 1000000, a, 2);
	refused(d, 3, "the shard counts differ");
	load_doc_free(&d[2]);
	/* 3 s later: its window [3 s, 5 s) meets none of the others' */
	shard(&d[2], 2, 3, 1003000, a, 2);
	refused(d, 3, "do not overlap");
	d[2].has_samples = 0;
	refused(d, 3, "--no-samples");
	for (int i = 0; i < 3; i++)
		load_doc_free(&d[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_union),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
