/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer harness for the SSE / NDJSON parser and the dialect rules.
 *
 * Input: byte 0 picks max_event_bytes, bytes 1-2 the cut point, the rest
 * is the response body. The body is parsed in both modes three ways: in
 * one feed, cut in two at the chosen point, and one byte at a time. Each
 * piece is a separate heap copy freed after its feed, so a pointer kept
 * into an old feed shows under ASan. The three ways must dispatch the same
 * events and count the same wire (line ends, data fields, comments, pings;
 * a difference traps); the events of the whole feed go through
 * every dialect, and the OpenAI fast path must agree with the full parse.
 * The body is also read as a response body, a request body and a path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dialect.h"
#include "sse.h"

/* What a parse dispatched, folded into a hash. */
struct seen {
	uint64_t hash;
	uint64_t events;
	int classify;       /* run the dialects too (on one of the ways) */
	struct dialect_memo memo;   /* the stream's, as a meter keeps it */
};

static uint64_t fold(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211u;
	return h;
}

/* A strict JSON reader (RFC 8259), for telling which inputs are JSON text:
 * returns the end of the value at p, or NULL. Nesting is bounded. */
static const char *js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *js_value(const char *p, const char *e, int depth);

static const char *js_string(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"')
			return p + 1;
		if (c < 0x20)
			return NULL;
		if (c == '\\') {
			if (++p >= e)
				return NULL;
			if (*p == 'u') {
				for (int i = 0; i < 4; i++)
					if (++p >= e || *p == '\0' ||
					    !strchr("0123456789abcdefABCDEF", *p))
						return NULL;
			} else if (*p == '\0' || !strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
	}
	return NULL;
}

static const char *js_number(const char *p, const char *e)
{
	const char *d;
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0')
		p++;
	else if (p < e && *p >= '1' && *p <= '9')
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	else
		return NULL;
	if (p < e && *p == '.') {
		for (d = ++p; p < e && *p >= '0' && *p <= '9'; p++)
			;
		if (p == d)
			return NULL;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		if (++p < e && (*p == '+' || *p == '-'))
			p++;
		for (d = p; p < e && *p >= '0' && *p <= '9'; p++)
			;
		if (p == d)
			return NULL;
	}
	return p;
}

static const char *js_members(const char *p, const char *e, int depth, char close)
{
	p = js_ws(p + 1, e);
	if (p < e && *p == close)
		return p + 1;
	for (;;) {
		if (close == '}') {
			if (p >= e || *p != '"' || (p = js_string(p, e)) == NULL)
				return NULL;
			p = js_ws(p, e);
			if (p >= e || *p != ':')
				return NULL;
			p = js_ws(p + 1, e);
		}
		if ((p = js_value(p, e, depth + 1)) == NULL)
			return NULL;
		p = js_ws(p, e);
		if (p < e && *p == close)
			return p + 1;
		if (p >= e || *p != ',')
			return NULL;
		p = js_ws(p + 1, e);
	}
}

static const char *js_value(const char *p, const char *e, int depth)
{
	static const char *const lit[] = { "true", "false", "null" };
	if (p >= e || depth > 64)
		return NULL;
	if (*p == '{' || *p == '[')
		return js_members(p, e, depth, *p == '{' ? '}' : ']');
	if (*p == '"')
		return js_string(p, e);
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(lit[i]);
		if ((size_t)(e - p) >= n && memcmp(p, lit[i], n) == 0)
			return p + n;
	}
	return js_number(p, e);
}

static int is_json_text(const char *p, size_t len)
{
	const char *e = p + len;
	p = js_value(js_ws(p, e), e, 0);
	return p != NULL && js_ws(p, e) == e;
}

/* The OpenAI fast path must tell what the full parse tells on any JSON text
 * (on malformed text they may differ: the fast path does not validate). */
static int same_info(const struct dialect_info *a, const struct dialect_info *b)
{
	if (a->n_finish != b->n_finish)
		return 0;
	for (unsigned i = 0; i < a->n_finish && i < DIALECT_FINISH_MAX; i++)
		if (a->finish[i].s != b->finish[i].s || a->finish[i].len != b->finish[i].len)
			return 0;
	return a->token == b->token && a->end == b->end &&
	    a->error == b->error && a->output_tokens == b->output_tokens &&
	    a->input_tokens == b->input_tokens &&
	    a->reasoning == b->reasoning &&
	    a->reasoning_tokens == b->reasoning_tokens &&
	    a->model_len == b->model_len &&
	    (a->model_len == 0 || a->model == b->model);
}

/* So must the memo, over the events of a stream in order (it is updated
 * on every event, told apart only on JSON text). */
static void fast_equals_full(struct seen *s, const struct sse_event *ev)
{
	struct dialect_info fast, memo, full;

	dialect_fast_path = 1;
	dialect_classify_memo(DIALECT_OPENAI, ev, &s->memo, &memo);
	if (!is_json_text(ev->data, ev->data_len))
		return;
	dialect_classify(DIALECT_OPENAI, ev, &fast);
	dialect_fast_path = 0;
	dialect_classify(DIALECT_OPENAI, ev, &full);
	dialect_fast_path = 1;
	if (!same_info(&fast, &full) || !same_info(&memo, &full))
		__builtin_trap();
}

