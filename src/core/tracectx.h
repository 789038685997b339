/* SPDX-License-Identifier: Apache-2.0 */
/* W3C Trace Context (Level 1, www.w3.org/TR/trace-context/): the
 * traceparent header read as the recommendation says (a value that is not
 * exactly right is ignored, never repaired), and written. Pure, no
 * allocation: the proxy reads a client's and writes its own with its span
 * as the parent; the ids are bytes here, hex on the wire. */
#ifndef TOKENTAP_TRACECTX_H
#define TOKENTAP_TRACECTX_H

#include <stddef.h>
#include <stdint.h>

#define TRACECTX_SAMPLED 0x01
/* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TRACECTX_LEN 55

struct tracectx {
	uint8_t trace_id[16];
	uint8_t span_id[8];        /* the parent's (parent-id) as read */
	uint8_t flags;             /* trace-flags */
};

/* Parses a traceparent value of len bytes (not NUL-terminated). 0 and *t
 * set, or -1: a version of ff, a version 00 value of any other length
 * than 55, a field of the wrong length, upper-case or non-hex digits, an
 * all-zero trace-id or parent-id, a higher version whose first 55 bytes
 * are not followed by '-' or the end (§3.2.4: parse what version 00
 * defines). */
int tracectx_parse(const char *v, size_t len, struct tracectx *t);
/* Writes "00-{trace}-{span}-{flags}" (55 bytes and a NUL) into out, span
 * the parent-id it names (the writer's own span). */
void tracectx_format(const uint8_t trace_id[16], const uint8_t span_id[8],
    uint8_t flags, char out[TRACECTX_LEN + 1]);
/* Lower-case hex of n bytes into out (2n + 1 bytes, NUL-terminated). */
void tracectx_hex(const uint8_t *b, size_t n, char *out);
/* Fills n bytes from a 64-bit source (rng_next's) never all zero, as ids
 * must not be. */
void tracectx_random(uint8_t *b, size_t n, uint64_t (*next)(uint64_t *), uint64_t *state);

#endif
