/* SPDX-License-Identifier: Apache-2.0 */
/* Content-Encoding, undone for the meter: the bytes tokentap forwards stay
 * as they came; the meter reads a decoded copy (zlib: gzip and deflate;
 * libbrotli: br; libzstd: zstd), streaming, each piece as it comes. Nothing
 * is set up for an uncompressed response, so it costs nothing. Memory is
 * bounded per response: a brotli window is at most 16 MiB by its format
 * (DECODE_BR_MEMORY in all), a zstd one at most 8 MiB (RFC 9659: larger
 * frames are refused); only what the stream writes of it is resident. */
#ifndef TOKENTAP_DECODE_H
#define TOKENTAP_DECODE_H

#include <stddef.h>

enum decode_kind {
	DECODE_IDENTITY,        /* no Content-Encoding, or identity */
	DECODE_GZIP,            /* gzip, x-gzip */
	DECODE_DEFLATE,         /* deflate: zlib-wrapped, or raw as some send it */
	DECODE_BR,              /* br (RFC 7932) */
	DECODE_ZSTD,            /* zstd (RFC 8878, RFC 9659) */
	DECODE_UNSUPPORTED      /* compress, a list of codings, anything else */
};

/* A brotli decoder's memory: the largest window and its tables */
#define DECODE_BR_MEMORY ((16u << 20) + (1u << 20))
/* a zstd frame's window: RFC 9659's limit for HTTP */
#define DECODE_ZSTD_WINDOW_LOG 23

/* The kind of a Content-Encoding value (NULL: none). */
enum decode_kind decode_kind(const char *ce, size_t len);

struct decoder;

/* A decoder for gzip, deflate, br or zstd; NULL for any other kind, or
 * when memory is short. */
struct decoder *decode_new(enum decode_kind k);
/* Decodes the next len bytes, handing each decoded piece to out. -1 once
 * the bytes are not of the coding, or need more memory than the bound
 * (decoding stops there). */
int decode_feed(struct decoder *d, const char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg);
void decode_free(struct decoder *d);

#endif
