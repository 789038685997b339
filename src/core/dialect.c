/* SPDX-License-Identifier: Apache-2.0 */
#include "dialect.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>

#include "json.h"

#define KEY(s) s, sizeof(s) - 1

/* Tokens on the stack for one payload (20 bytes each). A payload with more
 * is tokenized sparsely (json_parse): what does not fit stays opaque. */
#define TOK_MAX 1024

/* ---- reading the tokens ------------------------------------------------ */

static int tok_end(const jsmntok_t *t)
{
	return t->end < 0 ? INT_MAX : t->end;
}

/* The token after i and everything inside it. Positions, not sizes, so
 * that a truncated or sparse token array is walked the same way. */
static int j_skip(const struct json *j, int i)
{
	int end = tok_end(&j->t[i]);

	for (i++; i < j->n && j->t[i].start < end; i++)
		;
	return i;
}

static int j_str_is(const struct json *j, int i, const char *lit, size_t n)
{
	const jsmntok_t *t = &j->t[i];

	return t->type == JSMN_STRING && (size_t)(t->end - t->start) == n &&
	    memcmp(j->s + t->start, lit, n) == 0;
}

/* The value of key in object obj, or -1. */
static int j_key(const struct json *j, int obj, const char *key, size_t klen)
{
	int i, end;

	if (obj < 0 || obj >= j->n || j->t[obj].type != JSMN_OBJECT)
		return -1;
	end = tok_end(&j->t[obj]);
	for (i = obj + 1; i + 1 < j->n && j->t[i + 1].start < end;
	    i = j_skip(j, i + 1))
		if (j_str_is(j, i, key, klen))
			return i + 1;
	return -1;
}

/* An OpenAI choice's "delta", "text" and "finish_reason" (each the
 * first, as j_key's), or -1, in one walk of its members. */
static void j_choice(const struct json *j, int obj, int v[3])
{
	int i, end;

	v[0] = v[1] = v[2] = -1;
	if (obj < 0 || obj >= j->n || j->t[obj].type != JSMN_OBJECT)
		return;
	end = tok_end(&j->t[obj]);
	for (i = obj + 1; i + 1 < j->n && j->t[i + 1].start < end;
	    i = j_skip(j, i + 1)) {
		if (v[0] < 0 && j_str_is(j, i, "delta", 5))
			v[0] = i + 1;
		else if (v[1] < 0 && j_str_is(j, i, "text", 4))
			v[1] = i + 1;
		else if (v[2] < 0 && j_str_is(j, i, "finish_reason", 13))
			v[2] = i + 1;
	}
}

/* The value at a dotted path of keys ("usage.output_tokens") from i. */
static int j_at(const struct json *j, int i, const char *path)
{
	const char *dot;

	while (i >= 0 && *path != '\0') {
		dot = strchr(path, '.');
		if (dot == NULL)
			return j_key(j, i, path, strlen(path));
		i = j_key(j, i, path, (size_t)(dot - path));
		path = dot + 1;
	}
	return i;
}

/* The first element of array i, or -1; j_next walks the rest. */
static int j_first(const struct json *j, int i)
{
	if (i < 0 || j->t[i].type != JSMN_ARRAY || i + 1 >= j->n ||
	    j->t[i + 1].start >= tok_end(&j->t[i]))
		return -1;
	return i + 1;
}

static int j_next(const struct json *j, int arr, int e)
{
	e = j_skip(j, e);
	return e < j->n && j->t[e].start < tok_end(&j->t[arr]) ? e : -1;
}

static int j_nonempty_str(const struct json *j, int i)
{
	return i >= 0 && j->t[i].type == JSMN_STRING &&
	    j->t[i].end > j->t[i].start;
}

static int j_prim_is(const struct json *j, int i, const char *lit)
{
	size_t n = strlen(lit);

	return i >= 0 && j->t[i].type == JSMN_PRIMITIVE &&
	    (size_t)(j->t[i].end - j->t[i].start) == n &&
	    memcmp(j->s + j->t[i].start, lit, n) == 0;
}

/* Present and not null: an "error": null is no error. */
static int j_present(const struct json *j, int i)
{
	return i >= 0 && !j_prim_is(j, i, "null");
}

