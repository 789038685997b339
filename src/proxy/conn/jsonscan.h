/* SPDX-License-Identifier: Apache-2.0 */
/* Finds the top-level "model" string of a JSON request body as it streams
 * past, without keeping the body: a byte-at-a-time scanner of nesting and
 * strings. The OpenAI SDKs send "messages" before "model", so the key can
 * come after megabytes of prompt. */
#ifndef TOKENTAP_JSONSCAN_H
#define TOKENTAP_JSONSCAN_H

#include <stddef.h>

#define JSONSCAN_VALUE_MAX 128

struct json_model_scan {
	int depth;
	int in_string;
	int escape;
	int state;          /* where we are around a top-level key */
	size_t key_pos;     /* bytes of "model" matched in the current key */
	int key_ok;
	char value[JSONSCAN_VALUE_MAX];
	size_t value_len;
	int found;
};

void jsonscan_init(struct json_model_scan *js);
void jsonscan_feed(struct json_model_scan *js, const char *p, size_t len);

#endif
