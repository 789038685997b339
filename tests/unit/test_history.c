/* SPDX-License-Identifier: Apache-2.0 */
/* The history (history.c, history_file.c): a step's bytes, merging steps
 * into points and ranges exactly as one histogram of every value would,
 * the coarser tiers built from the finer, concurrency, the /stats window
 * pair, the file written and read back, refused when damaged or from the
 * future, re-bucketed into other steps. On a clock of our own (offset 0:
 * the feeder's clock is the wall clock). */

#include <math.h>
#include <time.h>

#include "history.h"
#include "promproto.h"
#include "rng.h"

#include "unit.h"

#define S 1000000ull                 /* a second in µs */

/* Steps of 1 s for 30 s, of 5 s for 2 min. */
static const struct conf_history_step tiers[] = { { 1 * S, 30 * S }, { 5 * S, 120 * S } };

/* history_save's pieces gathered in a pb. */
static int to_pb(void *arg, const void *p, size_t n)
{
	pb_raw(arg, p, n);
	return ((struct pb *)arg)->oom ? -1 : 0;
}

static struct history *fresh(void)
{
	struct history *h = history_new(tiers, 2);
	assert_non_null(h);
	return h;
}

static struct history_req req(enum meter_outcome o, int64_t ttft, int64_t tpot, int64_t conc)
{
	struct history_req r = { o, ttft, tpot, -1, 6, 10, 5, 5 * (uint64_t)tpot, conc, 0, ttft };
	return r;
}

/* The figures of series se (NULL: the instance) over range at now. */
static void range_sum(struct history *h, const char *route, uint64_t now, uint64_t range,
    uint64_t step, struct history_sum *s)
{
	struct history_view v;
	char why[200];
	const struct history_series *se = route ? history_find(h, HISTORY_ROUTE, route) :
	    history_find(h, HISTORY_INSTANCE, "");

	assert_non_null(se);
	assert_int_equal(history_view(h, now, range, step, &v, why, sizeof why), 0);
	history_sum_clear(s);
	assert_int_equal(history_merge(h, se, &v, 0, v.points, s), 0);
}