/* A non-negative integer count, or -1. */
static int64_t j_count(const struct json *j, int i)
{
	const char *p, *end;
	int64_t v = 0;

	if (i < 0 || j->t[i].type != JSMN_PRIMITIVE)
		return -1;
	p = j->s + j->t[i].start;
	end = j->s + j->t[i].end;
	if (p == end || end - p > 18)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static void j_model(const struct json *j, int i, struct dialect_info *out)
{
	if (j_nonempty_str(j, i)) {
		out->model = j->s + j->t[i].start;
		out->model_len = (size_t)(j->t[i].end - j->t[i].start);
	}
}

/* A finish reason the event gives: a non-empty string (null, "" or any
 * other value is none), kept as its raw text in the event's bytes. */
static void j_finish(const struct json *j, int i, struct dialect_info *out)
{
	if (!j_nonempty_str(j, i) || out->n_finish >= DIALECT_FINISH_MAX)
		return;
	out->finish[out->n_finish].s = j->s + j->t[i].start;
	out->finish[out->n_finish++].len = (size_t)(j->t[i].end - j->t[i].start);
}

/* Each choice's (OpenAI) or candidate's (Gemini) finish reason. */
static void j_finishes(const struct json *j, int arr, const char *key,
    struct dialect_info *out)
{
	for (int c = j_first(j, arr); c >= 0; c = j_next(j, arr, c))
		j_finish(j, j_key(j, c, key, strlen(key)), out);
}

/* The Responses API has no finish_reason: a response ends with its
 * status ("completed", "incomplete", "failed"), and an incomplete one
 * says why in incomplete_details.reason ("max_output_tokens",
 * "content_filter"). That reason is the finish reason where there is one
 * (as chat's "length" and "content_filter" are), else "completed": the
 * provider's own words, as the semantic conventions want them (they map
 * none). A failed response did not finish: its error says what it is. */
static void responses_finish(const struct json *j, int resp,
    struct dialect_info *out)
{
	int s = j_key(j, resp, KEY("status"));
	int r = j_at(j, resp, "incomplete_details.reason");

	if (s >= 0 && j_str_is(j, s, KEY("incomplete")) && j_nonempty_str(j, r))
		j_finish(j, r, out);
	else if (s >= 0 && (j_str_is(j, s, KEY("completed")) ||
	    j_str_is(j, s, KEY("incomplete"))))
		j_finish(j, s, out);
}

/* The reasoning part of the output count, where the usage tells it. */
static void j_reasoning(const struct json *j, int i, struct dialect_info *out)
{
	int64_t v = j_count(j, i);

	if (v >= 0)
		out->reasoning_tokens = v;
}

static void j_counts(const struct json *j, int obj, const char *out_key,
    const char *in_key, struct dialect_info *out)
{
	int64_t v;

	if (out_key && (v = j_count(j, j_at(j, obj, out_key))) >= 0)
		out->output_tokens = v;
	if (in_key && (v = j_count(j, j_at(j, obj, in_key))) >= 0)
		out->input_tokens = v;
}

/* Gemini's candidatesTokenCount leaves the thoughts out, where every other
 * API counts reasoning in its output: N adds thoughtsTokenCount, so that
 * TPOT spans the same tokens as TTFT does. */
static void gemini_counts(const struct json *j, int usage,
    struct dialect_info *out)
{
	int64_t thoughts = j_count(j, j_key(j, usage, "thoughtsTokenCount",
	    sizeof("thoughtsTokenCount") - 1));

	j_counts(j, usage, "candidatesTokenCount", "promptTokenCount", out);
	if (thoughts >= 0) {
		out->reasoning_tokens = thoughts;
		out->output_tokens = (out->output_tokens >= 0 ? out->output_tokens : 0) +
		    thoughts;
	}
}

/* ---- the dialects ------------------------------------------------------- */

/* The event's name: the "event:" field, else the data's key. */
static void event_name(const struct sse_event *ev, const struct json *j,
    const char *key, const char **name, size_t *len)
{
	int i;

	*name = ev->type;
	*len = ev->type_len;
	if (*len == 0 && (i = j_key(j, 0, key, strlen(key))) >= 0 &&
	    j->t[i].type == JSMN_STRING) {
		*name = j->s + j->t[i].start;
		*len = (size_t)(j->t[i].end - j->t[i].start);
	}
}

static int name_is(const char *name, size_t len, const char *lit)
{
	return len == strlen(lit) && memcmp(name, lit, len) == 0;
}

/* JSON's whitespace; comparisons, not strchr: this runs for every OpenAI
 * event */
static inline int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int is_done(const struct sse_event *ev)
{
	size_t n = ev->data_len;

	while (n > 0 && blank(ev->data[n - 1]))
		n--;
	return n == 6 && memcmp(ev->data, "[DONE]", 6) == 0;
}

/* What a choice's delta carries: 1 answer text (content, refusal, tool
 * calls; legacy text), 2 reasoning only (reasoning_content: DeepSeek,
 * vLLM, xAI; reasoning: OpenRouter, newer vLLM), 0 nothing. */
enum { TEXT_NONE, TEXT_OUTPUT, TEXT_REASONING };

static int openai_delta_text(const struct json *j, int d)
{
	static const char *const keys[] = { "content", "refusal", "text" };
	static const char *const thinking[] = { "reasoning_content", "reasoning" };

	if (d < 0 || j->t[d].type != JSMN_OBJECT)
		return TEXT_NONE;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (j_nonempty_str(j, j_key(j, d, keys[k], strlen(keys[k]))))
			return TEXT_OUTPUT;
	if (j_first(j, j_key(j, d, KEY("tool_calls"))) >= 0)
		return TEXT_OUTPUT;
	for (size_t k = 0; k < sizeof(thinking) / sizeof(thinking[0]); k++)
		if (j_nonempty_str(j, j_key(j, d, thinking[k], strlen(thinking[k]))))
			return TEXT_REASONING;
	return TEXT_NONE;
}

/* A token event of several choices or parts is reasoning only when none
 * of them carries answer text. */
static void text_kind(struct dialect_info *out, int kind)
{
	if (kind == TEXT_NONE)
		return;
	if (!out->token)
		out->reasoning = 1;
	out->token = 1;
	if (kind == TEXT_OUTPUT)
		out->reasoning = 0;
}

/* An empty delta (dialect.h): choices, each with a delta object that has
 * no "role", and no finish_reason but null; nothing else of the chunk
 * (no token, count or error) is the caller's to check. */
static int openai_empty(const struct json *j, int choices)
{
	int c, d, f, any = 0;

	for (c = j_first(j, choices); c >= 0; c = j_next(j, choices, c)) {
		d = j_key(j, c, KEY("delta"));
		f = j_key(j, c, KEY("finish_reason"));
		if (d < 0 || j->t[d].type != JSMN_OBJECT || j_key(j, d, KEY("role")) >= 0 ||
		    (f >= 0 && !j_prim_is(j, f, "null")))
			return 0;
		any = 1;
	}
	return any;
}

static void openai_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	int c, choices = j_key(j, 0, KEY("choices"));
	int u = j_key(j, 0, KEY("usage"));

	(void)ev;
	/* chat: the choice's delta; legacy completions: the choice's text;
	 * and each choice's finish_reason: its three keys in one walk of its
	 * members (a tool call's delta is many tokens to step over) */
	for (c = j_first(j, choices); c >= 0; c = j_next(j, choices, c)) {
		int k[3];
		j_choice(j, c, k);
		if (!out->token || out->reasoning) {
			text_kind(out, openai_delta_text(j, k[0]));
			if (j_nonempty_str(j, k[1]))
				text_kind(out, TEXT_OUTPUT);
		}
		j_finish(j, k[2], out);
	}
	j_counts(j, u, "completion_tokens", "prompt_tokens", out);
	j_reasoning(j, j_at(j, u, "completion_tokens_details.reasoning_tokens"), out);
	out->error = j_present(j, j_key(j, 0, KEY("error")));
	j_model(j, j_key(j, 0, KEY("model")), out);
	if (!out->token && !out->error && out->output_tokens < 0 &&
	    out->input_tokens < 0 && openai_empty(j, choices))
		out->keepalive = DIALECT_EMPTY;
}

static void responses_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	const char *name;
	size_t len;

	event_name(ev, j, "type", &name, &len);
	/* response.reasoning_text.delta, response.reasoning_summary_text.delta
	 * (and the older response.reasoning.delta) are reasoning; the other
	 * deltas answer: output_text, refusal, function_call_arguments, ... */
	if (len > 15 && memcmp(name, "response.", 9) == 0 &&
	    memcmp(name + len - 6, ".delta", 6) == 0)
		text_kind(out, len > 18 && memcmp(name + 9, "reasoning", 9) == 0 ?
		    TEXT_REASONING : TEXT_OUTPUT);
	if (name_is(name, len, "response.completed") ||
	    name_is(name, len, "response.incomplete") ||
	    name_is(name, len, "response.failed")) {
		int u = j_at(j, 0, "response.usage");
		out->end = 1;
		j_counts(j, u, "output_tokens", "input_tokens", out);
		j_reasoning(j, j_at(j, u, "output_tokens_details.reasoning_tokens"), out);
		responses_finish(j, j_key(j, 0, KEY("response")), out);
	}
	out->error = name_is(name, len, "error") ||
	    name_is(name, len, "response.failed");
	j_model(j, j_at(j, 0, "response.model"), out);
}

