/* SPDX-License-Identifier: Apache-2.0 */
/* The meter's decoded copy of a compressed body: gzip with a sync flush
 * after each event (as an SSE server writes it), zlib and raw deflate,
 * several gzip members, brotli and zstd (a flush after each event, and
 * frame after frame), input split at every byte, bytes that are not of the
 * coding, and a zstd window past the bound. The gzip, deflate and zstd
 * inputs are made here with zlib and libzstd; the brotli one is the brotli
 * tool's output, kept below. */
#include <zlib.h>
#include <zstd.h>

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
	assert_int_equal(decode_kind("br", 2), DECODE_BR);
	assert_int_equal(decode_kind("ZSTD", 4), DECODE_ZSTD);
	assert_int_equal(decode_kind("compress", 8), DECODE_UNSUPPORTED);
	assert_int_equal(decode_kind("gzip, br", 8), DECODE_UNSUPPORTED);
	assert_null(decode_new(DECODE_UNSUPPORTED));
}

/* `brotli -c -q 11` of the four events, one after another */
static const unsigned char events_br[] = {
	0xa1, 0x10, 0x05, 0x00, 0xe0, 0x2c, 0xb0, 0x1b, 0xad, 0x69, 0x3d, 0x36,
	0x82, 0xb0, 0x5e, 0x3c, 0x5b, 0x0f, 0x7e, 0xcc, 0x6a, 0x91, 0xbd, 0x2d,
	0x9d, 0xad, 0xa0, 0xd3, 0xd5, 0x27, 0xd9, 0x90, 0x40, 0xaa, 0xec, 0x4d,
	0x27, 0x07, 0xec, 0x87, 0xc3, 0x01, 0x2f, 0xdf, 0xda, 0xa2, 0x8c, 0x22,
	0x89, 0xf2, 0x94, 0x15, 0x41, 0x56, 0x04, 0xe6, 0xfd, 0x90, 0xbd, 0x72,
	0x79, 0xc3, 0x67, 0xd8, 0xc5, 0x44, 0x0d, 0xb5, 0xf8, 0xef, 0x1b, 0x7c,
	0xdc, 0xf1, 0xa1, 0x86, 0x5b, 0xe8, 0x5f, 0x14, 0x3b, 0x00
};

/* zstd, one frame with a flush after each part (as a streaming server
 * writes it), or a frame per part; windowLog 0: the library's choice. */
static size_t zstd_parts(const char *const *parts, size_t n, int frames, int window_log,
    unsigned char *out, size_t cap)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_outBuffer o = { out, cap, 0 };

	assert_non_null(c);
	if (window_log)
		assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog,
		    window_log)));
	for (size_t i = 0; i < n; i++) {
		ZSTD_inBuffer in = { parts[i], strlen(parts[i]), 0 };
		ZSTD_EndDirective how = frames || i + 1 == n ? ZSTD_e_end : ZSTD_e_flush;
		/* a flush first: the frame does not learn its whole size */
		assert_int_equal(ZSTD_compressStream2(c, &o, &in, ZSTD_e_flush), 0);
		if (how == ZSTD_e_end) {
			ZSTD_inBuffer none = { NULL, 0, 0 };
			assert_int_equal(ZSTD_compressStream2(c, &o, &none, ZSTD_e_end), 0);
		}
	}
	ZSTD_freeCCtx(c);
	return o.pos;
}

static void feed_all(enum decode_kind k, const unsigned char *z, size_t zn, size_t piece,
    const char *want)
{
	struct sink s = { .len = 0 };
	struct decoder *d = decode_new(k);

	assert_non_null(d);
	for (size_t at = 0; at < zn; at += piece)
		assert_int_equal(decode_feed(d, (const char *)z + at,
		    at + piece > zn ? zn - at : piece, collect, &s), 0);
	assert_int_equal(s.len, strlen(want));
	assert_memory_equal(s.buf, want, s.len);
	decode_free(d);
}

static void test_brotli_and_zstd_split_anywhere(void **state)
{
	unsigned char z[4096];
	char want[4096] = "";
	size_t one = zstd_parts(events, 4, 0, 0, z, sizeof z);
	(void)state;

	for (size_t i = 0; i < 4; i++)
		strcat(want, events[i]);
	for (size_t piece = 1; piece <= 100000; piece = piece < 64 ? piece * 2 + 1 : 100000) {
		feed_all(DECODE_BR, events_br, sizeof events_br, piece, want);
		feed_all(DECODE_ZSTD, z, one, piece, want);
		if (piece == 100000)
			break;
	}
	/* a frame per event: frames follow each other in one body */
	feed_all(DECODE_ZSTD, z, zstd_parts(events, 4, 1, 0, z, sizeof z), 7, want);
}

