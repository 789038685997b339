/* SPDX-License-Identifier: Apache-2.0 */
/* When a request goes to another replica (pure rules). Only before
 * anything of a response reached the client, and at most `retries` times:
 *
 *   connect_error, connect_timeout  nothing reached the backend: any method;
 *   status          a status in retry_on (429 only without Retry-After, or
 *                   with 0): the backend answered and generated nothing, so
 *                   a POST goes again too;
 *   first_token_timeout  no token by timeouts.first_token: the attempt is
 *                   closed (the backend stops) before any token, and a POST
 *                   goes again too;
 *   throughput      the first tokens came slower than health.throughput's
 *                   min_rate, all held back (firsttoken.c): closed the same
 *                   way before any byte reached the client, a POST too;
 *   closed, first_byte_timeout  the backend had the request and may have
 *                   acted on it: idempotent methods only (RFC 9110 §9.2.2).
 *
 * Passive health: each of these but a status outside 502 / 503 / 504 is a
 * failure of the replica. */
#ifndef TOKENTAP_FAILOVER_H
#define TOKENTAP_FAILOVER_H

#include <stddef.h>

#include "config.h"

enum failover_reason {
	FAILOVER_CONNECT,
	FAILOVER_CONNECT_TIMEOUT,
	FAILOVER_CLOSED,          /* closed or reset before the response head */
	FAILOVER_FIRST_BYTE,      /* no response head within timeouts.first_byte */
	FAILOVER_STATUS,          /* a status in retry_on */
	FAILOVER_FIRST_TOKEN,     /* no token within timeouts.first_token */
	FAILOVER_THROUGHPUT,      /* too slow by health.throughput */
	FAILOVER_REASON_COUNT
};

/* "connect_error", "connect_timeout", "closed", "first_byte_timeout",
 * "status", "first_token_timeout", "throughput": the access log's
 * attempts[].reason */
const char *failover_reason_name(enum failover_reason why);
/* May the request go again (to another replica) after this? */
int failover_resend_ok(enum failover_reason why, int idempotent);
/* Does a response head with this status (and Retry-After value, NULL when
 * absent) send the request to another replica on route r? */
int failover_status(const struct conf_route *r, unsigned status,
    const char *retry_after, size_t retry_after_len);
/* Is this outcome a failure of the replica (passive health)? status: the
 * response's, for FAILOVER_STATUS. */
int failover_unhealthy(enum failover_reason why, unsigned status);
/* Is a response head with this status a failure of its replica? */
int failover_unhealthy_status(unsigned status);

#endif