static void anthropic_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	const char *name;
	size_t len;
	int dt;

	event_name(ev, j, "type", &name, &len);
	if (name_is(name, len, "content_block_delta")) {
		/* thinking_delta is reasoning; text_delta, input_json_delta and
		 * citations_delta answer; signature_delta carries no text */
		dt = j_at(j, 0, "delta.type");
		if (dt < 0 || !j_str_is(j, dt, KEY("signature_delta")))
			text_kind(out, dt >= 0 && j_str_is(j, dt, KEY("thinking_delta")) ?
			    TEXT_REASONING : TEXT_OUTPUT);
	} else if (name_is(name, len, "message_delta")) {
		j_finish(j, j_at(j, 0, "delta.stop_reason"), out);
		j_counts(j, j_key(j, 0, KEY("usage")), "output_tokens",
		    "input_tokens", out);
	} else if (name_is(name, len, "message_start")) {
		/* its usage.output_tokens is provisional, not the count */
		j_counts(j, j_at(j, 0, "message.usage"), NULL, "input_tokens", out);
		j_model(j, j_at(j, 0, "message.model"), out);
	} else if (name_is(name, len, "message_stop")) {
		out->end = 1;
	} else if (name_is(name, len, "ping")) {
		out->keepalive = DIALECT_PING;
	}
	dt = j_key(j, 0, KEY("type"));
	out->error = name_is(name, len, "error") ||
	    (dt >= 0 && j_str_is(j, dt, KEY("error")));
}

static void dify_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	const char *name;
	size_t len;

	event_name(ev, j, "event", &name, &len);
	if (name_is(name, len, "message") || name_is(name, len, "agent_message"))
		out->token = j_nonempty_str(j, j_key(j, 0, KEY("answer")));
	else if (name_is(name, len, "text_chunk"))
		out->token = j_nonempty_str(j, j_at(j, 0, "data.text"));
	else if (name_is(name, len, "message_end"))
		j_counts(j, j_at(j, 0, "metadata.usage"), "completion_tokens",
		    "prompt_tokens", out);
	/* workflow_finished reports only total_tokens: the count stays the
	 * number of token-bearing events */
	out->end = name_is(name, len, "message_end") ||
	    name_is(name, len, "workflow_finished");
	out->error = name_is(name, len, "error");
}

static void gemini_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	int cands = j_key(j, 0, KEY("candidates")), c, parts, p;

	(void)ev;
	for (c = j_first(j, cands); c >= 0; c = j_next(j, cands, c)) {
		parts = j_at(j, c, "content.parts");
		for (p = j_first(j, parts); p >= 0; p = j_next(j, parts, p))
			if (j_nonempty_str(j, j_key(j, p, KEY("text"))))
				text_kind(out, j_prim_is(j, j_key(j, p, KEY("thought")),
				    "true") ? TEXT_REASONING : TEXT_OUTPUT);
		j_finish(j, j_key(j, c, KEY("finishReason")), out);
	}
	gemini_counts(j, j_key(j, 0, KEY("usageMetadata")), out);
	out->error = j_present(j, j_key(j, 0, KEY("error")));
	j_model(j, j_key(j, 0, KEY("modelVersion")), out);
}

static void tgi_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	int tok = j_key(j, 0, KEY("token"));

	(void)ev;
	out->token = tok >= 0 && j->t[tok].type == JSMN_OBJECT &&
	    !j_prim_is(j, j_key(j, tok, KEY("special")), "true");
	j_counts(j, j_key(j, 0, KEY("details")), "generated_tokens", NULL, out);
	j_finish(j, j_at(j, 0, "details.finish_reason"), out);
	out->error = j_present(j, j_key(j, 0, KEY("error")));
}

static void ollama_event(const struct json *j, const struct sse_event *ev,
    struct dialect_info *out)
{
	(void)ev;
	/* think: chat streams message.thinking, generate a top-level thinking */
	if (j_nonempty_str(j, j_at(j, 0, "message.thinking")) ||
	    j_nonempty_str(j, j_key(j, 0, KEY("thinking"))))
		text_kind(out, TEXT_REASONING);
	if (j_nonempty_str(j, j_at(j, 0, "message.content")) ||
	    j_nonempty_str(j, j_key(j, 0, KEY("response"))))
		text_kind(out, TEXT_OUTPUT);
	out->end = j_prim_is(j, j_key(j, 0, KEY("done")), "true");
	if (out->end)
		j_finish(j, j_key(j, 0, KEY("done_reason")), out);
	j_counts(j, 0, "eval_count", "prompt_eval_count", out);
	out->error = j_present(j, j_key(j, 0, KEY("error")));
	j_model(j, j_key(j, 0, KEY("model")), out);
	if (j->n > 0 && !out->token && !out->end && !out->error && out->output_tokens < 0)
		out->keepalive = DIALECT_EMPTY;
}

typedef void (*rule_fn)(const struct json *, const struct sse_event *,
    struct dialect_info *);

static const rule_fn rules[DIALECT_COUNT] = {
	[DIALECT_OPENAI] = openai_event,
	[DIALECT_OPENAI_RESPONSES] = responses_event,
	[DIALECT_ANTHROPIC] = anthropic_event,
	[DIALECT_DIFY] = dify_event,
	[DIALECT_GEMINI] = gemini_event,
	[DIALECT_TGI] = tgi_event,
	[DIALECT_OLLAMA] = ollama_event,
};

int dialect_one_token_per_event(enum dialect_id d)
{
	return d == DIALECT_TGI;
}

int dialect_fast_path = 1;
_Thread_local uint64_t dialect_fast_taken;

/* The common OpenAI chunk: a delta with non-empty "content" and no usage
 * object or error. Recognised from its bytes in one pass, without
 * tokenising the JSON, which is most of the parse cost per event; anything
 * else (empty or absent content, a usage object, an error, an escaped
 * model name) takes the full parse. Both give the same answer on any JSON
 * text (test_dialect checks it on every recorded stream, the fuzzer on
 * what it makes of them; malformed text the pass does not validate), so
 * the pass may give up on anything unusual: giving up costs time, never a
 * different answer. */

/* Byte classes between strings: a nesting step, or the quote that opens a
 * string; 0 for the common bytes (':', ',', digits, "null"), which then
 * cost one load and one test each, where chained comparisons took four. */
