/* SPDX-License-Identifier: Apache-2.0 */
#include "jsonw.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include <event2/buffer.h>

#include "util.h"

/* ---- the escape table ----------------------------------------------------- */

/* What each byte is in a JSON string: P passes as it is, Q is written
 * after a backslash, U as \u00XX, H begins (or continues) multi-byte
 * UTF-8 and is checked as a sequence. */
enum { P, Q, U, H };

static const unsigned char byte_class[256] = {
	U, U, U, U, U, U, U, U, U, U, U, U, U, U, U, U,   /* 0x00 */
	U, U, U, U, U, U, U, U, U, U, U, U, U, U, U, U,   /* 0x10 */
	P, P, Q, P, P, P, P, P, P, P, P, P, P, P, P, P,   /* 0x20  '"' */
	P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P,   /* 0x30 */
	P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P,   /* 0x40 */
	P, P, P, P, P, P, P, P, P, P, P, P, Q, P, P, P,   /* 0x50  '\' */
	P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P,   /* 0x60 */
	P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, U,   /* 0x70  DEL */
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,   /* 0x80 */
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
	H, H, H, H, H, H, H, H, H, H, H, H, H, H, H, H,
};

size_t jsonw_utf8_seq(const char *s, size_t n, int *valid)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need;

	*valid = u[0] < 0x80;
	if (u[0] < 0x80)
		return 1;
	if (u[0] < 0xc2 || u[0] > 0xf4)      /* a continuation, C0/C1 overlong, > F4 */
		return 1;
	need = u[0] < 0xe0 ? 1 : u[0] < 0xf0 ? 2 : 3;
	/* RFC 3629's table: the second byte's range rules out the overlong
	 * forms, the surrogates and what lies above U+10FFFF */
	if (u[0] == 0xe0)
		lo = 0xa0;
	else if (u[0] == 0xed)
		hi = 0x9f;
	else if (u[0] == 0xf0)
		lo = 0x90;
	else if (u[0] == 0xf4)
		hi = 0x8f;
	for (size_t i = 1; i <= need; i++) {
		if (i >= n || u[i] < lo || u[i] > hi)
			return i;
		lo = 0x80;
		hi = 0xbf;
	}
	*valid = 1;
	return need + 1;
}

size_t jsonw_clean(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0, i = 0;

	while (i < n) {
		int valid;
		size_t k = jsonw_utf8_seq(src + i, n - i, &valid);
		const char *put = src + i;
		size_t len = k;
		unsigned char c = (unsigned char)src[i];
		if (!valid) {
			put = "\xef\xbf\xbd";
			len = 3;
		} else if (k == 1 && (c < 0x20 || c == 0x7f)) {
			put = "?";
		}
		if (o + len > cap - 1)
			break;
		memcpy(dst + o, put, len);
		o += len;
		i += k;
	}
	dst[o] = '\0';
	return o;
}

/* One piece of a string's output: a run of input bytes that pass as they
 * are (p points into the input), or the escape or U+FFFD that stands for
 * `in` input bytes. */
struct piece {
	const char *p;
	size_t len;
	size_t in;
	int plain;
	char esc[6];
};

/* Bytes at the start of s[0..n) that pass as they are: ASCII the table
 * lets through and well-formed multi-byte sequences. */
static size_t plain_run(const char *s, size_t n)
{
	size_t i = 0;
	int valid;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (byte_class[c] == P) {
			i++;
		} else if (byte_class[c] == H) {
			size_t k = jsonw_utf8_seq(s + i, n - i, &valid);
			if (!valid)
				break;
			i += k;
		} else {
			break;
		}
	}
	return i;
}

/* The next piece of s[0..n), n > 0: the one routine every writer uses. */
static void next_piece(const char *s, size_t n, struct piece *pc)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = (unsigned char)s[0];
	int valid;

	pc->in = plain_run(s, n);
	pc->plain = pc->in > 0;
	if (pc->plain) {
		pc->p = s;
		pc->len = pc->in;
		return;
	}
	pc->p = pc->esc;
	switch (byte_class[c]) {
	case Q:
		pc->esc[0] = '\\';
		pc->esc[1] = (char)c;
		pc->len = 2;
		pc->in = 1;
		break;
	case U:
		memcpy(pc->esc, "\\u00", 4);
		pc->esc[4] = hex[c >> 4];
		pc->esc[5] = hex[c & 15];
		pc->len = 6;
		pc->in = 1;
		break;
	default:
		pc->p = JSONW_REPLACEMENT;
		pc->len = 3;
		pc->in = jsonw_utf8_seq(s, n, &valid);
		break;
	}
}

