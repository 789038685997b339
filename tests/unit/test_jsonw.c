/* SPDX-License-Identifier: Apache-2.0 */
/* jsonw.c: every byte and every class of ill-formed UTF-8 comes out as
 * valid JSON and valid UTF-8, valid text unchanged, a small buffer cut on a
 * character boundary; the numbers (fixed decimals against printf) and
 * times. A reader written here, apart from jsonw, checks each output. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "rng.h"

#include "unit.h"

#define FFFD JSONW_REPLACEMENT

/* ---- an independent reader ------------------------------------------------ */

/* The code point of the strict UTF-8 sequence at s[0..n) and its length,
 * or -1: decoded by value, not by jsonw's table of byte ranges. */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	int len;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		*cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		*cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		*cp = s[0] & 0x07;
	} else {
		return -1;
	}
	if (n < (size_t)len)
		return -1;
	for (int i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if (*cp < min[len] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return -1;
	return len;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads a quoted JSON string s[0..n) as RFC 8259 and strict UTF-8 say,
 * and refuses a raw DEL too (jsonw's rule). Returns the length of the
 * decoded text in out (n bytes are enough) or -1. */
static long read_string(const char *s, size_t n, char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	if (n < 2 || s[0] != '"' || s[n - 1] != '"')
		return -1;
	for (size_t i = 1; i < n - 1;) {
		uint32_t cp;
		int k;
		if (u[i] == '"' || u[i] < 0x20 || u[i] == 0x7f)
			return -1;
		if (u[i] != '\\') {
			k = utf8_decode(u + i, n - 1 - i, &cp);
			if (k < 0)
				return -1;
			memcpy(out + o, s + i, (size_t)k);
			o += (size_t)k;
			i += (size_t)k;
			continue;
		}
		if (i + 1 >= n - 1)
			return -1;
		switch (s[i + 1]) {
		case '"': case '\\': case '/':
			out[o++] = s[i + 1];
			break;
		case 'b': out[o++] = '\b'; break;
		case 'f': out[o++] = '\f'; break;
		case 'n': out[o++] = '\n'; break;
		case 'r': out[o++] = '\r'; break;
		case 't': out[o++] = '\t'; break;
		case 'u':
			if (i + 5 >= n - 1)
				return -1;
			cp = 0;
			for (int j = 2; j < 6; j++) {
				int h = hexval(s[i + j]);
				if (h < 0)
					return -1;
				cp = cp << 4 | (uint32_t)h;
			}
			if (cp >= 0xd800 && cp <= 0xdfff)   /* jsonw writes no pairs */
				return -1;
			o += utf8_encode(cp, out + o);
			i += 6;
			continue;
		default:
			return -1;
		}
		i += 2;
	}
	return (long)o;
}

/* 1 when s[0..n) is well-formed UTF-8 (by the reader's decoder). */
static int well_formed(const char *s, size_t n)
{
	uint32_t cp;

	for (size_t i = 0; i < n;) {
		int k = utf8_decode((const unsigned char *)s + i, n - i, &cp);
		if (k < 0)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

/* ---- helpers -------------------------------------------------------------- */

/* s[0..n) written by jsonw_buf_str into a buffer of cap bytes; out gets
 * the text, NUL-terminated. */
static size_t esc(const char *s, size_t n, char *out, size_t cap, int *cut)
{
	struct jsonw_buf b;

	jsonw_buf_init(&b, out, cap);
	jsonw_buf_str(&b, s, n);
	assert_true(b.len <= cap);
	if (cut != NULL)
		*cut = b.cut;
	out[b.len] = '\0';      /* callers pass a buffer one byte larger */
	return b.len;
}

/* The text between the quotes when s is written with room enough. */
static void assert_escapes(const char *s, size_t n, const char *want)
{
	char out[1024], text[1024];
	size_t len = esc(s, n, out, sizeof out - 1, NULL);

	assert_true(len >= 2);
	assert_int_equal(len - 2, strlen(want));
	assert_memory_equal(out + 1, want, len - 2);
	assert_true(read_string(out, len, text) >= 0);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_every_byte_alone(void **state)
{
	char out[16], text[16], want[8];

	(void)state;
	for (int c = 0; c < 256; c++) {
		char in = (char)c;
		size_t len = esc(&in, 1, out, sizeof out - 1, NULL);
		long tl = read_string(out, len, text);

		assert_true(tl >= 0);
		if (c == '"' || c == '\\')
			snprintf(want, sizeof want, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			snprintf(want, sizeof want, "\\u%04x", c);
		else if (c >= 0x80)
			snprintf(want, sizeof want, "%s", FFFD);
		else
			snprintf(want, sizeof want, "%c", c);
		assert_int_equal(len - 2, strlen(want));
		assert_memory_equal(out + 1, want, len - 2);
		/* what a reader gets back is the byte itself, or U+FFFD */
		if (c < 0x80)
			assert_true(tl == 1 && text[0] == in);
		assert_int_equal(jsonw_plain_len(&in, 1),
		    c >= 0x20 && c < 0x7f && c != '"' && c != '\\');
	}
}

/* Every pair, and every triple of a set of telling bytes: the output is
 * always a valid string, and well-formed input is what a reader gets back. */
static void test_every_pair_and_triple(void **state)
{
	static const unsigned char telling[] = {
		0x00, 0x0a, 0x1f, ' ', '"', '\\', 'a', 0x7f, 0x80, 0x8f, 0x90, 0x9f,
		0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee,
		0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xf8, 0xfe, 0xff,
	};
	char out[64], text[64];
	unsigned char in[3];
	size_t nt = sizeof telling;

	(void)state;
	for (int a = 0; a < 256; a++)
		for (int b = 0; b < 256; b++) {
			in[0] = (unsigned char)a;
			in[1] = (unsigned char)b;
			size_t len = esc((char *)in, 2, out, sizeof out - 1, NULL);
			long tl = read_string(out, len, text);
			assert_true(tl >= 0);
			if (well_formed((char *)in, 2))
				assert_true(tl == 2 && memcmp(text, in, 2) == 0);
			else
				assert_non_null(memmem(out, len, FFFD, 3));
		}
	for (size_t a = 0; a < nt; a++)
		for (size_t b = 0; b < nt; b++)
			for (size_t c = 0; c < nt; c++) {
				in[0] = telling[a];
				in[1] = telling[b];
				in[2] = telling[c];
				size_t len = esc((char *)in, 3, out, sizeof out - 1, NULL);
				long tl = read_string(out, len, text);
				assert_true(tl >= 0);
				if (well_formed((char *)in, 3))
					assert_true(tl == 3 && memcmp(text, in, 3) == 0);
			}
}

/* Every code point but the surrogates, encoded, comes back from a reader
 * as it went in; above U+007F it is copied unchanged. */
static void test_every_code_point(void **state)
{
	char in[4], out[16], text[16];

	(void)state;
	for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
		if (cp >= 0xd800 && cp <= 0xdfff)
			continue;
		size_t n = utf8_encode(cp, in);
		size_t len = esc(in, n, out, sizeof out - 1, NULL);
		long tl = read_string(out, len, text);
		assert_true(tl == (long)n && memcmp(text, in, n) == 0);
		if (cp >= 0x80) {
			assert_true(len == n + 2 && memcmp(out + 1, in, n) == 0);
			assert_int_equal(jsonw_plain_len(in, n), n);
		}
	}
}

#define S(lit) lit, sizeof(lit) - 1

/* Markus Kuhn's decoder stress test, one U+FFFD per maximal ill-formed
 * subpart (what Python's decode(errors="replace") gives). */
static void test_ill_formed_utf8(void **state)
{
	(void)state;
	assert_escapes(S("\xc0\xaf"), FFFD FFFD);                 /* overlong '/' */
	assert_escapes(S("\xe0\x80\xaf"), FFFD FFFD FFFD);
	assert_escapes(S("\xf0\x80\x80\xaf"), FFFD FFFD FFFD FFFD);
	assert_escapes(S("\xc1\xbf"), FFFD FFFD);
	assert_escapes(S("\xf0\x8f\xbf\xbf"), FFFD FFFD FFFD FFFD);
	assert_escapes(S("\xed\xa0\x80"), FFFD FFFD FFFD);        /* U+D800 */
	assert_escapes(S("\xed\xbf\xbf"), FFFD FFFD FFFD);        /* U+DFFF */
	assert_escapes(S("\xed\xa0\x80\xed\xb0\x80"), FFFD FFFD FFFD FFFD FFFD FFFD);
	assert_escapes(S("\xf4\x90\x80\x80"), FFFD FFFD FFFD FFFD); /* U+110000 */
	assert_escapes(S("\xf5\x80\x80\x80"), FFFD FFFD FFFD FFFD);
	assert_escapes(S("\xf8\x88\x80\x80\x80"), FFFD FFFD FFFD FFFD FFFD);
	assert_escapes(S("\xfe\xff"), FFFD FFFD);
	assert_escapes(S("\x80"), FFFD);                          /* lone continuation */
	assert_escapes(S("\x80\xbf\x80"), FFFD FFFD FFFD);
	assert_escapes(S("a\xe2\x82"), "a" FFFD);                 /* truncated at the end */
	assert_escapes(S("\xe2\x82" "a"), FFFD "a");
	assert_escapes(S("\xf0\x9f\x98"), FFFD);
	assert_escapes(S("\xf0\x9f\x98" "\xe2\x82" "\xc3"), FFFD FFFD FFFD);
	assert_escapes(S("\xc3\x28"), FFFD "(");
	assert_escapes(S("\xe0\xa0"), FFFD);
	assert_escapes(S("\xe2\x82\"\xac"), FFFD "\\\"" FFFD);
	/* the edges of the well-formed ranges pass */
	assert_escapes(S("\xc2\x80\xdf\xbf"), "\xc2\x80\xdf\xbf");
	assert_escapes(S("\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"),
	    "\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf");
	assert_escapes(S("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"),
	    "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
	assert_escapes(S("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"),  /* κόσμε */
	    "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5");
}

static void test_escapes(void **state)
{
	(void)state;
	assert_escapes(S("a\x01\x7f\"\\\n\r\t/"), "a\\u0001\\u007f\\\"\\\\\\u000a\\u000d\\u0009/");
	assert_escapes(S("a\0b"), "a\\u0000b");
	assert_escapes(S(""), "");
	assert_escapes(S("plain text, 100% ASCII"), "plain text, 100% ASCII");
}

/* At every size the buffer holds a valid string whose text is the start
 * of the whole one, cut after a whole character or escape. */
static void test_small_buffers(void **state)
{
	static const char in[] = "ab\"\xc3\xa9\x01\xe2\x82\xac\xf0\x9f\x98\x80"
	    "\x80z\\\xed\xa0\x80q\xe2\x82";
	char full[256], fulltext[256], out[256], text[256];
	size_t n = sizeof in - 1;
	size_t flen = esc(in, n, full, sizeof full - 1, NULL);
	long ftl = read_string(full, flen, fulltext);

	(void)state;
	assert_true(ftl > 0);
	for (size_t cap = 0; cap <= flen + 2; cap++) {
		int cut;
		size_t len = esc(in, n, out, cap, &cut);
		if (cap < 2) {
			assert_true(len == 0 && cut);
			continue;
		}
		long tl = read_string(out, len, text);
		assert_true(tl >= 0);
		assert_memory_equal(text, fulltext, (size_t)tl);
		/* the written text is the start of the whole output */
		assert_memory_equal(out, full, len - 1);
		assert_int_equal(cut, cap < flen);
		if (cap >= flen)
			assert_int_equal(len, flen);
		else    /* nothing whole that fitted was left out */
			assert_true(len + 6 > cap);
	}
}

static void test_buffer_rules(void **state)
{
	char out[16];
	struct jsonw_buf b;

	(void)state;
	jsonw_buf_init(&b, out, 8);
	jsonw_buf_puts(&b, "{\"a\":");
	jsonw_buf_add(&b, "123", 3);           /* 5 + 3 = 8: fits exactly */
	assert_true(b.len == 8 && !b.cut);
	jsonw_buf_init(&b, out, 8);
	jsonw_buf_puts(&b, "{\"a\":");
	jsonw_buf_puts(&b, "1234");            /* whole or not at all */
	assert_true(b.len == 5 && b.cut);
	jsonw_buf_puts(&b, "1");               /* nothing after a cut */
	assert_int_equal(b.len, 5);
	jsonw_buf_init(&b, out, 8);
	jsonw_buf_printf(&b, "%d", 12345678);
	assert_true(b.len == 8 && !b.cut && memcmp(out, "12345678", 8) == 0);
	jsonw_buf_printf(&b, "%s", "");
	jsonw_buf_init(&b, out, 8);
	jsonw_buf_printf(&b, "%d", 123456789);
	assert_true(b.len == 0 && b.cut);
	jsonw_buf_init(&b, out, 4);
	jsonw_buf_str(&b, NULL, 0);
	assert_true(b.len == 4 && memcmp(out, "null", 4) == 0);
	jsonw_buf_str(&b, "", 0);
	assert_true(b.len == 4 && b.cut);
}

static const char *buf_text(void (*fn)(struct jsonw_buf *, int64_t), int64_t v)
{
	static char out[64];
	struct jsonw_buf b;

	jsonw_buf_init(&b, out, sizeof out - 1);
	fn(&b, v);
	out[b.len] = '\0';
	return out;
}

static void test_numbers(void **state)
{
	(void)state;
	assert_string_equal(buf_text(jsonw_buf_ms, 0), "0");
	assert_string_equal(buf_text(jsonw_buf_ms, 5), "0.005");
	assert_string_equal(buf_text(jsonw_buf_ms, 1000), "1");
	assert_string_equal(buf_text(jsonw_buf_ms, 12345), "12.345");
	assert_string_equal(buf_text(jsonw_buf_ms, 12340), "12.340");
	assert_string_equal(buf_text(jsonw_buf_ms, 3600000000), "3600000");
	assert_string_equal(buf_text(jsonw_buf_ms, INT64_MAX), "9223372036854775.807");
	assert_string_equal(buf_text(jsonw_buf_ms, -1), "null");
	assert_string_equal(buf_text(jsonw_buf_int, 0), "0");
	assert_string_equal(buf_text(jsonw_buf_int, INT64_MAX), "9223372036854775807");
	assert_string_equal(buf_text(jsonw_buf_int, -1), "null");
}

/* jsonw_buf_fixed writes what printf's "%.*f" writes: ratios of whole
 * numbers (what the access log prints), exact ties (k / 2^n), values
 * around every rounding edge, random bit patterns of every magnitude,
 * and the ones it leaves to printf. */
static void fixed_check(double v, unsigned places)
{
	char want[512], out[512];
	struct jsonw_buf b;

	snprintf(want, sizeof want, "%.*f", (int)places, v);
	jsonw_buf_init(&b, out, sizeof out - 1);
	jsonw_buf_fixed(&b, v, places);
	out[b.len] = '\0';
	if (strcmp(out, want) != 0)
		fail_msg("%a with %u places: %s, not %s", v, places, out, want);
}

static void test_fixed(void **state)
{
	uint64_t seed = 11;

	(void)state;
	for (unsigned places = 0; places <= 3; places++) {
		for (uint64_t a = 0; a < 300; a++)
			for (uint64_t d = 1; d < 300; d++)
				fixed_check((double)a / (double)d, places);
		for (int n = 0; n < 60; n++)
			for (uint64_t k = 0; k < 2000; k++)
				fixed_check(ldexp((double)k, -n), places);
		for (uint64_t k = 0; k < 100000; k++) {
			double edge = ((double)k + 0.5) / 1000.0;
			fixed_check(edge, places);
			fixed_check(nextafter(edge, 0), places);
			fixed_check(nextafter(edge, 1e9), places);
		}
		for (int i = 0; i < 300000; i++) {
			uint64_t bits = rng_next(&seed);
			double v;
			bits &= ~((uint64_t)1 << 63);
			memcpy(&v, &bits, sizeof v);
			if (v != v)
				continue;      /* NaN: printf's own spelling, kept */
			fixed_check(v, places);
			fixed_check((double)(bits % 100000) / (double)(1 + bits % 977), places);
		}
		fixed_check(0x1p52, places);
		fixed_check(0x1p52 - 0.5, places);
		fixed_check(1e300, places);
		fixed_check(-0.0, places);
		fixed_check(-1.25, places);
		fixed_check(0x1p-1074, places);
	}
}

static void test_times(void **state)
{
	char out[64];
	struct jsonw_buf b;

	(void)state;
	jsonw_buf_init(&b, out, sizeof out - 1);
	jsonw_buf_time(&b, 1764583471123ull);
	jsonw_buf_puts(&b, ",");
	jsonw_buf_time(&b, 0);
	out[b.len] = '\0';
	assert_string_equal(out, "\"2025-12-01T10:04:31.123Z\",null");
}

static const char *drained(struct evbuffer *b)
{
	static char out[256];
	size_t n = evbuffer_get_length(b);

	assert_true(n < sizeof out);
	evbuffer_remove(b, out, n);
	out[n] = '\0';
	return out;
}

/* The evbuffer and stdio front ends write what the buffer one does. */
static void test_evbuffer_and_file(void **state)
{
	static const char in[] = "t\x80\"\xe2\x82\xac\x7f";
	static const char want[] = "\"t" FFFD "\\\"\xe2\x82\xac\\u007f\"";
	struct evbuffer *b = evbuffer_new();
	char fbuf[256] = "";
	FILE *f;

	(void)state;
	assert_int_equal(jsonw_str(b, in), 0);
	assert_string_equal(drained(b), want);
	jsonw_strn(b, "a\0b", 3);
	jsonw_str(b, NULL);
	assert_string_equal(drained(b), "\"a\\u0000b\"null");
	jsonw_fixed(b, 12.3456, 3);
	evbuffer_add(b, ",", 1);
	jsonw_fixed(b, 0.5, 4);
	evbuffer_add(b, ",", 1);
	jsonw_fixed(b, -1, 3);
	evbuffer_add(b, ",", 1);
	jsonw_fixed(b, INFINITY, 3);
	evbuffer_add(b, ",", 1);
	jsonw_time(b, 0);
	evbuffer_add(b, ",", 1);
	jsonw_time(b, 1000);
	assert_string_equal(drained(b),
	    "12.346,0.5000,null,null,null,\"1970-01-01T00:00:01.000Z\"");
	evbuffer_free(b);

	f = fmemopen(fbuf, sizeof fbuf, "w");
	assert_non_null(f);
	jsonw_file_str(f, in);
	fputc(',', f);
	jsonw_file_str(f, NULL);
	fclose(f);
	assert_string_equal(fbuf, "\"t" FFFD "\\\"\xe2\x82\xac\\u007f\",null");
}

static void test_sanitize_and_plain(void **state)
{
	char s[] = "ok \"q\" \\ \x01\x7f \xe2\x82\xac \xe2\x82 \xc0\xaf.";

	(void)state;
	jsonw_sanitize(s, '\'');
	assert_string_equal(s, "ok 'q' ' '' \xe2\x82\xac '' ''.");
	assert_int_equal(jsonw_plain_len(S("model-1 \xc3\xa9")), 10);
	assert_int_equal(jsonw_plain_len(S("ab\"c")), 2);
	assert_int_equal(jsonw_plain_len(S("ab\xc3")), 2);
	assert_int_equal(jsonw_plain_len(S("ab\x7f")), 2);
}

static void test_utf8_seq(void **state)
{
	static const struct { const char *s; size_t len; int valid; } seq[] = {
		{ "a", 1, 1 },
		{ "\xf0\x9f\x98\x80", 4, 1 },
		{ "\xf0\x9f\x98", 3, 0 },       /* truncated */
		{ "\xf0\x9f\x98x", 3, 0 },      /* cut by a byte that is no continuation */
		{ "\xed\xa0\x80", 1, 0 },       /* a surrogate: ED alone is the subpart */
		{ "\xbf", 1, 0 },
	};
	int valid;

	(void)state;
	for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
		assert_int_equal(jsonw_utf8_seq(seq[i].s, strlen(seq[i].s), &valid), seq[i].len);
		assert_int_equal(valid, seq[i].valid);
	}
}

/* A client's name for every output: ill-formed UTF-8 becomes U+FFFD,
 * control bytes and DEL '?', cut on a character boundary. */
static void test_clean(void **state)
{
	char out[16];
	(void)state;
	assert_int_equal(jsonw_clean(out, sizeof out, "team-a", 6), 6);
	assert_string_equal(out, "team-a");
	jsonw_clean(out, sizeof out, "t\tab\x7f\x01", 6);
	assert_string_equal(out, "t?ab??");
	jsonw_clean(out, sizeof out, "\xc3\x28\xce\xba", 4);
	assert_string_equal(out, "\xef\xbf\xbd(\xce\xba");
	jsonw_clean(out, sizeof out, "\xed\xa0\x80", 3);   /* a surrogate: 3 U+FFFD, */
	assert_string_equal(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* as Python */
	/* never past cap, never half a character */
	assert_int_equal(jsonw_clean(out, 4, "a\xce\xba\xce\xba", 5), 3);
	assert_string_equal(out, "a\xce\xba");
	assert_int_equal(jsonw_clean(out, 3, "a\xce\xba", 3), 1);
	assert_string_equal(out, "a");
	assert_int_equal(jsonw_clean(out, 1, "abc", 3), 0);
	assert_string_equal(out, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_every_byte_alone),
		cmocka_unit_test(test_every_pair_and_triple),
		cmocka_unit_test(test_every_code_point),
		cmocka_unit_test(test_ill_formed_utf8),
		cmocka_unit_test(test_escapes),
		cmocka_unit_test(test_small_buffers),
		cmocka_unit_test(test_buffer_rules),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_fixed),
		cmocka_unit_test(test_times),
		cmocka_unit_test(test_evbuffer_and_file),
		cmocka_unit_test(test_sanitize_and_plain),
		cmocka_unit_test(test_utf8_seq),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
