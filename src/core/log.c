/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static enum log_level current = LOG_LVL_INFO;

void log_msg(enum log_level level, const char *fmt, ...)
{
	/* sd-daemon(3) priority prefixes: journald reads them, people read the word. */
	static const char *const prefix[] = {
		"<3>error: ", "<4>warning: ", "<6>", "<7>debug: "
	};
	/* The "<N>" priority is for journald only (it sets JOURNAL_STREAM). */
	static int skip = -1;
	char line[2048];
	int n;
	va_list ap;

	if (level > current)
		return;
	if (skip < 0)
		skip = getenv("JOURNAL_STREAM") ? 0 : 3;
	n = snprintf(line, sizeof line, "%s", prefix[level] + skip);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write(2) per line so lines from worker threads never interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
