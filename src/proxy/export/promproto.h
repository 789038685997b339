/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus protobuf exposition (io.prometheus.client.MetricFamily,
 * "encoding=delimited": each family is a varint length and the message),
 * written from the format's definition (client_model's metrics.proto,
 * proto2) on the project's protobuf writer (pb.h). Pure: it fills a
 * growable byte buffer. Field numbers are the .proto's. */
#ifndef TOKENTAP_PROMPROTO_H
#define TOKENTAP_PROMPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "nhist.h"
#include "pb.h"

enum promproto_type {
	PROMPROTO_COUNTER = 0, PROMPROTO_GAUGE = 1, PROMPROTO_HISTOGRAM = 4
};

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
