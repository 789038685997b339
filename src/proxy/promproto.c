#include "promproto.h"

#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

static int grow(struct pb *b, size_t more)
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

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

void pb_varint(struct pb *b, uint64_t v)
{
	if (grow(b, 10) < 0)
		return;
	while (v >= 0x80) {
		b->p[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->n++] = (uint8_t)v;
}

void pb_raw(struct pb *b, const void *p, size_t n)
{
	if (n == 0 || grow(b, n) < 0)
		return;
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

void pb_tag(struct pb *b, unsigned field, unsigned wire_type)
{
	pb_varint(b, (uint64_t)field << 3 | wire_type);
}

void pb_bytes(struct pb *b, unsigned field, const void *p, size_t n)
{
	pb_tag(b, field, WT_LEN);
	pb_varint(b, n);
	if (grow(b, n) < 0)
		return;
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

void pb_double(struct pb *b, unsigned field, double v)
{
	uint64_t u;

	pb_tag(b, field, WT_I64);
	if (grow(b, 8) < 0)
		return;
	memcpy(&u, &v, 8);
	for (int i = 0; i < 8; i++)          /* little-endian whatever the host */
		b->p[b->n++] = (uint8_t)(u >> (8 * i));
}

void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, WT_VARINT);
	pb_varint(b, v);
}

void pb_sint(struct pb *b, unsigned field, int64_t v)
{
	pb_tag(b, field, WT_VARINT);
	pb_varint(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));   /* zigzag */
}

/* One byte is kept for the length; pb_close moves the body when the
 * length needs more. */
size_t pb_open(struct pb *b, unsigned field)
{
	size_t mark;

	if (field != 0)
		pb_tag(b, field, WT_LEN);
	mark = b->n;
	if (grow(b, 1) == 0)
		b->p[b->n++] = 0;
	return mark;
}

void pb_close(struct pb *b, size_t mark)
{
	size_t len, need;

	if (b->oom)
		return;
	len = b->n - mark - 1;
	need = varint_len(len);
	if (need > 1) {
		if (grow(b, need - 1) < 0)
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

static void pb_str(struct pb *b, unsigned field, const char *s)
{
	pb_bytes(b, field, s, strlen(s));
}

size_t promproto_family(struct pb *b, const char *name, const char *help,
    enum promproto_type type)
{
	size_t mark = pb_open(b, 0);
	pb_str(b, 1, name);
	pb_str(b, 2, help);
	pb_uint(b, 3, (uint64_t)type);
	return mark;
}

size_t promproto_metric(struct pb *b, const char *const *names,
    const char *const *values, size_t n)
{
	size_t mark = pb_open(b, 4);
	for (size_t i = 0; i < n; i++) {
		size_t l = pb_open(b, 1);
		pb_str(b, 1, names[i]);
		pb_str(b, 2, values[i]);
		pb_close(b, l);
	}
	return mark;
}

void promproto_counter(struct pb *b, double v)
{
	size_t m = pb_open(b, 3);
	pb_double(b, 1, v);
	pb_close(b, m);
}

void promproto_gauge(struct pb *b, double v)
{
	size_t m = pb_open(b, 2);
	pb_double(b, 1, v);
	pb_close(b, m);
}

/* Spans of consecutive indexes (BucketSpan {1 offset, 2 length}, field
 * 12), each offset from the end of the span before; then each bucket's
 * count as the difference to the one before (field 13, sint64). Repeated
 * scalars go unpacked, proto2's default, which every parser reads. */
static void native_buckets(struct pb *b, const struct nhist *h)
{
	int32_t next = 0;
	uint64_t prev = 0;

	for (uint32_t i = 0; i < h->n;) {
		uint32_t j = i + 1;
		size_t m;
		while (j < h->n && h->b[j].idx == h->b[j - 1].idx + 1)
			j++;
		m = pb_open(b, 12);
		pb_sint(b, 1, i == 0 ? h->b[i].idx : h->b[i].idx - next);
		pb_uint(b, 2, j - i);
		pb_close(b, m);
		next = h->b[j - 1].idx + 1;
		i = j;
	}
	for (uint32_t i = 0; i < h->n; i++) {
		pb_sint(b, 13, (int64_t)(h->b[i].count - prev));
		prev = h->b[i].count;
	}
}

void promproto_histogram(struct pb *b, const struct promproto_hist *h)
{
	size_t m = pb_open(b, 7);
	uint64_t cum = 0;

	pb_uint(b, 1, h->count);
	pb_double(b, 2, h->sum);
	for (size_t i = 0; i < h->n_bounds; i++) {
		size_t k = pb_open(b, 3);
		cum += h->counts[i];
		pb_uint(b, 1, cum);
		pb_double(b, 2, h->bounds[i]);
		pb_close(b, k);
	}
	if (h->native != NULL) {
		pb_sint(b, 5, NHIST_SCHEMA);
		pb_double(b, 6, NHIST_ZERO_THRESHOLD);
		pb_uint(b, 7, h->native->zero_count);
		native_buckets(b, h->native);
	}
	pb_close(b, m);
}
