/* SPDX-License-Identifier: Apache-2.0 */
/* The requests tokentap-load sends: an HTTP/1.1 POST with a realistic
 * streaming JSON body in the dialect's own shape, a synthetic prompt of
 * the conf's bytes a token (load_psize.h: 4, given, or calibrated on the
 * target), and the output-token limit under the name that dialect's API
 * reads. */
#ifndef TOKENTAP_LOAD_BODY_H
#define TOKENTAP_LOAD_BODY_H

#include <stdint.h>

#include "load_conf.h"

struct evbuffer;

struct load_prompt;

/* One request's own parts. */
struct load_req {
	uint32_t prompt_tokens;          /* a synthetic prompt's size */
	uint32_t max_tokens;
	const struct load_prompt *prompt; /* a prompt of --prompts, or NULL */
	const struct load_header *headers; /* a trace's, over -H's of that name */
	size_t nheaders;
	const char *request_id;          /* X-Request-Id unless -H sets one; NULL: none */
	uint32_t prefix_tokens;          /* --prefixes: a shared prefix first; 0: none */
	uint64_t prefix_seed;            /* its words' seed: the same text for the same seed */
	double bytes_per_token;          /* synthetic text's; 0: LOAD_PSIZE_DEFAULT */
	/* a conversation's turn (load_talk.h): the messages before it, each
	 * a JSON object and a comma, and its new messages (JSON objects,
	 * commas between); NULL: a single prompt */
	struct evbuffer *history;
	struct evbuffer *ask;
};

/* Appends the request (head and body) to out. rng: the state of the
 * prompt's word picks. Returns 0 or -1 (out of memory). */
int load_body_request(struct evbuffer *out, const struct load_conf *c,
    const struct load_req *rq, uint64_t *rng);

/* Plain words, round(tokens x bytes_per_token) characters (0: the
 * default 4, load_psize.h), that need no JSON escaping. */
int load_body_words(struct evbuffer *out, uint32_t tokens, double bytes_per_token,
    uint64_t *rng);
/* 1 when c's requests carry a chat's messages (a conversation can). */
int load_body_chat(const struct load_conf *c);

/* Appends only the JSON body. */
int load_body_json(struct evbuffer *out, const struct load_conf *c,
    const struct load_req *rq, uint64_t *rng);

#endif
