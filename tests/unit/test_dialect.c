/* SPDX-License-Identifier: Apache-2.0 */
/* The dialect rules: recorded SDK fixtures through the real parser, then
 * each rule on small hand-written events, the path table, the request and
 * path model, and non-streamed bodies.
 *
 * The fixture figures below were counted independently with a separate
 * Python WHATWG parser and the rules of docs/contract.md §4; the openai-python
 * ones match the fixtures README's table. */

#include "dialect.h"
#include "sse.h"

#include "unit.h"

#define NONE (-1)

struct fixture {
	const char *file;
	enum dialect_id d;
	int lines;          /* vercel-ai: one data payload per line, no SSE */
	int events;         /* dispatched */
	int tokens;         /* token-bearing */
	int64_t out, in;    /* last reported counts */
	int end, error;
	const char *model;  /* first model named by the stream */
};

#define OPENAI_PY(h) "openai-python/" h ".bin", DIALECT_OPENAI, 0

static const struct fixture fixtures[] = {
	/* README table: content/refusal/tool frames vs usage.completion_tokens */
	{ OPENAI_PY("e2aad469b71d1d4894ff833ea147020a9d875eb7ce644a0ff355581690a4cbfd"),
	  34, 30, 30, 14, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("7e5ea4d12e7cc064399b6631415e65923f182256b6e6b752950a3aaa2ad2320a"),
	  18, 14, 14, 79, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("a491adda08c3d4fde95f5b2ee3f60f7f745f1a56d82e62f58031cc2add502380"),
	  50, 42, 42, 79, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("4cc50a6135d254573a502310e6af1246f55edb6ad95fa24059f160996b68866d"),
	  5, 1, 1, 79, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353"),
	  14, 10, 11, 79, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("83b060bae42eb41c4f1edbb7c1542b954b37d9dfd1910b964ddebc9677e6ae85"),
	  6, 2, 2, 9, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("569c877e69429d4cbc1577d2cd6dd33878095c68badc6b6654a69769b391a1c1"),
	  15, 11, 12, 79, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("c6aa7e397b7123c3501f25df3a05d4daf7e8ad6d61ffa406ab5361fe36a8d5b1"),
	  18, 15, 24, 76, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b"),
	  26, 22, 60, 149, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("a247c49c5fcd492bfb7a02a3306ad615ed8d8f649888ebfddfbc3ee151f44d46"),
	  14, 11, 19, 48, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("d615580118391ee13492193e3a8bb74642d23ac1ca13fe37cb6e889b66f759f6"),
	  181, 177, 177, 19, 1, 0, "gpt-4o-2024-08-06" },
	{ OPENAI_PY("2018feb66ae13fcf5333d61b95849decc68d3f63bd38172889367e1afb1e04f7"),
	  11, 8, 16, 44, 1, 0, "gpt-4o-2024-08-06" },

	/* Anthropic; the four tests_lib files are UNTERMINATED: their last
	 * event, message_stop, is never dispatched, so no end is seen */
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_basic_response.txt",
	  DIALECT_ANTHROPIC, 0, 8, 3, 6, 11, 0, 0, "claude-3-opus-latest" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_tool_use_response.txt",
	  DIALECT_ANTHROPIC, 0, 14, 7, 65, 377, 0, 0, "claude-sonnet-4-20250514" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_incomplete_partial_json_response.txt",
	  DIALECT_ANTHROPIC, 0, 15, 9, 124, 450, 0, 0, "claude-3-7-sonnet-20250219" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_refusal_response.txt",
	  DIALECT_ANTHROPIC, 0, 4, 0, 0, 20, 0, 0, "claude-opus-4-7" },
	/* thinking_delta x4 and text_delta count, signature_delta does not */
	{ "anthropic-sdk-python/tests_fixtures_fable-fallback_stream-a-refusal.sse",
	  DIALECT_ANTHROPIC, 0, 14, 5, 106, 28, 1, 0, "claude-fable-5" },

	{ "prism-php/anthropic_stream-basic-text-1.sse",
	  DIALECT_ANTHROPIC, 0, 37, 31, 104, 11, 1, 0, "claude-3-7-sonnet-20250219" },
	{ "prism-php/anthropic_stream-with-tools-1.sse",
	  DIALECT_ANTHROPIC, 0, 23, 15, 96, 465, 1, 0, "claude-3-7-sonnet-20250219" },
	/* 23 thinking_delta + 15 text_delta; 452 reported */
	{ "prism-php/anthropic_stream-with-extended-thinking-1.sse",
	  DIALECT_ANTHROPIC, 0, 47, 38, 452, 50, 1, 0, "claude-3-7-sonnet-20250219" },
	{ "prism-php/deepseek_stream-basic-text-1.sse",
	  DIALECT_OPENAI, 0, 163, 160, 163, 7, 1, 0, "deepseek-chat" },
	/* hand-edited: no blank lines, so a WHATWG parser dispatches nothing */
	{ "prism-php/gemini_stream-basic-text-1.sse",
	  DIALECT_GEMINI, 0, 0, 0, NONE, NONE, 0, 0, NULL },
	/* CRLF framing; thought parts are tokens; the last chunk's text is "";
	 * N = candidatesTokenCount 15 + thoughtsTokenCount 95 */
	{ "prism-php/gemini_stream-with-tools-thought-1.json",
	  DIALECT_GEMINI, 0, 4, 2, 110, 131, 0, 0, "gemini-3-pro-preview" },
	/* UNTERMINATED: the final [DONE] is not dispatched */
	{ "prism-php/groq_stream-basic-text-1.sse",
	  DIALECT_OPENAI, 0, 35, 33, 50, 7, 0, 0, "llama-3.1-70b-versatile" },
	{ "prism-php/mistral_stream-basic-text-1-1.sse",
	  DIALECT_OPENAI, 0, 15, 12, 13, 7, 1, 0, "mistral-small-latest" },
	/* NDJSON: 37 lines, the last (done) has empty content */
	{ "prism-php/ollama_stream-basic-text-1.sse",
	  DIALECT_OLLAMA, 0, 37, 36, 37, 37, 1, 0, "granite3-dense:8b" },
	{ "prism-php/openai_stream-basic-text-responses-1.json",
	  DIALECT_OPENAI_RESPONSES, 0, 68, 60, 62, 10, 1, 0, "gpt-4-0613" },
	{ "prism-php/openai_stream-rate-limited-1.json",
	  DIALECT_OPENAI_RESPONSES, 0, 4, 0, NONE, NONE, 1, 1, "gpt-4o-2024-08-06" },
	{ "prism-php/openai_stream-unknown-error-responses-1.json",
	  DIALECT_OPENAI_RESPONSES, 0, 4, 0, NONE, NONE, 1, 1, "gpt-4o-2024-08-06" },
	{ "prism-php/openai_stream-with-tools-responses-1.json",
	  DIALECT_OPENAI_RESPONSES, 0, 29, 20, 52, 92, 1, 0, "gpt-4o-2024-08-06" },
	/* UNTERMINATED "data: [DONE] ": usage seen, no end */
	{ "prism-php/openrouter_stream-text-with-a-prompt-1.sse",
	  DIALECT_OPENAI, 0, 19, 17, 35, 7, 0, 0, "openai/gpt-4-turbo" },
	/* UNTERMINATED, and no usage at all */
	{ "prism-php/xai_stream-basic-text-responses-with-zeros-1.json",
	  DIALECT_OPENAI, 0, 7, 6, NONE, NONE, 0, 0, "grok-4" },

	{ "vercel-ai/anthropic-text.chunks.txt",
	  DIALECT_ANTHROPIC, 1, 12, 6, 30, 12, 1, 0, "claude-sonnet-4-5-20250929" },
	/* candidates 23 and 29, thoughts 185 and 256 */
	{ "vercel-ai/google-text.chunks.txt",
	  DIALECT_GEMINI, 1, 3, 2, 208, 9, 0, 0, "gemini-3-pro-preview" },
	{ "vercel-ai/google-reasoning.chunks.txt",
	  DIALECT_GEMINI, 1, 3, 2, 285, 9, 0, 0, "gemini-3-pro-preview" },
	{ "vercel-ai/openai-text.chunks.txt",
	  DIALECT_OPENAI, 1, 303, 300, 300, 16, 0, 0, "gpt-4.1-nano-2025-04-14" },
	{ "vercel-ai/openai-completion-text.chunks.txt",
	  DIALECT_OPENAI, 1, 17, 16, 16, 14, 0, 0,
	  "gpt-3.5-turbo-instruct:20230824-v2" },
	{ "vercel-ai/openai-error.1.chunks.txt",
	  DIALECT_OPENAI_RESPONSES, 1, 4, 0, NONE, NONE, 1, 1,
	  "gpt-5-nano-2025-08-07" },
	{ "vercel-ai/mistral-text.chunks.txt",
	  DIALECT_OPENAI, 1, 8, 6, 8, 13, 0, 0, "mistral-small-latest" },
};

/* What a stream added up to. */
struct tally {
	enum dialect_id d;
	int events, tokens, end, error;
	int64_t out, in;
	char model[128];
};

static void tally_event(void *arg, const struct sse_event *ev)
{
	struct tally *t = arg;
	struct dialect_info info;

	dialect_classify(t->d, ev, &info);
	t->events++;
	t->tokens += info.token;
	t->end |= info.end;
	t->error |= info.error;
	if (info.output_tokens >= 0)
		t->out = info.output_tokens;
	if (info.input_tokens >= 0)
		t->in = info.input_tokens;
	if (t->model[0] == '\0' && info.model_len > 0 &&
	    info.model_len < sizeof(t->model))
		memcpy(t->model, info.model, info.model_len);
}

