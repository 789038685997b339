/* SPDX-License-Identifier: Apache-2.0 */
/* The Protocol Buffers wire format, written (never read): varints, tags,
 * fixed and length-delimited fields into a growable byte buffer, messages
 * nested by marking where one starts and writing its length at its end.
 * By hand, for the messages tokentap writes: the Prometheus exposition
 * (promproto.h) and OTLP (otel/otlpenc.h). Not protobuf-c: it packs a tree
 * of message structs built first from generated code (a schema compiler
 * at build time, a struct per attribute, two passes) and writes no JSON;
 * this writes each field once, in order, into one buffer. Measured on an
 * OTLP span (tests/bench/otlp_encode.sh): 1.6 us here, 2.2 us with
 * protobuf-c at its best (one arena), 18 us allocating per message
 * (docs/alerts-and-metrics.md, "One protobuf writer"). Pure. */
#ifndef TOKENTAP_PB_H
#define TOKENTAP_PB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum pb_wire_type { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

struct pb {
	uint8_t *p;
	size_t n, cap;
	int oom;               /* an allocation failed: the buffer is unusable */
};

void pb_varint(struct pb *b, uint64_t v);
void pb_tag(struct pb *b, unsigned field, unsigned wire_type);
/* n bytes as they are (no tag, no length): for other formats built on
 * these varints (history.c's steps). */
void pb_raw(struct pb *b, const void *p, size_t n);
void pb_bytes(struct pb *b, unsigned field, const void *p, size_t n);
void pb_double(struct pb *b, unsigned field, double v);
void pb_uint(struct pb *b, unsigned field, uint64_t v);
void pb_sint(struct pb *b, unsigned field, int64_t v);
/* fixed64 (OTLP's timestamps and counts); pb_raw64 the 8 bytes alone, a
 * packed repeated fixed64's or double's element. */
void pb_fixed64(struct pb *b, unsigned field, uint64_t v);
void pb_raw64(struct pb *b, uint64_t v);
void pb_fixed32(struct pb *b, unsigned field, uint32_t v);
/* A length-delimited message: pb_open returns where it starts (field 0:
 * no tag, the length alone, as "delimited" frames a family); pb_close
 * writes its length there. Nest freely. */
size_t pb_open(struct pb *b, unsigned field);
void pb_close(struct pb *b, size_t mark);
void pb_free(struct pb *b);
/* For a message whose size the caller knows (OTLP's attributes, a few
 * dozen a span): room for `more` bytes (0, or -1 when memory ran out),
 * then the writers that check no room. */
int pb_grow(struct pb *b, size_t more);
static inline int pb_reserve(struct pb *b, size_t more)
{
	return !b->oom && b->n + more <= b->cap ? 0 : pb_grow(b, more);
}
static inline size_t pb_varint_len(uint64_t v)
{
	size_t n = 1;
	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}
static inline void pb_put_varint(struct pb *b, uint64_t v)
{
	for (; v >= 0x80; v >>= 7)
		b->p[b->n++] = (uint8_t)(v | 0x80);
	b->p[b->n++] = (uint8_t)v;
}
static inline void pb_put_bytes(struct pb *b, const void *p, size_t n)
{
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

#endif
