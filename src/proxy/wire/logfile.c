/* SPDX-License-Identifier: Apache-2.0 */
#include "logfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "log.h"
#include "util.h"

#define WARN_EVERY_US ((uint64_t)LOGFILE_WARN_EVERY_S * 1000000)

/* One lock per file around each write: a short write is then known to end
 * where the file ends (no other thread of ours wrote after it), so it can
 * be finished or cut back; the kernel serialises appends to one file
 * anyway, and a line is written once per request, never per event. */
struct logfile {
	const char *label;            /* the log label: access, stats */
	const char *what;             /* in messages */
	int dash_is_stdout;
	pthread_mutex_t mu;
	atomic_int fd;                /* changed under mu; -1: none */
	char *path;                   /* under mu */
	atomic_uint_least64_t lost_lines, lost_bytes;
	/* under mu: losses not said yet, and when the last message was */
	uint64_t quiet_lines, quiet_bytes, said_us;
	int said;
};

static struct logfile files[LOGFILES] = {
	[LOGFILE_ACCESS] = { "access", "access log", 1, PTHREAD_MUTEX_INITIALIZER, -1,
		NULL, 0, 0, 0, 0, 0, 0 },
	[LOGFILE_STATS] = { "stats", "stats file", 0, PTHREAD_MUTEX_INITIALIZER, -1,
		NULL, 0, 0, 0, 0, 0, 0 },
};

struct logfile *logfile_of(enum logfile_kind kind)
{
	return &files[kind];
}

/* Non-blocking open: a FIFO without a reader fails at once (ENXIO) where
 * a blocking open waited, before the listeners, for a reader that may
 * never come; the writes then block as for any file. */
static int open_path(const struct logfile *l, const char *path)
{
	int fd, fl;

	if (l->dash_is_stdout && strcmp(path, "-") == 0)
		return fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd >= 0 && (fl = fcntl(fd, F_GETFL)) >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int logfile_open(struct logfile *l, const char *path)
{
	struct stat st;
	char *copy = NULL;
	int fd, old;

	fd = open_path(l, path);
	if (fd < 0) {
		int err = errno;
		log_error("%s %s: %s", l->what, path, err == ENXIO && stat(path, &st) == 0 &&
		    S_ISFIFO(st.st_mode) ? "a FIFO that no process reads" : strerror(err));
		return -1;
	}
	if (l->path == NULL || strcmp(l->path, path) != 0) {
		if ((copy = strdup(path)) == NULL) {
			close(fd);
			log_error("%s %s: out of memory", l->what, path);
			return -1;
		}
	}
	pthread_mutex_lock(&l->mu);
	/* losses not said yet belong to the file closed: said now (a reopen
	 * is rare: logrotate, a reload) */
	if (l->quiet_lines > 0 && l->path != NULL) {
		log_warn("%s %s: %" PRIu64 " line(s) (%" PRIu64 " bytes) lost since the last "
		    "message, before this reopen", l->what, l->path, l->quiet_lines,
		    l->quiet_bytes);
		l->quiet_lines = l->quiet_bytes = 0;
	}
	old = atomic_load(&l->fd);
	atomic_store(&l->fd, fd);
	if (copy != NULL) {
		free(l->path);
		l->path = copy;
	}
	pthread_mutex_unlock(&l->mu);
	if (old >= 0)
		close(old);
	return 0;
}

int logfile_reopen(struct logfile *l)
{
	/* only the main thread changes the path: no lock to read it here */
	return l->path == NULL ? 0 : logfile_open(l, l->path);
}

void logfile_close(struct logfile *l)
{
	int fd;

	pthread_mutex_lock(&l->mu);
	fd = atomic_load(&l->fd);
	atomic_store(&l->fd, -1);
	free(l->path);
	l->path = NULL;
	pthread_mutex_unlock(&l->mu);
	if (fd >= 0)
		close(fd);
}

int logfile_enabled(const struct logfile *l)
{
	return atomic_load_explicit(&l->fd, memory_order_relaxed) >= 0;
}

/* The file ends with done bytes of a line that did not fit: cut them off,
 * so the next line starts a line. Only when the file still ends where
 * this write did (no process wrote after it) and is no shorter (logrotate's
 * copytruncate may have emptied it: cutting to a length past its end would
 * grow it with zeros); a pipe or a terminal cannot be cut. The lseek puts
 * back the offset of a file opened without O_APPEND ("-" redirected with
 * '>'). */
static void cut_back(int fd, size_t done)
{
	struct stat st;
	off_t end = lseek(fd, 0, SEEK_CUR);

	if (end < (off_t)done || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_size != end || ftruncate(fd, end - (off_t)done) != 0)
		return;
	lseek(fd, end - (off_t)done, SEEK_SET);
}

static void lost(struct logfile *l, const char *buf, size_t len, int err)
{
	uint64_t now = util_now_us(), lines = 0;
	const char *p = buf, *end = buf + len;

	while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
		lines++;
		p++;
	}
	if (lines == 0)
		lines = 1;
	atomic_fetch_add_explicit(&l->lost_lines, lines, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->lost_bytes, len, memory_order_relaxed);
	l->quiet_lines += lines;
	l->quiet_bytes += len;
	if (l->said && now - l->said_us < WARN_EVERY_US)
		return;
	if (!l->said)
		log_warn("%s %s: %s: %" PRIu64 " line(s) (%" PRIu64 " bytes) lost; lost lines "
		    "are counted in /metrics (tokentap_log_lines_lost_total) and said here at "
		    "most every %d s", l->what, l->path, strerror(err), l->quiet_lines,
		    l->quiet_bytes, LOGFILE_WARN_EVERY_S);
	else
		log_warn("%s %s: %s: %" PRIu64 " line(s) (%" PRIu64 " bytes) lost in the "
		    "last %.1f s", l->what, l->path, strerror(err), l->quiet_lines,
		    l->quiet_bytes, (double)(now - l->said_us) / 1e6);
	l->said = 1;
	l->said_us = now;
	l->quiet_lines = l->quiet_bytes = 0;
}

