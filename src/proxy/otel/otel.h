/* SPDX-License-Identifier: Apache-2.0 */
/* The OpenTelemetry export (docs/alerts-and-metrics.md, "OpenTelemetry"), on
 * the main thread: every 100 ms the workers' span queues (ring.h) are drained
 * into a bounded queue of otel.traces.queue spans, and a batch of up to
 * otel.traces.batch goes to /v1/traces when it is full or its oldest span
 * waited otel.traces.delay; every otel.metrics.interval the series of /metrics
 * go to /v1/metrics (otlpmetric.h). One export per signal in flight
 * (otlphttp.h): while the collector is slow or away, spans past the queue are
 * dropped and counted, never held by a worker, and a metrics export whose turn
 * comes while the last one is still going is skipped, counted. Memory: the
 * queue, one export per signal. */
#ifndef TOKENTAP_OTEL_H
#define TOKENTAP_OTEL_H

#include "config.h"

struct event_base;
struct evbuffer;
struct promout;

/* series: writes every series /metrics has (the shell's list). */
int otel_start(struct event_base *base, const struct conf *c,
    void (*series)(struct promout *o));
void otel_reload(const struct conf *c);
void otel_stop(void);
/* tokentap_otel_* (exports, spans and points sent, dropped, skipped). */
void otel_prometheus(struct promout *o);
/* ,"otel":{...}: the same for /stats (nothing without an endpoint). */
void otel_json(struct evbuffer *out);

#endif
