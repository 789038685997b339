/* SPDX-License-Identifier: Apache-2.0 */
/* The exchange between one client connection and its upstream: request
 * head and body in, response head and body out, byte for byte, measured on
 * the way. One struct session per client connection owns it all and one
 * function, session_close(), tears it down. */
#ifndef TOKENTAP_PROXY_H
#define TOKENTAP_PROXY_H

#include <stdint.h>
#include <sys/socket.h>

#include <event2/util.h>
#include <openssl/ssl.h>

struct loop;

/* Takes an accepted client socket; tls: the listener's context, or NULL. */
void proxy_accept(struct loop *l, evutil_socket_t fd,
    const struct sockaddr *sa, int socklen, SSL_CTX *tls);
/* Drain: closes idle client connections; busy ones close after their
 * response. */
void proxy_drain(struct loop *l);
/* Closes every session at once (shutdown timeout reached). */
void proxy_close_all(struct loop *l);
/* Looks at every open stream (the worker's timer, a few times a second):
 * stalls begun and ended, timeouts.token_idle. */
void proxy_sweep(struct loop *l, uint64_t now);

#endif
