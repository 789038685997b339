/* SPDX-License-Identifier: Apache-2.0 */
/* The event-stream parser against the WHATWG rules. Every case is fed
 * whole, one byte at a time and cut in two at every offset, and each way
 * must give the same events. */

#include "sse.h"

#include "eol.h"

#include "unit.h"

/* What the parser dispatched, as "[type|data|id]" per event, with LF, CR
 * and NUL shown as \n, \r, \0 and an absent id as "-". */
struct rec {
	char *s;
	size_t len, cap;
	const char *feed;       /* the buffer being fed, for zero-copy checks */
	size_t feed_len;
	int in_feed;            /* events whose data pointed into it */
};

static void rec_put(struct rec *r, const char *s, size_t n)
{
	if (r->len + 2 * n + 1 > r->cap) {
		r->cap = (r->len + 2 * n + 1) * 2;
		r->s = realloc(r->s, r->cap);
		assert_non_null(r->s);
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '\n' || c == '\r' || c == '\0') {
			r->s[r->len++] = '\\';
			c = c == '\n' ? 'n' : c == '\r' ? 'r' : '0';
		}
		r->s[r->len++] = c;
	}
	r->s[r->len] = '\0';
}

static void on_event(void *arg, const struct sse_event *ev)
{
	struct rec *r = arg;

	rec_put(r, "[", 1);
	rec_put(r, ev->type, ev->type_len);
	rec_put(r, "|", 1);
	rec_put(r, ev->data, ev->data_len);
	rec_put(r, "|", 1);
	if (ev->has_id)
		rec_put(r, ev->id, ev->id_len);
	else
		rec_put(r, "-", 1);
	rec_put(r, "]", 1);
	if (ev->data_len > 0 && ev->data >= r->feed &&
	    ev->data < r->feed + r->feed_len)
		r->in_feed++;
}

struct run {
	struct sse_parser p;
	struct rec r;
};

static void run_start(struct run *u, enum sse_mode mode, size_t max)
{
	memset(u, 0, sizeof(*u));
	sse_init(&u->p, mode, max, on_event, &u->r);
	rec_put(&u->r, "", 0);
}

static void run_feed(struct run *u, const char *buf, size_t len)
{
	u->r.feed = buf;
	u->r.feed_len = len;
	sse_feed(&u->p, buf, len);
	assert_true(u->p.scratch_cap <= u->p.max_event_bytes);
}

static void run_end(struct run *u)
{
	sse_free(&u->p);
	free(u->r.s);
}

/* Feeds in in the pieces cut at offsets cuts[0..n) and checks the result. */
static void expect_cut(const char *in, size_t len, enum sse_mode mode,
    size_t max, const size_t *cuts, size_t n, const char *want,
    uint64_t want_oversized, const char *how)
{
	struct run u;
	size_t from = 0;
	uint64_t events = 0;

	run_start(&u, mode, max);
	for (size_t i = 0; i <= n; i++) {
		size_t to = i < n ? cuts[i] : len;
		/* a private copy, so a pointer kept past its feed would show */
		char *piece = malloc(to - from + 1);
		assert_non_null(piece);
		memcpy(piece, in + from, to - from);
		run_feed(&u, piece, to - from);
		free(piece);
		from = to;
	}
	if (strcmp(u.r.s, want) != 0 || u.p.oversized != want_oversized)
		print_message("fed %s: got %s (oversized %llu)\n", how, u.r.s,
		    (unsigned long long)u.p.oversized);
	assert_string_equal(u.r.s, want);
	assert_int_equal(u.p.oversized, want_oversized);
	for (const char *c = want; *c; c++)
		events += *c == '[';
	assert_int_equal(u.p.events, events);
	run_end(&u);
}

static void expect_mode(const char *in, size_t len, enum sse_mode mode,
    size_t max, const char *want, uint64_t want_oversized)
{
	size_t *cuts = malloc((len + 1) * sizeof(*cuts));
	char how[64];

	assert_non_null(cuts);
	expect_cut(in, len, mode, max, NULL, 0, want, want_oversized, "whole");
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	expect_cut(in, len, mode, max, cuts, len ? len - 1 : 0, want,
	    want_oversized, "byte by byte");
	for (size_t k = 0; k <= len; k++) {
		snprintf(how, sizeof(how), "cut at %zu", k);
		expect_cut(in, len, mode, max, &k, 1, want, want_oversized, how);
	}
	free(cuts);
}

#define EXPECT(in, want) \
	expect_mode(in, sizeof(in) - 1, SSE_MODE_EVENTS, 4096, want, 0)

