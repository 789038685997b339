/* SPDX-License-Identifier: Apache-2.0 */
/* Finds the top-level "model" string and "stream" boolean of a JSON
 * request body as it streams past, without keeping the body: a
 * byte-at-a-time scanner of nesting and strings. The OpenAI SDKs send
 * "messages" before "model", so the key can come after megabytes of
 * prompt; it stops once it has both (a body without "stream" is read to
 * its end, as one without "model" always was). */
#ifndef TOKENTAP_JSONSCAN_H
#define TOKENTAP_JSONSCAN_H

#include <stddef.h>

#define JSONSCAN_VALUE_MAX 128

struct json_model_scan {
	int depth;
	int in_string;
	int escape;
	int state;          /* where we are around a top-level key */
	size_t key_pos;     /* bytes of the current key, kept in key[] */
	int key_ok;         /* it may still be "model" or "stream" */
	char key[6];
	int key_which;      /* the key just read: 1 "model", 2 "stream" */
	char value[JSONSCAN_VALUE_MAX];
	size_t value_len;
	int found;          /* value[] is the model */
	int stream;         /* "stream": true 1, false 0; -1: not (yet) seen */
};

void jsonscan_init(struct json_model_scan *js);
void jsonscan_feed(struct json_model_scan *js, const char *p, size_t len);
/* Both found: nothing more to read. */
static inline int jsonscan_done(const struct json_model_scan *js)
{
	return js->found && js->stream >= 0;
}

#endif
