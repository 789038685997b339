/* Content-Encoding, undone for the meter: the bytes tokentap forwards stay
 * as they came; the meter reads a decoded copy (zlib: gzip and deflate).
 * Nothing is set up for an uncompressed response, so it costs nothing. */
#ifndef TOKENTAP_DECODE_H
#define TOKENTAP_DECODE_H

#include <stddef.h>

enum decode_kind {
	DECODE_IDENTITY,        /* no Content-Encoding, or identity */
	DECODE_GZIP,            /* gzip, x-gzip */
	DECODE_DEFLATE,         /* deflate: zlib-wrapped, or raw as some send it */
	DECODE_UNSUPPORTED      /* br, zstd, compress, a list of codings */
};

/* The kind of a Content-Encoding value (NULL: none). */
enum decode_kind decode_kind(const char *ce, size_t len);

struct decoder;

/* A decoder for gzip or deflate; NULL when memory is short. */
struct decoder *decode_new(enum decode_kind k);
/* Decodes the next len bytes, handing each decoded piece to out. -1 once
 * the bytes are not of the coding (decoding stops there). */
int decode_feed(struct decoder *d, const char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg);
void decode_free(struct decoder *d);

#endif
