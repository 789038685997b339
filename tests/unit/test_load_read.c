/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_read.c: a saved document read back is checked, and
 * what `tokentap-load report` and `compare` do with it (the table, the
 * HTML report, the CSV, the comparison and its rules) reads nothing out
 * of bounds, whatever the document says. The hostile cases found from
 * outside are each a test; then a deterministic mutation run over four
 * real documents (tests/fixtures/load: a run with its gaps, a sweep, a
 * capacity search, a run of conversations) replaces values with hostile numbers, other types and
 * copies, deletes and repeats elements, flips bytes and cuts the text,
 * and reports and compares every document that still reads: under
 * ASan and UBSan (make test's san pass) an out-of-bounds read, an
 * overflowing conversion or a leak fails it. */
#include <math.h>
#include <unistd.h>

#include "load_compare.h"
#include "load_html.h"
#include "load_json.h"
#include "load_read.h"
#include "load_report.h"
#include "rng.h"

#include "unit.h"

static char path[64];
static FILE *devnull;

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(path, "/tmp/test_load_read_XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	devnull = fopen("/dev/null", "w");
	return devnull != NULL ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	fclose(devnull);
	return 0;
}

static char *slurp(const char *name, size_t *len)
{
	FILE *f = fopen(name, "rb");
	char *s;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	s = malloc((size_t)n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return s;
}

static void write_doc(const char *s, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, len, f), len);
	fclose(f);
}

/* Reads path, and when it reads, reports and compares it (with itself and
 * with base, when given) as the commands would. Returns load_read's. */
static int exercise(const struct load_doc *base, char **errs)
{
	struct load_doc d;
	struct load_cmp_opts o;
	char why[200];
	size_t elen;
	FILE *err = open_memstream(errs, &elen);
	int rc;

	assert_non_null(err);
	rc = load_read(&d, path, err);
	fclose(err);
	if (rc < 0)
		return rc;
	load_report_table(devnull, &d.r);
	load_html_write(devnull, &d.r);
	load_csv_write(devnull, &d.r);
	load_cmp_opts_init(&o);
	o.resamples = 40;
	assert_int_equal(load_cmp_parse_rules(&o, "tpot_p50>+10% ttft_p95>+20ms "
	    "error_rate>+1% output_tokens_per_s<-5% itl_p99>+1%", why, sizeof why), 0);
	load_compare(devnull, &d.r, "A", &d.r, "B", &o);
	if (base != NULL) {
		load_compare(devnull, &base->r, "A", &d.r, "B", &o);
		load_compare(devnull, &d.r, "A", &base->r, "B", &o);
	}
	load_doc_free(&d);
	return 0;
}

/* The document name with member key's first value (from the text's
 * start) replaced by repl. */
static char *replace_first(const char *doc, const char *key, const char *repl)
{
	char pat[64];
	const char *at, *end;
	size_t n;
	char *out;

	snprintf(pat, sizeof pat, "\"%s\": ", key);
	at = strstr(doc, pat);
	assert_non_null(at);
	at += strlen(pat);
	end = at + strcspn(at, ",}]\n");
	n = strlen(doc) - (size_t)(end - at) + strlen(repl) + 1;
	out = malloc(n);
	assert_non_null(out);
	snprintf(out, n, "%.*s%s%s", (int)(at - doc), doc, repl, end);
	return out;
}

static int read_with(const char *doc, const char *key, const char *repl, char **errs)
{
	char *s = replace_first(doc, key, repl);
	int rc;

	write_doc(s, strlen(s));
	free(s);
	rc = exercise(NULL, errs);
	return rc;
}

/* The cases found from outside: an index past the levels (a knee of a
 * million read levels[1000000]), spans no chart can scale (a slice of
 * 1e308 s made no tick, and the plot read its ticks[-1]), numbers no
 * integer holds. Each is refused at its FILE:LINE:COL with its member,
 * or read and drawn without a read out of bounds. */
