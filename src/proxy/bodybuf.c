#include "bodybuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "log.h"

void bodybuf_clear(struct bodybuf *b)
{
	b->mem = NULL;
	b->fd = -1;
	b->file_len = 0;
}

int bodybuf_open(struct bodybuf *b)
{
	bodybuf_clear(b);
	b->mem = evbuffer_new();
	return b->mem != NULL ? 0 : -1;
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

int bodybuf_settle(struct bodybuf *b)
{
	size_t n = evbuffer_get_length(b->mem);

	if (b->fd < 0 && n <= BODYBUF_MEMORY)
		return 0;
	if (b->fd < 0 && (b->fd = temp_file()) < 0) {
		log_warn("request body: no temporary file: %s", strerror(errno));
		return -1;
	}
	if (write_all(b->fd, b->mem) < 0) {
		log_warn("request body: writing the temporary file: %s", strerror(errno));
		return -1;
	}
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
	return evbuffer_add_buffer(out, b->mem);
}

int bodybuf_spilled(const struct bodybuf *b)
{
	return b->fd >= 0 || b->file_len > 0;
}

void bodybuf_free(struct bodybuf *b)
{
	if (b->mem != NULL)
		evbuffer_free(b->mem);
	if (b->fd >= 0)
		close(b->fd);
	bodybuf_clear(b);
}
