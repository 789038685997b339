/* SPDX-License-Identifier: Apache-2.0 */
#include "mock_wire.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "rng.h"
#include "util.h"

/* JSON-safe words, so token text needs no escaping. */
static const char *const words[] = {
	"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog",
	"token", "stream", "model", "answer", "is", "not", "only", "latency",
	"but", "also", "throughput", "and", "every", "event", "counts", "here",
	"we", "measure", "time", "to", "first", "byte", "of", "output", "per",
	"second", "while", "proxy", "forwards", "data", "unchanged", "with",
	"low", "overhead", "on", "each", "request", "from", "client", "server",
	"in", "order", "so", "that", "users", "see", "text", "appear", "as",
	"it", "is", "generated", "quickly", "today", ".",
};

static const char *const api_paths[] = {
	/* Order matters: the longest suffix that also ends a shorter one first. */
	"/chat/completions", "/completions", "/responses", "/chat-messages",
	"/completion-messages", "/workflows/run", "/messages",
	"/generate_stream", "/api/chat", "/api/generate",
};

static const enum mock_api path_apis[] = {
	MOCK_API_OPENAI_CHAT, MOCK_API_OPENAI_LEGACY, MOCK_API_RESPONSES,
	MOCK_API_DIFY_CHAT, MOCK_API_DIFY_CHAT, MOCK_API_DIFY_WORKFLOW,
	MOCK_API_ANTHROPIC, MOCK_API_TGI, MOCK_API_OLLAMA_CHAT,
	MOCK_API_OLLAMA_GENERATE,
};

enum mock_api mock_wire_api(const char *path, size_t len)
{
	const char *q = memchr(path, '?', len);

	if (q != NULL)
		len = (size_t)(q - path);
	if (memmem(path, len, ":streamGenerateContent", 22) != NULL)
		return MOCK_API_GEMINI;
	for (size_t i = 0; i < UTIL_ARRAY_LEN(api_paths); i++) {
		size_t n = strlen(api_paths[i]);
		if (len >= n && memcmp(path + len - n, api_paths[i], n) == 0)
			return path_apis[i];
	}
	return MOCK_API_OPENAI_CHAT;
}

enum dialect_id mock_wire_dialect(enum mock_api api)
{
	static const enum dialect_id ids[MOCK_API_COUNT] = {
		DIALECT_OPENAI, DIALECT_OPENAI, DIALECT_OPENAI_RESPONSES,
		DIALECT_ANTHROPIC, DIALECT_DIFY, DIALECT_DIFY, DIALECT_GEMINI,
		DIALECT_TGI, DIALECT_OLLAMA, DIALECT_OLLAMA,
	};
	return ids[api];
}

int mock_wire_ndjson(enum mock_api api)
{
	return api == MOCK_API_OLLAMA_CHAT || api == MOCK_API_OLLAMA_GENERATE;
}

const char *mock_wire_content_type(enum mock_api api)
{
	return mock_wire_ndjson(api) ? "application/x-ndjson" : "text/event-stream";
}

int mock_wire_path_model(const char *path, size_t len, char *out)
{
	const char *m = memmem(path, len, "/models/", 8), *end;
	size_t n = 0;

	if (m == NULL)
		return -1;
	m += 8;
	end = memchr(m, ':', len - (size_t)(m - path));
	if (end == NULL)
		return -1;
	for (const char *c = m; c < end && n + 1 < MOCK_MODEL_MAX; c++)
		if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20)
			out[n++] = *c;
	out[n] = '\0';
	return n > 0 ? 0 : -1;
}

void mock_wire_init(struct mock_wire *w, enum mock_api api, uint64_t seed)
{
	uint64_t s = seed;

	memset(w, 0, sizeof *w);
	w->api = api;
	w->cached_tokens = -1;
	w->seed = seed;
	snprintf(w->id, sizeof w->id, "%016" PRIx64, rng_next(&s));
}

static void add_words(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	for (uint64_t i = first; i < first + count; i++) {
		uint64_t s = w->seed ^ (i * 0xd1b54a32d192ed03ull);
		if (i > 0)
			mock_buf_add(b, " ", 1);
		mock_buf_str(b, words[rng_next(&s) % UTIL_ARRAY_LEN(words)]);
	}
}

void mock_wire_text(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	mock_buf_add(b, "\"", 1);
	add_words(w, first, count, b);
	mock_buf_add(b, "\"", 1);
}

static void sse_begin(struct mock_buf *b, const char *event)
{
	if (event != NULL)
		mock_buf_printf(b, "event: %s\n", event);
	mock_buf_str(b, "data: ");
}

static void sse_end(struct mock_buf *b)
{
	mock_buf_str(b, "\n\n");
}

/* Dify's ids are UUIDs; they differ by the variant digit. */
static void add_uuid(struct mock_buf *b, const char *key, const char *h,
    char tag)
{
	mock_buf_printf(b, "\"%s\":\"%.8s-%.4s-4%.3s-%c%.3s-%.12s\"", key, h, h + 8,
	    h + 12, tag, h + 1, h + 4);
}