static void test_hostile_members(void **state)
{
	static const struct {
		const char *key, *repl, *error;
	} cases[] = {
		{"knee_level", "1000000", "sweep.knee_level: a level of the document expected"},
		{"saturated_level", "3", "sweep.saturated_level: a level of the document expected"},
		{"knee_level", "-1", "a count (an integer from 0 to"},
		{"slice_s", "1e308", "slice_s: expected a number from 0 to"},
		{"started_s", "1e308", "started_s: expected a number from"},
		{"start_s", "-1e308", "start_s: expected a number from"},
		{"end_s", "1e300", "end_s: expected a number from"},
		{"start_ms", "1e300", "start_ms: expected a number from"},
		{"first_token_ms", "-1e300", "first_token_ms: expected a number from"},
		{"duration_s", "1e300", "duration_s: expected a number from"},
		{"value", "1e300", "value: expected a number from"},
		{"rate", "-5", "rate: expected a number from"},
		{"p50", "1e999", "a number expected"},
		{"mean", "1e300", "mean: expected a number from"},
		{"seq", "18446744073709551616", "a count (an integer from 0 to"},
		{"output_tokens", "1e19", "a count (an integer from 0 to"},
		{"concurrency", "4294967296", "concurrency: a count (an integer from 0 to 4294967295)"},
	};
	size_t len;
	char *doc = slurp("tests/fixtures/load/sweep.json", &len), *errs = NULL;

	(void)state;
	/* what a run writes reads: the largest --seed */
	assert_int_equal(read_with(doc, "seed", "1844674407370955161", &errs), 0);
	free(errs);
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int rc = read_with(doc, cases[i].key, cases[i].repl, &errs);
		if (rc != -1 || strstr(errs, cases[i].error) == NULL)
			fail_msg("%s: %s: rc %d, missing \"%s\" in:\n%s", cases[i].key,
			    cases[i].repl, rc, cases[i].error, errs);
		if (strncmp(errs, path, strlen(path)) != 0)
			fail_msg("no FILE:LINE:COL in:\n%s", errs);
		free(errs);
	}
	free(doc);
}

/* A device or a binary file is refused at its first bytes: /dev/zero was
 * read 1 GiB deep (2 GiB of memory) before it was refused. */
static void test_not_a_document(void **state)
{
	struct load_doc d;
	char *errs = NULL;
	size_t len;
	FILE *err = open_memstream(&errs, &len);

	(void)state;
	assert_int_equal(load_read(&d, "/dev/zero", err), -1);
	write_doc("  \n [1]", 7);
	assert_int_equal(load_read(&d, path, err), -1);
	fclose(err);
	assert_non_null(strstr(errs, "/dev/zero:1:1: a NUL byte: not a JSON document\n"));
	assert_non_null(strstr(errs, ":2:2: a tokentap-load JSON document (an object) "
	    "expected\n"));
	free(errs);
}

/* ---- a deterministic mutation run -------------------------------------- */

struct pos {
	size_t at;
	int in_array;                /* an element of an array */
};

/* Where values start (outside strings): after ':', and after '[' or ','
 * in an array. */
static size_t values(const char *s, size_t n, struct pos *v, size_t max)
{
	char stack[256];
	int depth = 0, str = 0;
	size_t k = 0;

	for (size_t i = 0; i < n && k < max; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				str = 0;
			continue;
		}
		if (c == '"') {
			str = 1;
		} else if (c == '{' || c == '[') {
			if (depth < (int)sizeof stack)
				stack[depth] = c;
			depth++;
		} else if (c == '}' || c == ']') {
			depth--;
		}
		if (c == ':' || c == '[' || (c == ',' && depth > 0 &&
		    depth <= (int)sizeof stack && stack[depth - 1] == '[')) {
			size_t j = i + 1;
			while (j < n && (s[j] == ' ' || s[j] == '\n'))
				j++;
			if (j < n && s[j] != ']' && s[j] != '}')
				v[k++] = (struct pos){ j, c != ':' };
		}
	}
	return k;
}

/* The end of the value that starts at i. */
static size_t value_end(const char *s, size_t n, size_t i)
{
	int depth = 0, str = 0;

	if (i < n && s[i] != '"' && s[i] != '{' && s[i] != '[') {
		while (i < n && strchr(",]}\n ", s[i]) == NULL)
			i++;
		return i;
	}
	for (; i < n; i++) {
		char c = s[i];
		if (str) {
			if (c == '\\')
				i++;
			else if (c == '"' && (str = 0, depth == 0))
				return i + 1;
			continue;
		}
		if (c == '"')
			str = 1;
		else if (c == '{' || c == '[')
			depth++;
		else if ((c == '}' || c == ']') && --depth == 0)
			return i + 1;
	}
	return n;
}

static const char *const hostile[] = {
	"1e308", "-1e308", "1.7976931348623157e308", "4.9e-324", "1e18", "-1e18",
	"9223372036854775807", "9223372036854775808", "18446744073709551615", "1e19",
	"-1", "-0", "0", "0.5", "1.5", "2", "3", "7", "101", "65536", "4294967295",
	"4294967296", "2147483647", "2147483648", "1000000", "1e999", "null", "true",
	"\"x\"", "\"\"", "\"ok\"", "\"concurrency\"", "\"rate\"", "\"ttft_p95\"", "[]",
	"{}", "[1e308, -1e308]", "[0]", "[null]", "{\"count\": 1e18}",
	"\"\\u0000\\uffff\\ud800\"",
};

