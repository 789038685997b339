/* SPDX-License-Identifier: Apache-2.0 */
/* The line-end scan against a byte by byte one: every length up to 300
 * (the vector steps, the overlapped last step, the byte by byte tail), an
 * LF, a CR, both or neither at every place, and bytes next to them that
 * differ from them by one bit. Each buffer is its own allocation of exactly
 * its length, so a read past its end shows under ASan and valgrind. */

#include "eol.h"

#include "unit.h"

static const char *naive(const char *s, const char *end)
{
	while (s < end && *s != '\n' && *s != '\r')
		s++;
	return s;
}

/* Every start within the buffer, every scan that this build has. */
static void check_all_starts(const char *b, size_t len)
{
	for (size_t from = 0; from <= len; from++) {
		const char *want = naive(b + from, b + len);

		assert_ptr_equal(eol_find(b + from, b + len), want);
#ifdef EOL_AVX2
		if (eol_has_avx2)
			assert_ptr_equal(eol_find_avx2(b + from, b + len), want);
#endif
	}
}

static char *filled(size_t len, unsigned seed)
{
	/* bytes that are not line ends but near them: 0x0a ^ 1 = 0x0b, 0x0d ^ 1
	 * = 0x0c, 0x8a, 0x8d (the high bit set), and text */
	static const char near[] = { 0x0b, 0x0c, 0x09, (char)0x8a, (char)0x8d, 'a',
	    '"', 0x0e, 0x00 };
	char *b = malloc(len > 0 ? len : 1);

	assert_non_null(b);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		b[i] = near[(seed >> 16) % sizeof near];
	}
	return b;
}

static void test_one_end_anywhere(void **state)
{
	(void)state;
	for (size_t len = 0; len <= 300; len++) {
		char *b = filled(len, (unsigned)len);

		check_all_starts(b, len);           /* none */
		for (size_t at = 0; at < len; at += len > 140 ? 7 : 1) {
			for (int c = 0; c < 2; c++) {
				char keep = b[at];

				b[at] = c ? '\r' : '\n';
				assert_ptr_equal(eol_find(b, b + len), b + at);
#ifdef EOL_AVX2
				if (eol_has_avx2)
					assert_ptr_equal(eol_find_avx2(b, b + len), b + at);
#endif
				b[at] = keep;
			}
		}
		free(b);
	}
}

/* Several ends: each start must find the first at or after it. */
static void test_many_ends(void **state)
{
	(void)state;
	for (unsigned seed = 1; seed <= 60; seed++) {
		size_t len = 1 + (seed * 37) % 260;
		char *b = filled(len, seed);

		for (size_t i = (seed * 13) % len; i < len; i += 1 + (seed % 29))
			b[i] = (i & 1) ? '\n' : '\r';
		check_all_starts(b, len);
		free(b);
	}
}

/* The case the parser meets most: a comment, a data line of 200 bytes,
 * the blank line. */
static void test_an_event(void **state)
{
	static const char ev[] = ": ts=53738772309\ndata: {\"id\":\"chatcmpl-mocke220a8397b1dcdaf\","
	    "\"object\":\"chat.completion.chunk\",\"created\":1796631394,\"model\":\"m\","
	    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\" order\"},"
	    "\"logprobs\":null,\"finish_reason\":null}]}\n\n";
	size_t len = sizeof ev - 1;
	char *b = malloc(len);

	(void)state;
	assert_non_null(b);
	memcpy(b, ev, len);
	assert_ptr_equal(eol_find(b, b + len), b + 16);
	assert_ptr_equal(eol_find(b + 17, b + len), b + len - 2);
	check_all_starts(b, len);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_end_anywhere),
		cmocka_unit_test(test_many_ends),
		cmocka_unit_test(test_an_event),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