void mock_wire_dify_ids(const struct mock_wire *w, struct mock_buf *b)
{
	add_uuid(b, "task_id", w->id, '8');
	if (w->api == MOCK_API_DIFY_WORKFLOW) {
		mock_buf_str(b, ",");
		add_uuid(b, "workflow_run_id", w->id, 'b');
		return;
	}
	mock_buf_str(b, ",");
	add_uuid(b, "id", w->id, '9');
	mock_buf_str(b, ",");
	add_uuid(b, "message_id", w->id, '9');
	mock_buf_str(b, ",");
	add_uuid(b, "conversation_id", w->id, 'a');
}

static void openai_chunk_begin(const struct mock_wire *w, struct mock_buf *b)
{
	int legacy = w->api == MOCK_API_OPENAI_LEGACY;
	mock_buf_printf(b, "data: {\"id\":\"%smock%s\",\"object\":\"%s\",\"created\":%"
	    PRIu64 ",\"model\":\"%s\",", legacy ? "cmpl-" : "chatcmpl-", w->id,
	    legacy ? "text_completion" : "chat.completion.chunk", w->created_s,
	    w->model);
}

static void responses_object(const struct mock_wire *w, const char *status,
    struct mock_buf *b)
{
	mock_buf_printf(b, "{\"id\":\"resp_mock%s\",\"object\":\"response\","
	    "\"created_at\":%" PRIu64 ",\"status\":\"%s\",\"error\":null,"
	    "\"incomplete_details\":null,\"model\":\"%s\",\"output\":[],"
	    "\"usage\":null}", w->id, w->created_s, status, w->model);
}

int mock_wire_has_reasoning(enum mock_api api)
{
	return api == MOCK_API_OPENAI_CHAT || api == MOCK_API_RESPONSES ||
	    api == MOCK_API_ANTHROPIC || api == MOCK_API_GEMINI ||
	    api == MOCK_API_OLLAMA_CHAT || api == MOCK_API_OLLAMA_GENERATE;
}

/* A reasoning model's Responses stream opens a reasoning item (output 0)
 * with a summary part; the message item (output 1) follows it. */
static void responses_reasoning_pre(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	if (k == 2) {
		sse_begin(b, "response.output_item.added");
		mock_buf_printf(b, "{\"type\":\"response.output_item.added\","
		    "\"sequence_number\":2,\"output_index\":0,\"item\":{\"id\":"
		    "\"rs_mock%s\",\"type\":\"reasoning\",\"summary\":[]}}", w->id);
	} else {
		sse_begin(b, "response.reasoning_summary_part.added");
		mock_buf_printf(b, "{\"type\":\"response.reasoning_summary_part.added\","
		    "\"sequence_number\":3,\"item_id\":\"rs_mock%s\",\"output_index\":0,"
		    "\"summary_index\":0,\"part\":{\"type\":\"summary_text\",\"text\":\"\"}}",
		    w->id);
	}
	sse_end(b);
}

size_t mock_wire_pre_count(const struct mock_wire *w)
{
	static const size_t n[MOCK_API_COUNT] = { 1, 0, 4, 3, 1, 2, 0, 0, 0, 0 };
	return n[w->api];
}

static void responses_pre(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	static const char *const names[] = {
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
	};

	sse_begin(b, names[k]);
	mock_buf_str(b, "{\"type\":\"");
	mock_buf_str(b, names[k]);
	mock_buf_printf(b, "\",\"sequence_number\":%zu,", k);
	if (k < 2) {
		mock_buf_str(b, "\"response\":");
		responses_object(w, "in_progress", b);
	} else if (k == 2) {
		mock_buf_printf(b, "\"output_index\":0,\"item\":{\"id\":\"msg_mock%s\","
		    "\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],"
		    "\"role\":\"assistant\"}", w->id);
	} else {
		mock_buf_printf(b, "\"item_id\":\"msg_mock%s\",\"output_index\":0,"
		    "\"content_index\":0,\"part\":{\"type\":\"output_text\","
		    "\"annotations\":[],\"text\":\"\"}", w->id);
	}
	mock_buf_str(b, "}");
	sse_end(b);
}

