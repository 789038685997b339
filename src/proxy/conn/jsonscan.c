/* SPDX-License-Identifier: Apache-2.0 */
#include "jsonscan.h"

#include <string.h>

enum { S_NONE, S_KEY, S_AFTER_KEY, S_VALUE, S_IN_VALUE };

void jsonscan_init(struct json_model_scan *js)
{
	memset(js, 0, sizeof *js);
	js->stream = -1;
}

enum { KEY_MODEL = 1, KEY_STREAM = 2 };

/* The key just closed: "model", "stream", or neither (0). */
static int key_of(const struct json_model_scan *js)
{
	if (!js->key_ok)
		return 0;
	if (js->key_pos == 5 && memcmp(js->key, "model", 5) == 0)
		return KEY_MODEL;
	if (js->key_pos == 6 && memcmp(js->key, "stream", 6) == 0)
		return KEY_STREAM;
	return 0;
}

/* Top-level key strings are compared with "model" and "stream" as they
 * pass; the model's string value is kept (escapes left as they are), the
 * stream's literal read (jsonscan_feed), other values skipped. */
static void scan_string_byte(struct json_model_scan *js, char c)
{
	if (js->escape) {
		js->escape = 0;
		if (js->state == S_KEY)
			js->key_ok = 0;
	} else if (c == '\\') {
		js->escape = 1;
	} else if (c == '"') {
		js->in_string = 0;
		if (js->state == S_KEY) {
			js->key_which = key_of(js);
			js->state = js->key_which != 0 && !(js->key_which == KEY_MODEL &&
			    js->found) && !(js->key_which == KEY_STREAM && js->stream >= 0) ?
			    S_AFTER_KEY : S_NONE;
		} else if (js->state == S_IN_VALUE) {
			js->found = 1;
			js->state = S_NONE;
		}
		return;
	}
	if (js->state == S_KEY) {
		if (js->key_pos < sizeof js->key)
			js->key[js->key_pos++] = c;
		else
			js->key_ok = 0;
	} else if (js->state == S_IN_VALUE) {
		if (js->value_len < JSONSCAN_VALUE_MAX - 1)
			js->value[js->value_len++] = c;
	}
}

/* From i in a string that is no key and not the model's value (a
 * prompt's text, mostly: most of a body): the next byte that can matter,
 * a quote or a backslash. Two memchr, each vectorised (the second only up
 * to the quote): a byte loop took some 5 instructions a byte of prompt,
 * which came to 50 an event of a 100-token stream. */
static size_t skip_text(const char *p, size_t i, size_t len)
{
	const char *q = memchr(p + i, '"', len - i);
	size_t to = q != NULL ? (size_t)(q - p) : len;
	const char *b = memchr(p + i, '\\', to - i);

	return b != NULL ? (size_t)(b - p) : to;
}

void jsonscan_feed(struct json_model_scan *js, const char *p, size_t len)
{
	for (size_t i = 0; i < len && !jsonscan_done(js); i++) {
		char c;
		if (js->in_string) {
			if (!js->escape && js->state != S_KEY &&
			    js->state != S_IN_VALUE &&
			    (i = skip_text(p, i, len)) == len)
				break;
			scan_string_byte(js, p[i]);
			continue;
		}
		c = p[i];
		switch (c) {
		case '"':
			js->in_string = 1;
			if (js->depth == 1 && js->state == S_NONE) {
				js->state = S_KEY;
				js->key_pos = 0;
				js->key_ok = 1;
			} else if (js->depth == 1 && js->state == S_VALUE) {
				/* a string: the model's value, never the stream's */
				js->state = js->key_which == KEY_MODEL ? S_IN_VALUE : S_NONE;
				js->value_len = 0;
			}
			break;
		case ':':
			if (js->depth == 1 && js->state == S_AFTER_KEY)
				js->state = S_VALUE;
			break;
		case '{':
		case '[':
			js->depth++;
			if (js->depth == 2)
				js->state = S_NONE;
			break;
		case '}':
		case ']':
			js->depth--;
			break;
		case ' ': case '\t': case '\r': case '\n':
			break;
		default:
			/* "stream": true or false (the literal's first byte; JSON
			 * allows no other word there); any other non-string value
			 * or a ',' ends the key in progress */
			if (js->depth == 1 && js->state == S_VALUE &&
			    js->key_which == KEY_STREAM && (c == 't' || c == 'f'))
				js->stream = c == 't';
			if (js->depth == 1)
				js->state = S_NONE;
			break;
		}
	}
}