#define OA_QUOTE 2
static const signed char oa_class[256] = {
	['{'] = 1, ['['] = 1, ['}'] = -1, [']'] = -1, ['"'] = OA_QUOTE,
};

/* Where the first delta's own "content" and the first top-level "model"
 * values are (model: its text, without quotes); quiet: the chunk carries
 * no text, provably (see oa_scan). */
struct oa_keys {
	const char *content, *model, *model_end;
	int quiet;
	int role;                 /* of a quiet chunk: a role */
	int finish;               /* finish_reason keys not null */
	const char *reason;       /* the first one's value, if the choices' */
};

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && blank(*p))
		p++;
	return p;
}

/* A key of 5 or 7 bytes at b equals the literal k: two overlapping 4-byte
 * loads each. memcmp would do, but whether gcc inlines it depends on the
 * shape of the whole function; a call per key was 250 instructions an
 * event. */
static inline int key5(const char *b, const char *k)
{
	uint32_t x, y;
	memcpy(&x, b, 4);
	memcpy(&y, k, 4);
	return x == y && b[4] == k[4];
}

static inline int key7(const char *b, const char *k)
{
	uint32_t x, y, u, v;
	memcpy(&x, b, 4);
	memcpy(&y, k, 4);
	memcpy(&u, b + 3, 4);
	memcpy(&v, k + 3, 4);
	return x == y && u == v;
}

/* The closing quote of the string whose text starts at b, or NULL. memchr
 * is vectorised; a quote found is escaped when an odd run of backslashes
 * precedes it, which is rare, so looking back is cheaper than looking at
 * every byte for a backslash. */
static const char *string_close(const char *b, const char *end)
{
	const char *q = b, *e;

	while ((q = memchr(q, '"', (size_t)(end - q))) != NULL && q[-1] == '\\') {
		for (e = q - 1; e > b && e[-1] == '\\'; e--)
			;
		if ((q - e) % 2 == 0)      /* an even run of backslashes */
			break;
		q++;
	}
	return q;
}

/* An empty string or null: a value that is no text. */
static int no_text(const char *v, const char *end)
{
	return (end - v >= 2 && v[0] == '"' && v[1] == '"') ||
	    (end - v >= 5 && memcmp(v, "null", 4) == 0 &&
	    (v[4] == ',' || v[4] == '}' || v[4] == ' '));
}

/* The value of a "finish_reason" key whose text ends at p, NULL when it
 * is null (or no value). Apart from oa_scan, and taking nothing of it: a
 * pointer into its keys would keep them in memory, a load and a store for
 * every string of every chunk. */
__attribute__((noinline))
static const char *oa_finish(const char *p, const char *end)
{
	const char *v = skip_blank(p, end);

	if (v >= end || *v != ':' || (v = skip_blank(v + 1, end)) >= end ||
	    (end - v >= 4 && memcmp(v, "null", 4) == 0))
		return NULL;
	return v;
}

/* One pass over the chunk's strings, nesting counted between them, so that
 * a quote inside text is never taken for a key. Returns 1 when the chunk
 * has no "error" key anywhere, no top-level "usage" but null ones, and a
 * first "delta" at the depth of choices[i].delta that is an object closed
 * in the text; 0 otherwise (the full parse decides). The delta's members
 * are read in the same pass (depth 4 while it is open), so nothing is
 * scanned twice.
 *
 * k->quiet (the role chunk, the finish chunk): one choice, no "text" key
 * of it (legacy completions), and a delta whose members are only "role"
 * and "content" or "refusal" that are empty or null, nothing nested in it:
 * what openai_event then finds is no token, no count, no error. Anything
 * else leaves it 0 and the full parse decides. */
static int oa_scan(const char *p, const char *end, struct oa_keys *k)
{
	int depth = 0, delta = 0;     /* delta: 0 not seen, 1 open, 2 closed */
	int choices = 0;              /* the top-level key now open is "choices" */
	int seen = 0;                 /* "choices" keys met */
	int elems = 0;                /* objects and arrays opened in choices */

	memset(k, 0, sizeof *k);
	k->quiet = 1;
	/* A chunk is one object: '{' first, its '}' last. With a last byte of
	 * non-zero class, the loop over class-0 bytes below stops inside the
	 * text without testing the end at every byte; anything else takes the
	 * full parse. */
	if (p >= end || *p != '{' || end[-1] != '}')
		return 0;
	for (;;) {
		const char *b, *q, *v;
		int c;

		if (p >= end)
			return delta == 2 && depth == 0;
		while (oa_class[(unsigned char)*p] == 0)
			p++;
		if ((c = oa_class[(unsigned char)*p++]) != OA_QUOTE) {
			if (c > 0 && depth == 2 && choices && ++elems > 1)
				k->quiet = 0;
			/* the top-level object closes at the end, not before */
			if ((depth += c) <= 0 && p < end)
				return 0;
			if (depth < 4 && delta == 1)
				delta = 2;
			if (depth > 4 && delta == 1)
				k->quiet = 0;
			continue;
		}
		b = p;
		if ((q = string_close(b, end)) == NULL)
			return 0;
		p = q + 1;
		/* at the top level every string but model's value is a key; a
		 * second "choices" (the full parse reads the first) gives up */
		if (depth == 1) {
			choices = q - b == 7 && key7(b, "choices");
			if (choices && seen++)
				return 0;
		}
		/* a key of the open delta, or a choice's "text" */
		if (k->quiet && ((delta == 1 && depth == 4) ||
		    (depth == 3 && q - b == 4 && memcmp(b, "text", 4) == 0)) &&
		    (v = skip_blank(p, end)) < end && *v == ':') {
			v = skip_blank(v + 1, end);
			if (depth == 3 || !((q - b == 4 && memcmp(b, "role", 4) == 0) ||
			    ((q - b == 7 && (key7(b, "content") || key7(b, "refusal"))) &&
			    no_text(v, end))))
				k->quiet = 0;
			k->role |= depth == 4 && q - b == 4;
		}
		/* the keys looked for are 5 or 7 bytes long, but a choice's
		 * finish_reason, of any chunk: anything but null is a finish
		 * (openai_fast reads a quiet chunk's one plain string, the full
		 * parse any other), so no memo is built of a finish chunk
		 * either. Tested after the others: no cost to their strings. */
		if (q - b != 5 && q - b != 7) {
			if (q - b == 13 && depth == 3 &&
			    memcmp(b, "finish_reason", 13) == 0 &&
			    (v = oa_finish(p, end)) != NULL && k->finish++ == 0 &&
			    choices)
				k->reason = v;
			continue;
		}
		if ((v = skip_blank(p, end)) >= end || *v != ':')
			continue;
		if ((v = skip_blank(v + 1, end)) >= end)
			return 0;
		if (q - b == 7) {
			if (delta == 1 && depth == 4 && k->content == NULL &&
			    key7(b, "content"))
				k->content = v;
		} else if (key5(b, "error")) {
			return 0;
		} else if (depth == 3 && delta == 0 && choices &&
		    key5(b, "delta")) {
			if (*v != '{')
				return 0;
			delta = 1;
		} else if (depth == 1 && key5(b, "usage")) {
			if (*v != 'n')
				return 0;
		} else if (depth == 1 && k->model == NULL &&
		    key5(b, "model")) {
			/* a plain string only: with a backslash in it, the first
			 * quote found may be an escaped one */
			if (*v != '"' || (q = memchr(v + 1, '"',
			    (size_t)(end - v - 1))) == NULL ||
			    memchr(v + 1, '\\', (size_t)(q - v - 1)) != NULL)
				return 0;
			k->model = v + 1;
			k->model_end = q;
			p = q + 1;
		}
	}
}