static void anthropic_pre(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	if (k == 0) {
		sse_begin(b, "message_start");
		mock_buf_printf(b, "{\"type\":\"message_start\",\"message\":{\"id\":"
		    "\"msg_mock%s\",\"type\":\"message\",\"role\":\"assistant\","
		    "\"model\":\"%s\",\"content\":[],\"stop_reason\":null,"
		    "\"stop_sequence\":null", w->id, w->model);
		if (w->usage)
			mock_buf_printf(b, ",\"usage\":{\"input_tokens\":%" PRIu64
			    ",\"cache_creation_input_tokens\":0,"
			    "\"cache_read_input_tokens\":0,\"output_tokens\":1}",
			    w->input_tokens);
		mock_buf_str(b, "}}");
	} else if (k == 1 && w->reasoning > 0) {
		sse_begin(b, "content_block_start");
		mock_buf_str(b, "{\"type\":\"content_block_start\",\"index\":0,"
		    "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\","
		    "\"signature\":\"\"}}");
	} else if (k == 1) {
		sse_begin(b, "content_block_start");
		mock_buf_str(b, "{\"type\":\"content_block_start\",\"index\":0,"
		    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
	} else {
		sse_begin(b, "ping");
		mock_buf_str(b, "{\"type\": \"ping\"}");
	}
	sse_end(b);
}

static void workflow_pre(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	sse_begin(b, NULL);
	mock_buf_printf(b, "{\"event\":\"%s\",", k == 0 ? "workflow_started" :
	    "node_started");
	mock_wire_dify_ids(w, b);
	if (k == 0)
		mock_buf_printf(b, ",\"data\":{\"id\":\"%s\",\"workflow_id\":"
		    "\"mock-workflow\",\"sequence_number\":1,\"created_at\":%"
		    PRIu64 "}}", w->id, w->created_s);
	else
		mock_buf_printf(b, ",\"data\":{\"id\":\"node-%s\",\"node_id\":\"llm\","
		    "\"node_type\":\"llm\",\"title\":\"LLM\",\"index\":1,"
		    "\"created_at\":%" PRIu64 "}}", w->id, w->created_s);
	sse_end(b);
}

void mock_wire_pre(const struct mock_wire *w, size_t k, struct mock_buf *b)
{
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
		openai_chunk_begin(w, b);
		mock_buf_str(b, "\"choices\":[{\"index\":0,\"delta\":{\"role\":"
		    "\"assistant\",\"content\":\"\",\"refusal\":null},"
		    "\"logprobs\":null,\"finish_reason\":null}]}");
		sse_end(b);
		break;
	case MOCK_API_RESPONSES:
		if (k >= 2 && w->reasoning > 0)
			responses_reasoning_pre(w, k, b);
		else
			responses_pre(w, k, b);
		break;
	case MOCK_API_ANTHROPIC:
		anthropic_pre(w, k, b);
		break;
	case MOCK_API_DIFY_CHAT:
		mock_buf_str(b, "event: ping\n\n");
		break;
	case MOCK_API_DIFY_WORKFLOW:
		workflow_pre(w, k, b);
		break;
	default:
		break;
	}
}

void mock_wire_ollama_begin(const struct mock_wire *w, struct mock_buf *b)
{
	char ts[32];

	util_rfc3339_ms(util_wall_ms(), ts);
	mock_buf_printf(b, "{\"model\":\"%s\",\"created_at\":\"%s\",", w->model, ts);
}

/* Reasoning tokens among the first n. */
static uint64_t reasoning_of(const struct mock_wire *w, uint64_t n)
{
	return n < w->reasoning ? n : w->reasoning;
}

static void gemini_chunk(const struct mock_wire *w, uint64_t first,
    uint64_t count, int last, struct mock_buf *b)
{
	uint64_t done = first + count, thoughts = reasoning_of(w, done);

	mock_buf_str(b, "data: {\"candidates\": [{\"content\": {\"parts\": "
	    "[{\"text\": ");
	mock_wire_text(w, first, count, b);
	mock_buf_printf(b, "%s}],\"role\": \"model\"}%s,\"index\": 0}]",
	    count > 0 && first < w->reasoning ? ",\"thought\": true" : "",
	    last ? ",\"finishReason\": \"STOP\"" : "");
	/* candidatesTokenCount leaves the thoughts out, as Gemini's does */
	if (w->usage && thoughts > 0)
		mock_buf_printf(b, ",\"usageMetadata\": {\"promptTokenCount\": %" PRIu64
		    ",\"candidatesTokenCount\": %" PRIu64 ",\"totalTokenCount\": %"
		    PRIu64 ",\"thoughtsTokenCount\": %" PRIu64 "}", w->input_tokens,
		    done - thoughts, w->input_tokens + done, thoughts);
	else if (w->usage)
		mock_buf_printf(b, ",\"usageMetadata\": {\"promptTokenCount\": %" PRIu64
		    ",\"candidatesTokenCount\": %" PRIu64 ",\"totalTokenCount\": %"
		    PRIu64 "}", w->input_tokens, done, w->input_tokens + done);
	mock_buf_printf(b, ",\"modelVersion\": \"%s\",\"responseId\": \"mock%s\"}"
	    "\r\n\r\n", w->model, w->id);
}

