/* util.c: the descriptor table reserved before threads start; the
 * duration text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "util.h"

/* The size of this process's descriptor table, as the kernel reports it. */
static long fd_table_size(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, "FDSize:", 7) == 0)
			n = strtol(line + 7, NULL, 10);
	fclose(f);
	return n;
}

static void test_reserve_grows_the_table(void **state)
{
	struct rlimit rl;
	long before = fd_table_size(), after;
	int fd;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 4096) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	assert_true(before > 0);
	assert_true(before < 2048);     /* a fresh process starts small */
	util_reserve_fds(2048);
	after = fd_table_size();
	assert_true(after >= 2048);
	/* nothing stays open: the next descriptor is a low one */
	fd = dup(0);
	assert_true(fd >= 0 && fd < 64);
	close(fd);
}

static void test_reserve_stops_at_the_limit(void **state)
{
	struct rlimit rl, low;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = 3000;
	if (low.rlim_cur > rl.rlim_max)
		low.rlim_cur = rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	util_reserve_fds(1000000);      /* capped, not refused */
	assert_true(fd_table_size() >= (long)low.rlim_cur);
	assert_true(fd_table_size() < 8192);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

static const char *duration(uint64_t us)
{
	static char buf[32];
	util_duration_text(us, buf, sizeof buf);
	return buf;
}

/* The largest unit that divides the duration, read back as the same
 * number of microseconds. */
static void test_duration_text(void **state)
{
	static const uint64_t us[] = {
		0, 1, 999, 1000, 1500, 999000, 1000000, 1500000, 59000000, 60000000,
		90000000, 300000000, 3540000000ull, 3600000000ull, 5400000000ull,
		86400000000ull, 3600000000001ull, 10000000000000000ull,
	};
	uint64_t back;

	(void)state;
	assert_string_equal(duration(0), "0s");
	assert_string_equal(duration(1), "1us");
	assert_string_equal(duration(1500), "1500us");
	assert_string_equal(duration(1000), "1ms");
	assert_string_equal(duration(1500000), "1500ms");
	assert_string_equal(duration(1000000), "1s");
	assert_string_equal(duration(90000000), "90s");
	assert_string_equal(duration(60000000), "1m");
	assert_string_equal(duration(300000000), "5m");
	assert_string_equal(duration(5400000000ull), "90m");
	assert_string_equal(duration(3600000000ull), "1h");
	assert_string_equal(duration(86400000000ull), "24h");
	for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
		assert_int_equal(util_parse_duration_us(duration(us[i]), &back), 0);
		assert_int_equal(back, us[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_grows_the_table),
		cmocka_unit_test(test_reserve_stops_at_the_limit),
		cmocka_unit_test(test_duration_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
