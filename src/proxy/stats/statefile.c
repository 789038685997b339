/* SPDX-License-Identifier: Apache-2.0 */
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static void fsync_dir(const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int fd;

	if (slash == NULL)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* The temporary file beside the state: made anew (O_EXCL), never through
 * a link or into something planted there (O_NOFOLLOW: a symlink planted as
 * <slo_state>.tmp would otherwise have had its target overwritten). One
 * left behind (a crash between create and rename) is removed first:
 * unlink removes a link, not what it names. */
static FILE *tmp_create(const char *tmp)
{
	int fd = -1;

	for (int i = 0; i < 2 && fd < 0; i++) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && (errno != EEXIST || i > 0 || unlink(tmp) != 0))
			return NULL;
	}
	return fdopen(fd, "w");
}

int statefile_write(const char *path, const char *what,
    int (*fill)(void *arg, FILE *f), void *arg)
{
	char tmp[4200];
	struct stat st;
	FILE *f;
	int rc;

	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		log_warn("%s %s: not written: %s", what, path,
		    S_ISLNK(st.st_mode) ? "it is a symlink now (the rename would replace "
		    "the link, not the file it names)" : "it is not a regular file now");
		return -1;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	f = tmp_create(tmp);
	if (f == NULL) {
		log_warn("%s %s: cannot write: %s", what, tmp, strerror(errno));
		return -1;
	}
	rc = fill(arg, f);
	rc |= fflush(f);
	rc |= fsync(fileno(f));
	rc |= fclose(f);
	if (rc != 0 || rename(tmp, path) != 0) {
		log_warn("%s %s: cannot write: %s", what, path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	fsync_dir(path);
	return 0;
}

char *statefile_read(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	FILE *f;
	char *buf = NULL;
	size_t cap = 0;

	*len = 0;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = ENODEV;
		return NULL;
	}
	if ((f = fdopen(fd, "rb")) == NULL) {
		close(fd);
		return NULL;
	}
	for (;;) {
		size_t n;
		if (*len == cap) {
			char *nb = cap < max ? realloc(buf, cap ? cap * 2 : 65536) : NULL;
			if (nb == NULL) {
				free(buf);
				fclose(f);
				errno = EFBIG;
				return NULL;
			}
			buf = nb;
			cap = cap ? cap * 2 : 65536;
		}
		n = fread(buf + *len, 1, cap - *len, f);
		*len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	return buf;
}