static void tgi_event(const struct mock_wire *w, uint64_t first,
    uint64_t count, int last, struct mock_buf *b)
{
	uint64_t s = w->seed ^ first;
	uint64_t r = rng_next(&s);

	/* TGI (axum) writes "data:" without the optional space. */
	mock_buf_printf(b, "data:{\"index\":%" PRIu64 ",\"token\":{\"id\":%" PRIu64
	    ",\"text\":", w->events_sent, r % 32000);
	mock_wire_text(w, first, count, b);
	mock_buf_printf(b, ",\"logprob\":-%.4f,\"special\":%s},\"generated_text\":",
	    (double)(r >> 40 & 1023) / 1024.0, count ? "false" : "true");
	if (!last) {
		mock_buf_str(b, "null,\"details\":null}\n\n");
		return;
	}
	mock_wire_text(w, 0, first + count, b);
	if (w->usage)
		mock_buf_printf(b, ",\"details\":{\"finish_reason\":\"length\","
		    "\"generated_tokens\":%" PRIu64 ",\"seed\":null}}\n\n",
		    first + count);
	else
		mock_buf_str(b, ",\"details\":null}\n\n");
}

static void openai_token(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	openai_chunk_begin(w, b);
	if (w->api == MOCK_API_OPENAI_CHAT) {
		/* DeepSeek's and vLLM's reasoning field */
		mock_buf_str(b, first < w->reasoning ?
		    "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":" :
		    "\"choices\":[{\"index\":0,\"delta\":{\"content\":");
		mock_wire_text(w, first, count, b);
		mock_buf_str(b, "}");
	} else {
		mock_buf_str(b, "\"choices\":[{\"text\":");
		mock_wire_text(w, first, count, b);
		mock_buf_str(b, ",\"index\":0");
	}
	mock_buf_str(b, ",\"logprobs\":null,\"finish_reason\":null}]");
	/* vLLM's continuous_usage_stats: the counts so far on every chunk */
	if (w->continuous_usage)
		mock_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%" PRIu64
		    ",\"completion_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64 "}",
		    w->input_tokens, first + count, w->input_tokens + first + count);
	mock_buf_str(b, "}");
	sse_end(b);
}

static void responses_token(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	uint64_t seq = 4 + w->events_sent + w->seq_extra;

	if (first < w->reasoning) {
		sse_begin(b, "response.reasoning_summary_text.delta");
		mock_buf_printf(b, "{\"type\":\"response.reasoning_summary_text.delta\","
		    "\"sequence_number\":%" PRIu64 ",\"item_id\":\"rs_mock%s\","
		    "\"output_index\":0,\"summary_index\":0,\"delta\":", seq, w->id);
	} else {
		sse_begin(b, "response.output_text.delta");
		mock_buf_printf(b, "{\"type\":\"response.output_text.delta\","
		    "\"sequence_number\":%" PRIu64 ",\"item_id\":\"msg_mock%s\","
		    "\"output_index\":%d,\"content_index\":0,\"delta\":", seq, w->id,
		    w->reasoning > 0);
	}
	mock_wire_text(w, first, count, b);
	mock_buf_str(b, "}");
	sse_end(b);
}

/* The reasoning item is done, the message item begins (Responses). */
static void responses_answer_begins(struct mock_wire *w, struct mock_buf *b)
{
	uint64_t seq = 4 + w->events_sent + w->seq_extra;

	sse_begin(b, "response.reasoning_summary_part.done");
	mock_buf_printf(b, "{\"type\":\"response.reasoning_summary_part.done\","
	    "\"sequence_number\":%" PRIu64 ",\"item_id\":\"rs_mock%s\","
	    "\"output_index\":0,\"summary_index\":0,\"part\":{\"type\":"
	    "\"summary_text\",\"text\":", seq, w->id);
	mock_wire_text(w, 0, w->reasoning, b);
	mock_buf_str(b, "}}");
	sse_end(b);
	sse_begin(b, "response.output_item.done");
	mock_buf_printf(b, "{\"type\":\"response.output_item.done\","
	    "\"sequence_number\":%" PRIu64 ",\"output_index\":0,\"item\":{\"id\":"
	    "\"rs_mock%s\",\"type\":\"reasoning\",\"summary\":[]}}", seq + 1, w->id);
	sse_end(b);
	sse_begin(b, "response.output_item.added");
	mock_buf_printf(b, "{\"type\":\"response.output_item.added\","
	    "\"sequence_number\":%" PRIu64 ",\"output_index\":1,\"item\":{\"id\":"
	    "\"msg_mock%s\",\"type\":\"message\",\"status\":\"in_progress\","
	    "\"content\":[],\"role\":\"assistant\"}}", seq + 2, w->id);
	sse_end(b);
	sse_begin(b, "response.content_part.added");
	mock_buf_printf(b, "{\"type\":\"response.content_part.added\","
	    "\"sequence_number\":%" PRIu64 ",\"item_id\":\"msg_mock%s\","
	    "\"output_index\":1,\"content_index\":0,\"part\":{\"type\":"
	    "\"output_text\",\"annotations\":[],\"text\":\"\"}}", seq + 3, w->id);
	sse_end(b);
	w->seq_extra += 4;
}