/* Replaces s[a..b) with r (rn bytes). */
static void splice(char **s, size_t *n, size_t a, size_t b, const char *r, size_t rn)
{
	char *o = malloc(*n - (b - a) + rn + 1);

	assert_non_null(o);
	memcpy(o, *s, a);
	memcpy(o + a, r, rn);
	memcpy(o + a + rn, *s + b, *n - b);
	*n = *n - (b - a) + rn;
	o[*n] = '\0';
	free(*s);
	*s = o;
}

static void mutate(char **s, size_t *n, uint64_t *rng, struct pos *v, size_t vmax)
{
	size_t nv = values(*s, *n, v, vmax), a, b, k = nv ? rng_next(rng) % nv : 0;
	unsigned what = (unsigned)(rng_next(rng) % 8);

	if (nv == 0 || *n == 0)
		return;
	a = v[k].at;
	b = value_end(*s, *n, a);
	switch (what) {
	case 0:
	case 1:
	case 2: {                            /* a hostile value */
		const char *r = hostile[rng_next(rng) % (sizeof hostile / sizeof *hostile)];
		splice(s, n, a, b, r, strlen(r));
		break;
	}
	case 3:                              /* an element gone */
		if (v[k].in_array) {
			if (b < *n && (*s)[b] == ',')
				b++;
			splice(s, n, a, b, "", 0);
		}
		break;
	case 4: {                            /* an element twice */
		char *copy;
		if (!v[k].in_array)
			break;
		copy = malloc(b - a + 2);
		assert_non_null(copy);
		memcpy(copy, *s + a, b - a);
		copy[b - a] = ',';
		splice(s, n, a, a, copy, b - a + 1);
		free(copy);
		break;
	}
	case 5: {                            /* a byte of another kind */
		static const char set[] = "{}[],:\"0123456789-.eE\\ntfx \n";
		char c = set[rng_next(rng) % (sizeof set - 1)];
		a = rng_next(rng) % *n;
		splice(s, n, a, a + 1, &c, 1);
		break;
	}
	case 6:                              /* cut short */
		if (rng_next(rng) % 8 == 0)
			*n = rng_next(rng) % *n;
		break;
	default: {                           /* a digit more, or a sign */
		const char *r = rng_next(rng) % 2 ? "9" : "-";
		splice(s, n, a, a, r, 1);
		break;
	}
	}
}

/* Each fixture, mutated 1 to 3 times a round, 400 rounds each: every
 * document read is reported and compared, the rest refused with their
 * FILE:LINE:COL. About 1 s plain, 5 s under ASan and UBSan; a longer
 * run: $TOKENTAP_LOAD_READ_ROUNDS rounds from $TOKENTAP_LOAD_READ_SEED. */
static void test_mutations(void **state)
{
	static const char *const fixtures[] = {"tests/fixtures/load/run.json",
		"tests/fixtures/load/sweep.json", "tests/fixtures/load/capacity.json",
		"tests/fixtures/load/conversation.json"};
	enum { VMAX = 1 << 16 };
	const char *env = getenv("TOKENTAP_LOAD_READ_ROUNDS");
	size_t rounds = env != NULL ? (size_t)strtoul(env, NULL, 10) : 400;
	uint64_t seed0 = getenv("TOKENTAP_LOAD_READ_SEED") != NULL ?
	    strtoull(getenv("TOKENTAP_LOAD_READ_SEED"), NULL, 0) : 0x5eed0000u;
	struct pos *v = malloc(VMAX * sizeof(*v));
	size_t read_ok = 0, refused = 0;

	(void)state;
	assert_non_null(v);
	for (size_t f = 0; f < sizeof fixtures / sizeof *fixtures; f++) {
		struct load_doc base;
		size_t len;
		char *seed = slurp(fixtures[f], &len), *errs = NULL;
		uint64_t rng = seed0 + f;

		write_doc(seed, len);
		assert_int_equal(exercise(NULL, &errs), 0);
		free(errs);
		assert_int_equal(load_read(&base, path, stderr), 0);
		for (size_t round = 0; round < rounds; round++) {
			size_t n = len, times = 1 + rng_next(&rng) % 3;
			char *s = malloc(len + 1);
			assert_non_null(s);
			memcpy(s, seed, len + 1);
			for (size_t t = 0; t < times; t++)
				mutate(&s, &n, &rng, v, VMAX);
			write_doc(s, n);
			if (exercise(&base, &errs) == 0) {
				read_ok++;
			} else {
				refused++;
				if (strncmp(errs, path, strlen(path)) != 0)
					fail_msg("round %zu of %s: no FILE:LINE:COL in:\n%s", round,
					    fixtures[f], errs);
			}
			free(errs);
			free(s);
		}
		load_doc_free(&base);
		free(seed);
	}
	free(v);
	/* both ways were taken often */
	print_message("mutations: %zu read, %zu refused\n", read_ok, refused);
	assert_true(rounds < 400 || (read_ok > 200 && refused > 200));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hostile_members, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_document, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mutations, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