/* ---- the memo ------------------------------------------------------------ */

_Thread_local uint64_t dialect_memo_taken;

/* The byte before p that is not blank, or 0 at s. */
static char solid_before(const char *s, const char *p)
{
	while (p > s && blank(p[-1]))
		p--;
	return p > s ? p[-1] : 0;
}

/* The string closed at q is followed by the end of a member or an element,
 * so oa_scan never reads it as a key: its text can be anything. */
static int ends_value(const char *q, const char *end)
{
	const char *v = skip_blank(q + 1, end);

	return v < end && (*v == ',' || *v == '}' || *v == ']');
}

static void memo_keep(struct dialect_memo *m, size_t *at, const char *from,
    const char *to)
{
	memcpy(m->text + *at, from, (size_t)(to - from));
	*at += (size_t)(to - from);
	m->seg_end[m->holes] = (uint16_t)*at;
}

/* The memo of a chunk the fast path read as a token (k, its keys): the
 * content's text is hole 0, the string values after it the next holes,
 * the rest is kept. None when the chunk does not fit or the model comes
 * after the content (its place would move).
 *
 * Why the next chunk that differs only in the holes gets the same answer:
 * oa_scan reads the same bytes up to each hole in the same state; a hole
 * is one string to it (string_close finds the same quote the match found);
 * what follows it is no ':' (ends_value), so its text is never compared
 * with a key; only a top-level string is, with "choices", which the match
 * refuses. So oa_scan walks the rest in the same states, and openai_fast
 * differs only in the content being non-empty, which the match requires. */
static void memo_build(struct dialect_memo *m, const struct sse_event *ev,
    const struct oa_keys *k)
{
	const char *s = ev->data, *end = s + ev->data_len;
	const char *run = s, *p = k->content + 1, *q;
	size_t at = 0;
	int depth = 4;             /* inside choices[i].delta */

	m->holes = 0;
	m->top = 0;
	if (ev->data_len > DIALECT_MEMO_MAX ||
	    (k->model != NULL && k->model > k->content) ||
	    (q = string_close(p, end)) == NULL || !ends_value(q, end))
		return;
	memo_keep(m, &at, run, p);
	m->holes = 1;
	for (run = q, p = q + 1; p < end; ) {
		int c = oa_class[(unsigned char)*p];

		if (c != OA_QUOTE) {
			depth += c;
			p++;
			continue;
		}
		if ((q = string_close(p + 1, end)) == NULL) {
			m->holes = 0;
			return;
		}
		if (m->holes < DIALECT_MEMO_HOLES && solid_before(s, p) == ':' &&
		    ends_value(q, end)) {
			memo_keep(m, &at, run, p + 1);
			m->top |= (uint8_t)((depth == 1) << m->holes);
			m->holes++;
			run = q;
		}
		p = q + 1;
	}
	memo_keep(m, &at, run, end);
	m->model_off = (uint16_t)(k->model != NULL ? k->model - s : 0);
	m->model_len = (uint16_t)(k->model != NULL ? k->model_end - k->model : 0);
}

/* The chunk is the memo's but for the holes' text, the content's not
 * empty (see memo_build). A hole's closing quote is looked for in place
 * (string_close's rule, memchr and a look back at the backslashes): this
 * runs for every token of a stream, where a call was a tenth of it. */
static int memo_match(const struct dialect_memo *m, const struct sse_event *ev)
{
	const char *p = ev->data, *end = p + ev->data_len, *q, *e;
	const char *t = m->text;
	size_t at = 0, n;

	for (unsigned i = 0;; i++) {
		n = m->seg_end[i] - at;
		if ((size_t)(end - p) < n || memcmp(p, t + at, n) != 0)
			return 0;
		p += n;
		at += n;
		if (i == m->holes)
			return p == end;
		for (q = p; (q = memchr(q, '"', (size_t)(end - q))) != NULL &&
		    q[-1] == '\\'; q++) {
			for (e = q - 1; e > p && e[-1] == '\\'; e--)
				;
			if ((q - e) % 2 == 0)      /* an even run of backslashes */
				break;
		}
		if (q == NULL || (i == 0 && q == p) ||
		    ((m->top >> i & 1) && q - p == 7 && key7(p, "choices")))
			return 0;
		p = q;
	}
}

static int openai_fast(const struct sse_event *ev, struct dialect_memo *memo,
    struct dialect_info *out)
{
	struct oa_keys k;
	const char *v;
	int text;

	if (!oa_scan(ev->data, ev->data + ev->data_len, &k))
		return 0;
	/* a non-empty string; it lies inside the delta, which closed */
	v = k.content;
	text = v != NULL && *v == '"' && v[1] != '"';
	if (!text && !k.quiet)
		return 0;
	/* a finish: the quiet finish chunk's one plain reason is read here
	 * (one choice, one key, a string without escapes), any other by the
	 * full parse */
	if (k.finish) {
		const char *r = k.reason, *end = ev->data + ev->data_len, *q;

		if (text || k.finish > 1 || r == NULL || *r != '"' ||
		    (q = memchr(r + 1, '"', (size_t)(end - r - 1))) == NULL ||
		    q == r + 1 || memchr(r + 1, '\\', (size_t)(q - r - 1)) != NULL)
			return 0;
		out->finish[0].s = r + 1;
		out->finish[0].len = (size_t)(q - r - 1);
		out->n_finish = 1;
	}
	if (k.model != NULL) {
		out->model = k.model;
		out->model_len = (size_t)(k.model_end - k.model);
	}
	dialect_fast_taken++;
	if (!text) {
		/* quiet: no token; a keep-alive unless a role or a finish */
		if (!k.role && !k.finish)
			out->keepalive = DIALECT_EMPTY;
		return 1;
	}
	out->token = 1;
	if (memo != NULL)
		memo_build(memo, ev, &k);
	return 1;
}

