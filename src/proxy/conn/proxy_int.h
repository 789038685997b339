/* SPDX-License-Identifier: Apache-2.0 */
/* What the three files of a client connection's I/O call of each other:
 * proxy.c (the session: accept, lifecycle, timers, errors, teardown),
 * proxy_client.c (the client side) and proxy_upstream.c (the upstream
 * side). One module cut along its seam, not three layers: the sides call
 * each other both ways, so only these three include it (firsttoken.c
 * sees the session's state, session.h, and none of these). Each function
 * is described where it is defined. As everywhere in these files, a
 * function that may free the session returns -1 when it did; callers
 * return at once. */
#ifndef TOKENTAP_PROXY_INT_H
#define TOKENTAP_PROXY_INT_H

#include <stdint.h>

#include <event2/util.h>

#include "session.h"

struct bufferevent;
struct conf;

/* Backpressure: stop reading the upstream once this much waits for the
 * client, resume when the client has taken all but LOW_MARK of it. */
#define HIGH_MARK (256 * 1024)
#define LOW_MARK  (64 * 1024)

/* proxy.c: the session */
void release_upstream(struct session *s);
void request_end(struct session *s, enum meter_end how);
int session_close(struct session *s);
int close_or_linger(struct session *s);
int client_flush(struct session *s);
int client_finish(struct session *s);
void timer_set(struct session *s, enum session_timer kind, uint64_t us);
void timer_lazy(struct session *s, enum session_timer kind, uint64_t us);
void timer_idle(struct session *s);
int respond_error(struct session *s, unsigned status, const char *type,
    const char *msg, enum meter_end how);
int respond(struct session *s, const struct exchange_verdict *v);
void request_begin(struct session *s, struct conf *conf);

/* proxy_client.c: the client side */
void client_reading(struct session *s, int on);
void client_read(struct bufferevent *bev, void *arg);
void client_write(struct bufferevent *bev, void *arg);
void client_event(struct bufferevent *bev, short what, void *arg);
void client_readable(evutil_socket_t fd, short what, void *arg);
int client_process(struct session *s);
void timer_request(struct session *s);
int may_fail_over(const struct session *s);
void request_sent(struct session *s, uint64_t at);
void request_flush(struct session *s);

/* proxy_upstream.c: the upstream side */
int dispatch(struct session *s, int fresh);
int over_backlog(const struct session *s);
int upstream_input(struct session *s);
int tunnel_client(struct session *s);
int try_another(struct session *s, enum failover_reason why, unsigned status);

#endif
