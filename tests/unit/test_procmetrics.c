/* SPDX-License-Identifier: Apache-2.0 */
/* procmetrics.c: the lines and bytes the log files lost (logfile.h), as
 * /metrics and /stats show them. */
#include <fcntl.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "log.h"
#include "logfile.h"
#include "procmetrics.h"
#include "promout.h"

#include "unit.h"

static void test_lost_lines_in_metrics_and_stats(void **state)
{
	struct logfile *l = logfile_of(LOGFILE_ACCESS);
	struct evbuffer *b = evbuffer_new();
	struct promout *o;
	uint64_t lines, bytes;
	char *text, want[200];
	int saved = dup(2), null = open("/dev/null", O_WRONLY);

	(void)state;
	assert_true(saved >= 0 && null >= 0);
	dup2(null, 2);                  /* the warning is test_logfile's */
	assert_int_equal(logfile_open(l, "/dev/full"), 0);
	for (int i = 0; i < 7; i++)
		assert_int_equal(logfile_write(l, "{\"a\":1}\n", 8), -1);
	logfile_close(l);
	dup2(saved, 2);
	close(null);
	close(saved);
	logfile_lost(l, &lines, &bytes);
	assert_int_equal(lines, 7);
	assert_int_equal(bytes, 56);

	o = promout_new(b, 0);
	procmetrics_logs(o);
	assert_int_equal(promout_finish(o), 0);
	text = unit_take(b);
	snprintf(want, sizeof want, "tokentap_log_lines_lost_total{log=\"access\"} %llu\n",
	    (unsigned long long)lines);
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof want, "tokentap_log_bytes_lost_total{log=\"access\"} %llu\n",
	    (unsigned long long)bytes);
	assert_non_null(strstr(text, want));
	assert_non_null(strstr(text, "tokentap_log_lines_lost_total{log=\"stats\"} 0\n"));
	free(text);
	procmetrics_logs_json(b);
	text = unit_take(b);
	assert_string_equal(text, ",\"logs\":{\"access\":{\"lines_lost\":7,\"bytes_lost\":56},"
	    "\"stats\":{\"lines_lost\":0,\"bytes_lost\":0}},\"log_lines_suppressed\":{}");
	free(text);
	evbuffer_free(b);
}

static struct log_limit quiet = LOG_LIMIT_INIT("quiet_kind", 2, 10000);
static struct log_limit loud = LOG_LIMIT_INIT("loud_kind", 2, 10000);

/* Each kind's suppressed lines, from 0 for a kind registered before its
 * first line. */
static void test_suppressed_lines_by_kind(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct promout *o;
	char *text;
	int saved = dup(2), null = open("/dev/null", O_WRONLY);

	(void)state;
	log_limit_register(&quiet);
	dup2(null, 2);
	for (int i = 0; i < 7; i++)
		log_limited(&loud, LOG_LVL_WARN, "loud %d", i);
	dup2(saved, 2);
	close(null);
	close(saved);
	o = promout_new(b, 0);
	procmetrics_logs(o);
	assert_int_equal(promout_finish(o), 0);
	text = unit_take(b);
	assert_non_null(strstr(text, "# TYPE tokentap_log_lines_suppressed_total counter\n"
	    "tokentap_log_lines_suppressed_total{kind=\"quiet_kind\"} 0\n"
	    "tokentap_log_lines_suppressed_total{kind=\"loud_kind\"} 5\n"));
	free(text);
	procmetrics_logs_json(b);
	text = unit_take(b);
	assert_non_null(strstr(text, "},\"log_lines_suppressed\":{\"quiet_kind\":0,"
	    "\"loud_kind\":5}"));
	free(text);
	evbuffer_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_lines_in_metrics_and_stats),
		cmocka_unit_test(test_suppressed_lines_by_kind),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
