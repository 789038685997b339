/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf exposition encoder: exact bytes for a small family, long
 * lengths, and a histogram's classic and native fields read back by a
 * decoder written here from the wire format. */
#include <math.h>

#include "nhist.h"
#include "promproto.h"

#include "unit.h"

static void test_counter_family_bytes(void **state)
{
	static const uint8_t want[] = { 0x15, 0x0a, 0x01, 'a', 0x12, 0x01, 'h', 0x18, 0x00,
		0x22, 0x0b, 0x1a, 0x09, 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f };
	struct pb b = { 0 };
	size_t f, m;
	(void)state;
	f = promproto_family(&b, "a", "h", PROMPROTO_COUNTER);
	m = promproto_metric(&b, NULL, NULL, 0);
	promproto_counter(&b, 1.0);
	pb_close(&b, m);
	pb_close(&b, f);
	assert_int_equal(b.n, sizeof want);
	assert_memory_equal(b.p, want, sizeof want);
	pb_free(&b);
}

static void test_long_lengths_and_zigzag(void **state)
{
	char s[300];
	struct pb b = { 0 };
	size_t m;
	(void)state;
	memset(s, 'x', sizeof s);
	m = pb_open(&b, 0);
	pb_bytes(&b, 1, s, sizeof s);      /* 0x0a, 300 = ac 02, then 300 bytes */
	pb_close(&b, m);
	/* 303 = af 02 */
	assert_int_equal(b.n, 2 + 3 + 300);
	assert_int_equal(b.p[0], 0xaf);
	assert_int_equal(b.p[1], 0x02);
	assert_int_equal(b.p[2], 0x0a);
	assert_int_equal(b.p[3], 0xac);
	assert_int_equal(b.p[4], 0x02);
	assert_int_equal(b.p[5], 'x');
	assert_int_equal(b.p[b.n - 1], 'x');
	b.n = 0;
	pb_sint(&b, 1, -1);
	pb_sint(&b, 1, 1);
	pb_sint(&b, 1, -2);
	static const uint8_t zz[] = { 0x08, 0x01, 0x08, 0x02, 0x08, 0x03 };
	assert_memory_equal(b.p, zz, sizeof zz);
	pb_free(&b);
}

/* ---- a decoder of the wire format, for reading back ---------------------- */

struct field {
	unsigned num, wt;
	uint64_t v;            /* varint, or the 64 bits of a double */
	const uint8_t *p;      /* length-delimited */
	size_t n;
};

static uint64_t rd_varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	for (int s = 0; *p < end; s += 7) {
		uint8_t c = *(*p)++;
		v |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80))
			break;
	}
	return v;
}

/* The fields of a message, in order; returns how many. */
static size_t fields(const uint8_t *p, size_t n, struct field *out, size_t max)
{
	const uint8_t *end = p + n;
	size_t k = 0;
	while (p < end && k < max) {
		uint64_t tag = rd_varint(&p, end);
		struct field *f = &out[k++];
		f->num = (unsigned)(tag >> 3);
		f->wt = (unsigned)(tag & 7);
		if (f->wt == 0) {
			f->v = rd_varint(&p, end);
		} else if (f->wt == 1) {
			f->v = 0;
			for (int i = 0; i < 8; i++)
				f->v |= (uint64_t)p[i] << (8 * i);
			p += 8;
		} else {
			f->n = rd_varint(&p, end);
			f->p = p;
			p += f->n;
		}
		assert_true(p <= end);
	}
	assert_true(p == end);
	return k;
}

