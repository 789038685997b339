/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_trace.c (and load_jsonl.c under it, and
 * load_prompts.c, which reads the same way): a JSONL trace, tokentap's
 * access log replayed as one (arrival = ts - duration_ms), prompts of a
 * file, and every problem at its FILE:LINE:COL. */
#include <math.h>
#include <unistd.h>

#include "load_prompts.h"
#include "load_trace.h"

#include "unit.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	strcpy(path, "/tmp/test_load_trace_XXXXXX");
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

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* Reads path as a trace (log: as an access log); the errors in *errs. */
static int read_trace(const char *text, int log, const char *route,
    struct load_trace *t, char **errs)
{
	size_t len;
	FILE *err = open_memstream(errs, &len);
	int rc;

	write_file(text);
	rc = log ? load_trace_read_access_log(t, path, route, err) :
	    load_trace_read(t, path, err);
	fclose(err);
	return rc;
}

static void has_error(const char *errs, size_t line, size_t col, const char *msg)
{
	char want[512];

	snprintf(want, sizeof want, "%s:%zu:%zu: %s", path, line, col, msg);
	if (strstr(errs, want) == NULL)
		fail_msg("missing \"%s\" in:\n%s", want, errs);
}

static void test_trace(void **state)
{
	struct load_trace t;
	char *errs = NULL;

	(void)state;
	assert_int_equal(read_trace(
	    "{\"offset_ms\": 250, \"prompt_tokens\": 512, \"output_tokens\": 64}\n"
	    "\n"
	    "{\"offset_ms\": 0.5, \"output_tokens\": 8, \"headers\": {\"X-Tenant-Id\": \"a\"}}\n"
	    "{\"timestamp\": 100, \"input_length\": 7, \"output_length\": 9, \"hash_ids\": [1]}\n",
	    0, NULL, &t, &errs), 0);
	assert_string_equal(errs, "");
	free(errs);
	assert_int_equal(t.n, 3);
	/* sorted, from the first */
	assert_int_equal(t.v[0].offset_us, 0);
	assert_int_equal(t.v[0].max_tokens, 8);
	assert_int_equal(t.v[0].prompt_tokens, 0);
	assert_int_equal(t.v[0].nheaders, 1);
	assert_string_equal(t.v[0].headers[0].value, "a");
	assert_int_equal(t.v[0].line, 3);
	assert_int_equal(t.v[1].offset_us, 99500);
	assert_int_equal(t.v[1].prompt_tokens, 7);
	assert_int_equal(t.v[2].offset_us, 249500);
	assert_int_equal(load_trace_span_us(&t), 249500);
	assert_false(t.access_log);
	load_trace_free(&t);

	/* every problem, each where it is */
	assert_int_equal(read_trace(
	    "{\"offset_ms\": 1}\n"
	    "{\"offset_ms\": 2,, }\n"
	    "{\"ofset_ms\": 3}\n"
	    "{\"offset_ms\": -1}\n"
	    "{\"offset_ms\": 4, \"output_tokens\": 2.5}\n"
	    "[1, 2]\n"
	    "{\"prompt_tokens\": 3}\n"
	    "{\"offset_ms\": 5, \"headers\": {\"Bad Name\": \"x\"}}\n"
	    "{\"offset_ms\": 6} {\"offset_ms\": 7}\n"
	    "{\"offset_ms\": 8\n",
	    0, NULL, &t, &errs), -1);
	has_error(errs, 2, 17, "a member name (a string) expected");
	has_error(errs, 3, 2, "unknown key 'ofset_ms'; did you mean 'offset_ms'?");
	has_error(errs, 4, 15, "offset_ms: expected a time in ms from 0");
	has_error(errs, 5, 35, "output_tokens: expected a whole number of tokens");
	has_error(errs, 6, 1, "expected a JSON object");
	has_error(errs, 7, 1, "no \"offset_ms\"");
	has_error(errs, 8, 30, "headers: bad character in header name");
	has_error(errs, 9, 18, "more than one JSON value on the line");
	has_error(errs, 10, 16, "JSON cut short");
	assert_int_equal(t.n, 0);
	free(errs);

	assert_int_equal(read_trace("\n\n", 0, NULL, &t, &errs), -1);
	has_error(errs, 1, 1, "no requests");
	free(errs);
}