size_t jsonw_plain_len(const char *s, size_t n)
{
	return plain_run(s, n);
}

void jsonw_sanitize(char *s, char sub)
{
	struct piece pc;

	for (size_t i = 0, n = strlen(s); i < n; i += pc.in) {
		next_piece(s + i, n - i, &pc);
		if (!pc.plain)
			memset(s + i, sub, pc.in);
	}
}

/* ---- a caller's fixed buffer ---------------------------------------------- */

void jsonw_buf_init(struct jsonw_buf *b, char *p, size_t cap)
{
	b->p = p;
	b->len = 0;
	b->cap = cap;
	b->cut = 0;
}

void jsonw_buf_printf(struct jsonw_buf *b, const char *fmt, ...)
{
	char tmp[256];
	size_t room = b->cap - b->len;
	va_list ap;
	int n;

	if (b->cut)
		return;
	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof tmp) {
		jsonw_buf_add(b, tmp, (size_t)n);
		return;
	}
	/* a longer text straight into the buffer; vsnprintf needs a byte for
	 * its NUL, so one that would take every byte left is refused too */
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		b->cut = 1;
		return;
	}
	b->len += (size_t)n;
}

/* The longest start of a plain run that fits in room bytes and ends on a
 * character boundary (the run is well-formed UTF-8, so a byte that is not
 * a continuation byte begins a character). */
static size_t run_cut(const char *p, size_t room)
{
	while (room > 0 && ((unsigned char)p[room] & 0xc0) == 0x80)
		room--;
	return room;
}

void jsonw_buf_str(struct jsonw_buf *b, const char *s, size_t n)
{
	struct piece pc;

	if (s == NULL) {
		jsonw_buf_add(b, "null", 4);
		return;
	}
	if (b->cut || b->cap - b->len < 2) {
		b->cut = 1;
		return;
	}
	b->p[b->len++] = '"';
	for (size_t i = 0; i < n; i += pc.in) {
		size_t room = b->cap - b->len - 1;      /* the closing quote's */
		next_piece(s + i, n - i, &pc);
		if (pc.len > room) {
			if (pc.plain) {
				size_t k = run_cut(pc.p, room);
				memcpy(b->p + b->len, pc.p, k);
				b->len += k;
			}
			b->cut = 1;
			break;
		}
		memcpy(b->p + b->len, pc.p, pc.len);
		b->len += pc.len;
	}
	b->p[b->len++] = '"';
}

/* ---- numbers and times, as text ------------------------------------------- */

#define NUM_MAX 32

/* The digits of v, without printf (every access log field is a number). */
static size_t u64_text(uint64_t v, char *out)
{
	char t[20];
	size_t n = 0, i;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		out[i] = t[n - 1 - i];
	return n;
}

static size_t ms_text(int64_t us, char out[NUM_MAX])
{
	size_t n;
	int64_t frac;

	if (us < 0) {
		memcpy(out, "null", 5);
		return 4;
	}
	n = u64_text((uint64_t)(us / 1000), out);
	if ((frac = us % 1000) != 0) {
		out[n++] = '.';
		out[n++] = (char)('0' + frac / 100);
		out[n++] = (char)('0' + frac / 10 % 10);
		out[n++] = (char)('0' + frac % 10);
	}
	out[n] = '\0';
	return n;
}

static size_t int_text(int64_t v, char out[NUM_MAX])
{
	size_t n;

	if (v < 0) {
		memcpy(out, "null", 5);
		return 4;
	}
	n = u64_text((uint64_t)v, out);
	out[n] = '\0';
	return n;
}

static size_t time_text(uint64_t wall_ms, char out[NUM_MAX])
{
	char ts[32];

	size_t n;

	if (wall_ms == 0) {
		memcpy(out, "null", 5);
		return 4;
	}
	util_rfc3339_ms(wall_ms, ts);
	n = strlen(ts);                /* 24: NUM_MAX holds it quoted */
	out[0] = '"';
	memcpy(out + 1, ts, n);
	out[n + 1] = '"';
	out[n + 2] = '\0';
	return n + 2;
}