static char *read_fixture(const char *name, size_t *len)
{
	const char *dir = getenv("TOKENTAP_FIXTURES");
	char path[1024];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/%s",
	    dir ? dir : "tests/fixtures/streams", name);
	f = fopen(path, "rb");
	if (f == NULL)
		fail_msg("cannot open fixture %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Every event of a recording, whole: parsed as SSE (NDJSON for Ollama),
 * or one data payload per line for the vercel-ai files. */
static void each_event(enum dialect_id d, int lines, const char *buf, size_t len,
    sse_event_fn fn, void *arg)
{
	struct sse_parser p;

	if (lines) {
		for (const char *q = buf, *nl; q < buf + len; q = nl + 1) {
			struct sse_event ev = { .type = "", .id = "" };
			nl = memchr(q, '\n', (size_t)(buf + len - q));
			if (nl == NULL)
				nl = buf + len;
			ev.data = q;
			ev.data_len = (size_t)(nl - q);
			if (ev.data_len > 0)
				fn(arg, &ev);
		}
		return;
	}
	sse_init(&p, d == DIALECT_OLLAMA ? SSE_MODE_NDJSON : SSE_MODE_EVENTS, 1 << 20,
	    fn, arg);
	sse_feed(&p, buf, len);
	sse_free(&p);
}

/* Runs the file through the parser in pieces of at most `piece` bytes
 * (0: whole), or line by line for the vercel-ai payload files. */
static void run_fixture(const struct fixture *fx, const char *buf, size_t len,
    size_t piece, struct tally *t)
{
	struct sse_parser p;
	unsigned seed = 1;

	memset(t, 0, sizeof(*t));
	t->d = fx->d;
	t->out = t->in = NONE;
	if (fx->lines) {
		each_event(fx->d, 1, buf, len, tally_event, t);
		return;
	}
	sse_init(&p, fx->d == DIALECT_OLLAMA ? SSE_MODE_NDJSON : SSE_MODE_EVENTS,
	    1 << 20, tally_event, t);
	for (size_t at = 0, n; at < len; at += n) {
		seed = seed * 1103515245u + 12345u;
		n = piece ? 1 + (seed >> 16) % piece : len;
		if (n > len - at)
			n = len - at;
		sse_feed(&p, buf + at, n);
	}
	assert_int_equal(p.events, (uint64_t)t->events);
	sse_free(&p);
}

static void same_answer(const struct dialect_info *a, const struct dialect_info *b)
{
	assert_int_equal(a->token, b->token);
	assert_int_equal(a->end, b->end);
	assert_int_equal(a->error, b->error);
	assert_int_equal(a->keepalive, b->keepalive);
	assert_int_equal(a->output_tokens, b->output_tokens);
	assert_int_equal(a->input_tokens, b->input_tokens);
	assert_int_equal(a->reasoning, b->reasoning);
	assert_int_equal(a->reasoning_tokens, b->reasoning_tokens);
	assert_int_equal(a->model_len, b->model_len);
	if (b->model_len > 0)
		assert_memory_equal(a->model, b->model, b->model_len);
	assert_int_equal(a->n_finish, b->n_finish);
	for (unsigned i = 0; i < b->n_finish; i++) {
		assert_int_equal(a->finish[i].len, b->finish[i].len);
		assert_memory_equal(a->finish[i].s, b->finish[i].s, b->finish[i].len);
	}
}

/* Every event of every recording, classified with and without the
 * byte-level fast path: the answers must be the same. */
static int fast_hits, openai_tokens;

static void compare_event(void *arg, const struct sse_event *ev)
{
	const enum dialect_id *d = arg;
	struct dialect_info fast, full;

	dialect_fast_path = 1;
	dialect_classify(*d, ev, &fast);
	dialect_fast_path = 0;
	dialect_classify(*d, ev, &full);
	dialect_fast_path = 1;
	same_answer(&fast, &full);
	fast_hits += fast.token;
	if (*d == DIALECT_OPENAI)
		openai_tokens += full.token;
}

static void test_fast_path_matches_full_parse(void **state)
{
	(void)state;
	fast_hits = openai_tokens = 0;
	dialect_fast_taken = 0;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		const struct fixture *fx = &fixtures[i];
		enum dialect_id d = fx->d;
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		each_event(d, fx->lines, buf, len, compare_event, &d);
		free(buf);
	}
	/* the recordings are mostly content chunks: the fast path was taken
	 * for most of the token events */
	assert_true(fast_hits > 500);
	print_message("openai token events %d, by the fast path %llu\n", openai_tokens,
	    (unsigned long long)dialect_fast_taken);
	/* all but the tool-call and refusal frames */
	assert_true(dialect_fast_taken * 10 >= (uint64_t)openai_tokens * 8);
	/* and chunks that only look close fall back to the full parse */
	{
		static const char *const tricky[] = {
			"{\"choices\":[{\"delta\":{\"content\": \"x\"}}],\"usage\": {\"completion_tokens\":3}}",
			"{\"choices\":[{\"delta\":{\"content\":\"\"}}],\"model\":\"m\"}",
			"{\"choices\":[{\"delta\":{\"content\":null,\"refusal\":\"no\"}}]}",
			"{\"error\":{\"message\":\"x\"},\"choices\":[{\"delta\":{\"content\":\"y\"}}]}",
			"{\"model\":\"a\\\"b\",\"choices\":[{\"delta\":{\"content\":\"y\"}}],\"usage\":null}",
			/* only the delta's own content counts: not one nested in
			 * it, nor one after it closed, nor a key ending in it */
			"{\"choices\":[{\"delta\":{\"x\":{\"content\":\"y\"},\"content\":\"\"}}]}",
			"{\"choices\":[{\"delta\":{\"role\":\"a\"},\"x\":{\"content\":\"y\"}}]}",
			"{\"choices\":[{\"delta\":{\"a\\\"content\":\"y\"}}]}",
			"{\"choices\":[{\"delta\":{\"content\":\"y\"}}],\"usage\":{\"completion_tokens\":3},\"usage\":null}",
			"{\"choices\":[{\"delta\":[\"content\",\"y\"]}]}",
			/* a delta at the right depth, under another key */
			"{\"cho1ices\":[{\"delta\":{\"content\":\"x\"}}]}",
			"{\"choices\":[],\"x\":[{\"delta\":{\"content\":\"x\"}}]}",
			/* cut short, or not ending with the object */
			"{\"choices\":[{\"delta\":",
			"{\"choices\":[{\"delta\": ",
			"{\"choices\":[{\"delta\":{\"content\":\"y",
			"{\"choices\":[{\"delta\":{\"content\":\"y\"}}]} ",
			"{\"choices\":[{\"delta\":{\"content\":\"y\"}}]}x",
			/* not one object; a second "choices" (found by the fuzzer) */
			"data: {\"choices\":[{\"delta\":{\"content\":\"y\"}}]}",
			"{\"a\":1}{\"choices\":[{\"delta\":{\"content\":\"y\"}}]}",
			"{\"choices\":\"x\",\"choices\":[{\"delta\":{\"content\":\"y\"}}]}",
			/* chunks with no text that only look quiet: a second
			 * choice, a choice's text, nesting, other members */
			"{\"choices\":[{\"delta\":{}},{\"delta\":{\"content\":\"x\"}}]}",
			"{\"choices\":[{\"delta\":{},\"text\":\"x\"}]}",
			"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\"}]}}]}",
			"{\"choices\":[{\"delta\":{\"reasoning_content\":\"r\"}}]}",
			"{\"choices\":[{\"delta\":{\"content\":\"\",\"content\":\"x\"}}]}",
			"{\"choices\":[{\"delta\":{\"role\":{\"content\":\"x\"}}}]}",
			"{\"choices\":[{\"delta\":{\"content\":nullx}}]}",
			"{\"choices\":[],\"usage\":{\"completion_tokens\":3}}",
			/* a finish reason, whatever else the chunk has: the full
			 * parse reads it */
			"{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":{\"content\":[{\"text\":\"x\"}]},\"finish_reason\":\"stop\"}]}",
			"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}",
			"{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\" : \"\"}]}",
			"{\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":\"stop\"}]}",
			/* a second key, an escaped or empty reason, one outside
			 * the choices, another choice's */
			"{\"choices\":[{\"delta\":{},\"finish_reason\":\"a\",\"finish_reason\":\"b\"}]}",
			"{\"choices\":[{\"delta\":{},\"finish_reason\":\"st\\\"op\"}]}",
			"{\"choices\":[{\"delta\":{},\"finish_reason\":\"\"}]}",
			"{\"choices\":[{\"delta\":{},\"finish_reason\":7}]}",
			"{\"x\":[{\"finish_reason\":\"s\"}],\"choices\":[{\"delta\":{},\"finish_reason\":null}]}",
			"{\"choices\":[{\"delta\":{},\"finish_reason\":null},{\"delta\":{},\"finish_reason\":\"b\"}]}",
		};
		/* and these are the fast path's, escapes and blanks included */
		static const char *const fast[] = {
			"{\"id\":\"a\\\\\",\"choices\":[{\"delta\":{\"content\":\"say \\\"hi\\\" \\\\\"}}],\"model\":\"m\"}",
			"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"}]{\\\"content\\\":\"}}]}",
			"{ \"model\" : \"m\" ,\r\n \"choices\" : [ { \"delta\" :\t{ \"content\" : \"x\" } } ] }",
			/* and the quiet ones: a role chunk, a finish chunk */
			"{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}",
			"{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":{\"content\":[{\"text\":\"x\"}]},\"finish_reason\":null}]}",
			/* ending in "}}", tried as a usage chunk first */
			"{\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"x\":{}}",
			/* the finish chunk: its one plain reason read here */
			"{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\" : \"stop\"}]}",
		};
		/* the usage chunk (openai_usage): taken when it is of the one
		 * shape (taken 1), else the full parse's (0); the same answer */
		static const struct { const char *text; int taken; } usage[] = {
			{ "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1796601064,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":4,\"total_tokens\":14}}", 1 },
			{ "{ \"choices\" : [ ] ,\r\n\"usage\" :\t{ \"completion_tokens\" : 3 } , \"model\":\"a\\\"b\"}", 1 },
			{ "{\"model\":7,\"model\":\"m\",\"choices\":[],\"usage\":{}}", 1 },
			{ "{\"model\":\"\",\"choices\":[],\"usage\":{\"completion_tokens\":1,\"completion_tokens\":2,\"prompt_tokens\":-1}}", 1 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":1e3,\"prompt_tokens\":123456789012345678}}", 1 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":12345678901234567890123,\"prompt_tokens\":null,\"completion_tokens_details\":null}}", 1 },
			{ "{\"choices\":[],\"x\":true,\"usage\":{\"completion_tokens\":0}}", 1 },
			/* the full parse's: details nested, an error, a choice, a
			 * second usage or choices, a null usage, a string count, an
			 * escaped key, no choices, trailing bytes */
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":9,\"completion_tokens_details\":{\"reasoning_tokens\":4}}}", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":9},\"error\":null}", 0 },
			{ "{\"choices\":[{\"delta\":{}}],\"usage\":{\"completion_tokens\":9}}", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":9},\"usage\":{\"completion_tokens\":8}}", 0 },
			{ "{\"choices\":[],\"choices\":[],\"usage\":{\"completion_tokens\":9}}", 0 },
			{ "{\"choices\":[],\"usage\":null}", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":\"9\"}}", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_\\u0074okens\":9}}", 0 },
			{ "{\"usage\":{\"completion_tokens\":9}}", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":9}} ", 0 },
			{ "{\"choices\":[],\"usage\":{\"completion_tokens\":9}", 0 },
			{ "{\"choices\":[],\"x\":[1],\"usage\":{\"completion_tokens\":9}}", 0 },
		};
		enum dialect_id d = DIALECT_OPENAI;
		for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
			struct sse_event ev = { .type = "", .id = "" };
			uint64_t taken = dialect_fast_taken;
			char *copy = malloc(strlen(usage[i].text));
			assert_non_null(copy);
			memcpy(copy, usage[i].text, strlen(usage[i].text));
			ev.data = copy;
			ev.data_len = strlen(usage[i].text);
			compare_event(&d, &ev);
			if (dialect_fast_taken - taken != (uint64_t)usage[i].taken)
				fail_msg("usage chunk %zu: %s", i, usage[i].taken ?
				    "not taken" : "taken");
			free(copy);
		}
		/* more members than the full parse has tokens for: its */
		{
			char big[16384];
			size_t n = 0;
			struct sse_event ev = { .type = "", .id = "" };
			uint64_t taken = dialect_fast_taken;
			n += (size_t)snprintf(big + n, sizeof big - n, "{\"choices\":[]");
			for (int i = 0; i < 600 && n + 64 < sizeof big; i++)
				n += (size_t)snprintf(big + n, sizeof big - n, ",\"k%d\":%d", i, i);
			n += (size_t)snprintf(big + n, sizeof big - n,
			    ",\"usage\":{\"completion_tokens\":5}}");
			ev.data = big;
			ev.data_len = n;
			compare_event(&d, &ev);
			assert_int_equal(dialect_fast_taken, taken);
		}
		for (size_t i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++) {
			struct sse_event ev = { .type = "", .id = "" };
			/* a copy of the exact length: a read past it shows under ASan */
			char *copy = malloc(strlen(tricky[i]));
			assert_non_null(copy);
			memcpy(copy, tricky[i], strlen(tricky[i]));
			ev.data = copy;
			ev.data_len = strlen(tricky[i]);
			compare_event(&d, &ev);
			free(copy);
		}
		for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]); i++) {
			struct sse_event ev = { .type = "", .id = "" };
			uint64_t taken = dialect_fast_taken;
			ev.data = fast[i];
			ev.data_len = strlen(fast[i]);
			compare_event(&d, &ev);
			assert_int_equal(dialect_fast_taken, taken + 1);
		}
	}
}

