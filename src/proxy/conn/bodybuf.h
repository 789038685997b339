/* SPDX-License-Identifier: Apache-2.0 */
/* A request body held while it arrives, before an upstream connection is
 * taken (request_buffering): in memory up to BODYBUF_MEMORY bytes while all
 * bodies held in memory stay within limits.request_buffers, else in an
 * unlinked temporary file ($TMPDIR, else /tmp), so that a thousand slow
 * uploads cost the backend nothing and tokentap a bounded amount of
 * memory. The bytes are the body as the client framed it (chunked stays
 * chunked). */
#ifndef TOKENTAP_BODYBUF_H
#define TOKENTAP_BODYBUF_H

#include <stddef.h>
#include <stdint.h>

#define BODYBUF_MEMORY (256 * 1024)
/* bodybuf_trim gives memory back after a peak of bodies this large */
#define BODYBUF_TRIM_PEAK (1024 * 1024)

struct evbuffer;

/* The body's bytes, in order: the file's, then kept's, then mem's. */
struct bodybuf {
	struct evbuffer *mem;       /* where bytes arrive; NULL: not in use */
	struct evbuffer *kept;      /* what settled in memory, packed */
	int fd;                     /* the temporary file, -1: none */
	uint64_t file_len;
	size_t counted;             /* kept's bytes, in the process's total */
};

/* Empty, nothing allocated (safe to free). */
void bodybuf_clear(struct bodybuf *b);
/* 0, or -1 when memory is short. */
int bodybuf_open(struct bodybuf *b);
/* After bytes were added to b->mem: keeps them in memory (copied into
 * full chains: what arrives read by read sits in chains twice its size),
 * or moves the whole body to the file once it is past BODYBUF_MEMORY or
 * the bodies in memory would pass limit bytes in all (limits.
 * request_buffers). 0, or -1 (the file could not be written). */
int bodybuf_settle(struct bodybuf *b, uint64_t limit);
/* Moves the whole body to out (the file as a segment libevent sends with
 * sendfile, or the memory); the buffer is empty after. 0 or -1. */
int bodybuf_send(struct bodybuf *b, struct evbuffer *out);
/* Did the body go to a file (it is then not kept for a retry)? */
int bodybuf_spilled(const struct bodybuf *b);
void bodybuf_free(struct bodybuf *b);
/* The main thread, now and then (now_us: CLOCK_MONOTONIC): once the bodies
 * held in memory fell well below their peak, the C library gives the
 * memory they took back to the system. */
void bodybuf_trim(uint64_t now_us);

#endif