/* ---- the usage chunk ------------------------------------------------------ */

/* The chunk that ends a stream asked for its usage (include_usage): no
 * choice, the counts. The full parse tokenised it (jsmn, then the rules:
 * some 5,500 instructions, 55 an event of a 100-token stream); this reads
 * the one shape, a subset of JSON that jsmn reads the same way, and gives
 * what openai_event would: the first "completion_tokens" and
 * "prompt_tokens" of the usage as j_count reads them, the first "model"
 * string. Anything else (an "error" key, a choice, a nested value in the
 * usage, a key with an escape, a second "choices" or "usage") is left to
 * the full parse: 0. */

/* Members read at most, in the chunk and in its usage: their tokens stay
 * far below TOK_MAX, where the full parse would go sparse and might not
 * reach the usage. */
#define USAGE_MEMBERS 64

/* A primitive's bytes (a number, true, false, null): what jsmn reads as
 * one, ended by a blank, ',' or '}'. */
static int prim_byte(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.';
}

/* The primitive from *pp (moved past it), as j_count reads it: 1 to 18
 * digits, else -1; *ok 0 when there is no primitive there. */
static int64_t prim_count(const char **pp, const char *end, int *ok)
{
	const char *p = *pp, *s = p;
	int64_t v = 0;
	int digits = 1;

	for (; p < end && prim_byte(*p); p++) {
		if (*p < '0' || *p > '9' || p - s >= 18)
			digits = 0;     /* and v no longer grows: no overflow */
		if (digits)
			v = v * 10 + (*p - '0');
	}
	*ok = p > s;
	*pp = p;
	return digits && p > s ? v : -1;
}

/* A key without a backslash from p (its opening quote): its end quote,
 * and *v the value's first byte past the ':'; NULL if not that. */
static const char *key_at(const char *p, const char *end, const char **v)
{
	const char *q;

	if (p >= end || *p != '"' ||
	    (q = memchr(p + 1, '"', (size_t)(end - p - 1))) == NULL ||
	    memchr(p + 1, '\\', (size_t)(q - p - 1)) != NULL)
		return NULL;
	*v = skip_blank(q + 1, end);
	if (*v >= end || **v != ':')
		return NULL;
	*v = skip_blank(*v + 1, end);
	return *v < end ? q : NULL;
}

/* The usage object from p ('{'): its counts; past its '}', or NULL. */
static const char *usage_counts(const char *p, const char *end,
    struct dialect_info *out)
{
	const char *k, *q, *v;
	int64_t n;
	int ok, got_out = 0, got_in = 0, members = 0;

	p = skip_blank(p + 1, end);
	if (p < end && *p == '}')
		return p + 1;
	for (;;) {
		if (++members > USAGE_MEMBERS || (q = key_at(p, end, &v)) == NULL)
			return NULL;
		k = p + 1;
		n = prim_count(&v, end, &ok);
		if (!ok)
			return NULL;
		if (q - k == 17 && memcmp(k, "completion_tokens", 17) == 0 && !got_out++)
			out->output_tokens = n;
		else if (q - k == 13 && memcmp(k, "prompt_tokens", 13) == 0 && !got_in++)
			out->input_tokens = n;
		p = skip_blank(v, end);
		if (p < end && *p == '}')
			return p + 1;
		if (p >= end || *p != ',')
			return NULL;
		p = skip_blank(p + 1, end);
	}
}

static int openai_usage(const struct sse_event *ev, struct dialect_info *out)
{
	const char *p = ev->data, *end = p + ev->data_len, *k, *q, *v;
	int choices = 0, usage = 0, model = 0, is_model, ok, members = 0;

	if (p >= end || *p != '{' || end[-1] != '}')
		return 0;
	for (p = skip_blank(p + 1, end);;) {
		if (++members > USAGE_MEMBERS || (q = key_at(p, end, &v)) == NULL)
			return 0;
		k = p + 1;
		/* the first "model" key is the one read, a string or not */
		is_model = q - k == 5 && key5(k, "model") && !model++;
		if (q - k == 5 && key5(k, "error")) {
			return 0;
		} else if (q - k == 7 && key7(k, "choices")) {
			if (choices++ || *v != '[' ||
			    (v = skip_blank(v + 1, end)) >= end || *v != ']')
				return 0;
			v++;
		} else if (q - k == 5 && key5(k, "usage")) {
			if (usage++ || *v != '{' || (v = usage_counts(v, end, out)) == NULL)
				return 0;
		} else if (*v == '"') {
			if ((q = string_close(v + 1, end)) == NULL)
				return 0;
			if (is_model && q > v + 1) {
				out->model = v + 1;
				out->model_len = (size_t)(q - v - 1);
			}
			v = q + 1;
		} else {
			(void)prim_count(&v, end, &ok);
			if (!ok)
				return 0;
		}
		p = skip_blank(v, end);
		if (p + 1 == end && *p == '}')
			break;
		if (p >= end || *p != ',')
			return 0;
		p = skip_blank(p + 1, end);
	}
	if (!choices || !usage)
		return 0;
	dialect_fast_taken++;
	return 1;
}

int dialect_memo_token(enum dialect_id d, const struct sse_event *ev,
    const struct dialect_memo *memo, const char **model, size_t *model_len)
{
	if (d != DIALECT_OPENAI || !dialect_fast_path || memo == NULL ||
	    memo->holes == 0 || !memo_match(memo, ev))
		return 0;
	*model = ev->data + memo->model_off;
	*model_len = memo->model_len;
	dialect_memo_taken++;
	return 1;
}

/* All but the finish array, read only below n_finish: that would be 64
 * bytes more to store for every event, and an event with no finish reason
 * costs no more than it did before there were any (n_finish sits in what
 * was padding: the same 64 bytes are zeroed). */
static void info_reset(struct dialect_info *out)
{
	memset(out, 0, offsetof(struct dialect_info, finish));
	out->output_tokens = out->input_tokens = out->reasoning_tokens = -1;
}

void dialect_classify(enum dialect_id d, const struct sse_event *ev,
    struct dialect_info *out)
{
	dialect_classify_memo(d, ev, NULL, out);
}

/* The fast readings of an OpenAI chunk; 0: the full parse's. A chunk that
 * ends in "}}" (its usage object last) is tried as the usage chunk first:
 * the fast scan would give it up only at its "usage" key, some 1,000
 * instructions later (and never takes one the usage reading takes: it
 * wants a delta). */