/* A write went after losses not said yet: said, within the same limit. */
static void written_again(struct logfile *l)
{
	uint64_t now = util_now_us();

	if (now - l->said_us < WARN_EVERY_US)
		return;
	log_info("%s %s: written again; %" PRIu64 " line(s) (%" PRIu64 " bytes) lost in "
	    "the %.1f s before", l->what, l->path, l->quiet_lines, l->quiet_bytes,
	    (double)(now - l->said_us) / 1e6);
	l->said_us = now;
	l->quiet_lines = l->quiet_bytes = 0;
}

int logfile_write(struct logfile *l, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	int fd, err = 0;

	if (!logfile_enabled(l))
		return 0;
	pthread_mutex_lock(&l->mu);
	fd = atomic_load(&l->fd);
	/* a short write (the disk filled in its middle) is followed by another
	 * for the rest: it ends the line if space came back, else says why */
	while (fd >= 0 && done < len) {
		ssize_t n = write(fd, p + done, len - done);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		err = n < 0 ? errno : ENOSPC;
		break;
	}
	if (done == len || fd < 0) {
		if (l->quiet_lines > 0)
			written_again(l);
		pthread_mutex_unlock(&l->mu);
		return 0;
	}
	if (done > 0)
		cut_back(fd, done);
	lost(l, buf, len, err);
	pthread_mutex_unlock(&l->mu);
	return -1;
}

void logfile_lost(const struct logfile *l, uint64_t *lines, uint64_t *bytes)
{
	*lines = atomic_load_explicit(&l->lost_lines, memory_order_relaxed);
	*bytes = atomic_load_explicit(&l->lost_bytes, memory_order_relaxed);
}

const char *logfile_label(const struct logfile *l)
{
	return l->label;
}
