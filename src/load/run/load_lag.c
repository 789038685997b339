/* SPDX-License-Identifier: Apache-2.0 */
#include "load_lag.h"

#include <string.h>

#define PREFIX ": ts="
#define PREFIX_LEN 5

enum {
	LINE_START,      /* nothing of this line read yet */
	LINE_PREFIX,     /* part of PREFIX matched */
	LINE_DIGITS,     /* PREFIX matched, reading the stamp */
	LINE_OTHER       /* any other line: skipped to its end */
};

void load_lag_init(struct load_lag *l, load_lag_fn fn, void *arg)
{
	memset(l, 0, sizeof(*l));
	l->fn = fn;
	l->arg = arg;
}

/* A line ended: a stamp line arms the event, a blank line ends it. */
static void end_line(struct load_lag *l, uint64_t now)
{
	if (l->state == LINE_START && l->has_stamp) {
		l->has_stamp = 0;
		l->fn(l->arg, now > l->stamp ? now - l->stamp : 0);
	} else if (l->state == LINE_DIGITS && l->matched > PREFIX_LEN) {
		l->stamp = l->value;
		l->has_stamp = 1;
	}
	l->state = LINE_START;
}

/* One byte of a line (not CR or LF). */
static void line_byte(struct load_lag *l, char ch)
{
	switch (l->state) {
	case LINE_START:
		l->state = ch == ':' ? LINE_PREFIX : LINE_OTHER;
		l->matched = 1;
		break;
	case LINE_PREFIX:
		if (ch != PREFIX[l->matched]) {
			l->state = LINE_OTHER;
		} else if (++l->matched == PREFIX_LEN) {
			l->state = LINE_DIGITS;
			l->value = 0;
		}
		break;
	case LINE_DIGITS:
		/* a stamp beyond 19 digits is no stamp of ours */
		if (ch < '0' || ch > '9' || l->matched >= PREFIX_LEN + 19) {
			l->state = LINE_OTHER;
			break;
		}
		l->value = l->value * 10 + (uint64_t)(ch - '0');
		l->matched++;
		break;
	default:
		break;
	}
}

void load_lag_feed(struct load_lag *l, const char *p, size_t len, uint64_t now)
{
	for (size_t i = 0; i < len; i++) {
		char ch = p[i];

		if (ch == '\n' && l->cr) {
			l->cr = 0;
			continue;
		}
		l->cr = ch == '\r';
		if (ch == '\r' || ch == '\n') {
			end_line(l, now);
			continue;
		}
		/* most bytes are data lines: run to the line's end */
		if (l->state == LINE_OTHER) {
			while (i + 1 < len && p[i + 1] != '\n' && p[i + 1] != '\r')
				i++;
			continue;
		}
		line_byte(l, ch);
	}
}