/* The memo: every event of every recording, classified in order with the
 * stream's memo, against the full parse. */
static struct dialect_memo fixture_memo;
static int memo_tokens;

static void memo_event(void *arg, const struct sse_event *ev)
{
	const enum dialect_id *d = arg;
	struct dialect_info memo, full;

	dialect_classify_memo(*d, ev, &fixture_memo, &memo);
	dialect_fast_path = 0;
	dialect_classify(*d, ev, &full);
	dialect_fast_path = 1;
	same_answer(&memo, &full);
	if (*d == DIALECT_OPENAI)
		memo_tokens += full.token;
}

/* One chunk through a memo, a copy of its exact length (a read past it
 * shows under ASan); returns 1 when the memo answered. */
static int memo_one(struct dialect_memo *m, const char *text)
{
	struct sse_event ev = { .type = "", .id = "" };
	struct dialect_info memo, full;
	uint64_t taken = dialect_memo_taken;
	char *copy = malloc(strlen(text));

	assert_non_null(copy);
	memcpy(copy, text, strlen(text));
	ev.data = copy;
	ev.data_len = strlen(text);
	dialect_classify_memo(DIALECT_OPENAI, &ev, m, &memo);
	dialect_fast_path = 0;
	dialect_classify(DIALECT_OPENAI, &ev, &full);
	dialect_fast_path = 1;
	same_answer(&memo, &full);
	free(copy);
	return dialect_memo_taken != taken;
}

static void test_memo_matches_full_parse(void **state)
{
	/* a chunk as OpenAI sends it, its content and obfuscation the holes */
#define PRE "{\"id\":\"c1\",\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
#define MID "\"},\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\""
#define FIN(r) "\"},\"finish_reason\":\"" r "\"}],\"usage\":null,\"obfuscation\":\""
	static const struct { const char *text; int memo; } seq[] = {
		{ PRE "Hi" MID "ab\"}", 0 },             /* builds the memo */
		{ PRE " there" MID "xyz12\"}", 1 },
		{ PRE "say \\\"x\\\"" MID "q\"}", 1 },   /* escaped quotes */
		{ PRE "back\\\\" MID "\\\\\"}", 1 },     /* ends in a backslash */
		{ PRE "" MID "ab\"}", 0 },               /* empty content: no token */
		/* a top-level value "choices": the scan gives up, so must the memo */
		{ PRE "x" MID "choices\"}", 0 },
		{ PRE "x" MID "choice\"}", 1 },
		/* text that closes the hole early: another structure (valid
		 * JSON too, the fast path's, and the memo is now its) */
		{ PRE "a\"},\"x\":{\"y\":\"" MID "ab\"}", 0 },
		{ PRE "a\"},\"x\":{\"y\":\"" MID "cd\"}", 1 },
		{ PRE "back" MID "ab\"}", 0 },
		{ PRE "a" MID "b\",\"usage\":{\"completion_tokens\":3},\"z\":\"c\"}", 0 },
		{ PRE "a" MID "b\",\"error\":\"e\"}", 0 },
		/* cut short, or one byte longer */
		{ PRE "a" MID "b\"", 0 },
		{ PRE "a" MID "b\"} ", 0 },
		{ PRE "again" MID "b\"}", 1 },
		/* the constant part changes: a new memo from this one on */
		{ "{\"id\":\"c2\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"n\"}}]}", 0 },
		{ "{\"id\":\"c2\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"o\"}}]}", 1 },
		{ PRE "old" MID "ab\"}", 0 },
		/* the model after the content: no memo, the scan each time */
		{ "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"model\":\"m\"}", 0 },
		{ "{\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"model\":\"m\"}", 0 },
		/* a value followed by ':' is no hole: the scan takes it for a
		 * key (no valid JSON, but the same answer all the same) */
		{ "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"k\":\"abcde\":1}", 0 },
		{ "{\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"k\":\"abcde\":1}", 1 },
		{ "{\"choices\":[{\"delta\":{\"content\":\"c\"}}],\"k\":\"usage\":1}", 0 },
		{ "{\"choices\":[{\"delta\":{\"content\":\"d\"}}],\"k\":\"error\":1}", 0 },
		/* a finish reason is never a hole: a chunk with one builds no
		 * memo (or its reason, a string value, would be one and the
		 * next finish chunk a plain token), nor matches one */
		{ PRE "a" FIN("stop") "ab\"}", 0 },
		{ PRE "b" FIN("length") "cd\"}", 0 },
		{ PRE "c" MID "ab\"}", 0 },
		{ PRE "d" MID "cd\"}", 1 },
		{ PRE "e" FIN("stop") "ab\"}", 0 },
		{ PRE "f" MID "ab\"}", 1 },
	};
#undef PRE
#undef MID
#undef FIN
	struct dialect_memo m = { 0 };
	uint64_t taken;

	(void)state;
	for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++)
		if (memo_one(&m, seq[i].text) != seq[i].memo)
			fail_msg("chunk %zu: memo %s", i, seq[i].memo ? "missed" : "answered");

	/* the recordings, each stream with its memo */
	memo_tokens = 0;
	taken = dialect_memo_taken;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		const struct fixture *fx = &fixtures[i];
		enum dialect_id d = fx->d;
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		memset(&fixture_memo, 0, sizeof fixture_memo);
		each_event(d, fx->lines, buf, len, memo_event, &d);
		free(buf);
	}
	print_message("openai token events %d, by the memo %llu\n", memo_tokens,
	    (unsigned long long)(dialect_memo_taken - taken));
	/* all but each stream's first content chunk, tool calls and refusals */
	assert_true((dialect_memo_taken - taken) * 10 >= (uint64_t)memo_tokens * 7);
}