static void test_bom(void **state)
{
	(void)state;
	EXPECT("\xEF\xBB\xBF" "data: a\n\n", "[|a|-]");
	/* only once, and only at the very start */
	EXPECT("\xEF\xBB\xBF\xEF\xBB\xBF" "data: a\n\ndata: b\n\n", "[|b|-]");
	EXPECT("data: a\n\n\xEF\xBB\xBF" "data: b\n\ndata: c\n\n",
	    "[|a|-][|c|-]");
	/* a BOM prefix that turns out not to be one is text */
	EXPECT("\xEF\xBB" "data: a\n\ndata: b\n\n", "[|b|-]");
	EXPECT("\xEF" "data: a\n\ndata: b\n\n", "[|b|-]");
	EXPECT("\xEF\xBB\xBE\ndata: a\n\n", "[|a|-]");
}

static void test_line_ends(void **state)
{
	(void)state;
	EXPECT("data: a\r\rdata: b\n\ndata: c\r\n\r\n", "[|a|-][|b|-][|c|-]");
	/* CRLF is one line end, also when a feed ends between CR and LF */
	EXPECT("data: a\r\ndata: b\r\n\r\n", "[|a\\nb|-]");
	EXPECT("data: a\rdata: b\ndata: c\r\n\n", "[|a\\nb\\nc|-]");
	/* LF CR is two line ends: a blank line */
	EXPECT("data: a\n\rdata: b\n\n", "[|a|-][|b|-]");
}

static void test_comments(void **state)
{
	(void)state;
	EXPECT(": hello\ndata: a\n:another: one\n\n", "[|a|-]");
	EXPECT(": ping\n\n:\n\ndata: x\n\n", "[|x|-]");
	EXPECT(":data: no\n\n", "");
}

static void test_field_without_colon(void **state)
{
	(void)state;
	EXPECT("data\n\n", "[||-]");
	EXPECT("data\ndata\n\n", "[|\\n|-]");
	EXPECT("event: foo\nevent\ndata: x\n\n", "[|x|-]");
	EXPECT("id\ndata: x\n\n", "[|x|]");
	EXPECT("dat\ndatax\ndata: y\n\n", "[|y|-]");
}

static void test_leading_space(void **state)
{
	(void)state;
	EXPECT("data:  two\n\n", "[| two|-]");
	EXPECT("data:x\n\n", "[|x|-]");
	EXPECT("data: \n\n", "[||-]");
	EXPECT("data:a: b\n\n", "[|a: b|-]");
	EXPECT("event:  e\ndata: x\n\n", "[ e|x|-]");
	EXPECT("id:  7\ndata: x\n\n", "[|x| 7]");
}

static void test_data_joined(void **state)
{
	(void)state;
	EXPECT("data: a\ndata: b\ndata: c\n\n", "[|a\\nb\\nc|-]");
	EXPECT("data: a\n\ndata: b\ndata:\n\n", "[|a|-][|b\\n|-]");
	EXPECT("data: {\"x\":\ndata: 1}\n\n", "[|{\"x\":\\n1}|-]");
}

static void test_event_type(void **state)
{
	(void)state;
	EXPECT("event: add\ndata: 1\n\ndata: 2\n\n", "[add|1|-][|2|-]");
	EXPECT("event: a\nevent: b\ndata: 1\n\n", "[b|1|-]");
	EXPECT("data: 1\nevent: late\n\n", "[late|1|-]");
	/* the type resets even when no event was dispatched */
	EXPECT("event: lost\n\ndata: 2\n\n", "[|2|-]");
}

static void test_id(void **state)
{
	(void)state;
	EXPECT("id: 1\ndata: a\n\n", "[|a|1]");
	EXPECT("data: a\nid: 42\n\n", "[|a|42]");
	EXPECT("id: 2\nid: x\0y\ndata: b\n\n", "[|b|2]");
	EXPECT("id: x\0y\ndata: b\n\n", "[|b|-]");
	EXPECT("id: 1\nevent: e\nid: 2\nevent: f\ndata: b\nid: 3\n\n",
	    "[f|b|3]");
	EXPECT("id: 9\ndata: a\n\ndata: b\n\n", "[|a|9][|b|-]");
}

static void test_ignored_fields(void **state)
{
	(void)state;
	EXPECT("retry: 100\nfoo: bar\ndata: a\nData: b\nevents: x\n\n",
	    "[|a|-]");
	EXPECT("retry: 10\n\n", "");
}

static void test_dispatch_needs_data(void **state)
{
	(void)state;
	EXPECT("event: x\n\n", "");
	EXPECT("id: 3\n\n\n\ndata:\n\n", "[||-]");
	EXPECT("data:\n\n", "[||-]");
}

