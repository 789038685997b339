/* A request body held while it arrives, before an upstream connection is
 * taken (request_buffering): in memory up to BODYBUF_MEMORY bytes, then in
 * an unlinked temporary file ($TMPDIR, else /tmp), so that a thousand slow
 * uploads cost the backend nothing and tokentap little memory. The bytes
 * are the body as the client framed it (chunked stays chunked). */
#ifndef TOKENTAP_BODYBUF_H
#define TOKENTAP_BODYBUF_H

#include <stdint.h>

#define BODYBUF_MEMORY (256 * 1024)

struct evbuffer;

struct bodybuf {
	struct evbuffer *mem;       /* NULL: not in use */
	int fd;                     /* the temporary file, -1: none */
	uint64_t file_len;
};

/* Empty, nothing allocated (safe to free). */
void bodybuf_clear(struct bodybuf *b);
/* 0, or -1 when memory is short. */
int bodybuf_open(struct bodybuf *b);
/* After bytes were added to b->mem: moves them to the file once the body
 * is past BODYBUF_MEMORY. 0, or -1 (the file could not be written). */
int bodybuf_settle(struct bodybuf *b);
/* Moves the whole body to out (the file as a segment libevent sends with
 * sendfile, or the memory); the buffer is empty after. 0 or -1. */
int bodybuf_send(struct bodybuf *b, struct evbuffer *out);
/* Did the body go to a file (it is then not kept for a retry)? */
int bodybuf_spilled(const struct bodybuf *b);
void bodybuf_free(struct bodybuf *b);

#endif