/* tokentap's access log: the line is written at the end, so the request
 * arrived duration_ms before ts; its token counts are the ones to ask. */
static void test_access_log(void **state)
{
	struct load_trace t;
	char *errs = NULL;
	double ms;

	(void)state;
	assert_int_equal(read_trace(
	    "{\"ts\":\"2026-11-29T16:04:31.500Z\",\"route\":\"chat\",\"duration_ms\":1500,"
	    "\"input_tokens\":120,\"output_tokens\":30,\"status\":200}\n"
	    "{\"ts\":\"2026-11-29T16:04:30.100Z\",\"route\":\"chat\",\"duration_ms\":80.25,"
	    "\"input_tokens\":null,\"output_tokens\":5}\n"
	    "{\"ts\":\"2026-11-29T16:04:30.000Z\",\"route\":\"other\",\"duration_ms\":1,"
	    "\"input_tokens\":1,\"output_tokens\":1}\n"
	    "{\"ts\":\"2026-11-29T16:04:32.000Z\",\"route\":\"chat\",\"duration_ms\":null,"
	    "\"input_tokens\":3,\"output_tokens\":null}\n",
	    1, "chat", &t, &errs), 0);
	assert_string_equal(errs, "");
	free(errs);
	assert_true(t.access_log);
	assert_int_equal(t.n, 3);
	/* arrivals 30.000 (31.5 - 1.5), 30.01975, 32.000 */
	assert_int_equal(t.v[0].offset_us, 0);
	assert_int_equal(t.v[0].prompt_tokens, 120);
	assert_int_equal(t.v[0].max_tokens, 30);
	assert_int_equal(t.v[1].offset_us, 19750);
	assert_int_equal(t.v[1].prompt_tokens, 0);
	assert_int_equal(t.v[1].max_tokens, 5);
	assert_int_equal(t.v[2].offset_us, 2000000);
	assert_int_equal(t.v[2].max_tokens, 0);
	load_trace_free(&t);

	assert_int_equal(read_trace("{\"ts\":\"yesterday\"}\n{\"ts\":\"2026-11-29T16:04:31Z\","
	    "\"duration_ms\":\"x\"}\n", 1, NULL, &t, &errs), -1);
	has_error(errs, 1, 7, "ts: expected an RFC 3339 time");
	has_error(errs, 2, 44, "duration_ms: expected a number >= 0 or null");
	free(errs);

	assert_int_equal(load_trace_rfc3339_ms("1970-01-02T00:00:01.25Z", &ms), 0);
	assert_true(ms == 86401250);
	assert_int_equal(load_trace_rfc3339_ms("2026-02-30T00:00:00Z", &ms), 0);
	assert_int_equal(load_trace_rfc3339_ms("2026-13-01T00:00:00Z", &ms), -1);
	assert_int_equal(load_trace_rfc3339_ms("2026-01-01T00:00:00+01:00", &ms), -1);
}