static int openai_quick(const struct sse_event *ev, struct dialect_memo *memo,
    struct dialect_info *out)
{
	const char *end = ev->data + ev->data_len;

	if (ev->data_len >= 2 && end[-2] == '}' && end[-1] == '}') {
		if (openai_usage(ev, out))
			return 1;
		info_reset(out);
		return openai_fast(ev, memo, out);
	}
	if (openai_fast(ev, memo, out))
		return 1;
	info_reset(out);
	return openai_usage(ev, out);
}

/* Everything but a memo's match: the tokens' array (20 KB of stack) and
 * the registers it takes are paid only here. */
__attribute__((noinline))
static void classify_parse(enum dialect_id d, const struct sse_event *ev,
    struct dialect_memo *memo, struct dialect_info *out)
{
	jsmntok_t tok[TOK_MAX];
	struct json j;

	if (d == DIALECT_RAW) {
		out->token = 1;
		return;
	}
	if ((unsigned)d >= DIALECT_COUNT || rules[d] == NULL)
		return;
	if (d == DIALECT_OPENAI && is_done(ev)) {
		out->end = 1;
		return;
	}
	if (!(d == DIALECT_OPENAI && dialect_fast_path &&
	    openai_quick(ev, memo, out))) {
		info_reset(out);
		json_parse(&j, ev->data, ev->data_len, tok, TOK_MAX);
		if (j.n == 0 || j.t[0].type != JSMN_OBJECT)
			j.n = 0;
		rules[d](&j, ev, out);
	}
	/* a ping under any dialect's name */
	if (ev->type_len == 4 && !out->token && memcmp(ev->type, "ping", 4) == 0)
		out->keepalive = DIALECT_PING;
}

void dialect_classify_memo(enum dialect_id d, const struct sse_event *ev,
    struct dialect_memo *memo, struct dialect_info *out)
{
	const char *model;
	size_t model_len;

	info_reset(out);
	/* the memo first: a chunk it matches starts as the memo's did, with
	 * '{', so it is no [DONE], and a token, so no ping */
	if (dialect_memo_token(d, ev, memo, &model, &model_len)) {
		out->token = 1;
		if (model_len > 0) {
			out->model = model;
			out->model_len = model_len;
		}
		return;
	}
	classify_parse(d, ev, memo, out);
}

void dialect_classify_parse(enum dialect_id d, const struct sse_event *ev,
    struct dialect_memo *memo, struct dialect_info *out)
{
	info_reset(out);
	classify_parse(d, ev, memo, out);
}

/* Non-streamed bodies: the usage object of the final response. */
static void body_rules(enum dialect_id d, const struct json *j, int root,
    struct dialect_info *out)
{
	int t;

	switch (d) {
	case DIALECT_OPENAI:
		t = j_key(j, root, KEY("usage"));
		j_counts(j, t, "completion_tokens", "prompt_tokens", out);
		j_reasoning(j, j_at(j, t, "completion_tokens_details.reasoning_tokens"), out);
		j_model(j, j_key(j, root, KEY("model")), out);
		j_finishes(j, j_key(j, root, KEY("choices")), "finish_reason", out);
		break;
	case DIALECT_OPENAI_RESPONSES:
		t = j_key(j, root, KEY("usage"));
		j_counts(j, t, "output_tokens", "input_tokens", out);
		j_reasoning(j, j_at(j, t, "output_tokens_details.reasoning_tokens"), out);
		j_model(j, j_key(j, root, KEY("model")), out);
		responses_finish(j, root, out);
		break;
	case DIALECT_ANTHROPIC:
		j_counts(j, j_key(j, root, KEY("usage")), "output_tokens",
		    "input_tokens", out);
		j_model(j, j_key(j, root, KEY("model")), out);
		j_finish(j, j_key(j, root, KEY("stop_reason")), out);
		t = j_key(j, root, KEY("type"));
		out->error = t >= 0 && j_str_is(j, t, KEY("error"));
		return;
	case DIALECT_DIFY:
		j_counts(j, j_at(j, root, "metadata.usage"), "completion_tokens",
		    "prompt_tokens", out);
		break;
	case DIALECT_GEMINI:
		gemini_counts(j, j_key(j, root, KEY("usageMetadata")), out);
		j_model(j, j_key(j, root, KEY("modelVersion")), out);
		j_finishes(j, j_key(j, root, KEY("candidates")), "finishReason", out);
		break;
	case DIALECT_TGI:
		j_counts(j, j_key(j, root, KEY("details")), "generated_tokens",
		    NULL, out);
		j_finish(j, j_at(j, root, "details.finish_reason"), out);
		break;
	case DIALECT_OLLAMA:
		j_counts(j, root, "eval_count", "prompt_eval_count", out);
		j_model(j, j_key(j, root, KEY("model")), out);
		j_finish(j, j_key(j, root, KEY("done_reason")), out);
		break;
	default:
		return;
	}
	out->error |= j_present(j, j_key(j, root, KEY("error")));
}

void dialect_classify_body(enum dialect_id d, const char *json, size_t len,
    struct dialect_info *out)
{
	jsmntok_t tok[TOK_MAX];
	struct json j;
	int e;

	info_reset(out);
	if (json_parse(&j, json, len, tok, TOK_MAX) == 0)
		return;
	if (j.t[0].type == JSMN_OBJECT) {
		body_rules(d, &j, 0, out);
		return;
	}
	/* Gemini without alt=sse and TGI's /generate answer with an array:
	 * the counts are cumulative, the last element's are the totals. */
	for (e = j_first(&j, 0); e >= 0; e = j_next(&j, 0, e))
		body_rules(d, &j, e, out);
}

int dialect_request_model(const char *json, size_t len, const char **model,
    size_t *model_len)
{
	jsmntok_t tok[TOK_MAX];
	struct json j;
	int m;

	if (json_parse(&j, json, len, tok, TOK_MAX) == 0 ||
	    j.t[0].type != JSMN_OBJECT)
		return 0;
	m = j_key(&j, 0, KEY("model"));
	if (!j_nonempty_str(&j, m))
		return 0;
	*model = json + j.t[m].start;
	*model_len = (size_t)(j.t[m].end - j.t[m].start);
	return 1;
}

