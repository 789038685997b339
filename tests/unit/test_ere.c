/* SPDX-License-Identifier: Apache-2.0 */
/* The config's regular expressions: the same verdicts as glibc's
 * regcomp(REG_EXTENDED) anchored whole, on patterns drawn at random and on
 * a table; back-references and expansions past the bound refused at
 * compile time, with where; the cases that took glibc seconds and
 * gigabytes compile and match in a bounded number of steps. */

#include <regex.h>
#include <time.h>

#include "ere.h"
#include "rng.h"

#include "unit.h"

/* glibc's verdict on the whole of s, the pattern wrapped as the config
 * used to wrap it; -1 when glibc does not compile it. */
static int glibc_match(const char *pattern, const char *s)
{
	char anchored[512];
	regex_t re;
	int r;

	snprintf(anchored, sizeof anchored, "^(%s)$", pattern);
	if (regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) != 0)
		return -1;
	r = regexec(&re, s, 0, NULL, 0) == 0;
	regfree(&re);
	return r;
}

static int ere_verdict(const char *pattern, const char *s)
{
	struct ere re;
	char err[200];
	int r;

	if (ere_compile(&re, pattern, err, sizeof err) != 0)
		return -1;
	r = ere_match(&re, s, strlen(s));
	ere_free(&re);
	return r;
}

static void agree(const char *pattern, const char *s)
{
	int want = glibc_match(pattern, s), got = ere_verdict(pattern, s);
	if (want != got) {
		fprintf(stderr, "pattern /%s/ on \"%s\": glibc %d, ere %d\n", pattern, s,
		    want, got);
		fail();
	}
}

static void test_table_agrees_with_glibc(void **state)
{
	static const char *const patterns[] = {
		"team-[a-z]+", "acme|globex", "(a|b)*c", "a{2,3}", "a{,2}b", "a{2,}",
		"x?y+z*", "[[:alpha:]_-]{1,5}", "[^a-c]+", "[]a]+", "[^]a]", "[a-]+",
		"[[.-.]-/]", "[[=e=]]x", "\\w+\\s\\W", "\\S+", "\\bab\\b", "a\\Bb",
		"\\<ab\\>", "ab\\>.*", ".*\\<x", "a\\b.*", "\\`ab\\'", "a\\.b", "a\\{1\\}", "()", "(|a)b", "a||b",
		"^a$", "a^b", "(^a|b)c", "a$|b", "(a*)*", "(a?){3}a{3}", ".*k.*",
		"[[:digit:]]{3}-[[:xdigit:]]+", "[[:punct:][:space:]]+", "a{0}b",
		"(ab|a)(bc|c)", "((a|b)(c|d)){2}", "a}", "a]", "[\\n]",
	};
	static const char *const texts[] = {
		"", "a", "b", "c", "aa", "aaa", "aaaa", "ab", "abc", "team-x", "team-",
		"Team-x", "acme", "globex", "acmeglobex", "xyz", "yy", "xz", "b_-a",
		"abcdef", "d", "]", "]]a", "-", "a-", ".", "e", "ex", "ab ;", "ab_9 x",
		"a.b", "a{1}", "ab", "abcd", "acbd", "123-ff", "12-f", "!? ", "k", "xky",
		"a}", "a]", "\\", "n",
	};

	(void)state;
	for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
		assert_true(ere_verdict(patterns[p], "") >= 0);
		for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++)
			agree(patterns[p], texts[t]);
	}
}

/* A random pattern over a, b and c of the grammar both read alike. */
static void draw(uint64_t *rng, char *out, size_t cap, int depth)
{
	static const char *const atoms[] = { "a", "b", "c", ".", "[ab]", "[^a]",
		"\\w", "x" };
	static const char *const reps[] = { "", "", "", "*", "+", "?", "{2}",
		"{0,2}", "{1,}", "{,3}" };
	unsigned n = 1 + (unsigned)(rng_next(rng) % 4);
	size_t len = strlen(out);

	for (unsigned i = 0; i < n && len + 40 < cap; i++) {
		unsigned k = (unsigned)(rng_next(rng) % 10);
		if (k < 2 && depth < 3) {
			strcat(out, "(");
			draw(rng, out, cap, depth + 1);
			if (rng_next(rng) % 3 == 0) {
				strcat(out, "|");
				draw(rng, out, cap, depth + 1);
			}
			strcat(out, ")");
		} else {
			strcat(out, atoms[rng_next(rng) % (sizeof atoms / sizeof atoms[0])]);
		}
		strcat(out, reps[rng_next(rng) % (sizeof reps / sizeof reps[0])]);
		len = strlen(out);
	}
	if (depth == 0 && rng_next(rng) % 4 == 0) {
		strcat(out, "|");
		draw(rng, out, cap, 1);
	}
}

