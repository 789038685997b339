/* SPDX-License-Identifier: Apache-2.0 */
/* Prompts from a file (--prompts): JSONL, one prompt a line, each
 *   "a text"                          a JSON string, or
 *   {"text": "..."} or {"prompt": "..."}, or
 *   {"messages": [{"role": "system", "content": "..."}, ...]}
 * with an optional "max_tokens" (or "output_tokens") for its answer. Each
 * request draws a line (seeded), so the prompt lengths are the file's.
 * Chat dialects send the messages as they are; the others the contents
 * joined by blank lines. Problems are reported as FILE:LINE:COL. */
#ifndef TOKENTAP_LOAD_PROMPTS_H
#define TOKENTAP_LOAD_PROMPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct load_prompt {
	char *text;            /* the prompt, or the messages' contents joined */
	size_t text_len;
	char *messages;        /* NULL, or the messages as a JSON array, escaped */
	size_t messages_len;
	uint32_t tokens;       /* an estimate: bytes / 4, at least 1 */
	uint32_t max_tokens;   /* 0: --max-tokens */
};

struct load_prompts {
	struct load_prompt *v;
	size_t n, cap;
	char *path;
};

int load_prompts_read(struct load_prompts *p, const char *path, FILE *err);
void load_prompts_free(struct load_prompts *p);

#endif
