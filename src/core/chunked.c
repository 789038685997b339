/* SPDX-License-Identifier: Apache-2.0 */
#include "chunked.h"

#include <string.h>

void chunked_start(struct chunked *c, int on)
{
	memset(c, 0, sizeof *c);
	c->state = on ? CHUNKED_SIZE : CHUNKED_OFF;
}

/* a hex digit's value plus one; 0 for any other byte */
static const unsigned char hex1[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, ['5'] = 6,
	['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
	['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
	['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

static int hex(unsigned char b)
{
	return hex1[b] - 1;
}

/* CR LF at q: one 16-bit compare (the constant is folded). */
static inline int is_crlf(const unsigned char *q)
{
	uint16_t x, y;

	memcpy(&x, q, 2);
	memcpy(&y, "\r\n", 2);
	return x == y;
}

/* Whole plain chunks from p[i]: size line, data and CRLF all in view, the
 * size not 0. Returns where the first other thing starts, for the byte by
 * byte states (the same rules; this is their common case in one step: one
 * chunk an event, so a loop turn a byte was most of the cost). Inlined in
 * both callers: a call's registers were a tenth of it. */
static inline __attribute__((always_inline)) size_t whole_chunks(
    const char *p, size_t i, size_t len, chunked_data_fn fn, void *arg)
{
	const unsigned char *end = (const unsigned char *)p + len;

	for (;;) {
		const unsigned char *d = (const unsigned char *)p + i, *lim;
		uint64_t size = 0;
		unsigned v;

		lim = end - d < CHUNKED_DIGITS_MAX ? end : d + CHUNKED_DIGITS_MAX;
		for (; d < lim && (v = hex1[*d]) != 0; d++)
			size = size << 4 | (v - 1);
		/* the digits, CRLF, size bytes of data, CRLF */
		if (size == 0 || end - d < 4 || !is_crlf(d) ||
		    size > (uint64_t)(end - d) - 4 || !is_crlf(d + 2 + size))
			return i;
		fn(arg, (const char *)d + 2, (size_t)size);
		if ((i = (size_t)((const char *)d + 4 + size - p)) == len)
			return len;    /* the common end: a read, a chunk */
	}
}

/* One byte of a size line. 0: taken; -1: not ours (CHUNKED_OFF). */
static int size_byte(struct chunked *c, unsigned char b)
{
	int v;

	if (c->state == CHUNKED_SIZE_LF) {
		/* the last chunk, and a CR without its LF, are llhttp's */
		if (b != '\n' || c->left == 0)
			goto off;
		c->state = CHUNKED_DATA;
		c->held_len = 0;
		return 0;
	}
	if (b == '\r' && c->held_len > 0) {
		c->held[c->held_len++] = '\r';
		c->state = CHUNKED_SIZE_LF;
		return 0;
	}
	if ((v = hex(b)) < 0 || c->held_len == CHUNKED_DIGITS_MAX)
		goto off;
	c->held[c->held_len++] = (char)b;
	c->left = c->left << 4 | (uint64_t)v;
	return 0;
off:
	c->state = CHUNKED_OFF;
	return -1;
}

size_t chunked_feed(struct chunked *c, const char *p, size_t len,
    chunked_data_fn fn, void *arg)
{
	size_t i = 0, n;

	/* the steady state first: a read of whole chunks */
	if (c->state == CHUNKED_SIZE && c->held_len == 0 && len > 0 &&
	    (i = whole_chunks(p, 0, len, fn, arg)) == len)
		return len;
	while (i < len) {
		switch (c->state) {
		case CHUNKED_SIZE:
			if (c->held_len == 0 && (i = whole_chunks(p, i, len, fn, arg)) == len)
				return len;
			/* fall through */
		case CHUNKED_SIZE_LF:
			if (size_byte(c, (unsigned char)p[i]) < 0)
				return i;
			i++;
			break;
		case CHUNKED_DATA:
			n = len - i < c->left ? len - i : (size_t)c->left;
			fn(arg, p + i, n);
			i += n;
			if ((c->left -= n) == 0)
				c->state = CHUNKED_DATA_CR;
			break;
		case CHUNKED_DATA_CR:
			if (p[i] != '\r')
				goto bad;
			c->state = CHUNKED_DATA_LF;
			i++;
			break;
		case CHUNKED_DATA_LF:
			if (p[i] != '\n')
				goto bad;
			c->state = CHUNKED_SIZE;
			i++;
			break;
		default:
			return i;
		}
	}
	return len;
bad:
	c->state = CHUNKED_BAD;
	return i;
}
