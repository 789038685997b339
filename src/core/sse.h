/* SPDX-License-Identifier: Apache-2.0 */
/* An incremental event-stream parser (WHATWG HTML §9.2.6) with no I/O.
 *
 * Fed the decoded body bytes as they are read, split anywhere, it calls back
 * once per dispatched event. An event that lies whole inside one fed buffer
 * with a single data line is reported in place (pointers into that buffer);
 * only an event that straddles feeds, or joins several data lines, is copied
 * into the parser's scratch buffer, which is allocated once per stream and
 * never grows beyond max_event_bytes. An event larger than that is skipped
 * (counted in `oversized`), the bytes around it still parse.
 *
 * The NDJSON mode (ollama) reports each non-empty line as one event whose
 * data is the line. */
#ifndef TOKENTAP_SSE_H
#define TOKENTAP_SSE_H

#include <stddef.h>
#include <stdint.h>

struct sse_event {
	const char *type;   /* the "event" field; type_len 0 when absent */
	size_t type_len;
	const char *data;   /* data lines joined with LF, no trailing LF */
	size_t data_len;
	const char *id;     /* the "id" field of this event, if it had one */
	size_t id_len;
	int has_id;
};

/* Called for each dispatched event; the pointers live until it returns. */
typedef void (*sse_event_fn)(void *arg, const struct sse_event *ev);

enum sse_mode { SSE_MODE_EVENTS, SSE_MODE_NDJSON };

/* Where a value of the event being assembled lies (private to sse.c): in
 * the buffer being fed while that feed lasts, else in the scratch buffer. */
struct sse_span {
	const char *ptr;     /* in the fed buffer */
	size_t len;
	size_t rel;          /* in scratch: type / id sit at scratch_cap - rel */
	int at;
};

/* Public so it can be embedded in a per-request struct without allocation;
 * the fields below `counters` are the parser's own. */
struct sse_parser {
	/* counters */
	uint64_t events;     /* events dispatched */
	uint64_t oversized;  /* events skipped for exceeding max_event_bytes */
	/* the wire as it came (the wire report): line ends (a CR that ends a
	 * feed is counted with the next byte), data fields with and without
	 * the one space after the colon, comment lines, and "event: ping"
	 * blocks without data (never dispatched) */
	uint64_t lf, crlf, cr;
	uint64_t data_space, data_bare;
	uint64_t comments, pings;

	/* private */
	enum sse_mode mode;
	sse_event_fn fn;
	void *arg;
	size_t max_event_bytes;
	int state;           /* how far the line being read has got */
	int field;           /* its field, once the name is known */
	int bom;             /* BOM bytes matched at the start; -1 once past */
	int cr_end;          /* a CR ended the last feed (NDJSON: a CR held back) */
	int oversize;        /* the event being read outgrew max_event_bytes */
	int has_data, has_id;
	char name[8];        /* a field name split across feeds */
	size_t name_len;
	char *scratch;       /* straddling event, allocated on first need */
	size_t scratch_cap;  /* never above max_event_bytes */
	size_t pend_len;     /* a split event / id value, just after the data */
	size_t top_len;      /* type and id values, packed at the scratch end */
	struct sse_span data, type, id;
};

void sse_init(struct sse_parser *p, enum sse_mode mode, size_t max_event_bytes,
    sse_event_fn fn, void *arg);
/* Feeds len bytes; calls fn for each event whose blank line is in them. */
void sse_feed(struct sse_parser *p, const char *buf, size_t len);
/* Releases the scratch buffer. An unterminated last event is dropped. */
void sse_free(struct sse_parser *p);

#endif