static void test_prompts(void **state)
{
	struct load_prompts p;
	char *errs = NULL;
	size_t len;
	FILE *err;

	(void)state;
	write_file("\"just a string prompt\"\n"
	    "{\"text\": \"abcdefgh\", \"max_tokens\": 12}\n"
	    "{\"messages\": [{\"role\": \"system\", \"content\": \"be \\\"brief\\\"\"},"
	    " {\"role\": \"user\", \"content\": \"hi\"}]}\n");
	err = open_memstream(&errs, &len);
	assert_int_equal(load_prompts_read(&p, path, err), 0);
	fclose(err);
	assert_string_equal(errs, "");
	free(errs);
	assert_int_equal(p.n, 3);
	assert_string_equal(p.v[0].text, "just a string prompt");
	assert_int_equal(p.v[0].tokens, 5);
	assert_null(p.v[0].messages);
	assert_int_equal(p.v[1].max_tokens, 12);
	assert_int_equal(p.v[1].tokens, 2);
	assert_string_equal(p.v[2].messages, "[{\"role\":\"system\",\"content\":"
	    "\"be \\\"brief\\\"\"},{\"role\":\"user\",\"content\":\"hi\"}]");
	assert_string_equal(p.v[2].text, "be \"brief\"\n\nhi");
	load_prompts_free(&p);

	write_file("{\"txt\": \"a\"}\n{\"messages\": [{\"role\": \"user\", \"content\": "
	    "[{\"type\": \"text\"}]}]}\n42\n{\"text\": \"a\", \"max_tokens\": 0}\n");
	err = open_memstream(&errs, &len);
	assert_int_equal(load_prompts_read(&p, path, err), -1);
	fclose(err);
	has_error(errs, 1, 2, "unknown key");
	has_error(errs, 2, 15, "messages: each message is");
	has_error(errs, 3, 1, "expected a string or an object");
	has_error(errs, 4, 29, "max_tokens: expected a whole number from 1");
	free(errs);
}

/* A trace in reverse order is put in order in O(n log n): 1,000,000 lines
 * took the insertion sort about 4 minutes (400,000: 37 s), a second or two
 * now; the alarm (120 s, SIGALRM's default action ends the test) fails
 * the test long before the old way would have finished, and far after
 * the new one does, even under ASan on a busy host. Equal arrivals keep
 * the file's order. */
static void test_reversed_trace(void **state)
{
	const size_t n = 1000000;
	struct load_trace t;
	char *errs = NULL;
	size_t len;
	FILE *f = fopen(path, "w"), *err;

	(void)state;
	assert_non_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "{\"offset_ms\":%zu,\"output_tokens\":%zu}\n", (n - 1 - i) / 2,
		    i % 2);
	fclose(f);
	err = open_memstream(&errs, &len);
	alarm(120);
	assert_int_equal(load_trace_read(&t, path, err), 0);
	alarm(0);
	fclose(err);
	free(errs);
	assert_int_equal(t.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(t.v[i].offset_us, i / 2 * 1000);
		/* the pair's first line asked 0 tokens, its second 1 */
		assert_int_equal(t.v[i].max_tokens, i % 2);
		assert_int_equal(t.v[i].line, n - (i / 2) * 2 - 1 + i % 2);
	}
	load_trace_free(&t);
}

/* A line is read up to 64 MiB and no further: a file without a newline
 * (/dev/zero: getline read 2 GiB of it before the line's length was
 * checked, then said "no requests") is an error at its line, for a trace,
 * an access log and prompts alike; so is a line of 64 MiB and a byte
 * after a good one. */
static void test_line_limit(void **state)
{
	struct load_trace t;
	struct load_prompts p;
	char *errs = NULL;
	size_t len;
	FILE *f, *err;

	(void)state;
	err = open_memstream(&errs, &len);
	alarm(120);
	assert_int_equal(load_trace_read(&t, "/dev/zero", err), -1);
	assert_int_equal(load_trace_read_access_log(&t, "/dev/zero", NULL, err), -1);
	assert_int_equal(load_prompts_read(&p, "/dev/zero", err), -1);
	alarm(0);
	fclose(err);
	assert_non_null(strstr(errs, "/dev/zero:1:1: a line longer than 64 MiB"));
	assert_null(strstr(errs, "no requests"));
	free(errs);

	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"offset_ms\": 0}\n", f);
	fputs("{\"offset_ms\": 1, \"x\": \"", f);
	for (size_t i = 0; i < 64 * 1024; i++)
		fprintf(f, "%01024d", 0);
	fputs("\"}\n{\"offset_ms\": 2}\n", f);
	fclose(f);
	err = open_memstream(&errs, &len);
	assert_int_equal(load_trace_read(&t, path, err), -1);
	fclose(err);
	has_error(errs, 2, 1, "a line longer than 64 MiB");
	free(errs);
}

