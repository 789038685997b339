/* SPDX-License-Identifier: Apache-2.0 */
/* Conversations tokentap-load holds (docs/load-testing.md): a
 * user sends turn after turn of one session, each turn's request carrying
 * the history so far (its earlier user messages and the answers as they
 * were received) and a new user message, a think time after the answer
 * before the next turn. The turns of a session are drawn (--turns K,
 * --think-time DIST) or read from a file:
 *   - tokentap's session trace, JSONL, one turn a line:
 *       {"session_id": "a", "turn": 1, "delay_ms": 0, "prompt": "Hi",
 *        "max_tokens": 64}
 *     ("prompt_tokens": N for a synthetic message instead of "prompt", or
 *     "messages": [{"role": "tool", "content": "..."}, ...], the turn's
 *     new messages as they are);
 *     turn 1's delay_ms is the session's start from the replay's start,
 *     a later turn's the think time after the answer before it (absent:
 *     --think-time). Turns are numbered 1, 2, ... within a session.
 *   - ShareGPT's JSON (vllm bench, guidellm):
 *       [{"id": "x", "conversations": [{"from": "human", "value": "Hi"},
 *                                      {"from": "gpt", "value": "Hello"}]}]
 *     each "human" (or "user") message a turn, its max_tokens the recorded
 *     answer's size (4 characters a token), think times --think-time.
 * Every problem is reported as FILE:LINE:COL: message. Pure but for the
 * reading of the file. */
#ifndef TOKENTAP_LOAD_SESSION_H
#define TOKENTAP_LOAD_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "load_conf.h"

#define LOAD_SESSION_MAX_TURNS 1000u

/* "DUR", "uniform:DUR-DUR" or "exp:DUR" (the mean). Returns 0, or -1 with
 * *err naming the problem. */
int load_think_parse(const char *s, struct load_think *t, const char **err);
/* One draw (µs), from rng.h's generator. */
uint64_t load_think_draw(const struct load_think *t, uint64_t *rng);
/* Its text for people and the JSON: "0s", "uniform:1s-3s", "exp:2s". */
void load_think_name(const struct load_think *t, char *buf, size_t len);
/* --turns: "K", "MIN-MAX" or "uniform:MIN-MAX", 1 to 1000. */
int load_session_parse_turns(const char *s, struct load_range *r, const char **err);

/* A message of a turn: its role and its text. */
struct load_msg {
	char *role;
	char *content;
	size_t content_len;
};

struct load_turn {
	char *text;                  /* the user's message (NULL: synthetic) */
	size_t text_len;
	struct load_msg *msgs;       /* or the turn's messages, as they are */
	size_t nmsgs;
	uint32_t prompt_tokens;      /* a synthetic message's size; 0: drawn */
	uint32_t max_tokens;         /* 0: drawn from --max-tokens */
	int64_t delay_us;            /* see above; -1: --think-time */
	size_t line;                 /* where it was read */
};

struct load_session {
	char *id;
	struct load_turn *v;
	size_t n, cap;
	uint64_t start_us;           /* from the replay's start */
};

/* The sessions of a file, by start (file order among equals). */
struct load_sessions {
	struct load_session *v;
	size_t n, cap;
	size_t turns;                /* in all */
	char *path;
	int sharegpt;                /* read as ShareGPT */
};

int load_sessions_read(struct load_sessions *s, const char *path, FILE *err);
int load_sessions_read_sharegpt(struct load_sessions *s, const char *path,
    FILE *err);
void load_sessions_free(struct load_sessions *s);

#endif
