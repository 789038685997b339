/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_session.c: think times and turn counts in their text
 * forms and their draws, a JSONL session trace (turns interleaved, sessions
 * by start, every problem at FILE:LINE:COL) and ShareGPT's JSON. */
#include <math.h>
#include <unistd.h>

#include "load_session.h"

#include "unit.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(path, "/tmp/test_load_session_XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* Reads text as a session trace (or ShareGPT); the errors in *errs. */
static int read_text(const char *text, int sharegpt, struct load_sessions *s, char **errs)
{
	size_t len;
	FILE *f = fopen(path, "w"), *err;
	int rc;

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	err = open_memstream(errs, &len);
	rc = sharegpt ? load_sessions_read_sharegpt(s, path, err) :
	    load_sessions_read(s, path, err);
	fclose(err);
	return rc;
}

static void has_error(const char *errs, const char *where_msg)
{
	char want[512];

	snprintf(want, sizeof want, "%s:%s", path, where_msg);
	if (strstr(errs, want) == NULL)
		fail_msg("wanted '%s' in:\n%s", want, errs);
}

static void test_think(void **state)
{
	struct load_think t;
	const char *err = NULL;
	char name[64];
	uint64_t rng = 1, lo = UINT64_MAX, hi = 0;
	double sum = 0;

	(void)state;
	assert_int_equal(load_think_parse("1500ms", &t, &err), 0);
	assert_int_equal(t.kind, LOAD_THINK_CONST);
	assert_int_equal(load_think_draw(&t, &rng), 1500000);
	load_think_name(&t, name, sizeof name);
	assert_string_equal(name, "1500ms");
	assert_int_equal(load_think_parse("uniform:1s-3s", &t, &err), 0);
	load_think_name(&t, name, sizeof name);
	assert_string_equal(name, "uniform:1s-3s");
	for (int i = 0; i < 10000; i++) {
		uint64_t v = load_think_draw(&t, &rng);
		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	assert_true(lo >= 1000000 && lo < 1010000 && hi <= 3000000 && hi > 2990000);
	assert_int_equal(load_think_parse("exp:2s", &t, &err), 0);
	for (int i = 0; i < 100000; i++)
		sum += (double)load_think_draw(&t, &rng);
	/* the mean of 100,000 exponential draws: within 2 % (7 sigma) */
	assert_true(fabs(sum / 100000 - 2e6) < 4e4);
	const char *bad[] = {"", "x", "uniform:", "uniform:3s-1s", "uniform:1s", "exp:",
	    "exp:-1s", "2d", "uniform:1s-2days"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		err = NULL;
		assert_int_equal(load_think_parse(bad[i], &t, &err), -1);
		assert_non_null(err);
	}
}

static void test_turns(void **state)
{
	struct load_range r;
	const char *err = NULL;

	(void)state;
	assert_int_equal(load_session_parse_turns("3", &r, &err), 0);
	assert_true(r.min == 3 && r.max == 3);
	assert_int_equal(load_session_parse_turns("2-5", &r, &err), 0);
	assert_true(r.min == 2 && r.max == 5);
	assert_int_equal(load_session_parse_turns("uniform:1-1000", &r, &err), 0);
	assert_true(r.min == 1 && r.max == 1000);
	const char *bad[] = {"0", "0-3", "1001", "5-2", "uniform:", "x", ""};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		assert_int_equal(load_session_parse_turns(bad[i], &r, &err), -1);
}

static void test_trace(void **state)
{
	struct load_sessions s;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text(
	    "{\"session_id\": \"late\", \"turn\": 1, \"delay_ms\": 50, \"prompt\": \"a\\u00e9\\\"\"}\n"
	    "\n"
	    "{\"session_id\": 7, \"turn\": 1, \"prompt_tokens\": 40, \"max_tokens\": 6}\n"
	    "{\"session_id\": \"late\", \"turn\": 2, \"delay_ms\": 1.5, \"prompt\": \"b\"}\n"
	    "{\"session_id\": 7, \"turn\": 2}\n"
	    "{\"session_id\": 7, \"turn\": 3, \"messages\": [{\"role\": \"tool\", "
	    "\"content\": \"42\"}, {\"role\": \"user\", \"content\": \"and?\"}]}\n",
	    0, &s, &errs), 0);
	assert_string_equal(errs, "");
	assert_int_equal(s.n, 2);
	assert_int_equal(s.turns, 5);
	assert_false(s.sharegpt);
	/* by start: session 7 (0) before "late" (50 ms) */
	assert_string_equal(s.v[0].id, "7");
	assert_int_equal(s.v[0].start_us, 0);
	assert_int_equal(s.v[0].n, 3);
	assert_int_equal(s.v[0].v[2].nmsgs, 2);
	assert_string_equal(s.v[0].v[2].msgs[0].role, "tool");
	assert_string_equal(s.v[0].v[2].msgs[1].content, "and?");
	assert_int_equal(s.v[0].v[2].msgs[1].content_len, 4);
	assert_null(s.v[0].v[0].text);
	assert_int_equal(s.v[0].v[0].prompt_tokens, 40);
	assert_int_equal(s.v[0].v[0].max_tokens, 6);
	assert_int_equal(s.v[0].v[1].delay_us, -1);
	assert_int_equal(s.v[0].v[1].line, 5);
	assert_string_equal(s.v[1].id, "late");
	assert_int_equal(s.v[1].start_us, 50000);
	assert_int_equal(s.v[1].v[0].text_len, 4);
	assert_memory_equal(s.v[1].v[0].text, "a\xc3\xa9\"", 4);
	assert_int_equal(s.v[1].v[1].delay_us, 1500);
	load_sessions_free(&s);
	free(errs);
}

