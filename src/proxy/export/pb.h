/* The Protocol Buffers wire format, written (never read): varints, tags,
 * fixed and length-delimited fields into a growable byte buffer, messages
 * nested by marking where one starts and writing its length at its end.
 * By hand, for the few messages tokentap writes (the Prometheus
 * exposition, promproto.h): a schema compiler would bring a runtime for
 * what is a hundred lines. Pure. */
#ifndef TOKENTAP_PB_H
#define TOKENTAP_PB_H

#include <stddef.h>
#include <stdint.h>

enum pb_wire_type { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2 };

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
/* A length-delimited message: pb_open returns where it starts (field 0:
 * no tag, the length alone, as "delimited" frames a family); pb_close
 * writes its length there. Nest freely. */
size_t pb_open(struct pb *b, unsigned field);
void pb_close(struct pb *b, size_t mark);
void pb_free(struct pb *b);

#endif
