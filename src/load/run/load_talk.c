/* SPDX-License-Identifier: Apache-2.0 */
#include "load_talk.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "json.h"
#include "jsonw.h"
#include "load_psize.h"
#include "util.h"

/* The tokens of one event: a chunk has a few dozen. */
#define TALK_TOKENS 128
/* An event bigger than this carries no text we keep. */
#define TALK_EVENT_MAX (1024 * 1024)

/* ---- the text of an event ---------------------------------------------- */

/* The value token of key in object obj, or -1. */
static int member(const struct json *j, int obj, const char *key)
{
	size_t klen = strlen(key);

	if (obj < 0 || obj >= j->n || j->t[obj].type != JSMN_OBJECT)
		return -1;
	for (int i = obj + 1; i + 1 < j->n && j->t[i].start < j->t[obj].end; i++)
		if (j->t[i].parent == obj && j->t[i].type == JSMN_STRING &&
		    (size_t)(j->t[i].end - j->t[i].start) == klen &&
		    memcmp(j->s + j->t[i].start, key, klen) == 0)
			return i + 1;
	return -1;
}

/* The first element of array arr, or -1. */
static int first(const struct json *j, int arr)
{
	if (arr < 0 || arr + 1 >= j->n || j->t[arr].type != JSMN_ARRAY ||
	    j->t[arr].size == 0)
		return -1;
	return arr + 1;
}

static int is_str(const struct json *j, int tok, const char *v)
{
	size_t n = strlen(v);

	return tok >= 0 && j->t[tok].type == JSMN_STRING &&
	    (size_t)(j->t[tok].end - j->t[tok].start) == n &&
	    memcmp(j->s + j->t[tok].start, v, n) == 0;
}

int load_talk_text(enum dialect_id d, const char *data, size_t len,
    const char **s, size_t *n)
{
	jsmntok_t tok[TALK_TOKENS];
	struct json j;
	int v = -1;

	if (len == 0 || data[0] != '{' || json_parse(&j, data, len, tok, TALK_TOKENS) < 1)
		return 0;
	switch (d) {
	case DIALECT_ANTHROPIC:
		if (is_str(&j, member(&j, 0, "type"), "content_block_delta"))
			v = member(&j, member(&j, 0, "delta"), "text");
		break;
	case DIALECT_OLLAMA:
		v = member(&j, member(&j, 0, "message"), "content");
		break;
	default:
		v = member(&j, member(&j, first(&j, member(&j, 0, "choices")), "delta"),
		    "content");
		break;
	}
	if (v < 0 || j.t[v].type != JSMN_STRING)
		return 0;
	*s = data + j.t[v].start;
	*n = (size_t)(j.t[v].end - j.t[v].start);
	return 1;
}

/* ---- the conversation -------------------------------------------------- */

static void on_event(void *arg, const struct sse_event *ev)
{
	struct load_talk *t = arg;
	char stack[4096], *buf = stack;
	const char *s;
	size_t n, m;

	if (!load_talk_text(t->dialect, ev->data, ev->data_len, &s, &n))
		return;
	if (n >= sizeof stack && (buf = malloc(n + 1)) == NULL)
		return;
	/* the text itself: the request's JSON writer escapes it again, so
	 * whatever the peer sent becomes well-formed JSON */
	m = json_unescape(buf, n + 1 > sizeof stack ? n + 1 : sizeof stack, s, n);
	evbuffer_add(t->answer, buf, m);
	if (buf != stack)
		free(buf);
}

int load_talk_init(struct load_talk *t, enum dialect_id d)
{
	memset(t, 0, sizeof *t);
	t->dialect = d;
	t->history = evbuffer_new();
	t->ask = evbuffer_new();
	t->answer = evbuffer_new();
	if (t->history == NULL || t->ask == NULL || t->answer == NULL) {
		load_talk_free(t);
		return -1;
	}
	return 0;
}

static void clear(struct evbuffer *b)
{
	evbuffer_drain(b, evbuffer_get_length(b));
}

static void sse_off(struct load_talk *t)
{
	if (t->sse_on)
		sse_free(&t->sse);
	t->sse_on = 0;
}

void load_talk_free(struct load_talk *t)
{
	sse_off(t);
	if (t->history != NULL)
		evbuffer_free(t->history);
	if (t->ask != NULL)
		evbuffer_free(t->ask);
	if (t->answer != NULL)
		evbuffer_free(t->answer);
	memset(t, 0, sizeof *t);
}

void load_talk_begin(struct load_talk *t, const struct load_session *script,
    uint32_t turns, uint64_t session)
{
	clear(t->history);
	t->history_chars = 0;
	t->script = script;
	t->turns = script != NULL ? (uint32_t)script->n : turns;
	t->turn = 0;
	t->session = session;
}

