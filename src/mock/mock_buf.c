/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"

static int reserve(struct mock_buf *b, size_t extra)
{
	size_t cap;
	char *p;

	if (b->failed)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + extra + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (p == NULL) {
		b->failed = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void mock_buf_add(struct mock_buf *b, const void *data, size_t len)
{
	if (reserve(b, len) < 0)
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
}

void mock_buf_str(struct mock_buf *b, const char *s)
{
	mock_buf_add(b, s, strlen(s));
}

void mock_buf_printf(struct mock_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (reserve(b, 256) < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	if ((size_t)n >= b->cap - b->len) {
		if (reserve(b, (size_t)n) < 0)
			return;
		va_start(ap, fmt);
		vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
	}
	b->len += (size_t)n;
}

void mock_buf_json(struct mock_buf *b, const char *s, size_t len)
{
	struct jsonw_buf jb;

	/* room for the worst case, so the string is never cut */
	if (reserve(b, JSONW_STR_MAX(len)) < 0)
		return;
	jsonw_buf_init(&jb, b->p + b->len, b->cap - b->len - 1);
	jsonw_buf_str(&jb, s, len);
	b->len += jb.len;
	b->p[b->len] = '\0';
}

void mock_buf_reset(struct mock_buf *b)
{
	b->len = 0;
	b->failed = 0;
	if (b->p != NULL)
		b->p[0] = '\0';
}

void mock_buf_free(struct mock_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->failed = 0;
}