/* Below 1e15 and at most 6 decimals, "%.*f" takes at most 23 bytes. */
static size_t fixed_text(double v, int decimals, char out[NUM_MAX])
{
	if (!isfinite(v) || v < 0 || v >= 1e15 || decimals < 0 || decimals > 6)
		return (size_t)snprintf(out, NUM_MAX, "null");
	return (size_t)snprintf(out, NUM_MAX, "%.*f", decimals, v);
}

/* v >= 0 below 2^52 with places (0 to 3) decimals, as printf's "%.*f":
 * the double's exact value m * 2^-k, rounded half to even. m times
 * 10^places is exact in 64 bits (m < 2^53), so the rounding is decided
 * on the exact remainder. 0: v is not of that range (printf's, then). */
static size_t fixed_exact(double v, unsigned places, char out[NUM_MAX])
{
	static const uint64_t scales[] = { 1, 10, 100, 1000 };
	uint64_t bits, m, scale, q, r, half, frac;
	int e;
	size_t n;

	memcpy(&bits, &v, sizeof bits);
	e = (int)(bits >> 52 & 0x7ff);
	if (places > 3 || (bits >> 63) != 0 || e >= 1075)
		return 0;          /* a sign, 2^52 and past, inf, NaN */
	m = bits & (((uint64_t)1 << 52) - 1);
	if (e != 0)
		m |= (uint64_t)1 << 52;
	e = 1075 - (e != 0 ? e : 1);       /* v = m * 2^-e, e >= 1 */
	scale = scales[places];
	m *= scale;
	if (e >= 64) {
		q = 0;             /* below 2^63 / 2^64: less than half */
	} else {
		q = m >> e;
		r = m & (((uint64_t)1 << e) - 1);
		half = (uint64_t)1 << (e - 1);
		q += r > half || (r == half && (q & 1));
	}
	n = u64_text(q / scale, out);
	if (places > 0) {
		out[n++] = '.';
		frac = q % scale;
		for (unsigned i = places; i > 0; i--, frac /= 10)
			out[n + i - 1] = (char)('0' + frac % 10);
		n += places;
	}
	out[n] = '\0';
	return n;
}

void jsonw_buf_fixed(struct jsonw_buf *b, double v, unsigned places)
{
	char t[NUM_MAX];
	size_t n = fixed_exact(v, places, t);

	if (n > 0)
		jsonw_buf_add(b, t, n);
	else
		jsonw_buf_printf(b, "%.*f", (int)places, v);
}

void jsonw_buf_ms(struct jsonw_buf *b, int64_t us)
{
	char t[NUM_MAX];
	jsonw_buf_add(b, t, ms_text(us, t));
}

void jsonw_buf_int(struct jsonw_buf *b, int64_t v)
{
	char t[NUM_MAX];
	jsonw_buf_add(b, t, int_text(v, t));
}

void jsonw_buf_time(struct jsonw_buf *b, uint64_t wall_ms)
{
	char t[NUM_MAX];
	jsonw_buf_add(b, t, time_text(wall_ms, t));
}

/* ---- evbuffer ------------------------------------------------------------- */

int jsonw_strn(struct evbuffer *out, const char *s, size_t n)
{
	struct piece pc;
	int r = evbuffer_add(out, "\"", 1);

	for (size_t i = 0; i < n; i += pc.in) {
		next_piece(s + i, n - i, &pc);
		r |= evbuffer_add(out, pc.p, pc.len);
	}
	r |= evbuffer_add(out, "\"", 1);
	return r < 0 ? -1 : 0;
}

int jsonw_str(struct evbuffer *out, const char *s)
{
	if (s == NULL)
		return evbuffer_add(out, "null", 4);
	return jsonw_strn(out, s, strlen(s));
}

int jsonw_time(struct evbuffer *out, uint64_t wall_ms)
{
	char t[NUM_MAX];
	return evbuffer_add(out, t, time_text(wall_ms, t));
}

int jsonw_fixed(struct evbuffer *out, double v, int decimals)
{
	char t[NUM_MAX];
	return evbuffer_add(out, t, fixed_text(v, decimals, t));
}

/* ---- stdio ---------------------------------------------------------------- */

void jsonw_file_str(FILE *f, const char *s)
{
	struct piece pc;
	size_t n;

	if (s == NULL) {
		fputs("null", f);
		return;
	}
	n = strlen(s);
	fputc('"', f);
	for (size_t i = 0; i < n; i += pc.in) {
		next_piece(s + i, n - i, &pc);
		fwrite(pc.p, 1, pc.len, f);
	}
	fputc('"', f);
}