static void test_unterminated_dropped(void **state)
{
	(void)state;
	EXPECT("data: a\n\ndata: b\n", "[|a|-]");
	EXPECT("data: a\n\ndata: b", "[|a|-]");
	EXPECT("data: a\n\ndata: b\r", "[|a|-]");
	EXPECT("data: [DONE] ", "");
}

static void test_oversized(void **state)
{
	static const char in[] =
	    "data: 0123456789abcdefXYZ\n\n"      /* 19 > 16 */
	    "data: ok\n\n"
	    "data: 01234567\ndata: 01234567\n\n" /* 17 joined */
	    "event: 0123456789\ndata: 0123456\n\n" /* 17 with its type */
	    "id: 0123456789\ndata: 0123456\n\n"    /* 17 with its id */
	    "data: 0123456789abcdef\n\n"          /* 16: fits */
	    "data: next\n\n";
	(void)state;
	expect_mode(in, sizeof(in) - 1, SSE_MODE_EVENTS, 16,
	    "[|ok|-][|0123456789abcdef|-][|next|-]", 4);
}

/* Replaced event / id values give their room back: an event that repeats
 * them many times still fits in a small max_event_bytes. */
static void test_repeated_fields(void **state)
{
	char in[2048];
	size_t n = 0, cuts[64], ncuts = 0;

	(void)state;
	for (int i = 0; i < 20; i++)
		n += (size_t)snprintf(in + n, sizeof(in) - n,
		    "event: type%02d\nid: id-%02d\n", i, i);
	n += (size_t)snprintf(in + n, sizeof(in) - n, "data: 0123456789\n\n");
	expect_mode(in, n, SSE_MODE_EVENTS, 24, "[type19|0123456789|id-19]", 0);
	/* one line per feed: each replaces a value kept from the feed before */
	for (size_t i = 0; i + 1 < n; i++)
		if (in[i] == '\n')
			cuts[ncuts++] = i + 1;
	expect_cut(in, n, SSE_MODE_EVENTS, 24, cuts, ncuts,
	    "[type19|0123456789|id-19]", 0, "line by line");
}

static void test_scratch_bounded(void **state)
{
	enum { BIG = 50000, MAX = 60000 };
	char *in = malloc(BIG + 64);
	struct run u;
	size_t n;

	(void)state;
	assert_non_null(in);
	memcpy(in, "event: big\ndata: ", 17);
	memset(in + 17, 'x', BIG);
	n = 17 + BIG;
	memcpy(in + n, "\n\n", 2);
	n += 2;
	run_start(&u, SSE_MODE_EVENTS, MAX);
	for (size_t i = 0; i < n; i++)
		run_feed(&u, in + i, 1);
	assert_int_equal(u.p.events, 1);
	assert_int_equal(u.r.len, strlen("[big||-]") + BIG);
	assert_true(u.p.scratch_cap >= BIG && u.p.scratch_cap <= MAX);
	run_end(&u);

	/* too big: skipped, and the buffer still stays under the cap */
	run_start(&u, SSE_MODE_EVENTS, BIG / 2);
	for (size_t i = 0; i < n; i++)
		run_feed(&u, in + i, 1);
	run_feed(&u, "data: after\n\n", 13);
	assert_string_equal(u.r.s, "[|after|-]");
	assert_int_equal(u.p.oversized, 1);
	run_end(&u);
	free(in);
}

/* A whole event in one feed is reported in place, nothing allocated. */
static void test_zero_copy(void **state)
{
	static const char in[] = "event: e\ndata: a\n\nid: 1\ndata: b\n\n";
	struct run u;

	(void)state;
	run_start(&u, SSE_MODE_EVENTS, 4096);
	run_feed(&u, in, sizeof(in) - 1);
	assert_string_equal(u.r.s, "[e|a|-][|b|1]");
	assert_int_equal(u.r.in_feed, 2);
	assert_null(u.p.scratch);
	/* an event cut by a feed boundary is copied */
	run_feed(&u, in, 12);
	run_feed(&u, in + 12, sizeof(in) - 1 - 12);
	assert_int_equal(u.r.in_feed, 3);
	assert_non_null(u.p.scratch);
	run_end(&u);
}

