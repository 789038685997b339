/* SPDX-License-Identifier: Apache-2.0 */
#include "bodybuf.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "gauge.h"
#include "log.h"

/* Every worker's bodies (gauge.h): bytes in memory, and spills (relaxed
 * atomics, once per read of an upload; the bound may be passed by a read
 * per worker); and the most in memory since the last trim. */
static atomic_ullong peak;

void bodybuf_clear(struct bodybuf *b)
{
	b->mem = b->kept = NULL;
	b->fd = -1;
	b->file_len = 0;
	b->counted = 0;
}

int bodybuf_open(struct bodybuf *b)
{
	bodybuf_clear(b);
	b->mem = evbuffer_new();
	b->kept = evbuffer_new();
	if (b->mem != NULL && b->kept != NULL)
		return 0;
	bodybuf_free(b);
	return -1;
}

static void uncount(struct bodybuf *b)
{
	atomic_fetch_sub_explicit(&gauge_body_bytes, b->counted, memory_order_relaxed);
	b->counted = 0;
}

/* An unlinked file: nothing is left behind whatever happens to us. */
static int temp_file(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	if (dir == NULL || *dir == '\0')
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	/* a file system without O_TMPFILE */
	if ((size_t)snprintf(path, sizeof path, "%s/tokentap-body-XXXXXX", dir) >= sizeof path)
		return -1;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static int write_all(int fd, struct evbuffer *from)
{
	while (evbuffer_get_length(from) > 0) {
		int n = evbuffer_write(from, fd);
		if (n < 0 && errno != EINTR)
			return -1;
	}
	return 0;
}

/* Copies what arrived into kept's chains, full ones: a socket read of 4 KiB
 * lands in a chain of 8 KiB, and moving chains would keep them so. */
static int pack(struct bodybuf *b)
{
	struct evbuffer_iovec v[16];
	int k;

	while ((k = evbuffer_peek(b->mem, -1, NULL, v, 16)) > 0) {
		size_t n = 0;
		for (int i = 0; i < k && i < 16; i++) {
			if (evbuffer_add(b->kept, v[i].iov_base, v[i].iov_len) < 0)
				return -1;
			n += v[i].iov_len;
		}
		evbuffer_drain(b->mem, n);
	}
	return 0;
}

int bodybuf_settle(struct bodybuf *b, uint64_t limit)
{
	size_t n = evbuffer_get_length(b->mem);

	if (n == 0)
		return 0;
	if (b->fd < 0 && b->counted + n <= BODYBUF_MEMORY &&
	    atomic_load_explicit(&gauge_body_bytes, memory_order_relaxed) + n <= limit) {
		uint64_t now;
		if (pack(b) < 0)
			return -1;
		now = atomic_fetch_add_explicit(&gauge_body_bytes, n, memory_order_relaxed) + n;
		if (now > atomic_load_explicit(&peak, memory_order_relaxed))
			atomic_store_explicit(&peak, now, memory_order_relaxed);
		b->counted += n;
		return 0;
	}
	if (b->fd < 0) {
		if ((b->fd = temp_file()) < 0) {
			log_limited(&gauge_log[GAUGE_LOG_REQUEST_BODY_FILE], LOG_LVL_WARN,
			    "request body: no temporary file: %s", strerror(errno));
			return -1;
		}
		atomic_fetch_add_explicit(&gauge_body_spills, 1, memory_order_relaxed);
	}
	n += evbuffer_get_length(b->kept);
	if (write_all(b->fd, b->kept) < 0 || write_all(b->fd, b->mem) < 0) {
		log_limited(&gauge_log[GAUGE_LOG_REQUEST_BODY_FILE], LOG_LVL_WARN,
		    "request body: writing the temporary file: %s", strerror(errno));
		return -1;
	}
	uncount(b);
	b->file_len += n;
	return 0;
}

int bodybuf_send(struct bodybuf *b, struct evbuffer *out)
{
	if (b->fd >= 0) {
		/* the evbuffer owns the descriptor from here on */
		if (evbuffer_add_file(out, b->fd, 0, (ev_off_t)b->file_len) < 0)
			return -1;
		b->fd = -1;
		b->file_len = 0;
	}
	uncount(b);
	if (evbuffer_add_buffer(out, b->kept) < 0)
		return -1;
	return evbuffer_add_buffer(out, b->mem);
}

int bodybuf_spilled(const struct bodybuf *b)
{
	return b->fd >= 0 || b->file_len > 0;
}

void bodybuf_free(struct bodybuf *b)
{
	uncount(b);
	if (b->mem != NULL)
		evbuffer_free(b->mem);
	if (b->kept != NULL)
		evbuffer_free(b->kept);
	if (b->fd >= 0)
		close(b->fd);
	bodybuf_clear(b);
}

/* glibc keeps what a burst of held bodies freed in its arenas (a worker's
 * arena is trimmed only from its top, and only after a large free): 1,000
 * uploads stalled at the default bound and closed left 31 MB resident, 11
 * MB after a malloc_trim. Given back once the bodies in memory fell to a
 * quarter of a peak of BODYBUF_TRIM_PEAK or more and stayed there for a
 * second, and again at five (for connections that were still closing):
 * the main thread walks the arenas (each locked meanwhile: a worker's
 * malloc may wait that long), a few ms, twice a burst at most. */
void bodybuf_trim(uint64_t now_us)
{
	static uint64_t low_since;
	static int trims;
	uint64_t top = atomic_load_explicit(&peak, memory_order_relaxed);

	if (top < BODYBUF_TRIM_PEAK || atomic_load_explicit(&gauge_body_bytes, memory_order_relaxed) > top / 4) {
		low_since = 0;
		trims = 0;
		return;
	}
	if (low_since == 0)
		low_since = now_us;
	if (now_us - low_since < (trims == 0 ? 1000000u : 5000000u) || trims == 2)
		return;
	if (++trims == 2)       /* the burst is over */
		atomic_store_explicit(&peak, atomic_load_explicit(&gauge_body_bytes, memory_order_relaxed), memory_order_relaxed);
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
