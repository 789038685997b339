/* SPDX-License-Identifier: Apache-2.0 */
#include "eol.h"

#include <stdint.h>
#include <string.h>

/* Under 16 bytes (the tail of a read, a line cut by the feed) one byte at
 * a time: no vector's set-up pays there. */
static const char *eol_short(const char *s, const char *end)
{
	while (s < end && *s != '\n' && *s != '\r')
		s++;
	return s;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Set once, before main: read by every worker, written by none. */
int eol_has_avx2;

__attribute__((constructor)) static void eol_init(void)
{
	__builtin_cpu_init();
	eol_has_avx2 = __builtin_cpu_supports("avx2");
}

/* A bit for each LF or CR among the 16 bytes at p. */
static inline uint32_t ends16(const char *p)
{
	__m128i v = _mm_loadu_si128((const __m128i_u *)(const void *)p);

	return (uint32_t)_mm_movemask_epi8(_mm_or_si128(
	    _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
	    _mm_cmpeq_epi8(v, _mm_set1_epi8('\r'))));
}

/* 16 bytes or more. The last step reads the last 16 bytes, over some
 * already read, and shifts out the bits of those: nothing past end is
 * read, and no byte by byte tail. */
static const char *eol_sse2(const char *s, const char *end)
{
	const char *p = s;
	uint32_t m;

	for (; end - p >= 16; p += 16)
		if ((m = ends16(p)) != 0)
			return p + __builtin_ctz(m);
	if (p == end)
		return end;
	m = ends16(end - 16) >> (16 - (end - p));
	return m != 0 ? p + __builtin_ctz(m) : end;
}

const char *eol_find(const char *s, const char *end)
{
	if (end - s < 16)
		return eol_short(s, end);
	return eol_sse2(s, end);
}

#else

const char *eol_find(const char *s, const char *end)
{
	const char *lf, *cr;

	if (end - s < 16)
		return eol_short(s, end);
	lf = memchr(s, '\n', (size_t)(end - s));
	cr = memchr(s, '\r', (size_t)((lf != NULL ? lf : end) - s));
	return cr != NULL ? cr : lf != NULL ? lf : end;
}

#endif
