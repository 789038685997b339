/* SPDX-License-Identifier: Apache-2.0 */
/* JSON tokenized with jsmn into the caller's token array: no allocation.
 * A text with more tokens than the array holds is tokenized sparsely,
 * member by member, and what does not fit stays one opaque token; a
 * truncated or malformed text keeps the tokens read before the problem. */
#ifndef TOKENTAP_JSON_H
#define TOKENTAP_JSON_H

#include <stddef.h>

/* Every includer sees the same token layout (with parent links). json.c
 * includes jsmn.h itself first, for the parser's code; elsewhere only the
 * types and declarations. */
#define JSMN_PARENT_LINKS
#define JSMN_HEADER
#include <jsmn.h>

/* A tokenized payload: tokens in document order, each with its parent. */
struct json {
	const char *s;
	int len;
	jsmntok_t *t;
	int n;
};

/* Tokenizes s (len bytes) into t (cap tokens) and points j at the
 * result. Returns the number of tokens. */
int json_parse(struct json *j, const char *s, size_t len, jsmntok_t *t,
    int cap);

/* The text of a JSON string's contents (src[0..n), without the quotes)
 * with its escapes undone: "\uXXXX" as UTF-8 (a surrogate pair as one
 * character, a lone surrogate as U+FFFD), an escape cut short at the end
 * dropped. Writes at most cap - 1 bytes and a NUL; returns the length.
 * Other bytes are copied as they are (the caller cleans them). */
size_t json_unescape(char *dst, size_t cap, const char *src, size_t n);

#endif
