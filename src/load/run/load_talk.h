/* SPDX-License-Identifier: Apache-2.0 */
/* A user's conversation (--turns, --sessions, --sharegpt; load_session.h):
 * the history it has so far, each turn's new user message, and the
 * answer's text as it streams back, read from the events of the chat
 * dialects (OpenAI's choices[0].delta.content, Anthropic's text_delta,
 * Ollama's message.content; reasoning is not part of it). A turn that
 * ended ok adds its message and its answer to the history, so that the
 * next request's messages open with the whole of the one before: a
 * server's prefix cache finds it. */
#ifndef TOKENTAP_LOAD_TALK_H
#define TOKENTAP_LOAD_TALK_H

#include <stddef.h>
#include <stdint.h>

#include "dialect_names.h"
#include "load_body.h"
#include "load_conf.h"
#include "load_session.h"
#include "sse.h"

struct evbuffer;

struct load_talk {
	struct evbuffer *history;    /* {"role":...,"content":...}, each and a comma */
	struct evbuffer *ask;        /* this turn's new messages, the same, commas between */
	size_t history_chars, ask_chars;  /* their texts' length */
	struct evbuffer *answer;     /* this turn's answer so far, as received */
	const struct load_session *script;  /* a file's session, or NULL: drawn */
	uint32_t turn;               /* the turn sent last, from 1; 0: none yet */
	uint32_t turns;              /* of this session */
	uint64_t session;            /* its number in the level, from 0 */
	uint64_t rng;                /* its draws' state (turns, texts, think
	                              * times): of the seed and its number alone,
	                              * so a seed gives the same sessions whatever
	                              * the timing (load_run.c) */
	uint64_t end_us;             /* when the last turn's answer ended */
	enum dialect_id dialect;
	struct sse_parser sse;
	int sse_on;
};

/* For the dialect of a run. Returns 0 or -1 (out of memory). */
int load_talk_init(struct load_talk *t, enum dialect_id d);
void load_talk_free(struct load_talk *t);
/* A new session: a file's (script), or one of turns drawn turns. */
void load_talk_begin(struct load_talk *t, const struct load_session *script,
    uint32_t turns, uint64_t session);
/* 1 while the session has a turn to send. */
int load_talk_more(const struct load_talk *t);
/* The think time (µs) before the next turn, after the answer before it;
 * a file's (at c->trace_speed), else drawn from c->think. */
uint64_t load_talk_think(const struct load_talk *t, const struct load_conf *c,
    uint64_t *rng);
/* Starts the next turn: its messages into t->ask, and rq's parts (the
 * history, the messages, their size) from it. Returns 0 or -1 (memory). */
int load_talk_turn(struct load_talk *t, const struct load_conf *c, uint64_t *rng,
    struct load_req *rq);
/* The response body's bytes as they come. */
void load_talk_feed(struct load_talk *t, const char *at, size_t len);
/* The turn ended: ok, its message and answer join the history; else the
 * session ends (no answer to go on from). Returns 0 or -1 (memory). */
int load_talk_answered(struct load_talk *t, int ok, uint64_t now_us);

/* The answer text one event of dialect d carries, as its JSON string's
 * raw contents (still escaped) in the event's bytes: returns 1 with *s,
 * *n set, or 0 when it carries none. Pure. */
int load_talk_text(enum dialect_id d, const char *data, size_t len,
    const char **s, size_t *n);

#endif
