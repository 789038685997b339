/* SPDX-License-Identifier: Apache-2.0 */
/* One client connection of tokentap-mock: the socket, the HTTP/1.1 request
 * parser, the write path, keep-alive and the single teardown. What to answer
 * and when is mock_stream's job; it talks back through mock_conn_send,
 * mock_conn_arm, mock_conn_finish and mock_conn_close. */
#ifndef TOKENTAP_MOCK_CONN_H
#define TOKENTAP_MOCK_CONN_H

#include <stdint.h>

#include <event2/event.h>
#include <event2/buffer.h>
#include <llhttp.h>

#include "mock_buf.h"
#include "mock_params.h"
#include "rxtime.h"
#include "mock_slots.h"
#include "mock_stream.h"

struct mock_config {
	struct mock_params defaults;   /* from the flags */
	int log_fd;                    /* request log (O_APPEND), or -1 */
};

/* One event loop thread and everything it owns. */
struct mock_worker {
	struct event_base *base;
	const struct mock_config *cfg;
	struct mock_conn *conns;       /* every open connection, for shutdown */
	struct mock_buf ev;            /* scratch: the event being rendered */
	struct mock_buf out;           /* scratch: the bytes of one flush */
	uint64_t requests;             /* numbers requests for their seeds */
	struct rxtime_clock rx;        /* kernel receive stamps -> monotonic */
	unsigned id;
};

enum mock_conn_state {
	MOCK_CONN_READING,      /* waiting for (the rest of) a request */
	MOCK_CONN_RESPONDING,   /* mock_stream owns the timer */
	MOCK_CONN_LINGERING     /* response done, the connection closing */
};

struct mock_conn {
	struct mock_worker *w;
	struct mock_conn *prev, *next;
	int fd;
	enum mock_conn_state state;
	struct event *rev, *wev, *timer;
	struct evbuffer *in;           /* read, not yet parsed */
	struct evbuffer *out;          /* what the socket did not take yet */
	int close_when_drained;
	int parsing;                   /* inside the parse loop: no re-entry */
	llhttp_t parser;

	/* The request being read, valid until the next one starts. */
	struct mock_buf url;
	struct mock_buf body;          /* first MOCK_BODY_KEEP bytes */
	uint64_t body_bytes;
	char hname[32];
	size_t hname_len;              /* > sizeof hname - 1: not ours */
	char hval[256];
	size_t hval_len;
	struct mock_params params;     /* flags, then X-Mock-* headers */
	char error[160];               /* a bad X-Mock-* header: 400 */
	char request_id[64];           /* X-Request-Id, for the request log */
	uint64_t t_req;                /* request fully read: the kernel's
	                                * receive time of the read that
	                                * completed it (the loop's clock where
	                                * the kernel gave none) */
	uint64_t t_req_loop;           /* ... when this loop parsed it */
	uint64_t rx_us;                /* the last read's receive time; 0: none */
	/* --slots: its place (mock_slots.c, under its lock) */
	enum mock_slot slot;
	uint64_t slot_at;              /* when it got its slot */
	struct mock_conn *slot_next;
	int expect_continue;           /* "Expect: 100-continue" */
	int keep_alive;
	int http10;
	int method_get;

	struct mock_stream s;
};

#define MOCK_BODY_KEEP (16u << 20)

/* Takes over an accepted, non-blocking socket. Returns 0, or -1 (closed). */
int mock_conn_new(struct mock_worker *w, int fd);
/* Closes every connection of the worker (shutdown). */
void mock_conn_free_all(struct mock_worker *w);

/* Writes now what the socket takes, queues the rest in order.
 * Returns 0, or -1 when the peer is gone (the caller then closes). */
int mock_conn_send(struct mock_conn *c, const char *data, size_t len);
/* Wakes mock_stream_tick at the absolute monotonic time at_us. */
void mock_conn_arm(struct mock_conn *c, uint64_t at_us);
/* The response is complete: logs it, then reads the next request on a
 * keep-alive connection, or closes once the output has drained.
 * Returns 0, or -1 when c was freed. */
int mock_conn_finish(struct mock_conn *c);
/* Tears the connection down now (logging an unfinished response). */
void mock_conn_close(struct mock_conn *c);

#endif
