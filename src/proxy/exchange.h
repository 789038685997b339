/* One client connection and the request/response exchange it carries.
 * proxy.c does the I/O (callbacks, timers, flushing); exchange.c does the
 * HTTP: finding and parsing heads with llhttp, rewriting them, framing
 * bodies, and closing the books on each request (access log, statistics). */
#ifndef TOKENTAP_EXCHANGE_H
#define TOKENTAP_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <llhttp.h>

#include "config.h"
#include "httphead.h"
#include "jsonscan.h"
#include "meter.h"
#include "stats.h"

struct bufferevent;
struct bufferevent_data_cb;
struct evbuffer;
struct event;
struct upconn;
struct worker;

enum client_state { C_IDLE, C_HEAD, C_BODY, C_WAIT };
enum up_state { U_NONE, U_CONNECT, U_HEAD, U_BODY };
enum session_timer {
	T_NONE, T_KEEPALIVE, T_HEADER, T_CONNECT, T_FIRST_BYTE, T_IDLE, T_LINGER
};

#define SESSION_ID_MAX     64
#define SESSION_TARGET_MAX 1024
#define SESSION_TENANT_MAX 64

struct session {
	TAILQ_ENTRY(session) link;
	struct worker *w;
	struct bufferevent *bev;
	int fd;
	int tls;                      /* the client came over TLS */
	struct event *defer_ev;       /* deferred backpressure (TLS upstream) */
	char client_ip[64];
	const char *proto;            /* "http" or "https" */

	struct event *timer;
	enum session_timer tkind;
	uint64_t tlen;
	uint64_t last_progress;

	enum client_state cs;
	enum up_state us;
	unsigned keepalive : 1;       /* the client connection carries on */
	unsigned closing : 1;         /* close once the output is flushed */
	unsigned lingering : 1;       /* shut down, discarding late input */
	unsigned http10 : 1;
	unsigned decode : 1;          /* client gets the decoded body */
	unsigned head_parsed : 1;
	unsigned head_sent : 1;       /* response head went to the client */
	unsigned req_done : 1;
	unsigned req_sent : 1;
	unsigned res_done : 1;
	unsigned client_paused : 1;   /* backpressure on the request body */
	unsigned up_paused : 1;       /* backpressure on the response */
	unsigned is_head_req : 1;
	unsigned retried : 1;
	unsigned counted : 1;         /* counted in active streams */
	unsigned too_many_headers : 1;
	unsigned dispatching : 1;     /* inside upstream_get() */
	unsigned connect_failed : 1;
	unsigned line_checked : 1;    /* the request line passed its check */
	unsigned body_too_large : 1;  /* a chunk would pass max_body_bytes */
	unsigned req_trailers : 1;    /* in the request's trailer section */
	size_t scan_pos, up_scan_pos;

	/* the request in flight; conf != NULL while there is one */
	struct conf *conf;
	const struct conf_route *route;
	struct upconn *up;
	struct evbuffer *req_copy;    /* request kept for one retry */
	llhttp_t req, res;
	struct http_head *head;       /* while a head is being parsed */
	struct json_model_scan model_scan;
	struct meter meter;
	uint64_t body_bytes;
	uint64_t bytes_in, bytes_out;
	long concurrency;
	unsigned status;
	const char *outcome;
	char request_id[SESSION_ID_MAX + 1];
	char method[16];
	char target[SESSION_TARGET_MAX + 1];
	size_t target_len;
	char tenant[SESSION_TENANT_MAX + 1];
	/* statistics: the group counted active, token gaps not yet sent */
	struct stats_key active_key;
	unsigned active_counted : 1;
	unsigned n_itl;
	uint32_t itl[STATS_ITL_BATCH];
};

/* exchange.c */
void exchange_begin(struct session *s, uint64_t t0);
void exchange_end(struct session *s, const char *outcome);
void exchange_abandon(struct session *s);
int exchange_done(struct session *s);
/* httpcheck_find_head on the input buffer */
int exchange_find_head(struct evbuffer *in, size_t *scan_pos, size_t max,
    size_t *head_len);
/* Drops the empty lines a request may be preceded by; returns how many
 * bytes that was. */
size_t exchange_skip_blank(struct evbuffer *in);
/* Checks the request line once it is complete; -1: answered (the session
 * may be gone). */
int exchange_request_line(struct session *s);
int exchange_request_head(struct session *s, size_t head_len);
int exchange_response_head(struct session *s, size_t head_len);
int exchange_parse(struct session *s, llhttp_t *p, struct evbuffer *in,
    size_t *used);
/* The response body in buf: *used bytes of it belong to the response. */
int exchange_parse_mem(struct session *s, const char *buf, size_t len,
    size_t *used);
int exchange_parse_eof(struct session *s);
/* 0: retried on a new connection; 1: not possible; -1: the session is gone */
int exchange_retry(struct session *s);
void exchange_keep_body(struct session *s, struct evbuffer *in, size_t n);
/* Bytes of tokentap's own in the request upstream (and its retry copy). */
void exchange_forward_bytes(struct session *s, const char *p, size_t n);
void exchange_route_meter(struct session *s, const struct http_head *rq);
const char *exchange_reason(unsigned status);
void exchange_client_addr(const struct sockaddr *sa, char *buf, size_t len);

/* proxy.c, for exchange.c */
/* fresh: never take a pooled connection */
int proxy_dispatch(struct session *s, int fresh);
int proxy_next_request(struct session *s);
int proxy_finish(struct session *s);
int proxy_flush(struct session *s);
int proxy_error(struct session *s, unsigned status, const char *type,
    const char *msg, const char *outcome);
void proxy_timer(struct session *s, enum session_timer kind, uint64_t us);

#endif
