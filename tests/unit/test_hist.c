/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of hist.c: the bucket layout against an independent reference
 * built by walking the powers of two, and quantiles against the exact
 * quantiles of large sorted samples. Every sample comes from a fixed-seed
 * xorshift generator, so a run is deterministic. */
#include <math.h>

#include "hist.h"

#include "unit.h"

#define NSAMPLES 200000
#define TOP      (1ull << HIST_TOP_BITS)

static uint64_t ref_lo[HIST_BUCKETS], ref_hi[HIST_BUCKETS];

/* The layout the header promises, written as the obvious loop: one bucket
 * per value below 2*HIST_SUB, then HIST_SUB equal buckets per power of two. */
static int ref_setup(void **state)
{
	unsigned i = 0, k, j;

	(void)state;
	for (; i < 2 * HIST_SUB; i++)
		ref_lo[i] = ref_hi[i] = i;
	for (k = HIST_SUB_BITS + 1; k < HIST_TOP_BITS; k++) {
		uint64_t w = 1ull << (k - HIST_SUB_BITS);
		for (j = 0; j < HIST_SUB; j++, i++) {
			ref_lo[i] = (1ull << k) + j * w;
			ref_hi[i] = ref_lo[i] + w - 1;
		}
	}
	return i == HIST_BUCKETS ? 0 : -1;
}

static unsigned ref_index(uint64_t v)
{
	unsigned lo = 0, hi = HIST_BUCKETS - 1;

	if (v >= TOP)
		return HIST_BUCKETS - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi + 1) / 2;
		if (ref_lo[mid] <= v)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* xorshift64*: small, fast, good enough for test data. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Uniform in (0, 1): never 0, so log() below is safe. */