static void anthropic_token(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	sse_begin(b, "content_block_delta");
	if (first < w->reasoning)
		mock_buf_str(b, "{\"type\":\"content_block_delta\",\"index\":0,"
		    "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":");
	else
		mock_buf_printf(b, "{\"type\":\"content_block_delta\",\"index\":%d,"
		    "\"delta\":{\"type\":\"text_delta\",\"text\":", w->reasoning > 0);
	mock_wire_text(w, first, count, b);
	mock_buf_str(b, "}}");
	sse_end(b);
}

/* The thinking block is signed and closed, the text block opens. */
static void anthropic_answer_begins(const struct mock_wire *w, struct mock_buf *b)
{
	sse_begin(b, "content_block_delta");
	mock_buf_printf(b, "{\"type\":\"content_block_delta\",\"index\":0,"
	    "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"mock%s\"}}",
	    w->id);
	sse_end(b);
	sse_begin(b, "content_block_stop");
	mock_buf_str(b, "{\"type\":\"content_block_stop\",\"index\":0}");
	sse_end(b);
	sse_begin(b, "content_block_start");
	mock_buf_str(b, "{\"type\":\"content_block_start\",\"index\":1,"
	    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
	sse_end(b);
}

static void dify_token(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	sse_begin(b, NULL);
	if (w->api == MOCK_API_DIFY_CHAT) {
		mock_buf_str(b, "{\"event\":\"message\",");
		mock_wire_dify_ids(w, b);
		mock_buf_str(b, ",\"answer\":");
		mock_wire_text(w, first, count, b);
		mock_buf_printf(b, ",\"created_at\":%" PRIu64 "}", w->created_s);
	} else {
		mock_buf_str(b, "{\"event\":\"text_chunk\",");
		mock_wire_dify_ids(w, b);
		mock_buf_str(b, ",\"data\":{\"text\":");
		mock_wire_text(w, first, count, b);
		mock_buf_str(b, ",\"from_variable_selector\":[\"llm\",\"text\"]}}");
	}
	sse_end(b);
}

static void ollama_token(const struct mock_wire *w, uint64_t first,
    uint64_t count, struct mock_buf *b)
{
	mock_wire_ollama_begin(w, b);
	if (w->api == MOCK_API_OLLAMA_CHAT && first < w->reasoning) {
		mock_buf_str(b, "\"message\":{\"role\":\"assistant\",\"content\":\"\","
		    "\"thinking\":");
		mock_wire_text(w, first, count, b);
		mock_buf_str(b, "}");
	} else if (w->api == MOCK_API_OLLAMA_CHAT) {
		mock_buf_str(b, "\"message\":{\"role\":\"assistant\",\"content\":");
		mock_wire_text(w, first, count, b);
		mock_buf_str(b, "}");
	} else if (first < w->reasoning) {
		mock_buf_str(b, "\"response\":\"\",\"thinking\":");
		mock_wire_text(w, first, count, b);
	} else {
		mock_buf_str(b, "\"response\":");
		mock_wire_text(w, first, count, b);
	}
	mock_buf_str(b, ",\"done\":false}\n");
}

void mock_wire_token(struct mock_wire *w, uint64_t count, struct mock_buf *b)
{
	uint64_t first = w->tokens_sent;
	int last = first + count >= w->output_tokens;

	if (w->reasoning > 0 && first >= w->reasoning && !w->answering) {
		w->answering = 1;
		if (w->api == MOCK_API_ANTHROPIC)
			anthropic_answer_begins(w, b);
		else if (w->api == MOCK_API_RESPONSES)
			responses_answer_begins(w, b);
	}
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
	case MOCK_API_OPENAI_LEGACY:
		openai_token(w, first, count, b);
		break;
	case MOCK_API_RESPONSES:
		responses_token(w, first, count, b);
		break;
	case MOCK_API_ANTHROPIC:
		anthropic_token(w, first, count, b);
		break;
	case MOCK_API_DIFY_CHAT:
	case MOCK_API_DIFY_WORKFLOW:
		dify_token(w, first, count, b);
		break;
	case MOCK_API_GEMINI:
		gemini_chunk(w, first, count, last, b);
		break;
	case MOCK_API_TGI:
		tgi_event(w, first, count, last, b);
		break;
	case MOCK_API_OLLAMA_CHAT:
	case MOCK_API_OLLAMA_GENERATE:
		ollama_token(w, first, count, b);
		break;
	case MOCK_API_COUNT:
		break;
	}
	w->tokens_sent += count;
	w->events_sent++;
}

size_t mock_wire_end_count(const struct mock_wire *w)
{
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
	case MOCK_API_OPENAI_LEGACY:
		return w->usage ? 3 : 2;
	case MOCK_API_RESPONSES:
		return 4;
	case MOCK_API_ANTHROPIC:
		return 3;
	case MOCK_API_DIFY_WORKFLOW:
		return 2;
	case MOCK_API_GEMINI:
	case MOCK_API_TGI:
		/* The last token event ends these; with no token, one empty one. */
		return w->output_tokens == 0;
	default:
		return 1;
	}
}