static void on_event(void *arg, const struct sse_event *ev)
{
	struct seen *s = arg;
	struct dialect_info info;

	s->hash = fold(s->hash, &ev->type_len, sizeof(ev->type_len));
	s->hash = fold(s->hash, ev->type, ev->type_len);
	s->hash = fold(s->hash, &ev->data_len, sizeof(ev->data_len));
	s->hash = fold(s->hash, ev->data, ev->data_len);
	s->hash = fold(s->hash, &ev->has_id, sizeof(ev->has_id));
	s->hash = fold(s->hash, ev->id, ev->id_len);
	s->events++;
	for (int d = DIALECT_OPENAI; s->classify && d < DIALECT_COUNT; d++) {
		dialect_classify((enum dialect_id)d, ev, &info);
		/* the model points into the event's data */
		if (info.model_len > 0 && (info.model < ev->data ||
		    info.model + info.model_len > ev->data + ev->data_len))
			__builtin_trap();
		/* so do the finish reasons */
		if (info.n_finish > DIALECT_FINISH_MAX)
			__builtin_trap();
		for (unsigned i = 0; i < info.n_finish; i++)
			if (info.finish[i].s < ev->data || info.finish[i].len == 0 ||
			    info.finish[i].s + info.finish[i].len > ev->data + ev->data_len)
				__builtin_trap();
	}
	if (s->classify)
		fast_equals_full(s, ev);
}

static void feed_copy(struct sse_parser *p, const uint8_t *buf, size_t len)
{
	char *copy = malloc(len ? len : 1);

	if (copy == NULL)
		abort();
	memcpy(copy, buf, len);
	sse_feed(p, copy, len);
	free(copy);
}

/* Parses body in pieces: step 0 = whole, else cut at `cut` when step is 1,
 * else one byte at a time. */
static struct seen parse(enum sse_mode mode, size_t max, const uint8_t *body,
    size_t len, size_t cut, int how)
{
	struct sse_parser p;
	struct seen s = { 1469598103934665603u, 0, how == 0 };

	sse_init(&p, mode, max, on_event, &s);
	if (how == 0) {
		feed_copy(&p, body, len);
	} else if (how == 1) {
		feed_copy(&p, body, cut);
		feed_copy(&p, body + cut, len - cut);
	} else {
		for (size_t i = 0; i < len; i++)
			feed_copy(&p, body + i, 1);
	}
	if (p.scratch_cap > max)
		__builtin_trap();
	s.hash = fold(s.hash, &p.oversized, sizeof(p.oversized));
	/* the wire report's counts too, however the body was cut */
	{
		uint64_t wire[] = { p.lf, p.crlf, p.cr, p.data_space, p.data_bare,
		    p.comments, p.pings };
		s.hash = fold(s.hash, wire, sizeof wire);
	}
	if (p.events != s.events)
		__builtin_trap();
	sse_free(&p);
	return s;
}

static void check_mode(enum sse_mode mode, size_t max, const uint8_t *body,
    size_t len, size_t cut)
{
	struct seen whole = parse(mode, max, body, len, cut, 0);
	struct seen two = parse(mode, max, body, len, cut, 1);
	struct seen bytes;

	if (whole.hash != two.hash || whole.events != two.events)
		__builtin_trap();
	if (len <= 1024) {
		bytes = parse(mode, max, body, len, cut, 2);
		if (whole.hash != bytes.hash || whole.events != bytes.events)
			__builtin_trap();
	}
}

static void check_whole_text(const uint8_t *body, size_t len)
{
	struct dialect_info info;
	const char *m;
	size_t n;
	char *copy = malloc(len ? len : 1);

	if (copy == NULL)
		abort();
	memcpy(copy, body, len);
	for (int d = DIALECT_OPENAI; d < DIALECT_COUNT; d++)
		dialect_classify_body((enum dialect_id)d, copy, len, &info);
	if (dialect_request_model(copy, len, &m, &n) &&
	    (m < copy || m + n > copy + len || n == 0))
		__builtin_trap();
	if (dialect_path_model(copy, len, &m, &n) &&
	    (m < copy || m + n > copy + len || n == 0))
		__builtin_trap();
	if ((unsigned)dialect_for_path(copy, len) >= DIALECT_COUNT)
		__builtin_trap();
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t max, cut, len;
	const uint8_t *body;

	if (size < 3)
		return 0;
	/* from 0 bytes (every event with data is too big) to 1 MiB */
	max = data[0] == 255 ? 0 : (size_t)1 << (data[0] % 21);
	body = data + 3;
	len = size - 3;
	cut = len ? ((size_t)data[1] | (size_t)data[2] << 8) % (len + 1) : 0;
	check_mode(SSE_MODE_EVENTS, max, body, len, cut);
	check_mode(SSE_MODE_NDJSON, max, body, len, cut);
	check_whole_text(body, len);
	return 0;
}
