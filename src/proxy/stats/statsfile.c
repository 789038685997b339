/* SPDX-License-Identifier: Apache-2.0 */
#include "statsfile.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "logfile.h"
#include "stats.h"

/* The file and its losses: logfile.c. */
#define SF (logfile_of(LOGFILE_STATS))

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
	return logfile_open(SF, path);
}

void statsfile_reopen(void)
{
	logfile_reopen(SF);
}

void statsfile_tick(uint64_t now_us)
{
	struct evbuffer *b;
	unsigned char *text;

	if (!logfile_enabled(SF))
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
	/* one write: the snapshot is in the file whole or not at all */
	text = evbuffer_pullup(b, -1);
	if (text != NULL)
		logfile_write(SF, text, evbuffer_get_length(b));
	evbuffer_free(b);
}

void statsfile_close(void)
{
	logfile_close(SF);
	free(path);
	path = NULL;
}