static void openai_end(const struct mock_wire *w, size_t k, struct mock_buf *b)
{
	uint64_t n = w->tokens_sent;

	if (k == 2 || (k == 1 && !w->usage)) {
		mock_buf_str(b, "data: [DONE]\n\n");
		return;
	}
	openai_chunk_begin(w, b);
	if (k == 0 && w->api == MOCK_API_OPENAI_CHAT)
		mock_buf_str(b, "\"choices\":[{\"index\":0,\"delta\":{},"
		    "\"logprobs\":null,\"finish_reason\":\"stop\"}]}");
	else if (k == 0)
		mock_buf_str(b, "\"choices\":[{\"text\":\"\",\"index\":0,"
		    "\"logprobs\":null,\"finish_reason\":\"stop\"}]}");
	else if (w->reasoning > 0)
		mock_buf_printf(b, "\"choices\":[],\"usage\":{\"prompt_tokens\":%" PRIu64
		    ",\"completion_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64
		    ",\"completion_tokens_details\":{\"reasoning_tokens\":%" PRIu64 "}",
		    w->input_tokens, n, w->input_tokens + n, reasoning_of(w, n));
	else
		mock_buf_printf(b, "\"choices\":[],\"usage\":{\"prompt_tokens\":%" PRIu64
		    ",\"completion_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64,
		    w->input_tokens, n, w->input_tokens + n);
	if (k == 1) {
		/* --prefix-cache: the cached share, as OpenAI and vLLM report it */
		if (w->cached_tokens >= 0)
			mock_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%"
			    PRId64 "}", w->cached_tokens);
		mock_buf_str(b, "}}");
	}
	sse_end(b);
}

static void responses_usage(const struct mock_wire *w, struct mock_buf *b)
{
	uint64_t n = w->tokens_sent;

	if (!w->usage) {
		mock_buf_str(b, "null");
		return;
	}
	mock_buf_printf(b, "{\"input_tokens\":%" PRIu64 ",\"input_tokens_details\":"
	    "{\"cached_tokens\":%" PRId64 "},\"output_tokens\":%" PRIu64 ","
	    "\"output_tokens_details\":{\"reasoning_tokens\":%" PRIu64 "},"
	    "\"total_tokens\":%" PRIu64 "}", w->input_tokens,
	    w->cached_tokens > 0 ? w->cached_tokens : 0, n,
	    reasoning_of(w, n), w->input_tokens + n);
}

void mock_wire_responses_message(const struct mock_wire *w,
    struct mock_buf *b)
{
	mock_buf_printf(b, "{\"id\":\"msg_mock%s\",\"type\":\"message\",\"status\":"
	    "\"completed\",\"content\":[{\"type\":\"output_text\",\"annotations\":[],"
	    "\"text\":", w->id);
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_str(b, "}],\"role\":\"assistant\"}");
}

static void responses_end(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	static const char *const names[] = {
		"response.output_text.done", "response.content_part.done",
		"response.output_item.done", "response.completed",
	};

	sse_begin(b, names[k]);
	mock_buf_printf(b, "{\"type\":\"%s\",\"sequence_number\":%" PRIu64 ",",
	    names[k], 4 + w->events_sent + w->seq_extra + k);
	if (k < 2)
		mock_buf_printf(b, "\"item_id\":\"msg_mock%s\",\"output_index\":%d,"
		    "\"content_index\":0,", w->id, w->answering);
	if (k == 0) {
		mock_buf_str(b, "\"text\":");
		mock_wire_text(w, 0, w->tokens_sent, b);
	} else if (k == 1) {
		mock_buf_str(b, "\"part\":{\"type\":\"output_text\",\"annotations\":[],"
		    "\"text\":");
		mock_wire_text(w, 0, w->tokens_sent, b);
		mock_buf_str(b, "}");
	} else if (k == 2) {
		mock_buf_printf(b, "\"output_index\":%d,\"item\":", w->answering);
		mock_wire_responses_message(w, b);
	} else {
		mock_buf_printf(b, "\"response\":{\"id\":\"resp_mock%s\",\"object\":"
		    "\"response\",\"created_at\":%" PRIu64 ",\"status\":\"completed\","
		    "\"error\":null,\"incomplete_details\":null,\"model\":\"%s\","
		    "\"output\":[", w->id, w->created_s, w->model);
		mock_wire_responses_message(w, b);
		mock_buf_str(b, "],\"usage\":");
		responses_usage(w, b);
		mock_buf_str(b, "}");
	}
	mock_buf_str(b, "}");
	sse_end(b);
}

