/* SPDX-License-Identifier: Apache-2.0 */
#include "pb.h"

#include <stdlib.h>
#include <string.h>

/* pb_reserve (pb.h) is the inline check every field's write makes; the
 * answer is almost always yes, and this is the rest. */
int pb_grow(struct pb *b, size_t more)
{
	size_t cap;
	uint8_t *p;

	if (b->oom)
		return -1;
	if (b->n + more <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->n + more)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL) {
		b->oom = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void pb_raw(struct pb *b, const void *p, size_t n)
{
	if (n == 0 || pb_reserve(b, n) < 0)
		return;
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

void pb_varint(struct pb *b, uint64_t v)
{
	if (pb_reserve(b, 10) < 0)
		return;
	pb_put_varint(b, v);
}

void pb_tag(struct pb *b, unsigned field, unsigned wire_type)
{
	pb_varint(b, (uint64_t)field << 3 | wire_type);
}

/* one growth for the tag, the length and the bytes: OTLP writes a few
 * dozen short strings a span */
void pb_bytes(struct pb *b, unsigned field, const void *p, size_t n)
{
	if (pb_reserve(b, n + 20) < 0)
		return;
	pb_put_varint(b, (uint64_t)field << 3 | PB_LEN);
	pb_put_varint(b, n);
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

void pb_double(struct pb *b, unsigned field, double v)
{
	uint64_t u;

	pb_tag(b, field, PB_I64);
	if (pb_reserve(b, 8) < 0)
		return;
	memcpy(&u, &v, 8);
	for (int i = 0; i < 8; i++)          /* little-endian whatever the host */
		b->p[b->n++] = (uint8_t)(u >> (8 * i));
}

void pb_raw64(struct pb *b, uint64_t v)
{
	if (pb_reserve(b, 8) < 0)
		return;
	for (int i = 0; i < 8; i++)
		b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

void pb_fixed32(struct pb *b, unsigned field, uint32_t v)
{
	pb_tag(b, field, PB_I32);
	if (pb_reserve(b, 4) < 0)
		return;
	for (int i = 0; i < 4; i++)
		b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

void pb_fixed64(struct pb *b, unsigned field, uint64_t v)
{
	if (pb_reserve(b, 18) < 0)
		return;
	pb_put_varint(b, (uint64_t)field << 3 | PB_I64);
	for (int i = 0; i < 8; i++)
		b->p[b->n++] = (uint8_t)(v >> (8 * i));
}

void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, v);
}

void pb_sint(struct pb *b, unsigned field, int64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));   /* zigzag */
}

/* One byte is kept for the length; pb_close moves the body when the
 * length needs more. */
size_t pb_open(struct pb *b, unsigned field)
{
	size_t mark;

	if (field != 0)
		pb_tag(b, field, PB_LEN);
	mark = b->n;
	if (pb_reserve(b, 1) == 0)
		b->p[b->n++] = 0;
	return mark;
}

void pb_close(struct pb *b, size_t mark)
{
	size_t len, need;

	if (b->oom)
		return;
	len = b->n - mark - 1;
	need = pb_varint_len(len);
	if (need > 1) {
		if (pb_reserve(b, need - 1) < 0)
			return;
		memmove(b->p + mark + need, b->p + mark + 1, len);
	}
	b->n = mark;
	pb_varint(b, len);
	b->n = mark + need + len;
}

void pb_free(struct pb *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}
