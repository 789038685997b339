/* SPDX-License-Identifier: Apache-2.0 */
#include "promproto.h"

#include <stdlib.h>
#include <string.h>

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
