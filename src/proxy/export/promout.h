/* SPDX-License-Identifier: Apache-2.0 */
/* One /metrics exposition being written, in the format the scraper asked
 * for: Prometheus text 0.0.4, or the protobuf format (promproto.h) whose
 * histograms also carry native buckets. Every module that exports series
 * writes them through this, once, for both formats. Plus the request's
 * side: which format and whether gzip (both pure). */
#ifndef TOKENTAP_PROMOUT_H
#define TOKENTAP_PROMOUT_H

#include <stddef.h>
#include <stdint.h>

#include "promproto.h"

struct evbuffer;
struct promout;

#define PROMOUT_TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROMOUT_PROTO_TYPE "application/vnd.google.protobuf; " \
	"proto=io.prometheus.client.MetricFamily; encoding=delimited"

/* A histogram in whole units: microseconds (div 1000000, written as
 * seconds) or tokens (div 1). counts: per bucket, +Inf last. */
struct promout_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t div;
	size_t n_bounds;
	const uint64_t *bounds;
	const uint64_t *counts;
	const struct nhist *native;   /* NULL: classic buckets only */
};

/* Labels: names are the exporter's own; values are escaped (text) or made
 * valid UTF-8 (protobuf) here, whatever bytes they hold. */
#define PROMOUT_LABELS_MAX 8

struct promout_labels {
	const char *names[PROMOUT_LABELS_MAX];
	const char *values[PROMOUT_LABELS_MAX];
	size_t n;
};

struct promout *promout_new(struct evbuffer *out, int protobuf);
/* A third writer of the same series: a sink that takes them family by
 * family (the OTLP metrics export, otel/otlpmetric.h), so every module
 * that exports series writes them once for all three. A sink sees every
 * family metrics.c keeps, whatever metrics.names exports here. */
struct promout_sink {
	void (*family)(void *arg, const char *name, const char *help,
	    enum promproto_type type);
	void (*sample)(void *arg, const struct promout_labels *l, double v);
	void (*histogram)(void *arg, const struct promout_labels *l,
	    const struct promout_hist *h);
};
struct promout *promout_new_sink(const struct promout_sink *sink, void *arg);
/* 1 for a sink (promout_new_sink). */
int promout_every_family(const struct promout *o);
/* A family: its samples follow (none is fine: protobuf then leaves it out). */
void promout_family(struct promout *o, const char *name, const char *help,
    enum promproto_type type);
void promout_sample(struct promout *o, const struct promout_labels *l, double v);
void promout_histogram(struct promout *o, const struct promout_labels *l,
    const struct promout_hist *h);
/* Writes what is left and frees o; -1 when memory ran out on the way. */
int promout_finish(struct promout *o);

void promout_label(struct promout_labels *l, const char *name, const char *value);

/* Accept asks for the delimited protobuf format at least as much as for
 * text (Prometheus with native histograms on). */
int promout_wants_protobuf(const char *accept);
/* Accept-Encoding takes gzip. */
int promout_accepts_gzip(const char *accept_encoding);
/* out = gzip(in); 0 or -1. */
int promout_gzip(struct evbuffer *in, struct evbuffer *out);

#endif
