/* The requests tokentap-load sends: an HTTP/1.1 POST with a realistic
 * streaming JSON body in the dialect's own shape, a prompt of about four
 * characters per token, and the output-token limit under the name that
 * dialect's API reads. */
#ifndef TOKENTAP_LOAD_BODY_H
#define TOKENTAP_LOAD_BODY_H

#include <stdint.h>

#include "load_conf.h"

struct evbuffer;

/* Appends the request (head and body) to out. rng: the state of the
 * prompt's word picks. Returns 0 or -1 (out of memory). */
int load_body_request(struct evbuffer *out, const struct load_conf *c,
    uint32_t prompt_tokens, uint32_t max_tokens, uint64_t *rng);

/* Appends only the JSON body. */
int load_body_json(struct evbuffer *out, const struct load_conf *c,
    uint32_t prompt_tokens, uint32_t max_tokens, uint64_t *rng);

#endif