/* The path without its query string or fragment. */
static size_t path_len(const char *path, size_t len)
{
	const char *q = memchr(path, '?', len);

	if (q != NULL)
		len = (size_t)(q - path);
	q = memchr(path, '#', len);
	return q != NULL ? (size_t)(q - path) : len;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* What a request path names: the API (dialect "auto") and the operation
 * (OpenTelemetry's gen_ai.operation.name). The first suffix that fits
 * wins; a path is read without its query and one trailing '/'. */
static const struct path_rule {
	const char *suffix;
	enum dialect_id d;
	enum dialect_op op;
} path_rules[] = {
	{ "/chat/completions", DIALECT_OPENAI, DIALECT_OP_CHAT },
	{ "/completions", DIALECT_OPENAI, DIALECT_OP_TEXT },
	{ "/responses", DIALECT_OPENAI_RESPONSES, DIALECT_OP_CHAT },
	{ "/messages", DIALECT_ANTHROPIC, DIALECT_OP_CHAT },
	{ "/chat-messages", DIALECT_DIFY, DIALECT_OP_CHAT },
	{ "/completion-messages", DIALECT_DIFY, DIALECT_OP_TEXT },
	{ "/workflows/run", DIALECT_DIFY, DIALECT_OP_OTHER },
	{ "/generate_stream", DIALECT_TGI, DIALECT_OP_TEXT },
	{ "/api/chat", DIALECT_OLLAMA, DIALECT_OP_CHAT },
	{ "/api/generate", DIALECT_OLLAMA, DIALECT_OP_TEXT },
	{ "/generate", DIALECT_RAW, DIALECT_OP_TEXT },
	{ "/embeddings", DIALECT_RAW, DIALECT_OP_EMBEDDINGS },
	{ "/api/embed", DIALECT_RAW, DIALECT_OP_EMBEDDINGS },
};

/* The rule of path, NULL for none; *gemini: a Gemini method path */
static const struct path_rule *path_rule(const char *path, size_t len, int *gemini)
{
	len = path_len(path, len);
	if (len > 1 && path[len - 1] == '/')
		len--;
	*gemini = memmem(path, len, KEY(":streamGenerateContent")) != NULL ? 2 :
	    memmem(path, len, KEY(":generateContent")) != NULL;
	for (size_t i = 0; i < sizeof(path_rules) / sizeof(path_rules[0]); i++)
		if (ends_with(path, len, path_rules[i].suffix))
			return &path_rules[i];
	return NULL;
}

enum dialect_id dialect_for_path(const char *path, size_t len)
{
	int gemini;
	const struct path_rule *r = path_rule(path, len, &gemini);

	if (gemini == 2)
		return DIALECT_GEMINI;
	return r != NULL ? r->d : DIALECT_RAW;
}

enum dialect_op dialect_operation(const char *path, size_t len)
{
	int gemini;
	const struct path_rule *r = path_rule(path, len, &gemini);

	if (gemini)
		return DIALECT_OP_GENERATE;
	return r != NULL ? r->op : DIALECT_OP_OTHER;
}

int dialect_path_model(const char *path, size_t len, const char **model,
    size_t *model_len)
{
	const char *colon, *start;

	len = path_len(path, len);
	colon = memmem(path, len, KEY(":streamGenerateContent"));
	if (colon == NULL)
		return 0;
	for (start = colon; start > path && start[-1] != '/'; start--)
		;
	if (start == colon || (size_t)(start - path) < 8 ||
	    memcmp(start - 8, "/models/", 8) != 0)
		return 0;
	/* a parameter (/models/key=...:stream...) is no model name, and its
	 * value may be a credential: no label of it */
	if (memchr(start, '=', (size_t)(colon - start)) != NULL ||
	    memchr(start, ';', (size_t)(colon - start)) != NULL)
		return 0;
	*model = start;
	*model_len = (size_t)(colon - start);
	return 1;
}

const char *dialect_end_marker(enum dialect_id d)
{
	switch (d) {
	case DIALECT_OPENAI:
		return "[DONE]";
	case DIALECT_OPENAI_RESPONSES:
		return "response.completed";
	case DIALECT_ANTHROPIC:
		return "message_stop";
	case DIALECT_DIFY:
		return "message_end";
	case DIALECT_OLLAMA:
		return "done";
	default:
		return NULL;
	}
}

int dialect_has_end_marker(enum dialect_id d)
{
	return dialect_end_marker(d) != NULL;
}

/* The names of Dify's stream events (its "event" key), but for the
 * generic ping and error. */
static int dify_event_name(const char *name, size_t len)
{
	static const char *const names[] = {
		"message", "agent_message", "agent_thought", "message_end",
		"message_file", "message_replace", "text_chunk", "tts_message",
		"tts_message_end", "workflow_started", "workflow_finished",
		"node_started", "node_finished", "iteration_started",
		"iteration_next", "iteration_completed",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (name_is(name, len, names[i]))
			return 1;
	return 0;
}

/* `auto` on a path that names no API: the first events say which it is.
 * Each dialect by what only it sends; an event that tells nothing (a
 * keep-alive comment's empty data, Anthropic's ping) leaves it open. */
enum dialect_id dialect_sniff(const struct sse_event *ev)
{
	jsmntok_t tok[TOK_MAX];
	struct json j;
	const char *name;
	size_t len;
	int t;

	if (is_done(ev))
		return DIALECT_OPENAI;
	json_parse(&j, ev->data, ev->data_len, tok, TOK_MAX);
	if (j.n == 0 || j.t[0].type != JSMN_OBJECT)
		return DIALECT_RAW;
	event_name(ev, &j, "type", &name, &len);
	if (len > 9 && memcmp(name, "response.", 9) == 0)
		return DIALECT_OPENAI_RESPONSES;
	if (name_is(name, len, "message_start") ||
	    name_is(name, len, "content_block_start") ||
	    name_is(name, len, "content_block_delta") ||
	    name_is(name, len, "message_delta") || name_is(name, len, "message_stop"))
		return DIALECT_ANTHROPIC;
	if ((t = j_key(&j, 0, KEY("choices"))) >= 0 && j.t[t].type == JSMN_ARRAY)
		return DIALECT_OPENAI;
	if ((t = j_key(&j, 0, KEY("candidates"))) >= 0 && j.t[t].type == JSMN_ARRAY)
		return DIALECT_GEMINI;
	if ((t = j_key(&j, 0, KEY("token"))) >= 0 && j.t[t].type == JSMN_OBJECT)
		return DIALECT_TGI;
	if (j_key(&j, 0, KEY("done")) >= 0 && j_key(&j, 0, KEY("model")) >= 0 &&
	    (j_key(&j, 0, KEY("message")) >= 0 || j_key(&j, 0, KEY("response")) >= 0))
		return DIALECT_OLLAMA;
	if ((t = j_key(&j, 0, KEY("event"))) >= 0 && j.t[t].type == JSMN_STRING &&
	    dify_event_name(j.s + j.t[t].start, (size_t)(j.t[t].end - j.t[t].start)))
		return DIALECT_DIFY;
	return DIALECT_RAW;
}