/* Spans a replay would wait out are refused, each at FILE:LINE:COL with
 * its field: offsets past 30 days (1e12 ms was taken: 31 years), an
 * access log's ts before 1970 or past 2099 (year 1 replayed the years to
 * 2026), a duration over a day (1e300 ms), a log spanning more than 30
 * days; a number past a double's range is no number. */
static void test_absurd_spans(void **state)
{
	struct load_trace t;
	char *errs = NULL, want[512];

	(void)state;
	assert_int_equal(read_trace(
	    "{\"offset_ms\": 0}\n"
	    "{\"offset_ms\": 1e12}\n"
	    "{\"timestamp\": 2592000001}\n"
	    "{\"offset_ms\": 1e999}\n",
	    0, NULL, &t, &errs), -1);
	has_error(errs, 2, 15, "offset_ms: expected a time in ms from 0 to 2592000000 "
	    "(30 days)");
	has_error(errs, 3, 15, "offset_ms: expected a time in ms from 0 to 2592000000");
	has_error(errs, 4, 15, "offset_ms: expected a time in ms from 0 to 2592000000");
	free(errs);
	/* 30 days exactly is a trace */
	assert_int_equal(read_trace("{\"offset_ms\": 2592000000}\n{\"offset_ms\": 0}\n",
	    0, NULL, &t, &errs), 0);
	assert_int_equal(t.v[1].offset_us, 2592000000000ull);
	free(errs);
	/* and so it lasts at --trace-speed 1, but not slower */
	{
		size_t len;
		FILE *err = open_memstream(&errs, &len);
		assert_int_equal(load_trace_check_speed(&t, 1, err), 0);
		assert_int_equal(load_trace_check_speed(&t, 0.5, err), -1);
		fclose(err);
		snprintf(want, sizeof want, "%s: at --trace-speed 0.5 the requests span 60.0 "
		    "days; a replay spans at most 30\n", path);
		assert_string_equal(errs, want);
		free(errs);
	}
	load_trace_free(&t);

	assert_int_equal(read_trace(
	    "{\"ts\":\"0001-01-01T00:00:00Z\",\"duration_ms\":1}\n"
	    "{\"ts\":\"9999-12-31T23:59:59Z\",\"duration_ms\":1}\n"
	    "{\"ts\":\"1969-12-31T23:59:59.999Z\"}\n"
	    "{\"ts\":\"2026-11-29T16:04:31Z\",\"duration_ms\":1e300}\n"
	    "{\"ts\":\"2026-11-29T16:04:31Z\",\"duration_ms\":86400001}\n"
	    "{\"ts\":\"2026-11-29T16:04:31Z\",\"output_tokens\":-1e999}\n",
	    1, NULL, &t, &errs), -1);
	has_error(errs, 1, 7, "ts: expected a time from 1970 to 2099");
	has_error(errs, 2, 7, "ts: expected a time from 1970 to 2099");
	has_error(errs, 3, 7, "ts: expected a time from 1970 to 2099");
	has_error(errs, 4, 44, "duration_ms: expected at most 86400000 (a day)");
	has_error(errs, 5, 44, "duration_ms: expected at most 86400000 (a day)");
	has_error(errs, 6, 46, "output_tokens: expected a number >= 0 or null");
	free(errs);

	/* every line fine, but 31 days from the first to the last */
	assert_int_equal(read_trace(
	    "{\"ts\":\"2026-01-01T00:00:00Z\"}\n"
	    "{\"ts\":\"2026-02-01T00:00:00Z\"}\n"
	    "{\"ts\":\"2025-12-31T23:59:59Z\",\"duration_ms\":3600000}\n",
	    1, NULL, &t, &errs), -1);
	has_error(errs, 2, 1, "the requests span 31.0 days, from line 3 to this one; a "
	    "replay spans at most 30");
	free(errs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_trace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_access_log, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prompts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reversed_trace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_line_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_absurd_spans, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