static void test_step_bytes_round_trip(void **state)
{
	struct history_sum a = { 0 }, b = { 0 };
	struct pb x = { 0 }, y = { 0 };
	char why[200];

	(void)state;
	history_encode(&x, &a);
	assert_int_equal(x.n, 0);                    /* an idle step costs nothing */
	a.outcomes[OUTCOME_OK] = 7;
	a.outcomes[OUTCOME_TIMEOUT] = 2;
	a.output_tokens = 1234567;
	a.speed_tokens = 99;
	a.speed_us = 123456789;
	a.active = -3;
	a.peak = 12;
	a.good = 5;
	a.r2 = (struct history_r2){ 9, 45, 285, 1.5, 2.25, 3.125 };
	for (uint64_t v = 1; v < 5000000; v = v * 3 + 1) {
		hist_sparse_record(&a.ttft, v);
		hist_sparse_record_n(&a.itl, v / 2, 3);
	}
	history_encode(&x, &a);
	assert_true(x.n > 0 && x.n < 200);
	assert_int_equal(history_decode(x.p, x.n, NULL, 0, &b, why, sizeof why), 0);
	history_encode(&y, &b);
	assert_int_equal(x.n, y.n);
	assert_memory_equal(x.p, y.p, x.n);
	assert_int_equal(b.active, -3);
	assert_true(b.r2.syy == 3.125);
	/* every cut is refused, never half taken */
	for (size_t n = 1; n < x.n; n++) {
		history_sum_clear(&b);
		assert_int_equal(history_decode(x.p, n, NULL, 0, &b, why, sizeof why), -1);
		assert_non_null(strstr(why, "at byte"));
	}
	/* a bucket count that no longer adds up to the histogram's */
	for (size_t i = x.n - 1; i > 0; i--)
		if (x.p[i] == 3) {            /* an ITL bucket's count */
			x.p[i] = 4;
			break;
		}
	history_sum_clear(&b);
	assert_int_equal(history_decode(x.p, x.n, NULL, 0, &b, why, sizeof why), -1);
	assert_non_null(strstr(why, "disagree"));
	history_sum_free(&a);
	history_sum_free(&b);
	pb_free(&x);
	pb_free(&y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Values spread over 25 s of 1 s steps: a point's and a range's quantiles
 * are those of one histogram of all their values, to the bit, whichever
 * tier the range is read from. */
static void test_ranges_are_exact(void **state)
{
	struct history *h = fresh();
	struct hist all, last5;
	struct history_sum s = { 0 };
	uint64_t seed = 42, t0 = 1000 * S, now = t0 + 25 * S;
	uint64_t per_step[25] = { 0 };

	(void)state;
	hist_init(&all);
	hist_init(&last5);
	history_advance(h, t0);
	static uint64_t times[3000];
	for (int i = 0; i < 3000; i++)
		times[i] = t0 + (uint64_t)(rng_unit(&seed) * 25.0 * S);
	/* records come in time order, give or take a drain (50 ms) */
	qsort(times, 3000, sizeof *times, cmp_u64);
	for (int i = 0; i < 3000; i++) {
		uint64_t t = times[i];
		int64_t ttft = (int64_t)(20000 + rng_unit(&seed) * 800000);
		struct history_req r = req(i % 10 ? OUTCOME_OK : OUTCOME_UPSTREAM_ERROR, ttft, 3000, i % 7);
		history_request(h, "a", t, &r);
		hist_record(&all, (uint64_t)ttft);
		if (t >= now - 5 * S)
			hist_record(&last5, (uint64_t)ttft);
		per_step[(t - t0) / S]++;
	}
	history_advance(h, now);
	/* 25 s on the 1 s tier; the points of its last 25 */
	struct history_view v;
	char why[200];
	assert_int_equal(history_view(h, now, 26 * S, 0, &v, why, sizeof why), 0);
	assert_int_equal(v.step_us, S);
	assert_int_equal(v.points, 26);
	assert_int_equal(v.first * S, t0);
	const struct history_series *se = history_find(h, HISTORY_ROUTE, "a");
	for (size_t p = 0; p < 25; p++) {
		history_sum_clear(&s);
		assert_int_equal(history_merge(h, se, &v, p, p + 1, &s), 0);
		assert_int_equal(history_sum_requests(&s), per_step[p]);
	}
	range_sum(h, "a", now, 26 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 3000);
	assert_int_equal(s.outcomes[OUTCOME_UPSTREAM_ERROR], 300);
	for (double q = 0.05; q < 1; q += 0.05)
		assert_true(hist_sparse_quantile(&s.ttft, q) == hist_quantile(&all, q));
	/* the instance holds the route's requests too */
	range_sum(h, NULL, now, 26 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 3000);
	/* 5 s points: five steps merged each */
	range_sum(h, "a", now, 10 * S, 5 * S, &s);
	assert_true(hist_sparse_quantile(&s.ttft, 0.99) == hist_quantile(&last5, 0.99));
	/* a minute: the 5 s tier, whose last steps are the 1 s tier's merged */
	range_sum(h, "a", now, 60 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 3000);
	assert_true(hist_sparse_quantile(&s.ttft, 0.95) == hist_quantile(&all, 0.95));
	/* later, when the 1 s steps are gone, the 5 s tier still has it all */
	history_advance(h, now + 60 * S);
	range_sum(h, "a", now + 60 * S, 120 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 3000);
	assert_true(hist_sparse_quantile(&s.ttft, 0.5) == hist_quantile(&all, 0.5));
	range_sum(h, "a", now + 60 * S, 30 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 0);
	history_sum_free(&s);
	history_free(h);
}

static void test_views(void **state)
{
	struct history *h = fresh();
	struct history_view v;
	char why[200];
	uint64_t now = 1000 * S + 300000;

	(void)state;
	history_advance(h, now);
	/* the defaults: the finest tier's span and step */
	assert_int_equal(history_view(h, now, 0, 0, &v, why, sizeof why), 0);
	assert_true(v.tier == 0 && v.step_us == S && v.points == 30);
	assert_int_equal((v.first + v.points - 1) * S, 1000 * S);   /* the last holds now */
	/* a range past the fine tier: the coarse one's steps */
	assert_int_equal(history_view(h, now, 100 * S, 0, &v, why, sizeof why), 0);
	assert_true(v.tier == 1 && v.step_us == 5 * S && v.points == 20);
	assert_int_equal(history_view(h, now, 100 * S, 10 * S, &v, why, sizeof why), 0);
	assert_true(v.tier == 1 && v.points == 10);
	/* 3 s divides neither 1 s's range nor 5 s */
	assert_int_equal(history_view(h, now, 100 * S, 3 * S, &v, why, sizeof why), -1);
	assert_non_null(strstr(why, "step: not a multiple"));
	assert_non_null(strstr(why, "5s steps over 2m"));
	assert_int_equal(history_view(h, now, 121 * S, 0, &v, why, sizeof why), -1);
	assert_non_null(strstr(why, "range: longer than kept"));
	history_free(h);
	/* tiers that cannot be kept */
	static const struct conf_history_step odd[] = { { 2 * S, 60 * S }, { 5 * S, 120 * S } };
	static const struct conf_history_step gap[] = { { 1 * S, 10 * S }, { 20 * S, 120 * S } };
	static const struct conf_history_step part[] = { { 1500000, 15 * S } };
	assert_non_null(conf_history_check(odd, 2));
	assert_non_null(conf_history_check(gap, 2));
	assert_non_null(conf_history_check(part, 1));
	assert_null(conf_history_check(tiers, 2));
	assert_null(history_new(odd, 2));
}

/* The coarse tier's steps hold exactly what the fine tier's steps under
 * them held: the same bytes as merging those by hand. */
static void test_coarse_steps_from_fine(void **state)
{
	struct history *h = fresh();
	struct history_sum fine = { 0 }, coarse = { 0 };
	uint64_t t0 = 2000 * S, seed = 7, n_req = 0;

	(void)state;
	history_advance(h, t0);
	for (int i = 0; i < 500; i++) {
		struct history_req r = req(OUTCOME_OK, (int64_t)(1000 + rng_unit(&seed) * 90000),
		    (int64_t)(500 + rng_unit(&seed) * 9000), i % 5);
		history_request(h, "a", t0 + (uint64_t)i * 20000, &r);   /* 10 s */
	}
	history_advance(h, t0 + 20 * S);
	struct history_view vf, vc;
	char why[200];
	const struct history_series *se = history_find(h, HISTORY_ROUTE, "a");
	assert_int_equal(history_view(h, t0 + 20 * S, 30 * S, 5 * S, &vf, why, sizeof why), 0);
	assert_int_equal(vf.tier, 0);
	assert_int_equal(history_view(h, t0 + 20 * S, 60 * S, 5 * S, &vc, why, sizeof why), 0);
	assert_int_equal(vc.tier, 1);
	for (size_t p = 0; p < vf.points; p++) {
		size_t pc = p + (size_t)(vf.first - vc.first);
		struct pb a = { 0 }, b = { 0 };
		history_sum_clear(&fine);
		history_sum_clear(&coarse);
		assert_int_equal(history_merge(h, se, &vf, p, p + 1, &fine), 0);
		assert_int_equal(history_merge(h, se, &vc, pc, pc + 1, &coarse), 0);
		n_req += history_sum_requests(&fine);
		history_encode(&a, &fine);
		history_encode(&b, &coarse);
		assert_int_equal(a.n, b.n);
		assert_memory_equal(a.p, b.p, a.n);
		pb_free(&a);
		pb_free(&b);
	}
	assert_int_equal(n_req, 500);
	history_sum_free(&fine);
	history_sum_free(&coarse);
	history_free(h);
}

/* A route's streams now and at most at once; the instance's as told. */
static void test_concurrency(void **state)
{
	struct history *h = fresh();
	struct history_sum s = { 0 };
	uint64_t t0 = 3000 * S;

	(void)state;
	history_advance(h, t0);
	history_active(h, "a", t0 + 100000, 1);
	history_active(h, "a", t0 + 200000, 1);
	history_active(h, "a", t0 + 300000, 1);
	history_active(h, "a", t0 + 400000, -1);        /* step 0: 2 now, 3 at most */
	history_active(h, "a", t0 + 2 * S + 1, -1);     /* step 2: 1 */
	history_concurrency(h, t0 + 1 * S + 5, 4, 9);
	history_advance(h, t0 + 5 * S);
	struct history_view v;
	char why[200];
	const struct history_series *se = history_find(h, HISTORY_ROUTE, "a");
	assert_int_equal(history_view(h, t0 + 5 * S, 6 * S, 0, &v, why, sizeof why), 0);
	int64_t want_active[6] = { 2, 2, 1, 1, 1, 1 }, want_peak[6] = { 3, 2, 2, 1, 1, 1 };
	for (size_t p = 0; p < 6; p++) {
		history_sum_clear(&s);
		history_merge(h, se, &v, p, p + 1, &s);
		assert_int_equal(s.active, want_active[p]);
		assert_int_equal(s.peak, want_peak[p]);
	}
	range_sum(h, "a", t0 + 5 * S, 6 * S, 0, &s);
	assert_int_equal(s.active, 1);
	assert_int_equal(s.peak, 3);
	range_sum(h, NULL, t0 + 5 * S, 6 * S, 0, &s);
	assert_int_equal(s.active, 4);
	assert_int_equal(s.peak, 9);
	history_sum_free(&s);
	history_free(h);
}

/* Routes whose names start with the letter arg: the others are removed. */
static int keep_letter(void *arg, enum history_kind kind, const char *name)
{
	(void)kind;
	return name[0] == *(const char *)arg;
}

/* A series keep() says no to goes at once and is not made again by its
 * records (they count in the instance alone), across a re-bucketing too;
 * a stream that ends once its route is back leaves it at 0, not -1. */
static void test_removed_series(void **state)
{
	static const struct conf_history_step other[] = { { 2 * S, 30 * S } };
	struct history *h = fresh();
	struct history_sum s = { 0 };
	struct history_req r = req(OUTCOME_OK, 100000, 1000, 0);
	uint64_t t0 = 3000 * S;
	char a = 'a', b = 'b';

	(void)state;
	history_advance(h, t0);
	history_request(h, "a1", t0 + 1000, &r);
	history_request(h, "b1", t0 + 1000, &r);
	history_active(h, "b1", t0 + 2000, 1);
	history_slo(h, "a-slo", t0 + 3000, 1, 0);
	assert_int_equal(history_n_series(h), 4);
	history_set_keep(h, keep_letter, &a);
	assert_int_equal(history_n_series(h), 3);
	assert_null(history_find(h, HISTORY_ROUTE, "b1"));
	history_request(h, "b1", t0 + 4000, &r);
	history_active(h, "b1", t0 + 5000, -1);
	assert_int_equal(history_n_series(h), 3);
	range_sum(h, NULL, t0 + 1 * S, 10 * S, 0, &s);
	assert_int_equal(history_sum_requests(&s), 3);
	h = history_retier(h, other, 1, t0 + 2 * S);
	assert_non_null(h);
	assert_int_equal(history_n_series(h), 3);
	history_request(h, "b2", t0 + 2 * S, &r);
	assert_int_equal(history_n_series(h), 3);
	history_set_keep(h, keep_letter, &b);
	assert_int_equal(history_n_series(h), 1);
	/* b1 is back: a stream that began before ends without going below 0 */
	history_active(h, "b1", t0 + 3 * S, -1);
	assert_int_equal(history_series_active(history_find(h, HISTORY_ROUTE, "b1")), 0);
	history_sum_free(&s);
	history_free(h);
}

/* A record a drain brings a little late finds its step while it is open
 * (the last two are); one later than that counts in the oldest open one,
 * never in a closed step nor lost. */
static void test_late_records(void **state)
{
	struct history *h = fresh();
	struct history_sum s = { 0 };
	struct history_view v;
	char why[200];
	uint64_t t0 = 7000 * S;
	struct history_req r = req(OUTCOME_OK, 1000, 100, 0);

	(void)state;
	history_advance(h, t0);
	history_request(h, "a", t0 + 1 * S + 10, &r);     /* opens step 1 */
	history_request(h, "a", t0 + 990000, &r);         /* step 0, still open */
	history_request(h, "a", t0 + 3 * S, &r);          /* closes step 0, 1 */
	history_request(h, "a", t0 + 500000, &r);         /* step 0: closed: into 2 */
	history_advance(h, t0 + 5 * S);
	assert_int_equal(history_view(h, t0 + 5 * S, 6 * S, 0, &v, why, sizeof why), 0);
	uint64_t want[6] = { 1, 1, 1, 1, 0, 0 };
	for (size_t p = 0; p < 6; p++) {
		history_sum_clear(&s);
		history_merge(h, history_find(h, HISTORY_ROUTE, "a"), &v, p, p + 1, &s);
		assert_int_equal(history_sum_requests(&s), want[p]);
	}
	history_sum_free(&s);
	history_free(h);
}

/* /stats' pair: the window ending now and the one before it. */
static void test_window_pair(void **state)
{
	struct history *h = fresh();
	struct history_sum cur = { 0 }, prev = { 0 };
	uint64_t t0 = 4000 * S;

	(void)state;
	history_advance(h, t0);
	for (int i = 0; i < 20; i++) {
		struct history_req a = req(OUTCOME_OK, 100000, 10000, i);
		history_request(h, "r", t0 + 2 * S, &a);
	}
	for (int i = 0; i < 20; i++) {
		struct history_req b = req(OUTCOME_OK, 150000, 12000, i);
		history_request(h, "r", t0 + 12 * S, &b);
	}
	history_advance(h, t0 + 15 * S);
	const struct history_series *se = history_find(h, HISTORY_ROUTE, "r");
	assert_int_equal(history_window(h, se, t0 + 15 * S, 10 * S, &cur, &prev), 0);
	assert_int_equal(history_sum_requests(&cur), 20);
	assert_int_equal(history_sum_requests(&prev), 20);
	assert_true(hist_sparse_quantile(&cur.ttft, 0.95) > 149000);
	assert_true(hist_sparse_quantile(&prev.ttft, 0.95) < 101000);
	assert_int_equal(cur.r2.n, 20);
	/* a window the tiers do not keep twice over */
	assert_int_equal(history_window(h, se, t0 + 15 * S, 61 * S, &cur, &prev), -1);
	history_sum_free(&cur);
	history_sum_free(&prev);
	history_free(h);
}

static struct history *loaded(struct pb *b, const struct conf_history_step *t, size_t n,
    uint64_t now, char *why)
{
	return history_load(b->p, b->n, t, n, now, why, 200);
}

static void test_file_round_trip(void **state)
{
	struct history *h = fresh(), *g;
	struct history_sum s = { 0 }, s2 = { 0 };
	struct pb a = { 0 }, b = { 0 };
	uint64_t t0 = 5000 * S, seed = 3;
	char why[200];

	(void)state;
	history_advance(h, t0);
	for (int i = 0; i < 400; i++) {
		struct history_req r = req(i % 3 ? OUTCOME_OK : OUTCOME_CLIENT_ABORT,
		    (int64_t)(rng_unit(&seed) * 500000), 4000, i % 9);
		history_request(h, i % 2 ? "a" : "b", t0 + (uint64_t)i * 200000, &r);  /* 80 s */
	}
	history_slo(h, "chat", t0 + 3 * S, 10, 2);
	history_active(h, "a", t0 + 79 * S, 2);
	history_advance(h, t0 + 80 * S);
	assert_int_equal(history_save(h, t0 + 80 * S, to_pb, &a), 0);
	/* read at once: the same store, written again the same */
	g = loaded(&a, tiers, 2, t0 + 80 * S, why);
	assert_non_null(g);
	assert_int_equal(history_save(g, t0 + 80 * S, to_pb, &b), 0);
	assert_int_equal(a.n, b.n);
	assert_memory_equal(a.p, b.p, a.n);
	range_sum(h, "a", t0 + 80 * S, 120 * S, 0, &s);
	range_sum(g, "a", t0 + 80 * S, 120 * S, 0, &s2);
	assert_int_equal(history_sum_requests(&s), 200);
	assert_int_equal(history_sum_requests(&s2), 200);
	assert_true(hist_sparse_quantile(&s.ttft, 0.9) == hist_sparse_quantile(&s2.ttft, 0.9));
	assert_int_equal(history_series_active(history_find(g, HISTORY_ROUTE, "a")), 2);
	assert_int_equal(history_find(g, HISTORY_SLO, "chat") != NULL, 1);
	history_free(g);
	/* read 20 s later: moved on, nothing lost that the tiers still keep */
	g = loaded(&a, tiers, 2, t0 + 100 * S, why);
	assert_non_null(g);
	range_sum(g, NULL, t0 + 100 * S, 120 * S, 0, &s2);
	assert_int_equal(history_sum_requests(&s2), 400);
	history_free(g);
	/* into other steps (2 s for 40 s, 10 s for 2 min): re-bucketed */
	static const struct conf_history_step other[] = { { 2 * S, 40 * S }, { 10 * S, 120 * S } };
	g = loaded(&a, other, 2, t0 + 80 * S, why);
	assert_non_null(g);
	range_sum(g, "a", t0 + 80 * S, 120 * S, 0, &s2);
	assert_int_equal(history_sum_requests(&s2), 200);
	assert_true(hist_sparse_quantile(&s.ttft, 0.9) == hist_sparse_quantile(&s2.ttft, 0.9));
	range_sum(g, "b", t0 + 80 * S, 120 * S, 0, &s2);
	assert_int_equal(history_sum_requests(&s2), 200);
	history_free(g);
	history_sum_free(&s);
	history_sum_free(&s2);
	pb_free(&b);
	pb_free(&a);
	history_free(h);
}

static void test_file_refused(void **state)
{
	struct history *h = fresh();
	struct pb a = { 0 };
	uint64_t t0 = 6000 * S;
	char why[200];
	struct history_req r = req(OUTCOME_OK, 1000, 100, 1);

	(void)state;
	history_advance(h, t0);
	history_request(h, "a", t0 + S, &r);
	history_advance(h, t0 + 3 * S);
	assert_int_equal(history_save(h, t0 + 3 * S, to_pb, &a), 0);
	/* any byte changed: the checksum */
	for (size_t i = 0; i < a.n; i += 7) {
		a.p[i] ^= 0x10;
		assert_null(loaded(&a, tiers, 2, t0 + 3 * S, why));
		assert_true(strstr(why, "checksum") != NULL || strstr(why, "not a tokentap") != NULL ||
		    strstr(why, "version") != NULL);
		a.p[i] ^= 0x10;
	}
	/* cut short */
	a.n -= 5;
	assert_null(loaded(&a, tiers, 2, t0 + 3 * S, why));
	a.n += 5;
	/* written more than a minute after now: a clock set back */
	assert_null(loaded(&a, tiers, 2, t0 + 3 * S - HISTORY_AHEAD_US - S, why));
	assert_non_null(strstr(why, "after this clock"));
	/* within the minute: read */
	h = (history_free(h), loaded(&a, tiers, 2, t0 + 3 * S - 30 * S, why));
	assert_non_null(h);
	history_free(h);
	memcpy(a.p, "tokentap-history 9\n", 19);
	assert_null(loaded(&a, tiers, 2, t0 + 3 * S, why));
	assert_non_null(strstr(why, "version"));
	pb_free(&a);
}

/* Lognormal around median m (µs), spread sigma: latencies as they come. */
static uint64_t lognormal(uint64_t *seed, double m, double sigma)
{
	double u = rng_unit_open(seed), v = rng_unit_open(seed);
	double z = sqrt(-2 * log(u)) * cos(2 * M_PI * v);
	return (uint64_t)(m * exp(sigma * z));
}

/* What a day of one busy route costs, with the shipped steps (10 s for an
 * hour, 1 min for a day): HISTORY_DAY_RATE requests a second (default 2),
 * TTFT around 400 ms, 50 tokens 20 ms apart, every hundredth an error.
 * The figure docs/operating.md gives; the test holds it under a bound. */
static void test_memory_of_a_day(void **state)
{
	static const struct conf_history_step shipped[] = { { 10 * S, 3600 * S }, { 60 * S, 86400 * S } };
	const char *env = getenv("HISTORY_DAY_RATE");
	double rate = env ? atof(env) : 2;
	struct history *h = history_new(shipped, 2);
	struct history *idle = history_new(shipped, 2);
	uint64_t seed = 11, t0 = 1000000 * S, t = t0, n = 0;
	uint32_t counts[HIST_BUCKETS] = { 0 };
	uint16_t used[64];
	size_t empty;

	(void)state;
	assert_non_null(h);
	history_advance(h, t);
	history_advance(idle, t);
	empty = history_bytes(h);
	while (t < t0 + 86400 * S) {
		uint64_t ttft = lognormal(&seed, 400000, 0.5), tpot = lognormal(&seed, 20000, 0.25);
		struct history_req r = { n % 100 ? OUTCOME_OK : OUTCOME_UPSTREAM_ERROR,
			(int64_t)ttft, (int64_t)tpot, (int64_t)ttft, 50, 400, 49, 49 * tpot,
			(int64_t)(n % 8), 0, (int64_t)ttft };
		uint64_t sum = 0, min = UINT64_MAX, max = 0;
		unsigned n_used = 0;
		for (int i = 0; i < 49; i++) {
			uint64_t g = lognormal(&seed, (double)tpot, 0.4);
			unsigned b = hist_bucket(g);
			if (counts[b]++ == 0 && n_used < 64)
				used[n_used++] = (uint16_t)b;
			sum += g;
			min = g < min ? g : min;
			max = g > max ? g : max;
		}
		history_request(h, "chat", t, &r);
		history_itl(h, "chat", t, counts, used, n_used, 49, sum, min, max);
		for (unsigned i = 0; i < n_used; i++)
			counts[used[i]] = 0;
		n++;
		t += (uint64_t)(-log(rng_unit_open(&seed)) / rate * 1e6);
		if (n % 64 == 0)
			history_advance(h, t);
	}
	history_advance(h, t);
	history_advance(idle, t);
	/* the instance holds the same: half of it is the route's */
	size_t route = (history_bytes(h) - empty) / 2;
	fprintf(stderr, "# history: %zu bytes for a route over a day at %g requests/s "
	    "(%llu requests); %zu bytes with none\n", route, rate, (unsigned long long)n,
	    history_bytes(idle));
	if (env == NULL)
		assert_true(route < 3 * 1024 * 1024);
	else {                          /* and what writing its file takes */
		struct pb b = { 0 };
		struct timespec a, z;
		for (int i = 0; i < 3; i++) {
			b.n = 0;
			clock_gettime(CLOCK_MONOTONIC, &a);
			assert_int_equal(history_save(h, t, to_pb, &b), 0);
			clock_gettime(CLOCK_MONOTONIC, &z);
		}
		fprintf(stderr, "# history: its file %zu bytes, encoded in %.1f ms\n", b.n,
		    (double)(z.tv_sec - a.tv_sec) * 1e3 + (double)(z.tv_nsec - a.tv_nsec) / 1e6);
		pb_free(&b);
	}
	history_free(h);
	history_free(idle);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_bytes_round_trip),
		cmocka_unit_test(test_ranges_are_exact),
		cmocka_unit_test(test_views),
		cmocka_unit_test(test_coarse_steps_from_fine),
		cmocka_unit_test(test_concurrency),
		cmocka_unit_test(test_removed_series),
		cmocka_unit_test(test_late_records),
		cmocka_unit_test(test_window_pair),
		cmocka_unit_test(test_file_round_trip),
		cmocka_unit_test(test_file_refused),
		cmocka_unit_test(test_memory_of_a_day),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
