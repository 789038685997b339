/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer for rendering responses. An allocation failure is
 * remembered in `failed` and later appends are dropped, so a caller renders
 * a whole response and checks once. */
#ifndef TOKENTAP_MOCK_BUF_H
#define TOKENTAP_MOCK_BUF_H

#include <stddef.h>

struct mock_buf {
	char *p;
	size_t len;
	size_t cap;
	int failed;
};

void mock_buf_add(struct mock_buf *b, const void *data, size_t len);
void mock_buf_str(struct mock_buf *b, const char *s);
void mock_buf_printf(struct mock_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends s as a quoted JSON string literal (jsonw's escapes). */
void mock_buf_json(struct mock_buf *b, const char *s, size_t len);
/* Empties the buffer but keeps its memory for the next render. */
void mock_buf_reset(struct mock_buf *b);
void mock_buf_free(struct mock_buf *b);

#endif