/* The finish reasons of every recording (what the stream's finish events
 * say, each once, in order; "" for none), counted apart with Python's json
 * over the same files: the fast path with the stream's memo, the fast
 * path alone, and the full parse must all find them. */
static const struct { const char *file, *finish; } finish_fixtures[] = {
	{ "openai-python/e2aad469b71d1d4894ff833ea147020a9d875eb7ce644a0ff355581690a4cbfd.bin", "stop" },
	{ "openai-python/7e5ea4d12e7cc064399b6631415e65923f182256b6e6b752950a3aaa2ad2320a.bin", "stop" },
	{ "openai-python/a491adda08c3d4fde95f5b2ee3f60f7f745f1a56d82e62f58031cc2add502380.bin", "stop" },
	{ "openai-python/4cc50a6135d254573a502310e6af1246f55edb6ad95fa24059f160996b68866d.bin", "length" },
	{ "openai-python/173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353.bin", "stop" },
	{ "openai-python/83b060bae42eb41c4f1edbb7c1542b954b37d9dfd1910b964ddebc9677e6ae85.bin", "stop" },
	{ "openai-python/569c877e69429d4cbc1577d2cd6dd33878095c68badc6b6654a69769b391a1c1.bin", "stop" },
	{ "openai-python/c6aa7e397b7123c3501f25df3a05d4daf7e8ad6d61ffa406ab5361fe36a8d5b1.bin", "tool_calls" },
	{ "openai-python/f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b.bin", "tool_calls" },
	{ "openai-python/a247c49c5fcd492bfb7a02a3306ad615ed8d8f649888ebfddfbc3ee151f44d46.bin", "tool_calls" },
	/* n = 3: three choices, each "stop" */
	{ "openai-python/d615580118391ee13492193e3a8bb74642d23ac1ca13fe37cb6e889b66f759f6.bin", "stop" },
	{ "openai-python/2018feb66ae13fcf5333d61b95849decc68d3f63bd38172889367e1afb1e04f7.bin", "tool_calls" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_basic_response.txt", "end_turn" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_tool_use_response.txt", "tool_use" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_incomplete_partial_json_response.txt", "max_tokens" },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_refusal_response.txt", "refusal" },
	{ "anthropic-sdk-python/tests_fixtures_fable-fallback_stream-a-refusal.sse", "refusal" },
	{ "prism-php/anthropic_stream-basic-text-1.sse", "end_turn" },
	{ "prism-php/anthropic_stream-with-tools-1.sse", "tool_use" },
	{ "prism-php/anthropic_stream-with-extended-thinking-1.sse", "end_turn" },
	{ "prism-php/deepseek_stream-basic-text-1.sse", "stop" },
	/* no event dispatched (see fixtures[]) */
	{ "prism-php/gemini_stream-basic-text-1.sse", "" },
	{ "prism-php/gemini_stream-with-tools-thought-1.json", "STOP" },
	{ "prism-php/groq_stream-basic-text-1.sse", "stop" },
	{ "prism-php/mistral_stream-basic-text-1-1.sse", "stop" },
	{ "prism-php/ollama_stream-basic-text-1.sse", "stop" },
	{ "prism-php/openai_stream-basic-text-responses-1.json", "completed" },
	/* response.failed: no finish, an error */
	{ "prism-php/openai_stream-rate-limited-1.json", "" },
	{ "prism-php/openai_stream-unknown-error-responses-1.json", "" },
	{ "prism-php/openai_stream-with-tools-responses-1.json", "completed" },
	{ "prism-php/openrouter_stream-text-with-a-prompt-1.sse", "stop" },
	{ "prism-php/xai_stream-basic-text-responses-with-zeros-1.json", "stop" },
	{ "vercel-ai/anthropic-text.chunks.txt", "end_turn" },
	{ "vercel-ai/google-text.chunks.txt", "STOP" },
	{ "vercel-ai/google-reasoning.chunks.txt", "STOP" },
	{ "vercel-ai/openai-text.chunks.txt", "stop" },
	{ "vercel-ai/openai-completion-text.chunks.txt", "length" },
	{ "vercel-ai/openai-error.1.chunks.txt", "" },
	{ "vercel-ai/mistral-text.chunks.txt", "stop" },
};

/* The reasons of one event added to a list ("a,b"), each once. */
static void finish_join(char *acc, size_t cap, const struct dialect_info *info)
{
	for (unsigned i = 0; i < info->n_finish; i++) {
		char one[64];
		size_t n = info->finish[i].len < sizeof one - 1 ? info->finish[i].len :
		    sizeof one - 1;
		const char *at;

		memcpy(one, info->finish[i].s, n);
		one[n] = '\0';
		for (at = strstr(acc, one); at != NULL; at = strstr(at + 1, one))
			if ((at == acc || at[-1] == ',') && (at[n] == '\0' || at[n] == ','))
				break;
		if (at != NULL)
			continue;
		if (acc[0] != '\0')
			strncat(acc, ",", cap - strlen(acc) - 1);
		strncat(acc, one, cap - strlen(acc) - 1);
	}
}

struct finish_run {
	enum dialect_id d;
	int mode;                   /* 0 memo, 1 fast path alone, 2 full parse */
	struct dialect_memo memo;
	char got[256];
};

static void finish_event(void *arg, const struct sse_event *ev)
{
	struct finish_run *r = arg;
	struct dialect_info info;

	dialect_fast_path = r->mode != 2;
	dialect_classify_memo(r->d, ev, r->mode == 0 ? &r->memo : NULL, &info);
	dialect_fast_path = 1;
	finish_join(r->got, sizeof r->got, &info);
}

static void test_finish_fixtures(void **state)
{
	(void)state;
	assert_int_equal(sizeof(finish_fixtures) / sizeof(finish_fixtures[0]),
	    sizeof(fixtures) / sizeof(fixtures[0]));
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		const struct fixture *fx = &fixtures[i];
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		assert_string_equal(finish_fixtures[i].file, fx->file);
		for (int mode = 0; mode < 3; mode++) {
			struct finish_run r = { .d = fx->d, .mode = mode };
			each_event(fx->d, fx->lines, buf, len, finish_event, &r);
			if (strcmp(r.got, finish_fixtures[i].finish) != 0)
				fail_msg("%s (mode %d): finish \"%s\", want \"%s\"", fx->file,
				    mode, r.got, finish_fixtures[i].finish);
		}
		free(buf);
	}
}

static void test_fixtures(void **state)
{
	static const size_t pieces[] = { 0, 1, 7, 100, 1500 };
	struct tally t;

	(void)state;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		const struct fixture *fx = &fixtures[i];
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
			run_fixture(fx, buf, len, pieces[k], &t);
			if (t.events != fx->events || t.tokens != fx->tokens ||
			    t.out != fx->out || t.in != fx->in ||
			    t.end != fx->end || t.error != fx->error)
				print_message("%s (pieces %zu): events %d tokens %d "
				    "out %lld in %lld end %d error %d\n", fx->file,
				    pieces[k], t.events, t.tokens, (long long)t.out,
				    (long long)t.in, t.end, t.error);
			assert_int_equal(t.events, fx->events);
			assert_int_equal(t.tokens, fx->tokens);
			assert_int_equal(t.out, fx->out);
			assert_int_equal(t.in, fx->in);
			assert_int_equal(t.end, fx->end);
			assert_int_equal(t.error, fx->error);
			assert_string_equal(t.model, fx->model ? fx->model : "");
			if (fx->lines)
				break;
		}
		free(buf);
	}
}

/* Reasoning in the recordings: token events that carry reasoning only,
 * the place of the first answer token among the token events (1-based,
 * 0: none), and the reasoning count the usage reports. Counted with the
 * Python reader that counted the table above. */
struct reasoning_fixture {
	const char *file;
	enum dialect_id d;
	int lines;
	int reasoning;       /* reasoning-only token events */
	int first_output;    /* ordinal of the first answer token event */
	int64_t reported;    /* last reasoning_tokens reported */
};

