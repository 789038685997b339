/* SPDX-License-Identifier: Apache-2.0 */
/* The answers that are one JSON document: non-streaming responses and the
 * error bodies that go with an HTTP error status. */
#include "mock_wire.h"

#include <inttypes.h>
#include <stdio.h>

static void openai_usage(const struct mock_wire *w, struct mock_buf *b)
{
	uint64_t n = w->tokens_sent;

	if (!w->usage)
		return;
	mock_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%" PRIu64
	    ",\"completion_tokens\":%" PRIu64 ",\"total_tokens\":%" PRIu64,
	    w->input_tokens, n, w->input_tokens + n);
	/* --prefix-cache: the cached share, as in a stream's last usage */
	if (w->cached_tokens >= 0)
		mock_buf_printf(b, ",\"prompt_tokens_details\":{\"cached_tokens\":%"
		    PRId64 "}", w->cached_tokens);
	mock_buf_str(b, "}");
}

static void openai_body(const struct mock_wire *w, struct mock_buf *b)
{
	int chat = w->api == MOCK_API_OPENAI_CHAT;

	mock_buf_printf(b, "{\"id\":\"%smock%s\",\"object\":\"%s\",\"created\":%"
	    PRIu64 ",\"model\":\"%s\",\"choices\":[{\"index\":0,",
	    chat ? "chatcmpl-" : "cmpl-", w->id,
	    chat ? "chat.completion" : "text_completion", w->created_s, w->model);
	if (chat)
		mock_buf_str(b, "\"message\":{\"role\":\"assistant\",\"content\":");
	else
		mock_buf_str(b, "\"text\":");
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_printf(b, "%s,\"logprobs\":null,\"finish_reason\":\"stop\"}]",
	    chat ? ",\"refusal\":null}" : "");
	openai_usage(w, b);
	mock_buf_str(b, "}");
}

static void responses_body(const struct mock_wire *w, struct mock_buf *b)
{
	uint64_t n = w->tokens_sent;

	mock_buf_printf(b, "{\"id\":\"resp_mock%s\",\"object\":\"response\","
	    "\"created_at\":%" PRIu64 ",\"status\":\"completed\",\"error\":null,"
	    "\"incomplete_details\":null,\"model\":\"%s\",\"output\":[", w->id,
	    w->created_s, w->model);
	mock_wire_responses_message(w, b);
	mock_buf_str(b, "],\"usage\":");
	if (w->usage)
		mock_buf_printf(b, "{\"input_tokens\":%" PRIu64 ",\"output_tokens\":%"
		    PRIu64 ",\"total_tokens\":%" PRIu64 "}}", w->input_tokens, n,
		    w->input_tokens + n);
	else
		mock_buf_str(b, "null}");
}

static void anthropic_body(const struct mock_wire *w, struct mock_buf *b)
{
	mock_buf_printf(b, "{\"id\":\"msg_mock%s\",\"type\":\"message\",\"role\":"
	    "\"assistant\",\"model\":\"%s\",\"content\":[{\"type\":\"text\","
	    "\"text\":", w->id, w->model);
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_str(b, "}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null");
	if (w->usage)
		mock_buf_printf(b, ",\"usage\":{\"input_tokens\":%" PRIu64
		    ",\"output_tokens\":%" PRIu64 "}", w->input_tokens, w->tokens_sent);
	mock_buf_str(b, "}");
}

static void dify_body(const struct mock_wire *w, struct mock_buf *b)
{
	if (w->api == MOCK_API_DIFY_CHAT) {
		mock_buf_str(b, "{\"event\":\"message\",");
		mock_wire_dify_ids(w, b);
		mock_buf_str(b, ",\"mode\":\"chat\",\"answer\":");
		mock_wire_text(w, 0, w->tokens_sent, b);
		mock_buf_str(b, ",");
		mock_wire_dify_metadata(w, b);
		mock_buf_printf(b, ",\"created_at\":%" PRIu64 "}", w->created_s);
		return;
	}
	mock_buf_str(b, "{");
	mock_wire_dify_ids(w, b);
	mock_buf_printf(b, ",\"data\":{\"id\":\"%s\",\"workflow_id\":\"mock-workflow\","
	    "\"status\":\"succeeded\",\"outputs\":{\"text\":", w->id);
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_str(b, "},\"error\":null,\"total_steps\":2");
	if (w->usage)
		mock_buf_printf(b, ",\"total_tokens\":%" PRIu64,
		    w->input_tokens + w->tokens_sent);
	mock_buf_printf(b, ",\"created_at\":%" PRIu64 ",\"finished_at\":%" PRIu64
	    "}}", w->created_s, w->created_s);
}