/* All rules at once, cut into random pieces. */
static void test_random_cuts(void **state)
{
	static const char in[] =
	    "\xEF\xBB\xBF: keepalive\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\n"
	    "id: 5\rretry: 1\rdata\r\rdata: x\n:c\ndata:  y\nevent\n\n"
	    "data: 0123456789012345678901234567890123456789\n\n"
	    "event: t\nid: q\0\ndata: z\n\ndata: tail";
	const char *want = "[a|1\\n2|-][||5][|x\\n y|-][t|z|-]";
	unsigned seed = 7;
	size_t cuts[16];

	(void)state;
	for (int iter = 0; iter < 2000; iter++) {
		size_t n = 0, at = 0;
		while (n < sizeof(cuts) / sizeof(cuts[0])) {
			seed = seed * 1103515245u + 12345u;
			at += 1 + (seed >> 16) % 9;
			if (at >= sizeof(in) - 1)
				break;
			cuts[n++] = at;
		}
		expect_cut(in, sizeof(in) - 1, SSE_MODE_EVENTS, 32, cuts, n, want,
		    1, "random");
	}
}

static void test_ndjson(void **state)
{
	static const char in[] =
	    "{\"a\":1}\n\r\n\n{\"b\":2}\r\nx\ry\r\n \n\r\r\n{\"c\"";
	static const char big[] = "0123456789\nabc\r\n0123456789a\r\nz\n";
	(void)state;
	expect_mode(in, sizeof(in) - 1, SSE_MODE_NDJSON, 4096,
	    "[|{\"a\":1}|-][|{\"b\":2}|-][|x\\ry|-][| |-][|\\r|-]", 0);
	expect_mode(big, sizeof(big) - 1, SSE_MODE_NDJSON, 10,
	    "[|0123456789|-][|abc|-][|z|-]", 1);
}

/* The wire report's counters (line ends, data with and without its space,
 * comments, pings without data) are the same however the bytes are cut,
 * a CR at the end of a feed included. */
static void wire_counts(const char *in, size_t len, const size_t *cuts, size_t n,
    uint64_t out[8])
{
	struct sse_parser p;
	size_t at = 0;

	sse_init(&p, SSE_MODE_EVENTS, 4096, NULL, NULL);
	for (size_t i = 0; i <= n; i++) {
		size_t to = i < n ? cuts[i] : len;
		sse_feed(&p, in + at, to - at);
		at = to;
	}
	out[0] = p.lf;
	out[1] = p.crlf;
	out[2] = p.cr;
	out[3] = p.data_space;
	out[4] = p.data_bare;
	out[5] = p.comments;
	out[6] = p.pings;
	out[7] = p.events;
	sse_free(&p);
}

/* The one-pass read of a feed (feed_fast): stamped events as tokentap-mock
 * sends them (a comment, the data line, the blank line), blank lines with
 * nothing before them, then the shapes it leaves to the line by line loop
 * (a CR, a second data line, an "event" field, an event too big, a data
 * line with no blank line after it yet): the same events and the same
 * wire counts, fed whole, byte by byte and cut at every offset. */
static void test_one_pass(void **state)
{
	static const char in[] =
	    ": ts=1\ndata: {\"a\":1}\n\n\n: ts=2\ndata:{}\n\n"
	    "data: x\r\n\ndata: y\ndata: z\n\n: ts=3\ndata: w\n\n"
	    "event: e\ndata: v\n\ndata: 0123456789abcdefghij0123456789\n\n"
	    ": ts=4\ndata: u\n\n";
	/* 23 lines, all ending in LF but "data: x" (CRLF); 8 data lines
	 * with the space, 1 without; 4 comments; 8 events (at 4096 bytes,
	 * where the long one is no longer too big) */
	const uint64_t want[8] = { 22, 1, 0, 8, 1, 4, 0, 8 };
	uint64_t got[8];
	size_t len = sizeof(in) - 1;

	(void)state;
	expect_mode(in, len, SSE_MODE_EVENTS, 24,
	    "[|{\"a\":1}|-][|{}|-][|x|-][|y\\nz|-][|w|-][e|v|-][|u|-]", 1);
	wire_counts(in, len, NULL, 0, got);
	assert_memory_equal(got, want, sizeof want);
	for (size_t at = 1; at < len; at++) {
		wire_counts(in, len, &at, 1, got);
		assert_memory_equal(got, want, sizeof want);
	}
}

