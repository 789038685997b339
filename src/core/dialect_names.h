/* SPDX-License-Identifier: Apache-2.0 */
/* The dialects of docs/contract.md §4 and their config names. Kept apart from
 * dialect.h so the config loader does not depend on the dialect rules. */
#ifndef TOKENTAP_DIALECT_NAMES_H
#define TOKENTAP_DIALECT_NAMES_H

#include <string.h>

enum dialect_id {
	DIALECT_AUTO,
	DIALECT_OPENAI,
	DIALECT_OPENAI_RESPONSES,
	DIALECT_ANTHROPIC,
	DIALECT_DIFY,
	DIALECT_GEMINI,
	DIALECT_TGI,
	DIALECT_OLLAMA,
	DIALECT_RAW,
	DIALECT_COUNT
};

static const char *const dialect_names[DIALECT_COUNT] = {
	"auto", "openai", "openai-responses", "anthropic", "dify",
	"gemini", "tgi", "ollama", "raw"
};

/* What a request asks for, by its path (dialect_operation): the values
 * of OpenTelemetry's gen_ai.operation.name, "_other" for none. */
enum dialect_op {
	DIALECT_OP_OTHER,
	DIALECT_OP_CHAT,
	DIALECT_OP_TEXT,
	DIALECT_OP_GENERATE,
	DIALECT_OP_EMBEDDINGS,
	DIALECT_OP_COUNT
};

static const char *const dialect_op_names[DIALECT_OP_COUNT] = {
	"_other", "chat", "text_completion", "generate_content", "embeddings"
};

/* Returns the dialect named s, or -1. */
static inline int dialect_by_name(const char *s)
{
	for (int i = 0; i < DIALECT_COUNT; i++)
		if (strcmp(s, dialect_names[i]) == 0)
			return i;
	return -1;
}

#endif