static const struct reasoning_fixture reasoning_fixtures[] = {
	/* thinking_delta x4, signature_delta, then the text */
	{ "anthropic-sdk-python/tests_fixtures_fable-fallback_stream-a-refusal.sse",
	  DIALECT_ANTHROPIC, 0, 4, 5, NONE },
	{ "prism-php/anthropic_stream-with-extended-thinking-1.sse",
	  DIALECT_ANTHROPIC, 0, 23, 24, NONE },
	{ "anthropic-sdk-python/tests_lib_streaming_fixtures_basic_response.txt",
	  DIALECT_ANTHROPIC, 0, 0, 1, NONE },
	/* two thought parts, then a function call (no text): no answer token */
	{ "prism-php/gemini_stream-with-tools-thought-1.json",
	  DIALECT_GEMINI, 0, 2, 0, 95 },
	{ "vercel-ai/google-reasoning.chunks.txt", DIALECT_GEMINI, 1, 0, 1, 256 },
	{ "vercel-ai/google-text.chunks.txt", DIALECT_GEMINI, 1, 0, 1, 185 },
	/* xAI: three reasoning_content deltas before the content */
	{ "prism-php/xai_stream-basic-text-responses-with-zeros-1.json",
	  DIALECT_OPENAI, 0, 3, 4, NONE },
	{ OPENAI_PY("e2aad469b71d1d4894ff833ea147020a9d875eb7ce644a0ff355581690a4cbfd"),
	  0, 1, 0 },
	{ "vercel-ai/openai-text.chunks.txt", DIALECT_OPENAI, 1, 0, 1, 0 },
	{ "prism-php/openai_stream-basic-text-responses-1.json",
	  DIALECT_OPENAI_RESPONSES, 0, 0, 1, 0 },
	{ "prism-php/ollama_stream-basic-text-1.sse", DIALECT_OLLAMA, 0, 0, 1, NONE },
};

struct reasoning_tally {
	enum dialect_id d;
	int tokens, reasoning, first_output;
	int64_t reported;
};

static void reasoning_event(void *arg, const struct sse_event *ev)
{
	struct reasoning_tally *t = arg;
	struct dialect_info info;

	dialect_classify(t->d, ev, &info);
	assert_true(!info.reasoning || info.token);
	if (info.token) {
		t->tokens++;
		t->reasoning += info.reasoning;
		if (!info.reasoning && t->first_output == 0)
			t->first_output = t->tokens;
	}
	if (info.reasoning_tokens >= 0)
		t->reported = info.reasoning_tokens;
}

static void test_reasoning_fixtures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(reasoning_fixtures) /
	    sizeof(reasoning_fixtures[0]); i++) {
		const struct reasoning_fixture *fx = &reasoning_fixtures[i];
		struct reasoning_tally t = { fx->d, 0, 0, 0, NONE };
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		each_event(fx->d, fx->lines, buf, len, reasoning_event, &t);
		if (t.reasoning != fx->reasoning || t.first_output != fx->first_output ||
		    t.reported != fx->reported)
			print_message("%s: reasoning %d first output %d reported %lld\n",
			    fx->file, t.reasoning, t.first_output, (long long)t.reported);
		assert_int_equal(t.reasoning, fx->reasoning);
		assert_int_equal(t.first_output, fx->first_output);
		assert_int_equal(t.reported, fx->reported);
		free(buf);
	}
}

/* ---- each rule on small events ---------------------------------------- */

static struct dialect_info cls(enum dialect_id d, const char *type,
    const char *data)
{
	struct sse_event ev = {
		.type = type, .type_len = strlen(type),
		.data = data, .data_len = strlen(data), .id = "",
	};
	struct dialect_info info;

	dialect_classify(d, &ev, &info);
	return info;
}

static void expect_info(struct dialect_info i, int token, int end, int error,
    int64_t out, int64_t in, const char *model)
{
	assert_int_equal(i.token, token);
	assert_int_equal(i.end, end);
	assert_int_equal(i.error, error);
	assert_int_equal(i.output_tokens, out);
	assert_int_equal(i.input_tokens, in);
	if (model == NULL) {
		assert_int_equal(i.model_len, 0);
	} else {
		assert_int_equal(i.model_len, strlen(model));
		assert_memory_equal(i.model, model, i.model_len);
	}
}

#define TOKEN(d, type, data) expect_info(cls(d, type, data), 1, 0, 0, NONE, NONE, NULL)
#define NOTHING(d, type, data) expect_info(cls(d, type, data), 0, 0, 0, NONE, NONE, NULL)

static void test_openai(void **state)
{
	const enum dialect_id d = DIALECT_OPENAI;

	(void)state;
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}");
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"reasoning_content\":\"h\"}}]}");
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"reasoning\":\"h\"}}]}");
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"refusal\":\"no\"}}]}");
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"text\":\"t\"}}]}");
	TOKEN(d, "", "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}");
	/* legacy completions */
	TOKEN(d, "", "{\"choices\":[{\"text\":\" holiday\",\"index\":0}]}");
	/* the second choice carries it */
	TOKEN(d, "", "{\"choices\":[{\"delta\":{}},{\"delta\":{\"content\":\"x\"}}]}");
	/* role-only, empty, null, empty tool_calls, usage-only */
	NOTHING(d, "", "{\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}");
	NOTHING(d, "", "{\"choices\":[{\"delta\":{\"content\":null,\"refusal\":null}}]}");
	NOTHING(d, "", "{\"choices\":[{\"delta\":{\"tool_calls\":[]}}]}");
	NOTHING(d, "", "{\"choices\":[{\"text\":\"\"}],\"usage\":null}");
	NOTHING(d, "", "{\"choices\":[],\"usage\":null}");
	/* a content key elsewhere is not a delta */
	NOTHING(d, "", "{\"content\":\"x\",\"choices\":[{\"message\":{\"content\":\"x\"}}]}");
	expect_info(cls(d, "", "{\"model\":\"m1\",\"choices\":[],\"usage\":"
	    "{\"prompt_tokens\":14,\"completion_tokens\":30}}"),
	    0, 0, 0, 30, 14, "m1");
	expect_info(cls(d, "", "[DONE]"), 0, 1, 0, NONE, NONE, NULL);
	expect_info(cls(d, "", "[DONE] \r\n"), 0, 1, 0, NONE, NONE, NULL);
	NOTHING(d, "", "[DONE]x");
	NOTHING(d, "", " [DONE]");
	expect_info(cls(d, "", "{\"error\":{\"message\":\"overloaded\"}}"),
	    0, 0, 1, NONE, NONE, NULL);
	NOTHING(d, "", "{\"error\":null}");
	NOTHING(d, "", "not json");
	NOTHING(d, "", "");
}

static void test_responses(void **state)
{
	const enum dialect_id d = DIALECT_OPENAI_RESPONSES;

	(void)state;
	TOKEN(d, "response.output_text.delta", "{\"delta\":\"Hi\"}");
	TOKEN(d, "", "{\"type\":\"response.reasoning_summary_text.delta\"}");
	TOKEN(d, "response.function_call_arguments.delta", "{}");
	TOKEN(d, "response.refusal.delta", "{}");
	NOTHING(d, "response.output_text.done", "{\"text\":\"Hi\"}");
	NOTHING(d, "response.delta", "{}");
	NOTHING(d, "", "{\"type\":\"response.in_progress\"}");
	expect_info(cls(d, "response.created", "{\"response\":{\"model\":\"gpt-x\","
	    "\"usage\":null}}"), 0, 0, 0, NONE, NONE, "gpt-x");
	expect_info(cls(d, "response.completed", "{\"response\":{\"usage\":"
	    "{\"input_tokens\":10,\"output_tokens\":62}}}"), 0, 1, 0, 62, 10, NULL);
	expect_info(cls(d, "", "{\"type\":\"response.incomplete\",\"response\":{}}"),
	    0, 1, 0, NONE, NONE, NULL);
	expect_info(cls(d, "response.failed", "{\"response\":{\"usage\":null}}"),
	    0, 1, 1, NONE, NONE, NULL);
	expect_info(cls(d, "error", "{\"code\":\"rate_limit_exceeded\"}"),
	    0, 0, 1, NONE, NONE, NULL);
	/* the event field wins over the data's type */
	TOKEN(d, "response.output_text.delta", "{\"type\":\"error\"}");
}

static void test_anthropic(void **state)
{
	const enum dialect_id d = DIALECT_ANTHROPIC;

	(void)state;
	TOKEN(d, "content_block_delta", "{\"type\":\"content_block_delta\","
	    "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}");
	TOKEN(d, "content_block_delta", "{\"delta\":{\"type\":\"thinking_delta\","
	    "\"thinking\":\"hmm\"}}");
	TOKEN(d, "", "{\"type\":\"content_block_delta\",\"delta\":"
	    "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"\"}}");
	NOTHING(d, "content_block_delta", "{\"delta\":{\"type\":\"signature_delta\","
	    "\"signature\":\"abc\"}}");
	NOTHING(d, "ping", "{\"type\": \"ping\"}");
	NOTHING(d, "content_block_start", "{\"content_block\":{\"text\":\"\"}}");
	/* message_start: input and model, never its provisional output */
	expect_info(cls(d, "message_start", "{\"type\":\"message_start\",\"message\":"
	    "{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":11,"
	    "\"output_tokens\":1}}}"), 0, 0, 0, NONE, 11, "claude-x");
	expect_info(cls(d, "message_delta", "{\"delta\":{\"stop_reason\":\"end_turn\"},"
	    "\"usage\":{\"output_tokens\":104}}"), 0, 0, 0, 104, NONE, NULL);
	expect_info(cls(d, "", "{\"type\":\"message_stop\"}"),
	    0, 1, 0, NONE, NONE, NULL);
	expect_info(cls(d, "error", "{\"error\":{\"type\":\"overloaded_error\"}}"),
	    0, 0, 1, NONE, NONE, NULL);
	expect_info(cls(d, "", "{\"type\":\"error\",\"error\":{}}"),
	    0, 0, 1, NONE, NONE, NULL);
}