static double rng_unit(void)
{
	return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static double rng_normal(void)
{
	return sqrt(-2 * log(rng_unit())) * cos(2 * M_PI * rng_unit());
}

static uint64_t at_least_1(double v)
{
	return v < 1 ? 1 : (uint64_t)llround(v);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Number of sorted[0..n) that are <= v. */
static uint64_t exact_le(const uint64_t *sorted, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sorted[mid] <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint64_t *sorted_copy(const uint64_t *v, size_t n)
{
	uint64_t *s = malloc(n * sizeof(*s));

	assert_non_null(s);
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	return s;
}

static void record_all(struct hist *h, const uint64_t *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		hist_record(h, v[i]);
}

/* The value of rank ceil(qm/1000 * n), in integers so that it does not
 * share hist.c's floating-point rank computation. */
static uint64_t exact_quantile(const uint64_t *sorted, size_t n, unsigned qm)
{
	size_t rank = ((size_t)qm * n + 999) / 1000;

	return sorted[rank ? rank - 1 : 0];
}

static double rel_err(double got, uint64_t want)
{
	return fabs(got - (double)want) / (double)want;
}

/*
 * Records the samples and checks count, sum, mean, min, max, the five
 * quantiles the brief names and then every per-mille quantile from 0.001 to
 * 0.999 against the sorted samples: relative error <= 1 %.
 */
static void check_quantiles(const char *name, const uint64_t *v, size_t n)
{
	static const unsigned named[] = { 500, 900, 950, 990, 999 };
	struct hist *h = malloc(sizeof(*h));
	uint64_t *s = sorted_copy(v, n), sum = 0;
	double worst = 0;
	unsigned qm;
	size_t i;

	assert_non_null(h);
	hist_init(h);
	record_all(h, v, n);
	for (i = 0; i < n; i++)
		sum += v[i];
	assert_int_equal(h->count, n);
	assert_int_equal(h->sum, sum);
	assert_int_equal(h->min, s[0]);
	assert_int_equal(h->max, s[n - 1]);
	assert_true(hist_mean(h) == (double)sum / (double)n);
	assert_true(hist_quantile(h, 0) == (double)s[0]);
	assert_true(hist_quantile(h, 1) == (double)s[n - 1]);
	for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		uint64_t want = exact_quantile(s, n, named[i]);
		double got = hist_quantile(h, named[i] / 1000.0);
		if (rel_err(got, want) > 0.01)
			fail_msg("%s q=0.%03u: got %.1f, exact %llu (%.3f %%)", name,
			    named[i], got, (unsigned long long)want,
			    100 * rel_err(got, want));
	}
	for (qm = 1; qm < 1000; qm++) {
		uint64_t want = exact_quantile(s, n, qm);
		double got = hist_quantile(h, qm / 1000.0);
		if (rel_err(got, want) > 0.01)
			fail_msg("%s q=0.%03u: got %.1f, exact %llu (%.3f %%)", name,
			    qm, got, (unsigned long long)want,
			    100 * rel_err(got, want));
		if (rel_err(got, want) > worst)
			worst = rel_err(got, want);
	}
	print_message("%-10s worst relative error over q=0.001..0.999: %.4f %%\n",
	    name, 100 * worst);
	free(s);
	free(h);
}

static uint64_t *gen_uniform(void)
{
	uint64_t *v = malloc(NSAMPLES * sizeof(*v));
	size_t i;

	assert_non_null(v);
	rng_state = 0x9E3779B97F4A7C15ull;
	for (i = 0; i < NSAMPLES; i++)
		v[i] = 1 + rng_next() % 10000000;	/* 1 µs .. 10 s */
	return v;
}

static uint64_t *gen_lognormal(void)
{
	uint64_t *v = malloc(NSAMPLES * sizeof(*v));
	size_t i;

	assert_non_null(v);
	rng_state = 0xD1B54A32D192ED03ull;
	for (i = 0; i < NSAMPLES; i++)	/* median 300 ms, sigma 1 */
		v[i] = at_least_1(exp(log(300000.0) + rng_normal()));
	return v;
}

/* Fast cached answers and slow generations: the tail quantiles fall in a
 * different mode from the median. */
static uint64_t *gen_bimodal(void)
{
	uint64_t *v = malloc(NSAMPLES * sizeof(*v));
	size_t i;

	assert_non_null(v);
	rng_state = 0x8CB92BA72F3D8DD7ull;
	for (i = 0; i < NSAMPLES; i++) {
		if (rng_next() % 100 < 85)
			v[i] = at_least_1(20000 + 3000 * rng_normal());
		else
			v[i] = at_least_1(2000000 + 300000 * rng_normal());
	}
	return v;
}

/* Log-uniform from 1 µs to 1 h, both ends included. */
static uint64_t *gen_span(void)
{
	uint64_t *v = malloc(NSAMPLES * sizeof(*v));
	size_t i;

	assert_non_null(v);
	rng_state = 0x94D049BB133111EBull;
	for (i = 0; i < NSAMPLES; i++)
		v[i] = at_least_1(exp(rng_unit() * log((double)HIST_MAX_US)));
	v[0] = 1;
	v[1] = HIST_MAX_US;
	return v;
}

static void test_quantiles_uniform(void **state)
{
	uint64_t *v = gen_uniform();

	(void)state;
	check_quantiles("uniform", v, NSAMPLES);
	free(v);
}

static void test_quantiles_lognormal(void **state)
{
	uint64_t *v = gen_lognormal();

	(void)state;
	check_quantiles("lognormal", v, NSAMPLES);
	free(v);
}

static void test_quantiles_bimodal(void **state)
{
	uint64_t *v = gen_bimodal();

	(void)state;
	check_quantiles("bimodal", v, NSAMPLES);
	free(v);
}

static void test_quantiles_span(void **state)
{
	uint64_t *v = gen_span();

	(void)state;
	check_quantiles("1us..1h", v, NSAMPLES);
	free(v);
}

/* Both edges of every bucket land in that bucket, the buckets tile 0 ..
 * 2^HIST_TOP_BITS - 1 without gaps, and the top one takes what is above. */
static void test_layout_edges(void **state)
{
	struct hist h;
	unsigned i;

	(void)state;
	assert_int_equal(ref_hi[HIST_BUCKETS - 1], TOP - 1);
	for (i = 0; i < HIST_BUCKETS; i++) {
		if (i > 0)
			assert_int_equal(ref_lo[i], ref_hi[i - 1] + 1);
		hist_init(&h);
		hist_record(&h, ref_lo[i]);
		hist_record(&h, ref_hi[i]);
		if (h.buckets[i] != 2)
			fail_msg("bucket %u [%llu, %llu] holds %u of its edges", i,
			    (unsigned long long)ref_lo[i],
			    (unsigned long long)ref_hi[i], h.buckets[i]);
	}
	hist_init(&h);
	hist_record(&h, TOP);
	hist_record(&h, UINT64_MAX);
	assert_int_equal(h.buckets[HIST_BUCKETS - 1], 2);
}

/* Every value below 2^16 and a million log-spread values up to 2^34 land
 * in the bucket the reference layout says. */
static void test_layout_values(void **state)
{
	struct hist h;
	uint64_t v;
	unsigned i, b;

	(void)state;
	hist_init(&h);
	rng_state = 0x2545F4914F6CDD1Dull;
	for (i = 0; i < (1u << 16) + 1000000; i++) {
		v = i < (1u << 16) ? i : rng_next() >> (rng_next() % 34 + 30);
		b = ref_index(v);
		hist_record(&h, v);
		if (h.buckets[b] != 1)
			fail_msg("value %llu not in bucket %u", (unsigned long long)v, b);
		h.buckets[b] = 0;
	}
}

static void test_empty(void **state)
{
	static struct hist zeroed;	/* all-zero storage is an empty histogram */
	struct hist h;

	(void)state;
	memset(&h, 0xA5, sizeof(h));
	hist_init(&h);
	assert_memory_equal(&h, &zeroed, sizeof(h));
	assert_int_equal(h.count, 0);
	assert_true(hist_quantile(&h, 0) == 0);
	assert_true(hist_quantile(&h, 0.5) == 0);
	assert_true(hist_quantile(&h, 1) == 0);
	assert_true(hist_mean(&h) == 0);
	assert_int_equal(hist_count_le(&h, 0), 0);
	assert_int_equal(hist_count_le(&h, UINT64_MAX), 0);
	/* The first value sets min even though min starts at 0. */
	hist_record(&zeroed, 5000);
	assert_int_equal(zeroed.min, 5000);
	assert_int_equal(zeroed.max, 5000);
}

/* One value in the top, the bottom and the middle of its bucket: the
 * bucket midpoint clamped into [min, max] must give it back exactly. */
static void test_single_value(void **state)
{
	static const double qs[] = { 0, 0.001, 0.5, 0.9, 0.99, 0.999, 1 };
	const uint64_t vals[] = { 123457, ref_lo[ref_index(123457)], 97, HIST_MAX_US };
	struct hist h;
	size_t i, j;

	(void)state;
	for (j = 0; j < sizeof(vals) / sizeof(vals[0]); j++) {
		uint64_t v = vals[j];
		hist_init(&h);
		hist_record(&h, v);
		assert_int_equal(h.count, 1);
		assert_int_equal(h.min, v);
		assert_int_equal(h.max, v);
		for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
			if (hist_quantile(&h, qs[i]) != (double)v)
				fail_msg("single %llu: q=%g gives %.1f",
				    (unsigned long long)v, qs[i], hist_quantile(&h, qs[i]));
		assert_true(hist_mean(&h) == (double)v);
		assert_int_equal(hist_count_le(&h, v - 1), 0);
		assert_int_equal(hist_count_le(&h, v), 1);
		assert_int_equal(hist_count_le(&h, UINT64_MAX), 1);
	}
}

static void test_clamp_beyond_top(void **state)
{
	const uint64_t five_h = 5 * HIST_MAX_US;
	unsigned top = HIST_BUCKETS - 1;
	struct hist h;
	double mid;

	(void)state;
	hist_init(&h);
	hist_record(&h, 10);
	hist_record(&h, HIST_MAX_US);
	hist_record(&h, five_h);
	assert_int_equal(h.buckets[top], 1);
	assert_int_equal(h.buckets[ref_index(HIST_MAX_US)], 1);
	assert_true(ref_index(HIST_MAX_US) < top);
	assert_int_equal(h.max, five_h);
	assert_int_equal(h.sum, 10 + HIST_MAX_US + five_h);
	assert_true(hist_mean(&h) == (double)(10 + HIST_MAX_US + five_h) / 3);
	assert_true(hist_quantile(&h, 1) == (double)five_h);
	assert_true(hist_quantile(&h, 0) == 10.0);
	assert_true(rel_err(hist_quantile(&h, 0.5), HIST_MAX_US) <= 0.01);
	/* Rank 3 is in the top bucket: its midpoint, the best the buckets know. */
	mid = (double)ref_lo[top] + (double)(ref_hi[top] - ref_lo[top]) / 2;
	assert_true(hist_quantile(&h, 0.9) == mid);
	/* 1 h shares a 2^25 µs wide bucket: exact at its upper edge only. */
	assert_int_equal(hist_count_le(&h, ref_hi[ref_index(HIST_MAX_US)]), 2);
	assert_in_range(hist_count_le(&h, HIST_MAX_US), 1, 2);
	assert_int_equal(hist_count_le(&h, five_h), 3);
}

/* Ranks are ceil(q * count) even where q * count rounds up in binary. */
static void test_rank_rounding(void **state)
{
	struct hist h;
	uint64_t v;

	(void)state;
	hist_init(&h);
	for (v = 1; v <= 100; v++)	/* exact buckets: quantile == rank */
		hist_record(&h, v);
	assert_true(0.07 * 100 > 7.0);	/* the trap this test is about */
	assert_true(hist_quantile(&h, 0.07) == 7.0);
	assert_true(hist_quantile(&h, 0.5) == 50.0);
	assert_true(hist_quantile(&h, 0.291) == 30.0);
	assert_true(hist_quantile(&h, 0.01) == 1.0);
	assert_true(hist_quantile(&h, 0.001) == 1.0);
	assert_true(hist_quantile(&h, 0.999) == 100.0);
	assert_true(hist_quantile(&h, -1) == 1.0);
	assert_true(hist_quantile(&h, 2) == 100.0);
	assert_true(hist_quantile(&h, NAN) == 1.0);
}

static void expect_same(const struct hist *a, const struct hist *b)
{
	unsigned i;

	assert_int_equal(a->count, b->count);
	assert_int_equal(a->sum, b->sum);
	assert_int_equal(a->min, b->min);
	assert_int_equal(a->max, b->max);
	for (i = 0; i < HIST_BUCKETS; i++)
		if (a->buckets[i] != b->buckets[i])
			fail_msg("bucket %u: %u != %u", i, a->buckets[i], b->buckets[i]);
}

static void test_merge(void **state)
{
	struct hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct hist *all = malloc(sizeof(*all)), *e = malloc(sizeof(*e));
	uint64_t *v = gen_span();

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(all);
	assert_non_null(e);
	/* A unique minimum and maximum in the second half, so merge has to
	 * take both from src. */
	v[NSAMPLES - 1] = 0;
	v[NSAMPLES - 2] = 5 * HIST_MAX_US;
	hist_init(a);
	hist_init(b);
	hist_init(all);
	hist_init(e);
	record_all(a, v, NSAMPLES / 2);
	record_all(b, v + NSAMPLES / 2, NSAMPLES - NSAMPLES / 2);
	record_all(all, v, NSAMPLES);
	assert_true(a->min > all->min && a->max < all->max);
	assert_true(a->min > 0);
	hist_merge(e, a);	/* empty dst: takes src's min, not its own 0 */
	expect_same(e, a);
	hist_merge(a, b);
	expect_same(a, all);
	hist_init(e);
	hist_merge(a, e);	/* empty src: nothing changes */
	expect_same(a, all);
	assert_true(hist_quantile(a, 0.99) == hist_quantile(all, 0.99));
	free(v);
	free(a);
	free(b);
	free(all);
	free(e);
}

/* count_le is exact at every bucket's upper edge and below 2*HIST_SUB,
 * elsewhere the bucket's share by width as documented (so between the
 * exact counts at the bucket's edges), monotone, 0 below min and count
 * from max up. */
static void test_count_le(void **state)
{
	struct hist *h = malloc(sizeof(*h));
	uint64_t *v = gen_lognormal(), *s, *probes, prev = 0;
	size_t i, np = 0, nprobes = HIST_BUCKETS + 20000;

	(void)state;
	assert_non_null(h);
	s = sorted_copy(v, NSAMPLES);
	probes = malloc(nprobes * sizeof(*probes));
	assert_non_null(probes);
	hist_init(h);
	record_all(h, v, NSAMPLES);
	for (i = 0; i < HIST_BUCKETS; i++) {
		uint64_t want = exact_le(s, NSAMPLES, ref_hi[i]);
		if (hist_count_le(h, ref_hi[i]) != want)
			fail_msg("count_le(%llu) = %llu, exact %llu",
			    (unsigned long long)ref_hi[i],
			    (unsigned long long)hist_count_le(h, ref_hi[i]),
			    (unsigned long long)want);
		probes[np++] = ref_hi[i];
	}
	rng_state = 0x123456789ABCDEFull;
	while (np < nprobes)
		probes[np++] = rng_next() >> (rng_next() % 40 + 24);
	qsort(probes, np, sizeof(*probes), cmp_u64);
	for (i = 0; i < np; i++) {
		uint64_t got = hist_count_le(h, probes[i]);
		unsigned b = ref_index(probes[i]);
		uint64_t lo = ref_lo[b] ? exact_le(s, NSAMPLES, ref_lo[b] - 1) : 0;
		uint64_t share = (uint64_t)h->buckets[b] * (probes[i] - ref_lo[b] + 1) /
		    (ref_hi[b] - ref_lo[b] + 1);
		uint64_t want = probes[i] < s[0] ? 0 :
		    probes[i] >= s[NSAMPLES - 1] ? NSAMPLES : lo + share;
		assert_int_equal(got, want);
		assert_true(got >= prev);
		assert_in_range(got, lo, exact_le(s, NSAMPLES, ref_hi[b]));
		if (probes[i] < 2 * HIST_SUB)
			assert_int_equal(got, exact_le(s, NSAMPLES, probes[i]));
		prev = got;
	}
	assert_int_equal(hist_count_le(h, s[0] - 1), 0);
	assert_int_equal(hist_count_le(h, s[NSAMPLES - 1]), NSAMPLES);
	free(probes);
	free(s);
	free(v);
	free(h);
}

/* Values counted by bucket elsewhere (hist_bucket), then added at once,
 * give the sparse histogram what as many single records give it, entry for
 * entry: batches of 1 to 64 values, spread from 0 to past the top, or
 * bunched in a few buckets (the common case). */
static void test_sparse_add_counts(void **state)
{
	static uint32_t counts[HIST_BUCKETS];
	struct hist_sparse one = { 0 }, batch = { 0 };

	(void)state;
	rng_state = 42;
	for (int round = 0; round < 3000; round++) {
		uint16_t used[64];
		unsigned n = 1 + (unsigned)(rng_next() % 64), n_used = 0;
		uint64_t base = rng_next() % 60000, sum = 0, min = 0, max = 0;

		for (unsigned i = 0; i < n; i++) {
			uint64_t r = rng_next();
			uint32_t v = round % 3 == 0 ? (uint32_t)r :
			    (uint32_t)(base + r % (round % 3 == 1 ? 400 : 5));
			unsigned b = hist_bucket(v);
			assert_true(b < HIST_BUCKETS);
			if (counts[b]++ == 0)
				used[n_used++] = (uint16_t)b;
			min = i == 0 || v < min ? v : min;
			max = v > max ? v : max;
			sum += v;
			assert_int_equal(hist_sparse_record(&one, v), 0);
		}
		assert_int_equal(hist_sparse_add_counts(&batch, counts, used, n_used,
		    n, sum, min, max), 0);
		for (unsigned i = 0; i < n_used; i++)
			counts[used[i]] = 0;
		assert_int_equal(batch.n, one.n);
		for (uint32_t i = 0; i < one.n; i++) {
			assert_int_equal(hist_sparse_entries(&batch)[i].idx,
			    hist_sparse_entries(&one)[i].idx);
			assert_int_equal(hist_sparse_entries(&batch)[i].count,
			    hist_sparse_entries(&one)[i].count);
		}
		assert_int_equal(batch.count, one.count);
		assert_int_equal(batch.sum, one.sum);
		assert_int_equal(batch.min, one.min);
		assert_int_equal(batch.max, one.max);
		if (round % 500 == 499) {
			hist_sparse_clear(&one);
			hist_sparse_clear(&batch);
		}
	}
	assert_int_equal(hist_sparse_add_counts(&batch, counts, NULL, 0, 0, 0, 0, 0), 0);
	hist_sparse_free(&one);
	hist_sparse_free(&batch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_edges),
		cmocka_unit_test(test_layout_values),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_single_value),
		cmocka_unit_test(test_clamp_beyond_top),
		cmocka_unit_test(test_rank_rounding),
		cmocka_unit_test(test_quantiles_uniform),
		cmocka_unit_test(test_quantiles_lognormal),
		cmocka_unit_test(test_quantiles_bimodal),
		cmocka_unit_test(test_quantiles_span),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_count_le),
		cmocka_unit_test(test_sparse_add_counts),
	};

	return cmocka_run_group_tests(tests, ref_setup, NULL);
}
