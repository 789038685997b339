/* SPDX-License-Identifier: Apache-2.0 */
/* logfile.c: a line is in the file whole or not at all, lost lines and
 * bytes are counted, the warning comes at most once a LOGFILE_WARN_EVERY_S.
 * The file runs out of room through RLIMIT_FSIZE (the write past the
 * limit is short, the next fails with EFBIG: the two outcomes of a write
 * on a disk that fills, ENOSPC) and /dev/full (ENOSPC itself). */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logfile.h"

#include "unit.h"

static char path[] = "/tmp/tt-logfile-XXXXXX";
static char err_path[] = "/tmp/tt-logfile-err-XXXXXX";
static int saved_stderr = -1;

/* stderr into a file of its own, to count the warnings */
static void capture_stderr(void)
{
	int fd = mkstemp(err_path);
	assert_true(fd >= 0);
	saved_stderr = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	close(fd);
}

/* stderr back; the warnings that came, counted by a part of them */
static int release_stderr(const char *part)
{
	char buf[65536];
	ssize_t n;
	int fd, count = 0;

	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	fd = open(err_path, O_RDONLY);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	unlink(err_path);
	strcpy(err_path, "/tmp/tt-logfile-err-XXXXXX");
	buf[n > 0 ? n : 0] = '\0';
	for (char *p = buf; (p = strstr(p, part)) != NULL; p++)
		count++;
	return count;
}

static void set_fsize(rlim_t limit)
{
	struct rlimit r;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &r), 0);
	r.rlim_cur = limit;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &r), 0);
}

/* A line of n bytes, the newline in them. */
static void line(char *buf, size_t n, int i)
{
	memset(buf, 'a' + i % 26, n - 1);
	buf[n - 1] = '\n';
}

static void test_whole_lines_and_counts(void **state)
{
	struct logfile *l = logfile_of(LOGFILE_STATS);
	uint64_t lines0, bytes0, lines, bytes;
	char buf[100];
	struct stat st;
	int fd;

	(void)state;
	signal(SIGXFSZ, SIG_IGN);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	logfile_lost(l, &lines0, &bytes0);
	assert_int_equal(logfile_open(l, path), 0);
	assert_true(logfile_enabled(l));
	/* room for 10 lines and half of the 11th */
	set_fsize(1050);
	capture_stderr();
	for (int i = 0; i < 300; i++) {
		line(buf, sizeof buf, i);
		assert_int_equal(logfile_write(l, buf, sizeof buf), i < 10 ? 0 : -1);
	}
	assert_int_equal(release_stderr("stats file"), 1);     /* not one a line */
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1000);                    /* the half line cut */
	logfile_lost(l, &lines, &bytes);
	assert_int_equal(lines - lines0, 290);
	assert_int_equal(bytes - bytes0, 290 * sizeof buf);
	/* room again: the next line starts a line */
	set_fsize(RLIM_INFINITY);
	line(buf, sizeof buf, 0);
	assert_int_equal(logfile_write(l, buf, sizeof buf), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1100);
	{
		char all[1100];
		int rfd = open(path, O_RDONLY);
		assert_int_equal(read(rfd, all, sizeof all), (ssize_t)sizeof all);
		close(rfd);
		for (int i = 0; i < 11; i++) {
			assert_int_equal(all[i * 100 + 99], '\n');
			for (int k = 0; k < 99; k++)
				assert_int_equal(all[i * 100 + k], 'a' + (i % 10) % 26);
		}
	}
	logfile_close(l);
	assert_false(logfile_enabled(l));
	/* nothing open: nothing lost */
	assert_int_equal(logfile_write(l, buf, sizeof buf), 0);
	logfile_lost(l, &lines, &bytes);
	assert_int_equal(lines - lines0, 290);
	unlink(path);
}

static void test_dev_full_counts_every_line(void **state)
{
	struct logfile *l = logfile_of(LOGFILE_ACCESS);
	uint64_t lines0, bytes0, lines, bytes;
	char buf[64];

	(void)state;
	logfile_lost(l, &lines0, &bytes0);
	assert_int_equal(logfile_open(l, "/dev/full"), 0);
	capture_stderr();
	for (int i = 0; i < 1000; i++) {
		line(buf, sizeof buf, i);
		assert_int_equal(logfile_write(l, buf, sizeof buf), -1);
	}
	/* two lines in one write count two */
	assert_int_equal(logfile_write(l, "a\nb\n", 4), -1);
	assert_int_equal(release_stderr("access log /dev/full: No space left on device"), 1);
	logfile_lost(l, &lines, &bytes);
	assert_int_equal(lines - lines0, 1002);
	assert_int_equal(bytes - bytes0, 1000 * sizeof buf + 4);
	logfile_close(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_lines_and_counts),
		cmocka_unit_test(test_dev_full_counts_every_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
