/* The meter's decoded copy of a compressed body: gzip with a sync flush
 * after each event (as an SSE server writes it), zlib and raw deflate,
 * several gzip members, input split at every byte, and bytes that are not
 * of the coding. The compressed inputs are made here with zlib itself. */
#include <zlib.h>

#include "decode.h"
#include "meter.h"

#include "unit.h"

struct sink {
	char buf[65536];
	size_t len;
};

static void collect(void *arg, const char *p, size_t n)
{
	struct sink *s = arg;
	assert_true(s->len + n <= sizeof s->buf);
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

/* Compresses each part with a sync flush after it (windowBits as zlib's
 * deflateInit2 takes them: 31 gzip, 15 zlib, -15 raw). */
static size_t compress_parts(int bits, const char *const *parts, size_t n,
    unsigned char *out, size_t cap)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_out = out;
	z.avail_out = (uInt)cap;
	for (size_t i = 0; i < n; i++) {
		z.next_in = (unsigned char *)(uintptr_t)parts[i];
		z.avail_in = (uInt)strlen(parts[i]);
		assert_int_equal(deflate(&z, i + 1 == n ? Z_FINISH : Z_SYNC_FLUSH),
		    i + 1 == n ? Z_STREAM_END : Z_OK);
	}
	deflateEnd(&z);
	return cap - z.avail_out;
}

static const char *const events[] = {
	"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
	"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
	"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
	"data: [DONE]\n\n",
};

static void test_kinds(void **state)
{
	(void)state;
	assert_int_equal(decode_kind(NULL, 0), DECODE_IDENTITY);
	assert_int_equal(decode_kind(" identity ", 10), DECODE_IDENTITY);
	assert_int_equal(decode_kind("GZIP", 4), DECODE_GZIP);
	assert_int_equal(decode_kind("x-gzip", 6), DECODE_GZIP);
	assert_int_equal(decode_kind("deflate", 7), DECODE_DEFLATE);
	assert_int_equal(decode_kind("br", 2), DECODE_UNSUPPORTED);
	assert_int_equal(decode_kind("zstd", 4), DECODE_UNSUPPORTED);
	assert_int_equal(decode_kind("gzip, br", 8), DECODE_UNSUPPORTED);
	assert_null(decode_new(DECODE_UNSUPPORTED));
}

static void roundtrip(int bits, enum decode_kind k, size_t piece)
{
	unsigned char z[4096];
	char want[4096] = "";
	size_t zn = compress_parts(bits, events, 4, z, sizeof z);
	struct sink s = { .len = 0 };
	struct decoder *d = decode_new(k);

	for (size_t i = 0; i < 4; i++)
		strcat(want, events[i]);
	assert_non_null(d);
	for (size_t at = 0; at < zn; at += piece)
		assert_int_equal(decode_feed(d, (const char *)z + at,
		    at + piece > zn ? zn - at : piece, collect, &s), 0);
	assert_int_equal(s.len, strlen(want));
	assert_memory_equal(s.buf, want, s.len);
	decode_free(d);
}

static void test_roundtrips_split_anywhere(void **state)
{
	(void)state;
	for (size_t piece = 1; piece <= 64; piece = piece * 2 + 1) {
		roundtrip(31, DECODE_GZIP, piece);
		roundtrip(15, DECODE_DEFLATE, piece);
		roundtrip(-15, DECODE_DEFLATE, piece);   /* raw, as some send it */
	}
	roundtrip(31, DECODE_GZIP, 100000);
}

static void test_gzip_members_and_garbage(void **state)
{
	unsigned char z[8192];
	const char *one[] = { "data: a\n\n" }, *two[] = { "data: b\n\n" };
	size_t n1 = compress_parts(31, one, 1, z, sizeof z);
	size_t n2 = compress_parts(31, two, 1, z + n1, sizeof z - n1);
	struct sink s = { .len = 0 };
	struct decoder *d = decode_new(DECODE_GZIP);
	(void)state;

	assert_int_equal(decode_feed(d, (const char *)z, n1 + n2, collect, &s), 0);
	assert_int_equal(s.len, 18);
	assert_memory_equal(s.buf, "data: a\n\ndata: b\n\n", 18);
	decode_free(d);

	d = decode_new(DECODE_GZIP);
	s.len = 0;
	assert_int_equal(decode_feed(d, "data: not gzip\n\n", 16, collect, &s), -1);
	assert_int_equal(decode_feed(d, "more", 4, collect, &s), -1);
	assert_int_equal(s.len, 0);
	decode_free(d);
}

/* Through the meter: a gzip stream is measured as if it were plain; a
 * coding it cannot read leaves the stream unmeasured, never miscounted. */
static void test_meter_reads_the_decoded_copy(void **state)
{
	unsigned char z[4096];
	size_t zn = compress_parts(31, events, 4, z, sizeof z), half = zn / 2;
	struct meter m;
	(void)state;

	meter_init(&m, 1000, DIALECT_OPENAI);
	meter_response_head(&m, 200, "text/event-stream", 17, "gzip", 4, 1 << 20, 1500);
	meter_body(&m, (const char *)z, half, 2000);
	meter_body(&m, (const char *)z + half, zn - half, 3000);
	meter_end(&m, 4000);
	assert_false(m.unmeasured);
	assert_int_equal(m.events, 4);
	assert_int_equal(m.token_events, 2);
	assert_true(m.end_seen);
	assert_int_equal(meter_outcome(&m, METER_END_COMPLETE), OUTCOME_OK);
	meter_free(&m);

	meter_init(&m, 1000, DIALECT_OPENAI);
	meter_response_head(&m, 200, "text/event-stream", 17, "br", 2, 1 << 20, 1500);
	meter_body(&m, (const char *)z, zn, 2000);
	meter_end(&m, 4000);
	assert_true(m.unmeasured);
	assert_int_equal(m.events, 0);
	assert_int_equal(meter_ttft_us(&m), -1);
	meter_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_roundtrips_split_anywhere),
		cmocka_unit_test(test_gzip_members_and_garbage),
		cmocka_unit_test(test_meter_reads_the_decoded_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
