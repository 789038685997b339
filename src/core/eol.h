/* SPDX-License-Identifier: Apache-2.0 */
#ifndef TOKENTAP_EOL_H
#define TOKENTAP_EOL_H

/*
 * The first line end, LF or CR, in [s, end): the event-stream parser's one
 * scan. glibc has no memchr for two bytes; two memchr passes (CR over the
 * whole read, then LF line by line) read every byte twice and paid a
 * call's set-up three times an event. Both functions read no byte outside
 * [s, end).
 */
const char *eol_find(const char *s, const char *end);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <stdint.h>

#define EOL_AVX2 1

/* The CPU has AVX2: set once, before main. */
extern int eol_has_avx2;

/* 0xff in each byte of the 32 at p that is an LF or a CR */
__attribute__((target("avx2")))
static inline __m256i eol_mask32(const char *p)
{
	__m256i v = _mm256_loadu_si256((const __m256i_u *)(const void *)p);

	return _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
	    _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')));
}

/*
 * eol_find for a caller compiled for AVX2 (only called when eol_has_avx2),
 * inlined there: no call, and the constants set once for all the lines of
 * a feed. 64 bytes a step while they last (a step's own tests cost as much
 * as its compares); the last step reads the last 32 bytes, over some
 * already read, and shifts out the bits of those: nothing past end is
 * read, and no byte by byte tail.
 */
__attribute__((target("avx2")))
static inline const char *eol_find_avx2(const char *s, const char *end)
{
	const char *p = s;
	__m256i a, b;
	uint64_t m;

	if (end - s < 32)
		return eol_find(s, end);
	for (; end - p >= 64; p += 64) {
		a = eol_mask32(p);
		b = eol_mask32(p + 32);
		if (!_mm256_testz_si256(_mm256_or_si256(a, b), _mm256_or_si256(a, b))) {
			m = (uint32_t)_mm256_movemask_epi8(a) |
			    (uint64_t)(uint32_t)_mm256_movemask_epi8(b) << 32;
			return p + __builtin_ctzll(m);
		}
	}
	if (end - p >= 32) {
		if ((m = (uint32_t)_mm256_movemask_epi8(eol_mask32(p))) != 0)
			return p + __builtin_ctzll(m);
		p += 32;
	}
	if (p == end)
		return end;
	m = (uint32_t)_mm256_movemask_epi8(eol_mask32(end - 32)) >> (32 - (end - p));
	return m != 0 ? p + __builtin_ctzll(m) : end;
}
#endif

#endif