static void test_trace_problems(void **state)
{
	struct load_sessions s;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text(
	    "{\"session_id\": \"a\", \"turn\": 2}\n"
	    "{\"session_id\": \"a\", \"turn\": 1, \"promt\": \"x\"}\n"
	    "{\"session_id\": \"a\", \"turn\": 1, \"prompt\": \"x\", \"prompt_tokens\": 3}\n"
	    "{\"turn\": 1}\n"
	    "{\"session_id\": \"b\", \"turn\": 1, \"delay_ms\": -1}\n"
	    "{\"session_id\": \"b\", \"turn\": 1.5}\n"
	    "{\"session_id\": \"b\", \"turn\": 1, \"max_tokens\": 0}\n"
	    "[1]\n"
	    "{\"session_id\": \"b\",\n"
	    "{\"session_id\": \"c\", \"turn\": 1, \"messages\": [{\"role\": \"user\"}]}\n"
	    "{\"session_id\": \"c\", \"turn\": 1, \"messages\": []}\n", 0, &s, &errs), -1);
	has_error(errs, "1:1: session 'a': turn 2 after 0");
	has_error(errs, "2:32: unknown key 'promt'; did you mean 'prompt'?");
	has_error(errs, "3:1: \"prompt\", \"prompt_tokens\" or \"messages\": one of them");
	has_error(errs, "4:1: a turn needs \"session_id\" and \"turn\"");
	has_error(errs, "5:44: delay_ms: expected a time in ms");
	has_error(errs, "6:29: turn: expected a whole number from 1 to 1000");
	has_error(errs, "7:46: max_tokens: expected a whole number");
	has_error(errs, "8:1: expected a JSON object");
	has_error(errs, "9:20: JSON cut short");
	has_error(errs, "10:45: messages: expected an array of {\"role\"");
	has_error(errs, "11:44: messages: expected an array of {\"role\"");
	assert_int_equal(s.n, 0);
	assert_null(s.v);
	free(errs);
	errs = NULL;
	assert_int_equal(read_text("\n", 0, &s, &errs), -1);
	assert_non_null(strstr(errs, "no session in it"));
	free(errs);
}

static void test_sharegpt(void **state)
{
	struct load_sessions s;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_text(
	    "[{\"id\": \"x\", \"conversations\": [\n"
	    "  {\"from\": \"system\", \"value\": \"be brief\"},\n"
	    "  {\"from\": \"human\", \"value\": \"hi\\tthere\"},\n"
	    "  {\"from\": \"gpt\", \"value\": \"123456789\"},\n"
	    "  {\"from\": \"human\", \"value\": \"more\"}]},\n"
	    " {\"conversations\": [{\"from\": \"gpt\", \"value\": \"no question\"}]},\n"
	    " {\"conversations\": [{\"from\": \"user\", \"value\": \"q\"},\n"
	    "  {\"from\": \"assistant\", \"value\": \"\"}]}]\n", 1, &s, &errs), 0);
	assert_string_equal(errs, "");
	assert_true(s.sharegpt);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.turns, 3);
	assert_int_equal(s.v[0].n, 2);
	assert_memory_equal(s.v[0].v[0].text, "hi\tthere", 8);
	/* 9 characters: 3 tokens; the last turn has no recorded answer */
	assert_int_equal(s.v[0].v[0].max_tokens, 3);
	assert_int_equal(s.v[0].v[1].max_tokens, 0);
	assert_int_equal(s.v[0].v[1].line, 5);
	assert_int_equal(s.v[0].v[0].delay_us, -1);
	assert_int_equal(s.v[1].n, 1);
	assert_int_equal(s.v[1].v[0].max_tokens, 1);
	load_sessions_free(&s);
	free(errs);
	errs = NULL;
	assert_int_equal(read_text("[{\"conversations\": [{\"from\": \"human\"}]},\n"
	    " {\"conversations\": 3},\n {\"conversations\": [{\"from\": 1, \"value\": \"x\"}]}]",
	    1, &s, &errs), -1);
	has_error(errs, "1:21: a message needs \"from\" and \"value\"");
	has_error(errs, "2:2: expected an object with a \"conversations\" array");
	has_error(errs, "3:30: expected a string");
	free(errs);
	errs = NULL;
	assert_int_equal(read_text("[{\"conversations\": [\n", 1, &s, &errs), -1);
	has_error(errs, "2:1: ");
	free(errs);
	errs = NULL;
	assert_int_equal(read_text("{}", 1, &s, &errs), -1);
	has_error(errs, "1:1: expected ShareGPT's array of conversations");
	free(errs);
}

/* The fixtures cut at every byte: each read is whole or refused with a
 * FILE:LINE:COL, never a crash or a leak (ASan, LeakSanitizer). */
static void test_cuts(void **state)
{
	static const char *const files[] = {"tests/fixtures/sessions.jsonl",
		"tests/fixtures/sharegpt.json"};

	(void)state;
	for (int k = 0; k < 2; k++) {
		FILE *f = fopen(files[k], "r");
		char text[8192];
		size_t len;

		assert_non_null(f);
		len = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		assert_true(len > 100 && len < sizeof text - 1);
		for (size_t n = 0; n <= len; n++) {
			struct load_sessions s;
			char *errs = NULL, save = text[n];
			int rc;

			text[n] = '\0';
			rc = read_text(text, k, &s, &errs);
			text[n] = save;
			if (rc == 0) {
				assert_true(s.n > 0 && s.turns > 0);
				load_sessions_free(&s);
			} else {
				assert_non_null(strstr(errs, path));
				assert_int_equal(s.n, 0);
			}
			free(errs);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_think),
		cmocka_unit_test(test_turns),
		cmocka_unit_test_setup_teardown(test_trace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_problems, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sharegpt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cuts, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
