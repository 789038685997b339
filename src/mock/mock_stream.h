/* SPDX-License-Identifier: Apache-2.0 */
/* The schedule of one simulated response: when the head, each token event,
 * the end or the fault go out, computed as absolute monotonic due times from
 * the moment the request was read (so a late timer never shifts the events
 * after it), and the request log line written when it is over. */
#ifndef TOKENTAP_MOCK_STREAM_H
#define TOKENTAP_MOCK_STREAM_H

#include <stdint.h>

#include "mock_params.h"
#include "mock_wire.h"

struct mock_conn;

enum mock_phase {
	MOCK_PHASE_HEAD,     /* the head and pre-token events are next */
	MOCK_PHASE_TOKENS,   /* a token event, the end, or the fault is next */
	MOCK_PHASE_BODY,     /* a whole JSON answer is next */
	MOCK_PHASE_STALL,    /* nothing more, ever */
	MOCK_PHASE_QUEUED    /* --slots: waiting for a slot, nothing sent yet */
};

struct mock_stream {
	int active;                  /* started and not yet logged */
	enum mock_phase phase;
	struct mock_params p;
	struct mock_wire w;
	int streaming;               /* events, not one JSON document */
	int chunked;
	int status;
	const char *outcome;         /* for the log; NULL: client_abort */
	uint64_t rng;
	uint64_t due;                /* absolute time of the next step */
	uint64_t first_due;          /* absolute time of the first token */
	uint64_t last_write;
	uint64_t last_write_end;     /* read just after that send(2) returned */
	uint64_t events_planned;
	uint64_t fault_at;           /* tokens before the fault, or UINT64_MAX */
	int stalling;                /* in --stall's pause: heartbeats, no tokens */
	int stalled;                 /* the pause is over */
	uint64_t sched_first, sent_first, sched_last, sent_last;
	uint64_t sent_first_end, sent_last_end;   /* each send's other end */
	uint64_t late_max;
	uint64_t queue_us;           /* --slots: the wait for a slot */
	long others;                 /* streams in progress at its start, besides it */
	uint64_t cached_tokens;      /* --prefix-cache: input tokens found cached */
};

/* The request in c is complete: plans and starts the response.
 * Returns 0, or -1 when c was freed. */
int mock_stream_start(struct mock_conn *c);
/* c's timer fired while it was responding. */
void mock_stream_tick(struct mock_conn *c);
/* Writes the request log line once (outcome client_abort unless set). */
void mock_stream_log(struct mock_conn *c);

#endif