static void gemini_body(const struct mock_wire *w, struct mock_buf *b)
{
	mock_buf_str(b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":");
	mock_wire_text(w, 0, w->tokens_sent, b);
	mock_buf_str(b, "}],\"role\":\"model\"},\"finishReason\":\"STOP\","
	    "\"index\":0}]");
	if (w->usage)
		mock_buf_printf(b, ",\"usageMetadata\":{\"promptTokenCount\":%" PRIu64
		    ",\"candidatesTokenCount\":%" PRIu64 ",\"totalTokenCount\":%"
		    PRIu64 "}", w->input_tokens, w->tokens_sent,
		    w->input_tokens + w->tokens_sent);
	mock_buf_printf(b, ",\"modelVersion\":\"%s\",\"responseId\":\"mock%s\"}",
	    w->model, w->id);
}

void mock_wire_body(struct mock_wire *w, struct mock_buf *b)
{
	w->tokens_sent = w->output_tokens;
	switch (w->api) {
	case MOCK_API_OPENAI_CHAT:
	case MOCK_API_OPENAI_LEGACY:
		openai_body(w, b);
		break;
	case MOCK_API_RESPONSES:
		responses_body(w, b);
		break;
	case MOCK_API_ANTHROPIC:
		anthropic_body(w, b);
		break;
	case MOCK_API_DIFY_CHAT:
	case MOCK_API_DIFY_WORKFLOW:
		dify_body(w, b);
		break;
	case MOCK_API_GEMINI:
		gemini_body(w, b);
		break;
	case MOCK_API_TGI:
		mock_buf_str(b, "{\"generated_text\":");
		mock_wire_text(w, 0, w->tokens_sent, b);
		if (w->usage)
			mock_buf_printf(b, ",\"details\":{\"finish_reason\":\"length\","
			    "\"generated_tokens\":%" PRIu64 ",\"seed\":null}}",
			    w->tokens_sent);
		else
			mock_buf_str(b, ",\"details\":null}");
		break;
	case MOCK_API_OLLAMA_CHAT:
	case MOCK_API_OLLAMA_GENERATE:
		mock_wire_ollama_begin(w, b);
		mock_buf_str(b, w->api == MOCK_API_OLLAMA_CHAT ?
		    "\"message\":{\"role\":\"assistant\",\"content\":" : "\"response\":");
		mock_wire_text(w, 0, w->tokens_sent, b);
		mock_buf_str(b, w->api == MOCK_API_OLLAMA_CHAT ? "}," : ",");
		mock_wire_ollama_done(w, b);
		break;
	case MOCK_API_COUNT:
		break;
	}
}

/* The error kinds of OpenAI, Anthropic and Gemini for common statuses. */
static const char *error_kind(enum mock_api api, int status)
{
	static const struct { int status; const char *openai, *anthropic, *gemini; }
	kinds[] = {
		{400, "invalid_request_error", "invalid_request_error", "INVALID_ARGUMENT"},
		{401, "authentication_error", "authentication_error", "UNAUTHENTICATED"},
		{403, "permission_error", "permission_error", "PERMISSION_DENIED"},
		{404, "not_found_error", "not_found_error", "NOT_FOUND"},
		{429, "rate_limit_error", "rate_limit_error", "RESOURCE_EXHAUSTED"},
		{503, "server_error", "overloaded_error", "UNAVAILABLE"},
		{529, "server_error", "overloaded_error", "UNAVAILABLE"},
	};
	size_t i;

	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (kinds[i].status == status)
			break;
	if (api == MOCK_API_ANTHROPIC)
		return i < sizeof kinds / sizeof kinds[0] ? kinds[i].anthropic : "api_error";
	if (api == MOCK_API_GEMINI)
		return i < sizeof kinds / sizeof kinds[0] ? kinds[i].gemini : "INTERNAL";
	return i < sizeof kinds / sizeof kinds[0] ? kinds[i].openai : "server_error";
}

void mock_wire_error_body(const struct mock_wire *w, int status,
    struct mock_buf *b)
{
	char msg[48];
	const char *kind = error_kind(w->api, status);

	snprintf(msg, sizeof msg, "mock fault: status %d", status);
	switch (w->api) {
	case MOCK_API_ANTHROPIC:
		mock_buf_printf(b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\","
		    "\"message\":\"%s\"}}", kind, msg);
		break;
	case MOCK_API_DIFY_CHAT:
	case MOCK_API_DIFY_WORKFLOW:
		mock_buf_printf(b, "{\"code\":\"mock_fault\",\"message\":\"%s\","
		    "\"status\":%d}", msg, status);
		break;
	case MOCK_API_GEMINI:
		mock_buf_printf(b, "{\"error\":{\"code\":%d,\"message\":\"%s\","
		    "\"status\":\"%s\"}}", status, msg, kind);
		break;
	case MOCK_API_TGI:
		mock_buf_printf(b, "{\"error\":\"%s\",\"error_type\":\"%s\"}", msg,
		    status == 429 || status == 503 ? "overloaded" :
		    status < 500 ? "validation" : "generation");
		break;
	case MOCK_API_OLLAMA_CHAT:
	case MOCK_API_OLLAMA_GENERATE:
		mock_buf_printf(b, "{\"error\":\"%s\"}", msg);
		break;
	default:
		mock_buf_printf(b, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\","
		    "\"param\":null,\"code\":null}}", msg, kind);
		break;
	}
}
