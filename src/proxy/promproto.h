/* The Prometheus protobuf exposition (io.prometheus.client.MetricFamily,
 * "encoding=delimited": each family is a varint length and the message),
 * written from the format's definition (client_model's metrics.proto,
 * proto2) by a small encoder of our own for these few messages. Pure: it
 * fills a growable byte buffer. Field numbers are the .proto's. */
#ifndef TOKENTAP_PROMPROTO_H
#define TOKENTAP_PROMPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "nhist.h"

struct pb {
	uint8_t *p;
	size_t n, cap;
	int oom;               /* an allocation failed: the buffer is unusable */
};

enum promproto_type {
	PROMPROTO_COUNTER = 0, PROMPROTO_GAUGE = 1, PROMPROTO_HISTOGRAM = 4
};

/* Wire-level encoding. */
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

/* A histogram as exported: classic buckets (upper bounds, counts per
 * bucket, not cumulative, +Inf last) and, when native is not NULL, the
 * sparse exponential buckets of NHIST_SCHEMA. */
struct promproto_hist {
	uint64_t count;
	double sum;
	size_t n_bounds;
	const double *bounds;
	const uint64_t *counts;          /* n_bounds + 1 */
	const struct nhist *native;
};

/* MetricFamily {1 name, 2 help, 3 type}; then metrics, then pb_close. */
size_t promproto_family(struct pb *b, const char *name, const char *help,
    enum promproto_type type);
/* Metric (family field 4) with its labels (LabelPair {1 name, 2 value});
 * values must be valid UTF-8. Then one value, then pb_close. */
size_t promproto_metric(struct pb *b, const char *const *names,
    const char *const *values, size_t n);
void promproto_counter(struct pb *b, double v);
void promproto_gauge(struct pb *b, double v);
void promproto_histogram(struct pb *b, const struct promproto_hist *h);

#endif
