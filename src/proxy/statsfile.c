#include "statsfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "log.h"
#include "stats.h"

static int fd = -1;
static char *path;
static uint64_t interval_us, next_us;

int statsfile_configure(const struct conf *c)
{
	if (path != NULL && c->stats_file != NULL && strcmp(path, c->stats_file) == 0) {
		interval_us = c->stats_interval_us;
		return 0;
	}
	statsfile_close();
	if (c->stats_file == NULL)
		return 0;
	path = strdup(c->stats_file);
	interval_us = c->stats_interval_us;
	next_us = 0;
	if (path == NULL)
		return -1;
	statsfile_reopen();
	return fd < 0 ? -1 : 0;
}

void statsfile_reopen(void)
{
	int nfd;
	if (path == NULL)
		return;
	nfd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (nfd < 0) {
		log_error("stats file %s: %s", path, strerror(errno));
		return;
	}
	if (fd >= 0)
		close(fd);
	fd = nfd;
}

void statsfile_tick(uint64_t now_us)
{
	struct evbuffer *b;
	if (fd < 0)
		return;
	if (next_us == 0)
		next_us = now_us + interval_us;
	if (now_us < next_us)
		return;
	next_us += interval_us;
	if (next_us <= now_us)
		next_us = now_us + interval_us;
	b = evbuffer_new();
	if (b == NULL)
		return;
	stats_json(b, 0, BY_ROUTE, 0, STATS_ROWS_MAX);
	if (evbuffer_write(b, fd) < 0)
		log_warn("stats file %s: %s", path, strerror(errno));
	evbuffer_free(b);
}

void statsfile_close(void)
{
	if (fd >= 0)
		close(fd);
	fd = -1;
	free(path);
	path = NULL;
}