/* Each flushed event is there as soon as its bytes are, not at the end */
static void test_zstd_flush_gives_each_event_at_once(void **state)
{
	unsigned char z[4096];
	size_t ends[4], n = 0;
	struct sink s = { .len = 0 };
	struct decoder *d = decode_new(DECODE_ZSTD);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_outBuffer o = { z, sizeof z, 0 };
	(void)state;

	for (size_t i = 0; i < 4; i++) {
		ZSTD_inBuffer in = { events[i], strlen(events[i]), 0 };
		assert_int_equal(ZSTD_compressStream2(c, &o, &in, ZSTD_e_flush), 0);
		ends[i] = o.pos;
	}
	ZSTD_freeCCtx(c);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(decode_feed(d, (const char *)z + (i ? ends[i - 1] : 0),
		    ends[i] - (i ? ends[i - 1] : 0), collect, &s), 0);
		n += strlen(events[i]);
		assert_int_equal(s.len, n);
	}
	decode_free(d);
}

static void test_brotli_and_zstd_garbage_and_bounds(void **state)
{
	static char big[64 * 1024];
	const char *parts[] = { big };
	unsigned char z[8192];
	size_t zn;
	struct sink s = { .len = 0 };
	struct decoder *d;
	(void)state;

	d = decode_new(DECODE_BR);
	assert_int_equal(decode_feed(d, "data: not brotli\n\n", 18, collect, &s), -1);
	assert_int_equal(decode_feed(d, "more", 4, collect, &s), -1);
	decode_free(d);
	/* bytes after a brotli stream's end are none of it */
	d = decode_new(DECODE_BR);
	assert_int_equal(decode_feed(d, (const char *)events_br, sizeof events_br, collect, &s), 0);
	assert_int_equal(decode_feed(d, "x", 1, collect, &s), -1);
	decode_free(d);
	s.len = 0;
	d = decode_new(DECODE_ZSTD);
	assert_int_equal(decode_feed(d, "data: not zstd at all\n\n", 24, collect, &s), -1);
	decode_free(d);
	/* a zstd window over RFC 9659's 8 MiB is refused, one within is not */
	memset(big, 'a', sizeof big - 1);
	zn = zstd_parts(parts, 1, 0, 24, z, sizeof z);
	d = decode_new(DECODE_ZSTD);
	assert_int_equal(decode_feed(d, (const char *)z, zn, collect, &s), -1);
	decode_free(d);
	s.len = 0;
	zn = zstd_parts(parts, 1, 0, DECODE_ZSTD_WINDOW_LOG, z, sizeof z);
	d = decode_new(DECODE_ZSTD);
	assert_int_equal(decode_feed(d, (const char *)z, zn, collect, &s), 0);
	assert_int_equal(s.len, sizeof big - 1);
	decode_free(d);
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
	meter_body(&m, (const char *)events_br, 40, 2000);
	meter_body(&m, (const char *)events_br + 40, sizeof events_br - 40, 3000);
	meter_end(&m, 4000);
	assert_int_equal(meter_unmeasured(&m), METER_MEASURED);
	assert_int_equal(m.events, 4);
	assert_int_equal(m.token_events, 2);
	meter_free(&m);

	/* a coding it cannot read: unmeasured, said why, never miscounted */
	meter_init(&m, 1000, DIALECT_OPENAI);
	meter_response_head(&m, 200, "text/event-stream", 17, "compress", 8, 1 << 20, 1500);
	assert_int_equal(meter_unmeasured(&m), METER_MEASURED);   /* no body yet */
	meter_body(&m, (const char *)z, zn, 2000);
	meter_end(&m, 4000);
	assert_int_equal(meter_unmeasured(&m), METER_UNMEASURED_CODING);
	assert_string_equal(meter_unmeasured_name(meter_unmeasured(&m)), "coding");
	assert_int_equal(m.events, 0);
	assert_int_equal(meter_ttft_us(&m), -1);
	meter_free(&m);

	/* gzip bytes said to be zstd: a decode error */
	meter_init(&m, 1000, DIALECT_OPENAI);
	meter_response_head(&m, 200, "text/event-stream", 17, "zstd", 4, 1 << 20, 1500);
	meter_body(&m, (const char *)z, zn, 2000);
	meter_end(&m, 4000);
	assert_int_equal(meter_unmeasured(&m), METER_UNMEASURED_DECODE);
	assert_string_equal(meter_unmeasured_name(METER_UNMEASURED_DECODE), "decode_error");
	assert_null(meter_unmeasured_name(METER_MEASURED));
	assert_int_equal(m.events, 0);
	meter_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_roundtrips_split_anywhere),
		cmocka_unit_test(test_gzip_members_and_garbage),
		cmocka_unit_test(test_brotli_and_zstd_split_anywhere),
		cmocka_unit_test(test_zstd_flush_gives_each_event_at_once),
		cmocka_unit_test(test_brotli_and_zstd_garbage_and_bounds),
		cmocka_unit_test(test_meter_reads_the_decoded_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
