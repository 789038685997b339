/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers shared by every module: clock, units, strings. */
#ifndef TOKENTAP_UTIL_H
#define TOKENTAP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define UTIL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* CLOCK_MONOTONIC in microseconds: the clock of every measurement.
 * Inline: a read and its event take it three times. */
static inline uint64_t util_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
/* CLOCK_REALTIME in milliseconds, for timestamps shown to people. */
uint64_t util_wall_ms(void);
/* CLOCK_REALTIME in nanoseconds (OpenTelemetry's timestamps). */
uint64_t util_wall_ns(void);
/* Writes "2026-11-29T16:04:31.123Z" (24 chars + NUL) for a wall time in ms. */
void util_rfc3339_ms(uint64_t wall_ms, char out[32]);

/* "1500ms", "2s", "1m", "1h", "28d" (a bare number is seconds) -> microseconds.
 * Returns 0 on success, -1 when the text is not a duration. */
int util_parse_duration_us(const char *s, uint64_t *out_us);
/* Its inverse, the one duration text ("window": "1m"): us in the largest
 * of d, h, m, s, ms and us that divides it exactly ("28d", "1h", "90s",
 * "1500ms", "1500us"; 0 is "0s"), which util_parse_duration_us reads back
 * as us.
 * 24 bytes always suffice. */
void util_duration_text(uint64_t us, char *buf, size_t len);
/* "16k", "1m", "4096" -> bytes. Returns 0 or -1. */
int util_parse_size(const char *s, uint64_t *out);

/* Case-insensitive comparison of a counted string with a C string. Inline:
 * b is mostly a literal, whose length the compiler then knows. */
static inline int util_ieq(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}
/* An RFC 9110 §5.6.2 token character (header names, methods, protocols). */
static inline int util_is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}
/* FNV-1a, 64 bits: the one hash of names and keys. Start from
 * UTIL_FNV_INIT and feed bytes, small numbers (util_fnv_byte), or strings
 * (util_fnv_str ends each with a 0xff, so "ab","c" and "a","bc" differ). */
#define UTIL_FNV_INIT 1469598103934665603ull
static inline uint64_t util_fnv_byte(uint64_t h, unsigned c)
{
	return (h ^ c) * 1099511628211ull;
}
static inline uint64_t util_fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = util_fnv_byte(h, ((const unsigned char *)p)[i]);
	return h;
}
static inline uint64_t util_fnv_str(uint64_t h, const char *s)
{
	for (; s != NULL && *s; s++)
		h = util_fnv_byte(h, (unsigned char)*s);
	return util_fnv_byte(h, 0xff);
}
/* Opens slot at (<= *n) in an array of *n elements of size bytes kept
 * sorted by its caller (a sparse histogram's buckets): grown to twice its
 * *cap (min_cap at first; a NULL array with cap 0 is empty) when full,
 * the elements from at moved up one, *n counted. The array (it may have
 * moved), or NULL when memory ran out, the array unchanged. */
void *util_array_open(void *a, uint32_t *n, uint32_t *cap, size_t size,
    uint32_t at, uint32_t min_cap);
/* Levenshtein distance, for "did you mean" hints (short strings only). */
size_t util_edit_distance(const char *a, const char *b);

/* Splits "host:port", "[v6]:port" or ":port" into host (empty for any) and
 * port. host must hold at least 256 bytes. Returns 0 or -1. */
int util_split_hostport(const char *s, char *host, size_t hostlen, unsigned *port);

/* Constant-time equality of two byte strings (length leaks, content does not). */
int util_ct_equal(const void *a, size_t alen, const void *b, size_t blen);

#endif
