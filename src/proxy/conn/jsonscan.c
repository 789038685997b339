/* SPDX-License-Identifier: Apache-2.0 */
#include "jsonscan.h"

#include <string.h>

enum { S_NONE, S_KEY, S_AFTER_KEY, S_VALUE, S_IN_VALUE };

void jsonscan_init(struct json_model_scan *js)
{
	memset(js, 0, sizeof *js);
}

/* Top-level key strings are compared with "model" as they pass; its string
 * value is kept (escapes left as they are), other values are skipped. */
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
		if (js->state == S_KEY)
			js->state = js->key_ok && js->key_pos == 5 ? S_AFTER_KEY : S_NONE;
		else if (js->state == S_IN_VALUE) {
			js->found = 1;
			js->state = S_NONE;
		}
		return;
	}
	if (js->state == S_KEY) {
		if (js->key_pos < 5 && c == "model"[js->key_pos])
			js->key_pos++;
		else
			js->key_ok = 0;
	} else if (js->state == S_IN_VALUE) {
		if (js->value_len < JSONSCAN_VALUE_MAX - 1)
			js->value[js->value_len++] = c;
	}
}

void jsonscan_feed(struct json_model_scan *js, const char *p, size_t len)
{
	for (size_t i = 0; i < len && !js->found; i++) {
		char c = p[i];
		if (js->in_string) {
			scan_string_byte(js, c);
			continue;
		}
		switch (c) {
		case '"':
			js->in_string = 1;
			if (js->depth == 1 && js->state == S_NONE) {
				js->state = S_KEY;
				js->key_pos = 0;
				js->key_ok = 1;
			} else if (js->depth == 1 && js->state == S_VALUE) {
				js->state = S_IN_VALUE;
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
			/* a non-string value or a ',' ends any key in progress */
			if (js->depth == 1)
				js->state = S_NONE;
			break;
		}
	}
}
