/* SPDX-License-Identifier: Apache-2.0 */
/* chunked: the decoder of a chunked body's plain chunks, with llhttp
 * reading on where it stops, against llhttp alone on the same bytes, cut
 * at every point: the same data, the same end (done, more to come, or an
 * error) at the same byte. Hand-made bodies for each way a size line may
 * leave the plain form, then many bodies built and mutated at random. */

#include "chunked.h"

#include <llhttp.h>

#include "unit.h"

#define HEAD "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
#define OUT_MAX 4096

struct run {
	llhttp_t p;
	llhttp_settings_t s;
	struct chunked c;
	char out[OUT_MAX];
	size_t out_len;
	int done;
};

static void data(void *arg, const char *at, size_t n)
{
	struct run *r = arg;
	assert_true(r->out_len + n <= OUT_MAX);
	memcpy(r->out + r->out_len, at, n);
	r->out_len += n;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
	data(p->data, at, n);
	return 0;
}

static int on_complete(llhttp_t *p)
{
	((struct run *)p->data)->done = 1;
	return HPE_PAUSED;
}

static void start(struct run *r, int decoder)
{
	memset(r, 0, sizeof *r);
	llhttp_settings_init(&r->s);
	r->s.on_body = on_body;
	r->s.on_message_complete = on_complete;
	llhttp_init(&r->p, HTTP_RESPONSE, &r->s);
	r->p.data = r;
	assert_int_equal(llhttp_execute(&r->p, HEAD, strlen(HEAD)), HPE_OK);
	chunked_start(&r->c, decoder);
}

/* As exchange.c's body_execute: the decoder, then llhttp. Returns 0 (all
 * taken), 1 (the message ended at *at) or -1 (an error at *at). */
static int feed(struct run *r, const char *buf, size_t len, size_t *at)
{
	enum llhttp_errno e;
	size_t n = 0;

	if (r->c.state != CHUNKED_OFF) {
		n = chunked_feed(&r->c, buf, len, data, r);
		if (r->c.state == CHUNKED_BAD) {
			*at = n;
			return -1;
		}
		if (r->c.state != CHUNKED_OFF)
			return 0;
		if (r->c.held_len > 0) {
			e = llhttp_execute(&r->p, r->c.held, r->c.held_len);
			assert_int_equal(e, HPE_OK);   /* digits and a CR: no end */
			r->c.held_len = 0;
		}
	}
	e = llhttp_execute(&r->p, buf + n, len - n);
	if (e == HPE_OK)
		return 0;
	*at = (size_t)(llhttp_get_error_pos(&r->p) - buf);
	return e == HPE_PAUSED ? 1 : -1;
}

/* The outcome of body fed in two pieces cut at k: 0/1/-1 and where. */
static int outcome(struct run *r, const char *body, size_t len, size_t k,
    size_t *where)
{
	size_t at = 0;
	int v = feed(r, body, k, &at);

	if (v != 0) {
		*where = at;
		return v;
	}
	v = feed(r, body + k, len - k, &at);
	*where = k + at;
	return v;
}

static void same(const char *body, size_t len)
{
	struct run a, b;

	for (size_t k = 0; k <= len; k++) {
		size_t wa = 0, wb = 0;
		int va, vb;

		start(&a, 0);
		start(&b, 1);
		va = outcome(&a, body, len, k, &wa);
		vb = outcome(&b, body, len, k, &wb);
		if (va != vb || (va != 0 && wa != wb) || a.out_len != b.out_len ||
		    memcmp(a.out, b.out, a.out_len) != 0 || a.done != b.done)
			fail_msg("cut at %zu of \"%.*s\": llhttp %d at %zu (%zu bytes), "
			    "decoder %d at %zu (%zu bytes)", k, (int)len, body, va, wa,
			    a.out_len, vb, wb, b.out_len);
	}
}

#define SAME(s) same(s, sizeof(s) - 1)

static void test_plain_chunks(void **state)
{
	struct run r;
	size_t at = 0;
	(void)state;
	SAME("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
	SAME("a\r\n0123456789\r\nA\r\n0123456789\r\n0\r\n\r\nNEXT");
	SAME("00005\r\nhello\r\n000\r\n\r\n");
	SAME("5\r\nhello\r\n");
	/* the decoder does the chunks, llhttp only the last */
	start(&r, 1);
	assert_int_equal(feed(&r, "3\r\nabc\r\n", 8, &at), 0);
	assert_int_equal(r.c.state, CHUNKED_SIZE);
	assert_int_equal(r.out_len, 3);
}

static void test_what_llhttp_reads(void **state)
{
	(void)state;
	SAME("5;ext=1\r\nhello\r\n0\r\n\r\n");              /* an extension */
	SAME("5 \r\nhello\r\n0\r\n\r\n");                   /* whitespace */
	SAME("5\nhello\r\n0\r\n\r\n");                      /* a bare LF */
	SAME("5\r\rhello\r\n0\r\n\r\n");                    /* CR, no LF */
	SAME("0\r\nTrailer: x\r\n\r\n");                    /* trailers */
	SAME("0;x\r\n\r\n");
	SAME("g\r\nhello\r\n");                             /* not hex */
	SAME("\r\n");                                       /* no digits */
	SAME("0000000000000005\r\nhello\r\n0\r\n\r\n");     /* 16 digits */
	SAME("fffffffffffffffff\r\nx\r\n");                 /* overflow */
	SAME("5\r\nhello\r\n0\r\n\r");
	SAME("5\r\nhelloX\r\n0\r\n\r\n");                   /* no CRLF after */
	SAME("5\r\nhello\rX\n0\r\n\r\n");
	SAME("5\r\nhello\n0\r\n\r\n");
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Chunks of random sizes and digits (some upper case, some padded), the
 * last chunk, then a byte or two changed, inserted or dropped. */
static void test_random_bodies(void **state)
{
	static const char alpha[] = "0123456789abcdefABCDEF\r\n; \t=x0";
	uint64_t s = 0x9e3779b97f4a7c15ULL;
	char body[512];
	(void)state;

	for (int round = 0; round < 3000; round++) {
		size_t len = 0;
		int chunks = (int)(rnd(&s) % 4);

		for (int c = 0; c < chunks; c++) {
			unsigned n = (unsigned)(rnd(&s) % 40) + 1;
			len += (size_t)snprintf(body + len, sizeof body - len,
			    rnd(&s) % 3 == 0 ? "%03X\r\n" : "%x\r\n", n);
			for (unsigned i = 0; i < n; i++)
				body[len++] = (char)('a' + rnd(&s) % 26);
			body[len++] = '\r';
			body[len++] = '\n';
		}
		len += (size_t)snprintf(body + len, sizeof body - len, "0\r\n\r\n");
		for (int m = (int)(rnd(&s) % 3); m > 0 && len > 0; m--) {
			size_t at = (size_t)(rnd(&s) % len);
			char b = alpha[rnd(&s) % (sizeof alpha - 1)];
			switch (rnd(&s) % 3) {
			case 0:
				body[at] = b;
				break;
			case 1:
				memmove(body + at + 1, body + at, len - at);
				body[at] = b;
				len++;
				break;
			default:
				memmove(body + at, body + at + 1, len - at - 1);
				len--;
			}
		}
		same(body, len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_chunks),
		cmocka_unit_test(test_what_llhttp_reads),
		cmocka_unit_test(test_random_bodies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
