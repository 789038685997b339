/* SPDX-License-Identifier: Apache-2.0 */
/* The steady state of a chunked response body (RFC 9112 §7.1), decoded
 * where it lies: chunk-size CRLF, chunk-data, CRLF, and again. llhttp did
 * this before, some 230 instructions a chunk (its state machine, a span
 * per callback); an LLM stream is one small chunk per token, so that was
 * a tenth of the proxy's work an event. Pure: no I/O, no allocation.
 *
 * Only that much: a size line that is not hex digits and CRLF (an
 * extension, whitespace, a bare LF, over 15 digits) or the last chunk (0)
 * stops the decoder (CHUNKED_OFF) at that line's start, and llhttp, which
 * never saw the chunks before, reads the rest from there: the size line's
 * bytes the decoder took (held), then the byte it stopped at. So llhttp
 * (strict) still decides every chunk extension, the last chunk, the
 * trailers, the message's end and every error but one: a chunk's data not
 * followed by CRLF (CHUNKED_BAD), which llhttp refuses as well. */
#ifndef TOKENTAP_CHUNKED_H
#define TOKENTAP_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

enum chunked_state {
	CHUNKED_OFF,      /* llhttp reads (the initial state) */
	CHUNKED_SIZE,     /* in a size line's digits (held so far) */
	CHUNKED_SIZE_LF,  /* after its CR */
	CHUNKED_DATA,     /* in a chunk's data */
	CHUNKED_DATA_CR,  /* after it */
	CHUNKED_DATA_LF,
	CHUNKED_BAD       /* no CRLF after a chunk's data */
};

/* 15 hex digits: a size below 2^60, no overflow to check */
#define CHUNKED_DIGITS_MAX 15

struct chunked {
	uint64_t left;                     /* data bytes of the chunk to come */
	uint8_t state;                     /* enum chunked_state */
	uint8_t held_len;                  /* bytes of the size line taken */
	char held[CHUNKED_DIGITS_MAX + 1]; /* they: digits, then a CR */
};

typedef void (*chunked_data_fn)(void *arg, const char *p, size_t n);

/* A chunked body starts (on 1) or none does (0). */
void chunked_start(struct chunked *c, int on);

/* Decodes from p: data to fn in pieces, as it lies in p. Returns the bytes
 * taken: all of len, or fewer when the state is then CHUNKED_OFF (llhttp
 * reads on from p + that, after the held bytes) or CHUNKED_BAD (the byte
 * there is the error). */
size_t chunked_feed(struct chunked *c, const char *p, size_t len,
    chunked_data_fn fn, void *arg);

#endif