static void anthropic_end(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	if (k == 0) {
		sse_begin(b, "content_block_stop");
		mock_buf_printf(b, "{\"type\":\"content_block_stop\",\"index\":%d}",
		    w->answering);
	} else if (k == 1) {
		sse_begin(b, "message_delta");
		mock_buf_str(b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
		    "\"end_turn\",\"stop_sequence\":null}");
		if (w->usage)
			mock_buf_printf(b, ",\"usage\":{\"output_tokens\":%" PRIu64 "}",
			    w->tokens_sent);
		mock_buf_str(b, "}");
	} else {
		sse_begin(b, "message_stop");
		mock_buf_str(b, "{\"type\":\"message_stop\"}");
	}
	sse_end(b);
}

void mock_wire_dify_metadata(const struct mock_wire *w, struct mock_buf *b)
{
	uint64_t n = w->tokens_sent;
	double latency = (double)(util_now_us() - w->start_us) / 1e6;

	mock_buf_str(b, "\"metadata\":{");
	if (w->usage)
		mock_buf_printf(b, "\"usage\":{\"prompt_tokens\":%" PRIu64
		    ",\"completion_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64
		    ",\"currency\":\"USD\",\"latency\":%.3f}", w->input_tokens, n,
		    w->input_tokens + n, latency);
	mock_buf_str(b, "}");
}

static void workflow_end(const struct mock_wire *w, size_t k,
    struct mock_buf *b)
{
	double elapsed = (double)(util_now_us() - w->start_us) / 1e6;
	uint64_t total = w->input_tokens + w->tokens_sent;

	sse_begin(b, NULL);
	mock_buf_printf(b, "{\"event\":\"%s\",", k == 0 ? "node_finished" :
	    "workflow_finished");
	mock_wire_dify_ids(w, b);
	if (k == 0)
		mock_buf_printf(b, ",\"data\":{\"id\":\"node-%s\",\"node_id\":\"llm\","
		    "\"node_type\":\"llm\",\"title\":\"LLM\",\"index\":1,\"status\":"
		    "\"succeeded\",\"elapsed_time\":%.3f,\"outputs\":{\"text\":", w->id,
		    elapsed);
	else
		mock_buf_printf(b, ",\"data\":{\"id\":\"%s\",\"workflow_id\":"
		    "\"mock-workflow\",\"status\":\"succeeded\",\"error\":null,"
		    "\"elapsed_time\":%.3f,\"total_steps\":2,\"outputs\":{\"text\":",
		    w->id, elapsed);
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_str(b, "}");
	if (w->usage && k == 0)
		mock_buf_printf(b, ",\"execution_metadata\":{\"total_tokens\":%"
		    PRIu64 "}", total);
	else if (w->usage)
		mock_buf_printf(b, ",\"total_tokens\":%" PRIu64, total);
	mock_buf_printf(b, ",\"created_at\":%" PRIu64 "}}", w->created_s);
	sse_end(b);
}

void mock_wire_ollama_done(const struct mock_wire *w, struct mock_buf *b)
{
	uint64_t ns = (util_now_us() - w->start_us) * 1000;

	mock_buf_str(b, "\"done_reason\":\"stop\",\"done\":true");
	mock_buf_printf(b, ",\"total_duration\":%" PRIu64 ",\"load_duration\":0", ns);
	if (w->usage)
		mock_buf_printf(b, ",\"prompt_eval_count\":%" PRIu64
		    ",\"prompt_eval_duration\":0,\"eval_count\":%" PRIu64
		    ",\"eval_duration\":%" PRIu64, w->input_tokens, w->tokens_sent, ns);
	mock_buf_str(b, "}");
}

void mock_wire_end(const struct mock_wire *w, size_t k, struct mock_buf *b)
{
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
	case MOCK_API_OPENAI_LEGACY:
		openai_end(w, k, b);
		break;
	case MOCK_API_RESPONSES:
		responses_end(w, k, b);
		break;
	case MOCK_API_ANTHROPIC:
		anthropic_end(w, k, b);
		break;
	case MOCK_API_DIFY_CHAT:
		sse_begin(b, NULL);
		mock_buf_str(b, "{\"event\":\"message_end\",");
		mock_wire_dify_ids(w, b);
		mock_buf_str(b, ",");
		mock_wire_dify_metadata(w, b);
		mock_buf_str(b, ",\"files\":null}");
		sse_end(b);
		break;
	case MOCK_API_DIFY_WORKFLOW:
		workflow_end(w, k, b);
		break;
	case MOCK_API_GEMINI:
		gemini_chunk(w, 0, 0, 1, b);
		break;
	case MOCK_API_TGI:
		tgi_event(w, 0, 0, 1, b);
		break;
	case MOCK_API_OLLAMA_CHAT:
	case MOCK_API_OLLAMA_GENERATE:
		mock_wire_ollama_begin(w, b);
		if (w->api == MOCK_API_OLLAMA_CHAT)
			mock_buf_str(b, "\"message\":{\"role\":\"assistant\","
			    "\"content\":\"\"},");
		else
			mock_buf_str(b, "\"response\":\"\",");
		mock_wire_ollama_done(w, b);
		mock_buf_str(b, "\n");
		break;
	case MOCK_API_COUNT:
		break;
	}
}