static double as_double(uint64_t v)
{
	double d;
	memcpy(&d, &v, 8);
	return d;
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static void test_histogram_reads_back(void **state)
{
	static const uint64_t counts[] = { 1, 2, 3 };
	static const double bounds[] = { 0.1, 0.25 };
	struct nhist nh = { 0 };
	struct pb b = { 0 };
	struct promproto_hist h = { .count = 6, .sum = 1.5, .n_bounds = 2,
		.bounds = bounds, .counts = counts, .native = &nh };
	const char *names[] = { "route" }, *values[] = { "r" };
	struct field fam[8], met[8], hist[64], sub[4];
	size_t nf, nm, nhf, f, m;
	const uint8_t *p;
	uint64_t len;
	(void)state;

	/* native buckets 0 (x2), 1 (x3), 5 (x1): values at their upper bounds */
	nhist_record(&nh, 1.0);
	nhist_record(&nh, 1.0);
	for (int i = 0; i < 3; i++)
		nhist_record(&nh, nhist_upper(1));
	nhist_record(&nh, nhist_upper(5));
	nhist_record(&nh, 0);
	assert_int_equal(nh.n, 3);

	f = promproto_family(&b, "x_seconds", "help", PROMPROTO_HISTOGRAM);
	m = promproto_metric(&b, names, values, 1);
	promproto_histogram(&b, &h);
	pb_close(&b, m);
	pb_close(&b, f);

	p = b.p;
	len = rd_varint(&p, b.p + b.n);
	assert_int_equal(len, b.n - (size_t)(p - b.p));
	nf = fields(p, len, fam, 8);
	assert_int_equal(nf, 4);
	assert_int_equal(fam[2].num, 3);
	assert_int_equal(fam[2].v, 4);                 /* HISTOGRAM */
	assert_int_equal(fam[3].num, 4);
	nm = fields(fam[3].p, fam[3].n, met, 8);
	assert_int_equal(nm, 2);
	assert_int_equal(met[0].num, 1);               /* the label pair */
	assert_int_equal(fields(met[0].p, met[0].n, sub, 4), 2);
	assert_memory_equal(sub[0].p, "route", 5);
	assert_int_equal(met[1].num, 7);
	nhf = fields(met[1].p, met[1].n, hist, 64);
	/* count, sum, 2 buckets, schema, zero threshold, zero count,
	 * 2 spans, 3 deltas */
	assert_int_equal(nhf, 12);
	assert_int_equal(hist[0].num, 1);
	assert_int_equal(hist[0].v, 6);
	assert_true(as_double(hist[1].v) == 1.5);
	assert_int_equal(hist[2].num, 3);
	assert_int_equal(fields(hist[3].p, hist[3].n, sub, 4), 2);
	assert_int_equal(sub[0].v, 3);                 /* cumulative */
	assert_true(as_double(sub[1].v) == 0.25);
	assert_int_equal(hist[4].num, 5);
	assert_int_equal(unzigzag(hist[4].v), NHIST_SCHEMA);
	assert_int_equal(hist[5].num, 6);
	assert_true(as_double(hist[5].v) > 0 && as_double(hist[5].v) < 1e-30);
	assert_int_equal(hist[6].num, 7);
	assert_int_equal(hist[6].v, 1);
	assert_int_equal(hist[7].num, 12);
	assert_int_equal(fields(hist[7].p, hist[7].n, sub, 4), 2);
	assert_int_equal(unzigzag(sub[0].v), 0);
	assert_int_equal(sub[1].v, 2);
	assert_int_equal(fields(hist[8].p, hist[8].n, sub, 4), 2);
	assert_int_equal(unzigzag(sub[0].v), 3);       /* 2 empty buckets: 2, 3, 4 */
	assert_int_equal(sub[1].v, 1);
	assert_int_equal(hist[9].num, 13);
	assert_int_equal(unzigzag(hist[9].v), 2);
	assert_int_equal(unzigzag(hist[10].v), 1);
	assert_int_equal(unzigzag(hist[11].v), -2);
	nhist_free(&nh);
	pb_free(&b);
}

static void test_native_index_bounds(void **state)
{
	(void)state;
	/* bucket i holds (2^((i-1)/64), 2^(i/64)]: powers of two are upper bounds */
	assert_int_equal(nhist_index(1.0), 0);
	assert_int_equal(nhist_index(2.0), 64);
	assert_int_equal(nhist_index(0.5), -64);
	assert_int_equal(nhist_index(1.0000001), 1);
	assert_int_equal(nhist_index(0.001), (int)ceil(log2(0.001) * 64));
	for (int i = -1500; i < 1500; i += 7) {
		double up = nhist_upper(i);
		assert_int_equal(nhist_index(up * (1 - 1e-9)), i);
		assert_int_equal(nhist_index(up * (1 + 1e-9)), i + 1);
	}
	/* adjacent bounds 1.1 % apart */
	assert_true(nhist_upper(1) / nhist_upper(0) < 1.011);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counter_family_bytes),
		cmocka_unit_test(test_long_lengths_and_zigzag),
		cmocka_unit_test(test_histogram_reads_back),
		cmocka_unit_test(test_native_index_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