static void test_dify(void **state)
{
	const enum dialect_id d = DIALECT_DIFY;

	(void)state;
	TOKEN(d, "", "{\"event\":\"message\",\"answer\":\"Hi\"}");
	TOKEN(d, "", "{\"event\":\"agent_message\",\"answer\":\" there\"}");
	TOKEN(d, "", "{\"event\":\"text_chunk\",\"data\":{\"text\":\"x\"}}");
	TOKEN(d, "message", "{\"answer\":\"y\"}");
	NOTHING(d, "", "{\"event\":\"message\",\"answer\":\"\"}");
	NOTHING(d, "", "{\"event\":\"text_chunk\",\"data\":{\"text\":\"\"}}");
	NOTHING(d, "", "{\"event\":\"agent_thought\",\"thought\":\"x\"}");
	NOTHING(d, "ping", "");
	NOTHING(d, "", "{\"event\":\"workflow_started\",\"answer\":\"x\"}");
	expect_info(cls(d, "", "{\"event\":\"message_end\",\"metadata\":{\"usage\":"
	    "{\"prompt_tokens\":20,\"completion_tokens\":7,\"total_tokens\":27}}}"),
	    0, 1, 0, 7, 20, NULL);
	/* only total_tokens: the count comes from events */
	expect_info(cls(d, "", "{\"event\":\"workflow_finished\",\"data\":"
	    "{\"total_tokens\":99}}"), 0, 1, 0, NONE, NONE, NULL);
	expect_info(cls(d, "", "{\"event\":\"error\",\"status\":400}"),
	    0, 0, 1, NONE, NONE, NULL);
}

static void test_gemini(void **state)
{
	const enum dialect_id d = DIALECT_GEMINI;

	(void)state;
	expect_info(cls(d, "", "{\"candidates\":[{\"content\":{\"parts\":"
	    "[{\"text\":\"Hi\"}]}}],\"usageMetadata\":{\"promptTokenCount\":21,"
	    "\"candidatesTokenCount\":5},\"modelVersion\":\"gemini-2.0-flash\"}"),
	    1, 0, 0, 5, 21, "gemini-2.0-flash");
	TOKEN(d, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":"
	    "{}},{\"text\":\"thinking\",\"thought\":true}]}}]}");
	NOTHING(d, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}]}}]}");
	NOTHING(d, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":"
	    "{\"name\":\"f\",\"args\":{\"text\":\"x\"}}}]}}]}");
	expect_info(cls(d, "", "{\"error\":{\"code\":429}}"),
	    0, 0, 1, NONE, NONE, NULL);
}

static void test_tgi(void **state)
{
	const enum dialect_id d = DIALECT_TGI;

	(void)state;
	TOKEN(d, "", "{\"index\":1,\"token\":{\"id\":3,\"text\":\"Hi\","
	    "\"special\":false},\"generated_text\":null,\"details\":null}");
	NOTHING(d, "", "{\"token\":{\"id\":2,\"text\":\"</s>\",\"special\":true}}");
	NOTHING(d, "", "{\"token\":null}");
	expect_info(cls(d, "", "{\"token\":{\"text\":\"\",\"special\":true},"
	    "\"generated_text\":\"Hi\",\"details\":{\"finish_reason\":\"eos_token\","
	    "\"generated_tokens\":12}}"), 0, 0, 0, 12, NONE, NULL);
	expect_info(cls(d, "", "{\"error\":\"Input validation error\","
	    "\"error_type\":\"validation\"}"), 0, 0, 1, NONE, NONE, NULL);
}

static void test_ollama(void **state)
{
	const enum dialect_id d = DIALECT_OLLAMA;

	(void)state;
	expect_info(cls(d, "", "{\"model\":\"llama3\",\"message\":{\"role\":"
	    "\"assistant\",\"content\":\"Hi\"},\"done\":false}"),
	    1, 0, 0, NONE, NONE, "llama3");
	expect_info(cls(d, "", "{\"message\":{\"thinking\":\"hm\",\"content\":\"\"}}"),
	    1, 0, 0, NONE, NONE, NULL);
	expect_info(cls(d, "", "{\"response\":\" there\",\"done\":false}"),
	    1, 0, 0, NONE, NONE, NULL);
	expect_info(cls(d, "", "{\"response\":\"\",\"done\":true,\"prompt_eval_count\":"
	    "26,\"eval_count\":290}"), 0, 1, 0, 290, 26, NULL);
	expect_info(cls(d, "", "{\"error\":\"model not found\"}"),
	    0, 0, 1, NONE, NONE, NULL);
}

static void test_raw(void **state)
{
	(void)state;
	expect_info(cls(DIALECT_RAW, "", ""), 1, 0, 0, NONE, NONE, NULL);
	expect_info(cls(DIALECT_RAW, "x", "{\"error\":1,\"usage\":"
	    "{\"completion_tokens\":3}}"), 1, 0, 0, NONE, NONE, NULL);
}

/* Token events that are reasoning only, and those that answer. */
#define REASONING(d, type, data) do { \
	struct dialect_info i_ = cls(d, type, data); \
	assert_int_equal(i_.token, 1); \
	assert_int_equal(i_.reasoning, 1); \
} while (0)
#define ANSWER(d, type, data) do { \
	struct dialect_info i_ = cls(d, type, data); \
	assert_int_equal(i_.token, 1); \
	assert_int_equal(i_.reasoning, 0); \
} while (0)

static void test_reasoning(void **state)
{
	const enum dialect_id o = DIALECT_OPENAI, r = DIALECT_OPENAI_RESPONSES;
	const enum dialect_id a = DIALECT_ANTHROPIC, g = DIALECT_GEMINI;

	(void)state;
	REASONING(o, "", "{\"choices\":[{\"delta\":{\"reasoning_content\":\"h\"}}]}");
	REASONING(o, "", "{\"choices\":[{\"delta\":{\"reasoning\":\"h\",\"content\":\"\"}}]}");
	ANSWER(o, "", "{\"choices\":[{\"delta\":{\"reasoning_content\":\"h\",\"content\":\"x\"}}]}");
	ANSWER(o, "", "{\"choices\":[{\"delta\":{\"refusal\":\"no\"}}]}");
	ANSWER(o, "", "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}");
	ANSWER(o, "", "{\"choices\":[{\"text\":\" holiday\"}]}");
	/* n > 1: one choice answering makes the event an answer */
	ANSWER(o, "", "{\"choices\":[{\"delta\":{\"reasoning\":\"a\"}},"
	    "{\"delta\":{\"content\":\"x\"}}]}");
	REASONING(o, "", "{\"choices\":[{\"delta\":{\"reasoning\":\"a\"}},"
	    "{\"delta\":{}}]}");
	assert_int_equal(cls(o, "", "{\"choices\":[],\"usage\":{\"completion_tokens\":9,"
	    "\"completion_tokens_details\":{\"reasoning_tokens\":7}}}").reasoning_tokens, 7);
	assert_int_equal(cls(o, "", "{\"choices\":[],\"usage\":{\"completion_tokens\":9}}"
	    ).reasoning_tokens, NONE);

	REASONING(r, "response.reasoning_summary_text.delta", "{\"delta\":\"a\"}");
	REASONING(r, "response.reasoning_text.delta", "{\"delta\":\"a\"}");
	REASONING(r, "", "{\"type\":\"response.reasoning.delta\"}");
	ANSWER(r, "response.output_text.delta", "{\"delta\":\"Hi\"}");
	ANSWER(r, "response.function_call_arguments.delta", "{}");
	ANSWER(r, "response.refusal.delta", "{}");
	assert_int_equal(cls(r, "response.completed", "{\"response\":{\"usage\":"
	    "{\"output_tokens\":62,\"output_tokens_details\":{\"reasoning_tokens\":40}}}}"
	    ).reasoning_tokens, 40);

	REASONING(a, "content_block_delta", "{\"delta\":{\"type\":\"thinking_delta\","
	    "\"thinking\":\"hmm\"}}");
	ANSWER(a, "content_block_delta", "{\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}");
	ANSWER(a, "content_block_delta", "{\"delta\":{\"type\":\"input_json_delta\","
	    "\"partial_json\":\"{\"}}");
	ANSWER(a, "content_block_delta", "{\"delta\":{\"type\":\"citations_delta\"}}");

	REASONING(g, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\","
	    "\"thought\":true}]}}]}");
	ANSWER(g, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\","
	    "\"thought\":true},{\"text\":\"answer\"}]}}]}");
	ANSWER(g, "", "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\","
	    "\"thought\":false}]}}]}");
	assert_int_equal(cls(g, "", "{\"usageMetadata\":{\"candidatesTokenCount\":5,"
	    "\"thoughtsTokenCount\":185}}").reasoning_tokens, 185);
	/* Gemini leaves the thoughts out of its candidates: N counts them */
	assert_int_equal(cls(g, "", "{\"usageMetadata\":{\"candidatesTokenCount\":5,"
	    "\"thoughtsTokenCount\":185}}").output_tokens, 190);

	REASONING(DIALECT_OLLAMA, "", "{\"message\":{\"thinking\":\"hm\",\"content\":\"\"}}");
	REASONING(DIALECT_OLLAMA, "", "{\"thinking\":\"hm\",\"response\":\"\"}");
	ANSWER(DIALECT_OLLAMA, "", "{\"message\":{\"thinking\":\"hm\",\"content\":\"x\"}}");
	ANSWER(DIALECT_OLLAMA, "", "{\"response\":\"x\"}");
	ANSWER(DIALECT_DIFY, "", "{\"event\":\"message\",\"answer\":\"Hi\"}");
	ANSWER(DIALECT_TGI, "", "{\"token\":{\"text\":\"Hi\",\"special\":false}}");
	ANSWER(DIALECT_RAW, "", "");
}

