/* SPDX-License-Identifier: Apache-2.0 */
/* The exposition writer: text lines, label values whatever their bytes,
 * the scraper's Accept and Accept-Encoding, gzip. */
#include <event2/buffer.h>
#include <zlib.h>

#include "promout.h"

#include "unit.h"

static void test_text_lines(void **state)
{
	static const uint64_t bounds[] = { 100000, 1500000 }, counts[] = { 1, 0, 2 };
	struct promout_hist h = { .count = 3, .sum = 2500001, .div = 1000000, .n_bounds = 2,
		.bounds = bounds, .counts = counts };
	struct promout_labels l = { .n = 0 };
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 0);
	char *s;
	(void)state;
	promout_label(&l, "route", "r");
	promout_label(&l, "model", "a\"b\\c\nd\xff");
	promout_family(o, "x_seconds", "Help.", PROMPROTO_HISTOGRAM);
	promout_histogram(o, &l, &h);
	promout_family(o, "y_total", "Y.", PROMPROTO_COUNTER);
	promout_sample(o, &(struct promout_labels){ .n = 0 }, 7);
	promout_family(o, "z", "Z.", PROMPROTO_GAUGE);
	promout_sample(o, &l, 0.25);
	assert_int_equal(promout_finish(o), 0);
	s = unit_take(b);
	assert_string_equal(s,
	    "# HELP x_seconds Help.\n# TYPE x_seconds histogram\n"
	    "x_seconds_bucket{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\",le=\"0.100000\"} 1\n"
	    "x_seconds_bucket{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\",le=\"1.500000\"} 1\n"
	    "x_seconds_bucket{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\",le=\"+Inf\"} 3\n"
	    "x_seconds_sum{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\"} 2.500001\n"
	    "x_seconds_count{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\"} 3\n"
	    "# HELP y_total Y.\n# TYPE y_total counter\ny_total 7\n"
	    "# HELP z Z.\n# TYPE z gauge\n"
	    "z{route=\"r\",model=\"a\\\"b\\\\c\\nd\xef\xbf\xbd\"} 0.25\n");
	free(s);
	evbuffer_free(b);
}

static void test_protobuf_leaves_out_empty_families(void **state)
{
	struct promout_labels l = { .n = 0 };
	struct evbuffer *b = evbuffer_new();
	struct promout *o = promout_new(b, 1);
	char *s;
	(void)state;
	promout_label(&l, "v", "\xc3\x28");
	promout_family(o, "empty_total", "E.", PROMPROTO_COUNTER);
	promout_family(o, "g", "G.", PROMPROTO_GAUGE);
	promout_sample(o, &l, 2);
	assert_int_equal(promout_finish(o), 0);
	size_t n = evbuffer_get_length(b);
	s = unit_take(b);
	/* one family: its length, then name "g" first */
	assert_int_equal((size_t)(unsigned char)s[0], n - 1);
	assert_int_equal(s[1], 0x0a);
	assert_int_equal(s[3], 'g');
	assert_null(memmem(s, n, "empty", 5));
	/* the ill-formed byte became U+FFFD, the valid one after it stayed */
	assert_non_null(memmem(s, n, "\xef\xbf\xbd(", 4));
	free(s);
	evbuffer_free(b);
}

static void test_accept(void **state)
{
	(void)state;
	/* Prometheus 2.42 with native histograms on */
	assert_true(promout_wants_protobuf("application/vnd.google.protobuf;"
	    "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,"
	    "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"));
	/* and without */
	assert_false(promout_wants_protobuf("application/openmetrics-text;version=1.0.0,"
	    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,"
	    "*/*;q=0.1"));
	assert_false(promout_wants_protobuf(NULL));
	assert_false(promout_wants_protobuf("*/*"));
	assert_false(promout_wants_protobuf("application/vnd.google.protobuf;"
	    "proto=io.prometheus.client.MetricFamily;encoding=text"));
	assert_false(promout_wants_protobuf("application/vnd.google.protobuf;"
	    "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0"));
	assert_true(promout_wants_protobuf("text/plain;q=0.5, application/vnd.google.protobuf; "
	    "proto=io.prometheus.client.MetricFamily; encoding=delimited"));
	assert_true(promout_accepts_gzip("gzip"));
	assert_true(promout_accepts_gzip("deflate, gzip;q=0.5"));
	assert_false(promout_accepts_gzip("gzip;q=0"));
	assert_false(promout_accepts_gzip("identity"));
	assert_false(promout_accepts_gzip(NULL));
}

static void test_gzip_round_trip(void **state)
{
	struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
	char *big = malloc(3000000), *z, *back = malloc(3000000);
	z_stream s;
	(void)state;
	for (size_t i = 0; i < 3000000; i++)
		big[i] = (char)('a' + (i * 7919 % 26) * (i % 3 == 0));
	/* several chunks, as an evbuffer built line by line holds them */
	for (size_t i = 0; i < 3000000; i += 100000)
		evbuffer_add(in, big + i, 100000);
	assert_int_equal(promout_gzip(in, out), 0);
	assert_int_equal(evbuffer_get_length(in), 0);
	size_t n = evbuffer_get_length(out);
	z = (char *)evbuffer_pullup(out, -1);
	assert_int_equal((unsigned char)z[0], 0x1f);
	assert_int_equal((unsigned char)z[1], 0x8b);
	memset(&s, 0, sizeof s);
	assert_int_equal(inflateInit2(&s, 15 + 16), Z_OK);
	s.next_in = (unsigned char *)z;
	s.avail_in = (uInt)n;
	s.next_out = (unsigned char *)back;
	s.avail_out = 3000000;
	assert_int_equal(inflate(&s, Z_FINISH), Z_STREAM_END);
	assert_int_equal(s.total_out, 3000000);
	assert_memory_equal(back, big, 3000000);
	inflateEnd(&s);
	free(big);
	free(back);
	evbuffer_free(in);
	evbuffer_free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_lines),
		cmocka_unit_test(test_protobuf_leaves_out_empty_families),
		cmocka_unit_test(test_accept),
		cmocka_unit_test(test_gzip_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