static void test_random_patterns_agree_with_glibc(void **state)
{
	uint64_t rng = 26;

	(void)state;
	for (int i = 0; i < 3000; i++) {
		char pattern[400] = "", text[12];
		unsigned len = (unsigned)(rng_next(&rng) % 9);

		draw(&rng, pattern, sizeof pattern, 0);
		for (int t = 0; t < 12; t++) {
			for (unsigned j = 0; j < len; j++)
				text[j] = "abcx"[rng_next(&rng) % 4];
			text[len] = '\0';
			agree(pattern, text);
			len = (unsigned)(rng_next(&rng) % 9);
		}
	}
}

static void refused(const char *pattern, const char *why, int offset)
{
	struct ere re;
	char err[200], at[40];

	if (ere_compile(&re, pattern, err, sizeof err) == 0) {
		fprintf(stderr, "/%s/ compiled\n", pattern);
		fail();
	}
	if (strstr(err, why) == NULL) {
		fprintf(stderr, "/%s/: \"%s\" lacks \"%s\"\n", pattern, err, why);
		fail();
	}
	snprintf(at, sizeof at, "(at offset %d)", offset);
	assert_non_null(strstr(err, at));
	assert_null(re.prog);
}

static void test_refusals_say_why_and_where(void **state)
{
	(void)state;
	refused("(.*)(.*)\\2", "back-reference \\2", 8);
	refused("(a)\\1", "back-reference", 3);
	refused("((((a{30}){30}){30}){30}){10}", "more than 4096 positions", 0);
	refused("(a?){5000}", "a count over 255", 4);
	refused("((a?){100}){100}", "more than 4096 positions", 0);
	refused("\\d+", "\\d is not POSIX", 0);
	refused("*a", "repeats nothing", 0);
	refused("a|+", "repeats nothing", 2);
	refused("^*", "after an anchor", 1);
	refused("a{2,1}", "invalid content", 1);
	refused("a{1", "unmatched {", 1);
	refused("(ab", "unmatched (", 0);
	refused("ab)", "unmatched )", 2);
	refused("[ab", "unmatched [", 0);
	refused("[z-a]", "invalid range", 1);
	refused("[[:foo:]]", "unknown character class", 1);
	refused("[[.ab.]]", "not one character", 1);
	refused("ab\\", "trailing backslash", 2);
}

/* The patterns that took glibc seconds: bounded here by construction (a
 * match visits each instruction at most once per byte), so a long value
 * against the largest program allowed is a count, not a timing. */
static void test_pathological_patterns_are_bounded(void **state)
{
	struct ere re;
	char err[200], text[4096];
	struct timespec t0, t1;
	double s;

	(void)state;
	/* the largest: 4,095 instructions of optional a's, then a's */
	assert_int_equal(ere_compile(&re, "(a?){255}(a?){255}(a?){255}(a?){255}"
	    "(a?){255}(a?){255}(a?){255}(a?){255}a{2}", err, sizeof err), 0);
	assert_true(re.n <= ERE_MAX_INST);
	memset(text, 'a', sizeof text);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(ere_match(&re, text, 2042), 1);
	assert_int_equal(ere_match(&re, text, 2043), 0);
	assert_int_equal(ere_match(&re, text, sizeof text), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* 8 k bytes x 4 k instructions: tens of ms; glibc took 16 s on 1 KiB
	 * of (a?){5000}. Generous, for a loaded machine and the sanitizers. */
	assert_true(s < 20.0);
	ere_free(&re);
	/* what glibc backtracks on, less the back-reference */
	assert_int_equal(ere_compile(&re, "(.*)(.*)(.*)(.*)(.*)x", err, sizeof err), 0);
	assert_int_equal(ere_match(&re, text, sizeof text), 0);
	ere_free(&re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_agrees_with_glibc),
		cmocka_unit_test(test_random_patterns_agree_with_glibc),
		cmocka_unit_test(test_refusals_say_why_and_where),
		cmocka_unit_test(test_pathological_patterns_are_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
