/* SPDX-License-Identifier: Apache-2.0 */
/* The one JSON writer: strings escaped so that no byte a client sends can
 * make a line or a document invalid JSON or invalid UTF-8, numbers as
 * tokentap writes them, RFC 3339 times. One escape routine, three front
 * ends: a caller's fixed buffer (the access log's stack line, written with
 * one write(2)), an evbuffer (the admin documents) and a stdio stream
 * (tokentap-load's report).
 *
 * What a string becomes: '"' and '\' are written \" and \\; every other
 * byte below 0x20, and DEL (0x7f), \u00XX (lower-case hex); ill-formed
 * UTF-8 U+FFFD (EF BF BD), one for each maximal ill-formed subpart as
 * Unicode recommends and Python, browsers and jq decode (a bad lead byte, a
 * truncated, overlong or surrogate sequence, a code point above U+10FFFF);
 * every other byte, well-formed multi-byte UTF-8 included, as it is. */
#ifndef TOKENTAP_JSONW_H
#define TOKENTAP_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct evbuffer;

/* U+FFFD REPLACEMENT CHARACTER in UTF-8 */
#define JSONW_REPLACEMENT "\xef\xbf\xbd"
/* The most a string of n bytes can take written, quotes included. */
#define JSONW_STR_MAX(n) ((n) * 6 + 2)

/* ---- UTF-8 ---------------------------------------------------------------- */

/* The sequence that starts s[0..n), n > 0: returns its length and sets
 * *valid. Well-formed (RFC 3629): 1 to 4 bytes, *valid = 1. Ill-formed: the
 * length of its maximal subpart (1 to 3 bytes, to be replaced by one
 * U+FFFD), *valid = 0. For every writer of text that must be UTF-8 (the
 * Prometheus label values too). */
size_t jsonw_utf8_seq(const char *s, size_t n, int *valid);

/* A text a client chose (a tenant, a model name) as every output may show
 * it, in logs and labels too: ill-formed UTF-8 becomes U+FFFD, control
 * bytes and DEL become '?'. Copied into dst (cap > 0), cut on a character
 * boundary, NUL-terminated; returns its length. */
size_t jsonw_clean(char *dst, size_t cap, const char *src, size_t n);

/* ---- strings, checked ----------------------------------------------------- */

/* How many leading bytes of s[0..n) a string writer copies unchanged: n
 * when s goes into a JSON string as it is. */
size_t jsonw_plain_len(const char *s, size_t n);
/* Overwrites with sub every byte of s a string writer would escape or
 * replace, so that s can go inside a JSON string unescaped (printf's %s)
 * and stays readable as text; sub must be printable ASCII. */
void jsonw_sanitize(char *s, char sub);

/* ---- a caller's fixed buffer ---------------------------------------------- */

/* p[0..cap) holds len bytes; nothing is ever written past cap, and no NUL.
 * When something does not fit, the text is cut and `cut` set:
 * - a string is cut after its last whole character or escape that fits,
 *   and still closed with its quote (opened only when both quotes fit), so
 *   what was written is valid UTF-8 and never ends inside an escape;
 * - anything else (literals, numbers, printf) is written whole or not;
 * - once cut, every later write is dropped: the text is the document's
 *   beginning, never one with a hole in it. */
struct jsonw_buf {
	char *p;
	size_t len;
	size_t cap;
	int cut;
};

void jsonw_buf_init(struct jsonw_buf *b, char *p, size_t cap);
/* Inline: most writes are a literal, whose length and copy the compiler
 * then knows (an access-log line is some hundred of them). */
static inline void jsonw_buf_add(struct jsonw_buf *b, const char *s, size_t n)
{
	if (b->cut || n > b->cap - b->len) {
		b->cut = 1;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void jsonw_buf_puts(struct jsonw_buf *b, const char *s)
{
	jsonw_buf_add(b, s, strlen(s));
}
void jsonw_buf_printf(struct jsonw_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* s[0..n) as a quoted string; null when s is NULL. */
void jsonw_buf_str(struct jsonw_buf *b, const char *s, size_t n);
/* Microseconds as milliseconds: "12" for whole ms, else three decimals
 * ("12.340", "0.005"); null when us < 0 (undefined). */
void jsonw_buf_ms(struct jsonw_buf *b, int64_t us);
/* v with places decimals (0 to 3), byte for byte what printf's "%.*f"
 * writes, without printf where v >= 0 is below 2^52. */
void jsonw_buf_fixed(struct jsonw_buf *b, double v, unsigned places);
/* An integer; null when v < 0 (undefined). */
void jsonw_buf_int(struct jsonw_buf *b, int64_t v);
/* A wall time in ms as a quoted RFC 3339 time (util_rfc3339_ms); null
 * when wall_ms is 0 (no time). */
void jsonw_buf_time(struct jsonw_buf *b, uint64_t wall_ms);

/* ---- evbuffer (admin documents) ------------------------------------------- */
/* Each returns 0, or -1 when the evbuffer could not grow. */

/* s as a quoted string; null when s is NULL. */
int jsonw_str(struct evbuffer *out, const char *s);
int jsonw_strn(struct evbuffer *out, const char *s, size_t n);
/* A quoted RFC 3339 time; null when wall_ms is 0. */
int jsonw_time(struct evbuffer *out, uint64_t wall_ms);
/* v with that many decimals ("%.3f"); null when v is negative, not finite
 * or too large to be a measurement (1e15 or more). */
int jsonw_fixed(struct evbuffer *out, double v, int decimals);

/* ---- stdio ---------------------------------------------------------------- */

/* s as a quoted string; null when s is NULL. Errors stay in f (ferror). */
void jsonw_file_str(FILE *f, const char *s);

#endif