/* Payloads with more tokens than the stack array: read sparsely. */
static char *big_array(const char *head, const char *item, int n,
    const char *tail)
{
	size_t hl = strlen(head), il = strlen(item), tl = strlen(tail);
	char *s = malloc(hl + (il + 1) * (size_t)n + tl + 1), *p = s;

	assert_non_null(s);
	memcpy(p, head, hl);
	p += hl;
	for (int i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		memcpy(p, item, il);
		p += il;
	}
	memcpy(p, tail, tl + 1);
	return s;
}

static void test_huge_payloads(void **state)
{
	char *s;

	(void)state;
	/* /api/generate's final line: the context array before the counts */
	s = big_array("{\"model\":\"m\",\"response\":\"\",\"done\":true,\"context\":[",
	    "128000", 5000, "],\"prompt_eval_count\":12,\"eval_count\":34}");
	expect_info(cls(DIALECT_OLLAMA, "", s), 0, 1, 0, 34, 12, "m");
	free(s);

	/* logprobs before the delta, usage after */
	s = big_array("{\"model\":\"g\",\"choices\":[{\"index\":0,\"logprobs\":{"
	    "\"content\":[", "{\"token\":\"a\",\"logprob\":-0.1,\"bytes\":[97],"
	    "\"top_logprobs\":[{\"token\":\"b\",\"logprob\":-2}]}", 600,
	    "]},\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":"
	    "7,\"prompt_tokens\":3}}");
	expect_info(cls(DIALECT_OPENAI, "", s), 1, 0, 0, 7, 3, "g");
	free(s);

	/* deep nesting and long flat arrays end without a crash */
	s = big_array("", "[", 200000, "");
	NOTHING(DIALECT_OPENAI, "", s);
	free(s);
	s = big_array("{\"choices\":", "[", 100000, "1");
	NOTHING(DIALECT_OPENAI, "", s);
	free(s);
	s = big_array("{\"a\":[", "{}", 100000, "]}");
	NOTHING(DIALECT_GEMINI, "", s);
	free(s);
}

/* ---- paths, request model, bodies ------------------------------------- */

static enum dialect_id for_path(const char *p)
{
	return dialect_for_path(p, strlen(p));
}

static void test_for_path(void **state)
{
	(void)state;
	assert_int_equal(for_path("/v1/chat/completions"), DIALECT_OPENAI);
	assert_int_equal(for_path("/v1/completions"), DIALECT_OPENAI);
	assert_int_equal(for_path("/openai/deployments/x/chat/completions?api-version=2024-06-01"),
	    DIALECT_OPENAI);
	assert_int_equal(for_path("/v1/responses"), DIALECT_OPENAI_RESPONSES);
	assert_int_equal(for_path("/v1/messages?beta=true"), DIALECT_ANTHROPIC);
	assert_int_equal(for_path("/v1/chat-messages"), DIALECT_DIFY);
	assert_int_equal(for_path("/v1/completion-messages"), DIALECT_DIFY);
	assert_int_equal(for_path("/v1/workflows/run"), DIALECT_DIFY);
	assert_int_equal(for_path("/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"),
	    DIALECT_GEMINI);
	assert_int_equal(for_path("/generate_stream"), DIALECT_TGI);
	assert_int_equal(for_path("/api/chat"), DIALECT_OLLAMA);
	assert_int_equal(for_path("/api/generate/"), DIALECT_OLLAMA);
	assert_int_equal(for_path("/v1/models"), DIALECT_RAW);
	assert_int_equal(for_path("/"), DIALECT_RAW);
	assert_int_equal(for_path(""), DIALECT_RAW);
	assert_int_equal(for_path("/x?next=/v1/chat/completions"), DIALECT_RAW);
	assert_int_equal(for_path("/v1/messages/count_tokens"), DIALECT_RAW);
}

static int req_model(const char *json, size_t len, char *out)
{
	const char *m;
	size_t n;

	out[0] = '\0';
	if (!dialect_request_model(json, len, &m, &n))
		return 0;
	assert_true(m >= json && m + n <= json + len);
	memcpy(out, m, n);
	out[n] = '\0';
	return 1;
}

static void test_request_model(void **state)
{
	static const char body[] =
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"model\":\"no\"}],"
	    "\"metadata\":{\"model\":\"no2\"},\"model\" : \"gpt-4o\",\"stream\":true}";
	const char *end_of_model = strstr(body, "gpt-4o\"") + 7;
	char got[256];
	char *big;

	(void)state;
	assert_true(req_model(body, sizeof(body) - 1, got));
	assert_string_equal(got, "gpt-4o");
	/* every prefix: found once its closing quote is in, never a nested one */
	for (size_t k = 0; k < sizeof(body) - 1; k++) {
		int found = req_model(body, k, got);
		assert_int_equal(found, k >= (size_t)(end_of_model - body));
		if (found)
			assert_string_equal(got, "gpt-4o");
	}
	assert_false(req_model("{\"a\":{\"model\":\"x\"}}", 19, got));
	assert_false(req_model("[{\"model\":\"x\"}]", 15, got));
	assert_false(req_model("{\"model\":5}", 11, got));
	assert_false(req_model("{\"model\":\"\"}", 12, got));
	assert_false(req_model("", 0, got));
	assert_true(req_model("{\"model\":\"a\\\"b\"}", 16, got));
	assert_string_equal(got, "a\\\"b");

	/* OpenAI SDKs send the messages first: thousands of tokens before */
	big = big_array("{\"messages\":[", "{\"role\":\"user\",\"content\":\"x\"}",
	    3000, "],\"model\":\"gpt-big\",\"stream\":true}");
	assert_true(req_model(big, strlen(big), got));
	assert_string_equal(got, "gpt-big");
	assert_true(req_model(big, strlen(big) - 12, got));
	assert_string_equal(got, "gpt-big");
	assert_false(req_model(big, strlen(big) - 20, got));
	assert_false(req_model(big, strlen(big) / 2, got));
	free(big);
}

static void test_path_model(void **state)
{
	static const char *const yes[][2] = {
		{ "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
		  "gemini-2.0-flash" },
		{ "/v1/projects/p/locations/us/publishers/google/models/"
		  "gemini-1.5-pro:streamGenerateContent", "gemini-1.5-pro" },
	};
	static const char *const no[] = {
		"/v1beta/models/:streamGenerateContent",
		"/v1beta/gemini-2.0-flash:streamGenerateContent",
		"/v1beta/models/gemini-2.0-flash:generateContent",
		"/v1/chat/completions?x=/models/a:streamGenerateContent",
		":streamGenerateContent",
		"/g:streamGenerateContent",
		/* a parameter, not a model: no label of a credential */
		"/v1beta/models/key=sk-123:streamGenerateContent",
		"/v1beta/models/m;key=sk-123:streamGenerateContent",
	};
	const char *m;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		assert_true(dialect_path_model(yes[i][0], strlen(yes[i][0]), &m, &n));
		assert_int_equal(n, strlen(yes[i][1]));
		assert_memory_equal(m, yes[i][1], n);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		/* an exact heap copy, so a read before the path would show */
		size_t len = strlen(no[i]);
		char *copy = malloc(len);
		assert_non_null(copy);
		memcpy(copy, no[i], len);
		assert_false(dialect_path_model(copy, len, &m, &n));
		free(copy);
	}
}

static struct dialect_info body(enum dialect_id d, const char *json)
{
	struct dialect_info info;

	dialect_classify_body(d, json, strlen(json), &info);
	return info;
}

static void test_bodies(void **state)
{
	(void)state;
	expect_info(body(DIALECT_OPENAI, "{\"model\":\"gpt-4o\",\"choices\":[{"
	    "\"message\":{\"content\":\"Hi\"}}],\"usage\":{\"prompt_tokens\":9,"
	    "\"completion_tokens\":12}}"), 0, 0, 0, 12, 9, "gpt-4o");
	expect_info(body(DIALECT_OPENAI_RESPONSES, "{\"model\":\"gpt-r\",\"output\":"
	    "[],\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}"),
	    0, 0, 0, 6, 5, "gpt-r");
	expect_info(body(DIALECT_ANTHROPIC, "{\"type\":\"message\",\"model\":"
	    "\"claude\",\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}"),
	    0, 0, 0, 4, 3, "claude");
	expect_info(body(DIALECT_ANTHROPIC, "{\"type\":\"error\",\"error\":{}}"),
	    0, 0, 1, NONE, NONE, NULL);
	expect_info(body(DIALECT_GEMINI, "{\"candidates\":[],\"usageMetadata\":"
	    "{\"promptTokenCount\":8,\"candidatesTokenCount\":2},"
	    "\"modelVersion\":\"gem\"}"), 0, 0, 0, 2, 8, "gem");
	/* streamGenerateContent without alt=sse: an array, counts cumulative */
	expect_info(body(DIALECT_GEMINI, "[{\"usageMetadata\":{\"promptTokenCount\":"
	    "8,\"candidatesTokenCount\":2}},{\"usageMetadata\":{\"promptTokenCount\""
	    ":8,\"candidatesTokenCount\":17},\"modelVersion\":\"gem\"}]"),
	    0, 0, 0, 17, 8, "gem");
	expect_info(body(DIALECT_OLLAMA, "{\"model\":\"llama3\",\"done\":true,"
	    "\"prompt_eval_count\":26,\"eval_count\":290}"),
	    0, 0, 0, 290, 26, "llama3");
	expect_info(body(DIALECT_DIFY, "{\"event\":\"message\",\"answer\":\"x\","
	    "\"metadata\":{\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}}"),
	    0, 0, 0, 2, 1, NULL);
	expect_info(body(DIALECT_TGI, "{\"generated_text\":\"x\",\"details\":"
	    "{\"generated_tokens\":40}}"), 0, 0, 0, 40, NONE, NULL);
	expect_info(body(DIALECT_OPENAI, "{\"error\":{\"message\":\"bad\"}}"),
	    0, 0, 1, NONE, NONE, NULL);
	expect_info(body(DIALECT_RAW, "{\"usage\":{\"completion_tokens\":1}}"),
	    0, 0, 0, NONE, NONE, NULL);
	expect_info(body(DIALECT_OPENAI, "{\"usage\":{\"completion_tokens\":1"),
	    0, 0, 0, 1, NONE, NULL);
	expect_info(body(DIALECT_OPENAI, "<html>"), 0, 0, 0, NONE, NONE, NULL);
}