size_t mock_wire_error_count(const struct mock_wire *w)
{
	return w->api == MOCK_API_RESPONSES ? 2 : 1;
}

static void responses_error(const struct mock_wire *w, size_t k,
    const char *msg, struct mock_buf *b)
{
	sse_begin(b, k == 0 ? "error" : "response.failed");
	if (k == 0)
		mock_buf_printf(b, "{\"type\":\"error\",\"sequence_number\":%" PRIu64
		    ",\"error\":{\"type\":\"server_error\",\"code\":\"mock_fault\","
		    "\"message\":\"%s\",\"param\":null}}", 4 + w->events_sent, msg);
	else
		mock_buf_printf(b, "{\"type\":\"response.failed\",\"sequence_number\":%"
		    PRIu64 ",\"response\":{\"id\":\"resp_mock%s\",\"object\":"
		    "\"response\",\"created_at\":%" PRIu64 ",\"status\":\"failed\","
		    "\"error\":{\"code\":\"server_error\",\"message\":\"%s\"},"
		    "\"model\":\"%s\",\"output\":[],\"usage\":null}}",
		    5 + w->events_sent, w->id, w->created_s, msg, w->model);
	sse_end(b);
}

void mock_wire_error(const struct mock_wire *w, size_t k, struct mock_buf *b)
{
	char msg[96];

	snprintf(msg, sizeof msg, "mock fault: error after %" PRIu64 " tokens",
	    w->tokens_sent);
	switch (w->api) {
	case MOCK_API_RESPONSES:
		responses_error(w, k, msg, b);
		break;
	case MOCK_API_ANTHROPIC:
		mock_buf_printf(b, "event: error\ndata: {\"type\":\"error\",\"error\":"
		    "{\"type\":\"overloaded_error\",\"message\":\"%s\"}}\n\n", msg);
		break;
	case MOCK_API_DIFY_CHAT:
	case MOCK_API_DIFY_WORKFLOW:
		/* Dify names it in the JSON; the event field serves EventSource. */
		sse_begin(b, "error");
		mock_buf_str(b, "{\"event\":\"error\",");
		mock_wire_dify_ids(w, b);
		mock_buf_printf(b, ",\"status\":500,\"code\":\"mock_fault\","
		    "\"message\":\"%s\"}", msg);
		sse_end(b);
		break;
	case MOCK_API_GEMINI:
		mock_buf_printf(b, "data: {\"error\": {\"code\": 500,\"message\": \"%s\","
		    "\"status\": \"INTERNAL\"}}\r\n\r\n", msg);
		break;
	case MOCK_API_TGI:
		mock_buf_printf(b, "data:{\"error\":\"%s\",\"error_type\":\"generation\"}"
		    "\n\n", msg);
		break;
	case MOCK_API_OLLAMA_CHAT:
	case MOCK_API_OLLAMA_GENERATE:
		mock_buf_printf(b, "{\"error\":\"%s\"}\n", msg);
		break;
	default:
		mock_buf_printf(b, "data: {\"error\":{\"message\":\"%s\",\"type\":"
		    "\"server_error\",\"param\":null,\"code\":\"mock_fault\"}}\n\n", msg);
		break;
	}
}

void mock_wire_heartbeat(const struct mock_wire *w, struct mock_buf *b)
{
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
		/* an empty delta: a chunk, and no token */
		openai_chunk_begin(w, b);
		mock_buf_str(b, "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},"
		    "\"logprobs\":null,\"finish_reason\":null}]}");
		sse_end(b);
		break;
	case MOCK_API_ANTHROPIC:
		mock_buf_str(b, "event: ping\ndata: {\"type\": \"ping\"}\n\n");
		break;
	case MOCK_API_OLLAMA_CHAT:
		mock_wire_ollama_begin(w, b);
		mock_buf_str(b, "\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
		    "\"done\":false}\n");
		break;
	case MOCK_API_OLLAMA_GENERATE:
		mock_wire_ollama_begin(w, b);
		mock_buf_str(b, "\"response\":\"\",\"done\":false}\n");
		break;
	default:
		mock_wire_keepalive(w, b);     /* Dify's ping, else a comment */
		break;
	}
}

void mock_wire_keepalive(const struct mock_wire *w, struct mock_buf *b)
{
	if (w->api == MOCK_API_DIFY_CHAT || w->api == MOCK_API_DIFY_WORKFLOW)
		mock_buf_str(b, "event: ping\n\n");
	else if (!mock_wire_ndjson(w->api))
		mock_buf_str(b, ": keep-alive\n\n");
}