int load_talk_more(const struct load_talk *t)
{
	return t->turn < t->turns;
}

uint64_t load_talk_think(const struct load_talk *t, const struct load_conf *c,
    uint64_t *rng)
{
	/* a file's think time, at --trace-speed */
	if (t->script != NULL && t->script->v[t->turn].delay_us >= 0)
		return (uint64_t)((double)t->script->v[t->turn].delay_us / c->trace_speed);
	return load_think_draw(&c->think, rng);
}

/* A string literal, without its NUL. */
#define ADD_LIT(out, s) evbuffer_add((out), (s), sizeof(s) - 1)

/* One message: its role and text written by the one JSON writer. */
static int add_msg(struct evbuffer *out, const char *role, const char *s, size_t n)
{
	return ADD_LIT(out, "{\"role\":") < 0 || jsonw_str(out, role) < 0 ||
	    ADD_LIT(out, ",\"content\":") < 0 || jsonw_strn(out, s, n) < 0 ||
	    ADD_LIT(out, "}") < 0 ? -1 : 0;
}

/* The run's bytes a token: given, calibrated, or the default 4. */
static double bpt(const struct load_conf *c)
{
	return c->bytes_per_token > 0 ? c->bytes_per_token : LOAD_PSIZE_DEFAULT;
}

/* The turn's new messages into t->ask: the file's, its text as the
 * user's, or a user's message of synthetic words. */
static int add_ask(struct load_talk *t, const struct load_turn *tn,
    const struct load_conf *c, uint64_t *rng)
{
	uint32_t tokens = tn != NULL ? tn->prompt_tokens : 0;

	t->ask_chars = 0;
	if (tn != NULL && tn->msgs != NULL) {
		for (size_t i = 0; i < tn->nmsgs; i++) {
			if ((i > 0 && ADD_LIT(t->ask, ",") < 0) || add_msg(t->ask,
			    tn->msgs[i].role, tn->msgs[i].content, tn->msgs[i].content_len) < 0)
				return -1;
			t->ask_chars += tn->msgs[i].content_len;
		}
		return 0;
	}
	if (tn != NULL && tn->text != NULL) {
		t->ask_chars = tn->text_len;
		return add_msg(t->ask, "user", tn->text, tn->text_len);
	}
	if (tokens == 0)
		tokens = load_conf_draw(&c->prompt_tokens, rng);
	/* plain words need no escaping; sized at the run's bytes a token
	 * (given or calibrated, load_psize.h) */
	t->ask_chars = load_psize_bytes(tokens, bpt(c));
	return ADD_LIT(t->ask, "{\"role\":\"user\",\"content\":\"") < 0 ||
	    load_body_words(t->ask, tokens, bpt(c), rng) < 0 ||
	    ADD_LIT(t->ask, "\"}") < 0 ? -1 : 0;
}

int load_talk_turn(struct load_talk *t, const struct load_conf *c, uint64_t *rng,
    struct load_req *rq)
{
	const struct load_turn *tn = t->script != NULL ? &t->script->v[t->turn] : NULL;

	clear(t->ask);
	clear(t->answer);
	if (add_ask(t, tn, c, rng) < 0)
		return -1;
	sse_off(t);
	sse_init(&t->sse, t->dialect == DIALECT_OLLAMA ? SSE_MODE_NDJSON : SSE_MODE_EVENTS,
	    TALK_EVENT_MAX, on_event, t);
	t->sse_on = 1;
	t->turn++;
	rq->history = t->history;
	rq->ask = t->ask;
	/* what the request asks the model to read: the text of the history
	 * and of the new messages, at the run's bytes a token */
	rq->prompt_tokens = load_psize_tokens(t->history_chars + t->ask_chars, bpt(c));
	rq->max_tokens = tn != NULL ? tn->max_tokens : 0;
	return 0;
}

void load_talk_feed(struct load_talk *t, const char *at, size_t len)
{
	if (t->sse_on)
		sse_feed(&t->sse, at, len);
}

int load_talk_answered(struct load_talk *t, int ok, uint64_t now_us)
{
	size_t n;
	int rc = 0;

	sse_off(t);
	t->end_us = now_us;
	if (!ok) {
		/* no answer to go on from: the session ends here */
		t->turns = t->turn;
		return 0;
	}
	n = evbuffer_get_length(t->answer);
	if (evbuffer_add_buffer(t->history, t->ask) < 0 || ADD_LIT(t->history, ",") < 0 ||
	    add_msg(t->history, "assistant", (const char *)evbuffer_pullup(t->answer, -1),
	    n) < 0 || ADD_LIT(t->history, ",") < 0)
		rc = -1;
	t->history_chars += t->ask_chars + n;
	clear(t->answer);
	return rc;
}