/* The reasons of an event (as "a,b"), by the fast path and by the full
 * parse alike. */
static void expect_finish(enum dialect_id d, const char *type, const char *data,
    const char *want)
{
	for (int fast = 1; fast >= 0; fast--) {
		char got[256] = "";
		struct dialect_info info;

		dialect_fast_path = fast;
		info = cls(d, type, data);
		dialect_fast_path = 1;
		finish_join(got, sizeof got, &info);
		if (strcmp(got, want) != 0)
			fail_msg("%s (fast path %d): finish \"%s\", want \"%s\"", data, fast,
			    got, want);
	}
}

static void expect_body_finish(enum dialect_id d, const char *json, const char *want)
{
	char got[256] = "";
	struct dialect_info info = body(d, json);

	finish_join(got, sizeof got, &info);
	if (strcmp(got, want) != 0)
		fail_msg("%s: finish \"%s\", want \"%s\"", json, got, want);
}

static void test_finish_events(void **state)
{
	struct dialect_info info;

	(void)state;
	/* OpenAI: each choice's, null and "" none; n choices in one chunk,
	 * the first four kept; a finish with the last text is a token too */
	expect_finish(DIALECT_OPENAI, "", "{\"choices\":[{\"index\":0,\"delta\":{},"
	    "\"finish_reason\":\"stop\"}]}", "stop");
	expect_finish(DIALECT_OPENAI, "", "{\"choices\":[{\"index\":0,\"delta\":{},"
	    "\"finish_reason\":null}]}", "");
	expect_finish(DIALECT_OPENAI, "", "{\"choices\":[{\"index\":0,\"delta\":{},"
	    "\"finish_reason\":\"\"}]}", "");
	expect_finish(DIALECT_OPENAI, "", "{\"choices\":[{\"finish_reason\":\"a\"},"
	    "{\"finish_reason\":\"b\"},{\"finish_reason\":null},{\"finish_reason\":\"c\"},"
	    "{\"finish_reason\":\"d\"},{\"finish_reason\":\"e\"}]}", "a,b,c,d");
	info = cls(DIALECT_OPENAI, "", "{\"choices\":[{\"index\":0,\"delta\":"
	    "{\"content\":\"end.\"},\"finish_reason\":\"length\"}]}");
	assert_int_equal(info.token, 1);
	assert_int_equal(info.n_finish, 1);
	/* legacy completions */
	expect_finish(DIALECT_OPENAI, "", "{\"object\":\"text_completion\",\"choices\":"
	    "[{\"text\":\" to\",\"index\":0,\"finish_reason\":\"length\"}]}", "length");
	/* Responses: completed; incomplete's reason; failed none; deltas none */
	expect_finish(DIALECT_OPENAI_RESPONSES, "response.completed",
	    "{\"type\":\"response.completed\",\"response\":{\"status\":\"completed\","
	    "\"incomplete_details\":null}}", "completed");
	expect_finish(DIALECT_OPENAI_RESPONSES, "response.incomplete",
	    "{\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\","
	    "\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}",
	    "max_output_tokens");
	expect_finish(DIALECT_OPENAI_RESPONSES, "response.failed",
	    "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\"}}", "");
	expect_finish(DIALECT_OPENAI_RESPONSES, "response.output_text.delta",
	    "{\"type\":\"response.output_text.delta\",\"delta\":\"x\","
	    "\"status\":\"completed\"}", "");
	/* Anthropic: message_delta's stop_reason only */
	expect_finish(DIALECT_ANTHROPIC, "message_delta", "{\"type\":\"message_delta\","
	    "\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},"
	    "\"usage\":{\"output_tokens\":6}}", "end_turn");
	expect_finish(DIALECT_ANTHROPIC, "message_start", "{\"type\":\"message_start\","
	    "\"message\":{\"stop_reason\":\"x\"}}", "");
	/* Gemini: each candidate's */
	expect_finish(DIALECT_GEMINI, "", "{\"candidates\":[{\"content\":{\"parts\":"
	    "[{\"text\":\"\"}],\"role\":\"model\"},\"finishReason\":\"STOP\","
	    "\"index\":0}]}", "STOP");
	/* TGI: the final event's details */
	expect_finish(DIALECT_TGI, "", "{\"token\":{\"text\":\"\",\"special\":true},"
	    "\"generated_text\":\"Hi\",\"details\":{\"finish_reason\":\"eos_token\","
	    "\"generated_tokens\":12}}", "eos_token");
	expect_finish(DIALECT_TGI, "", "{\"token\":{\"text\":\"a\"},\"details\":null}", "");
	/* Ollama: done_reason of the done line only */
	expect_finish(DIALECT_OLLAMA, "", "{\"model\":\"m\",\"response\":\"\","
	    "\"done\":true,\"done_reason\":\"length\"}", "length");
	expect_finish(DIALECT_OLLAMA, "", "{\"response\":\"a\",\"done\":false,"
	    "\"done_reason\":\"x\"}", "");
	/* Dify tells none */
	expect_finish(DIALECT_DIFY, "", "{\"event\":\"message_end\",\"metadata\":{}}", "");

	/* non-streamed bodies */
	expect_body_finish(DIALECT_OPENAI, "{\"choices\":[{\"message\":{\"content\":"
	    "\"Hi\"},\"finish_reason\":\"stop\"},{\"finish_reason\":\"length\"}]}",
	    "stop,length");
	expect_body_finish(DIALECT_OPENAI_RESPONSES, "{\"status\":\"incomplete\","
	    "\"incomplete_details\":{\"reason\":\"content_filter\"},\"output\":[]}",
	    "content_filter");
	expect_body_finish(DIALECT_OPENAI_RESPONSES, "{\"status\":\"completed\","
	    "\"incomplete_details\":null}", "completed");
	expect_body_finish(DIALECT_ANTHROPIC, "{\"type\":\"message\",\"stop_reason\":"
	    "\"max_tokens\",\"usage\":{}}", "max_tokens");
	expect_body_finish(DIALECT_GEMINI, "[{\"candidates\":[{\"index\":0}]},"
	    "{\"candidates\":[{\"finishReason\":\"MAX_TOKENS\"}]}]", "MAX_TOKENS");
	expect_body_finish(DIALECT_TGI, "{\"generated_text\":\"x\",\"details\":"
	    "{\"finish_reason\":\"length\",\"generated_tokens\":40}}", "length");
	expect_body_finish(DIALECT_OLLAMA, "{\"done\":true,\"done_reason\":\"stop\"}",
	    "stop");
	expect_body_finish(DIALECT_OPENAI, "{\"error\":{\"message\":\"bad\"}}", "");
}

/* `auto` on a path that names no API: the first events of every recording
 * tell its dialect (within the meter's four), and never a wrong one. */
struct sniff {
	int seen;
	enum dialect_id d;
};

static void sniff_event(void *arg, const struct sse_event *ev)
{
	struct sniff *sn = arg;
	if (sn->d == DIALECT_RAW && sn->seen++ < 4)
		sn->d = dialect_sniff(ev);
}

static void test_sniff(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		const struct fixture *fx = &fixtures[i];
		struct sniff sn = { 0, DIALECT_RAW };
		size_t len;
		char *buf = read_fixture(fx->file, &len);

		each_event(fx->d, fx->lines, buf, len, sniff_event, &sn);
		if (sn.d != (fx->events > 0 ? fx->d : DIALECT_RAW))
			fail_msg("%s: sniffed %s, not %s", fx->file, dialect_names[sn.d],
			    dialect_names[fx->d]);
		free(buf);
	}
	/* events that tell nothing */
	struct sse_event ping = { .type = "ping", .type_len = 4, .data = "{\"type\": \"ping\"}",
	    .data_len = 16, .id = "" };
	struct sse_event text = { .type = "", .id = "", .data = "hello", .data_len = 5 };
	assert_int_equal(dialect_sniff(&ping), DIALECT_RAW);
	assert_int_equal(dialect_sniff(&text), DIALECT_RAW);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixtures),
		cmocka_unit_test(test_reasoning_fixtures),
		cmocka_unit_test(test_reasoning),
		cmocka_unit_test(test_fast_path_matches_full_parse),
		cmocka_unit_test(test_memo_matches_full_parse),
		cmocka_unit_test(test_finish_fixtures),
		cmocka_unit_test(test_finish_events),
		cmocka_unit_test(test_openai),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_anthropic),
		cmocka_unit_test(test_dify),
		cmocka_unit_test(test_gemini),
		cmocka_unit_test(test_tgi),
		cmocka_unit_test(test_ollama),
		cmocka_unit_test(test_raw),
		cmocka_unit_test(test_huge_payloads),
		cmocka_unit_test(test_for_path),
		cmocka_unit_test(test_request_model),
		cmocka_unit_test(test_path_model),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_sniff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
