/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics series as OTLP metrics (metrics/v1/metrics.proto,
 * collector's ExportMetricsServiceRequest): the modules write them
 * through a promout sink (promout.h), once, as they write /metrics; this
 * names them as the GenAI semantic conventions' client metrics do where
 * those have a name (gen_ai.client.operation.duration, ...), tokentap.*
 * otherwise,
 * labels as attributes (gen_ai.request.model, tokentap.route, ...);
 * histograms exponential (the native buckets, scale 6, as dense as
 * /metrics' protobuf) or explicit (the classic bounds); counters as
 * monotonic sums, cumulative or delta (the state to subtract is kept per
 * series, bounded by metrics.max_series, forgotten when a series is not
 * seen for ten exports). Main thread. */
#ifndef TOKENTAP_OTLPMETRIC_H
#define TOKENTAP_OTLPMETRIC_H

#include <stddef.h>
#include <stdint.h>

#include "otlpenc.h"
#include "otlpspan.h"
#include "promout.h"

struct otlpmetric_state;

struct otlpmetric_state *otlpmetric_state_new(void);
void otlpmetric_state_free(struct otlpmetric_state *st);

struct otlpmetric;

/* Starts an ExportMetricsServiceRequest in e: write(o) follows with
 * every module's series, then otlpmetric_end. start_ns: the cumulative
 * series' start (the process's), now_ns: this collection's time. */
struct otlpmetric *otlpmetric_begin(struct otlpenc *e, struct otlpmetric_state *st,
    const struct otlp_kv *res, size_t n_res, int delta, int explicit_buckets,
    uint64_t start_ns, uint64_t now_ns);
/* The promout that writes into it. */
struct promout *otlpmetric_out(struct otlpmetric *m);
/* Ends the request; returns the data points written (0: nothing to
 * send) or -1 when memory ran out. */
long otlpmetric_end(struct otlpmetric *m);

/* The OTLP name and unit of a /metrics family ("" for no unit); NULL:
 * not exported over OTLP (the process metrics: a collector has its own). */
const char *otlpmetric_name(const char *prom, char *buf, size_t len, const char **unit);

#endif