static void test_wire_counters(void **state)
{
	static const char in[] =
	    ": ok\r\ndata:{\"a\":1}\r\n\r\nevent: ping\r\n\r\n: ka\r\n\r\n"
	    "data: b\n\ndata:\rdata: c\r\revent: ping\ndata: {}\n\n";
	/* lines: 11 CRLF (": ok", the data, the blank, "event: ping", the
	 * blank, ": ka", the blank) = 7; LF: "data: b", blank, "event: ping",
	 * "data: {}", blank = 5; CR alone: "data:", "data: c", blank = 3 */
	const uint64_t want[8] = { 5, 7, 3, 3, 2, 2, 1, 4 };
	uint64_t got[8];
	size_t len = sizeof(in) - 1, cuts[64];

	(void)state;
	wire_counts(in, len, NULL, 0, got);
	assert_memory_equal(got, want, sizeof want);
	for (size_t i = 0; i < len - 1 && i < 64; i++)
		cuts[i] = i + 1;
	wire_counts(in, len, cuts, len - 1 < 64 ? len - 1 : 64, got);
	assert_memory_equal(got, want, sizeof want);
	for (size_t at = 1; at < len; at++) {
		wire_counts(in, len, &at, 1, got);
		assert_memory_equal(got, want, sizeof want);
	}
}

/* An event that its second data line makes too big still counts that
 * line's space or none in the wire report, as a whole feed does, fed cut
 * anywhere or byte by byte (the stream fuzzer found the byte by byte read
 * counting none); a line after it, in an event already too big, counts
 * in neither. */
static void test_wire_counts_of_an_event_too_big(void **state)
{
	static const char in[] = "data: 1\ndata:x\ndata: y\n\n";
	size_t len = sizeof(in) - 1;

	(void)state;
	for (size_t at = 0; at <= len + 1; at++) {
		struct sse_parser p;

		sse_init(&p, SSE_MODE_EVENTS, 1, NULL, NULL);
		if (at <= len) {
			sse_feed(&p, in, at);
			sse_feed(&p, in + at, len - at);
		} else {
			for (size_t i = 0; i < len; i++)
				sse_feed(&p, in + i, 1);
		}
		assert_int_equal(p.data_space, 1);
		assert_int_equal(p.data_bare, 1);
		assert_int_equal(p.oversized, 1);
		assert_int_equal(p.events, 0);
		sse_free(&p);
	}
}

/* Lines longer than the scan's vector steps (64 and 32 bytes), a CR at
 * each place of one of them: the one pass hands the feed to the line by
 * line loop at the CR, and the events are the same fed whole, byte by byte
 * and cut at every offset. */
static void test_long_lines_and_a_cr(void **state)
{
	char in[512], want[512];

	(void)state;
	for (size_t at = 0; at <= 70; at += 7) {
		size_t n = 0, w = 0;

		n += (size_t)sprintf(in + n, ": ts=1\ndata: %0100d\n\ndata: ", 7);
		memset(in + n, 'y', 70);
		in[n + at] = '\r';         /* "data: yyy" ends there; the rest is a
		                             * line of its own, a field ignored */
		n += 70;
		n += (size_t)sprintf(in + n, "\n\ndata: %090d\n\n", 9);
		w += (size_t)sprintf(want + w, "[|%0100d|-][|", 7);
		memset(want + w, 'y', at);
		w += at;
		w += (size_t)sprintf(want + w, "|-][|%090d|-]", 9);
		expect_mode(in, n, SSE_MODE_EVENTS, 4096, want, 0);
	}
}

/* The cases that reach feed_fast, again through its build for any CPU
 * (feed_fast_any and eol_find), which a CPU with AVX2 never takes. Last:
 * a failure leaves the flag off. */
static void test_without_avx2(void **state)
{
#ifdef EOL_AVX2
	int keep = eol_has_avx2;

	eol_has_avx2 = 0;
#endif
	test_line_ends(state);
	test_comments(state);
	test_zero_copy(state);
	test_random_cuts(state);
	test_wire_counters(state);
	test_one_pass(state);
	test_long_lines_and_a_cr(state);
	test_wire_counts_of_an_event_too_big(state);
#ifdef EOL_AVX2
	eol_has_avx2 = keep;
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bom),
		cmocka_unit_test(test_line_ends),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_field_without_colon),
		cmocka_unit_test(test_leading_space),
		cmocka_unit_test(test_data_joined),
		cmocka_unit_test(test_event_type),
		cmocka_unit_test(test_id),
		cmocka_unit_test(test_ignored_fields),
		cmocka_unit_test(test_dispatch_needs_data),
		cmocka_unit_test(test_unterminated_dropped),
		cmocka_unit_test(test_oversized),
		cmocka_unit_test(test_repeated_fields),
		cmocka_unit_test(test_scratch_bounded),
		cmocka_unit_test(test_zero_copy),
		cmocka_unit_test(test_random_cuts),
		cmocka_unit_test(test_ndjson),
		cmocka_unit_test(test_wire_counters),
		cmocka_unit_test(test_one_pass),
		cmocka_unit_test(test_long_lines_and_a_cr),
		cmocka_unit_test(test_wire_counts_of_an_event_too_big),
		cmocka_unit_test(test_without_avx2),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
