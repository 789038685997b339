/* util.c: the descriptor table reserved before threads start. */
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"

#include "unit.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserve_grows_the_table),
		cmocka_unit_test(test_reserve_stops_at_the_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
