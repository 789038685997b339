/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus series of the requests (docs/contract.md §5), kept on the
 * main thread beside the /stats groups: per label set (route, tenant, model,
 * upstream, and with OpenTelemetry names the operation and provider)
 * cumulative histograms with classic and native buckets, and counters; per
 * route the upstream connect histogram and the proxy's own overhead.
 *
 * Cardinality is the operator's: a statistics group maps to a label set,
 * the tenant label only for tenants the operator named (tenant.c), the
 * model only for models earned (stats.h, SAMPLE_MINT_MODEL), and a label
 * set is admitted only while the series it can export fit in
 * metrics.max_series; past that a request counts under its route's
 * (_other, _other) label set, reserved up front, and in
 * tokentap_metrics_folded_requests_total. Label sets idle for
 * metrics.expiration go and give their series back. */
#ifndef TOKENTAP_METRICS_H
#define TOKENTAP_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct conf;
struct sample;
struct mset;
struct nhist;
struct promout;

enum metrics_names { METRICS_NAMES_TOKENTAP, METRICS_NAMES_OTEL, METRICS_NAMES_BOTH };

/* Bounds, names and the budget from c (kept: tenant labels read it). A
 * reload that changes the bounds or the names starts the series anew. */
void metrics_configure(const struct conf *c);
/* The label set of a statistics group (upstream: the replica, "-":
 * none); *folded: not its own (the budget was spent), its requests are
 * counted as folded. The group holds it until metrics_release. */
struct mset *metrics_resolve(const char *route, const char *tenant,
    const char *model, const char *upstream, unsigned dialect, unsigned op,
    int *folded);
/* A group lets m go (NULL: nothing), last_us its last use of it. A label
 * set no group holds goes at a metrics_sweep once idle for expiration_us
 * (0: never), its series with it, and gives back its share of
 * metrics.max_series; one that comes back starts from zero (a counter
 * reset, which rate() and increase() take as such). */
void metrics_release(struct mset *m, uint64_t last_us);
void metrics_sweep(uint64_t now_us, uint64_t expiration_us);
/* Counts up each time label sets went: a folded group may find room. */
uint64_t metrics_epoch(void);
/* A group's open streams and stalls move from one label set to another. */
void metrics_move(struct mset *from, struct mset *to, long active, long stalled);
/* A finished request (sample.h). */
void metrics_request(struct mset *m, int folded, const struct sample *o);
/* Token gaps in µs: their classic buckets, sum and count. */
void metrics_itl(struct mset *m, const uint32_t *gaps, unsigned n);
/* The native histogram of m's token gaps (seconds), for gaps counted by
 * bucket (nhist_index_us); NULL when m keeps none. */
struct nhist *metrics_itl_native(struct mset *m);
void metrics_active(struct mset *m, int delta);
/* A stream stalled (+1: one stall more) or its stall ended (-1). */
void metrics_stall(struct mset *m, int delta);
/* Every series of the requests, then the process's (procmetrics.h). */
void metrics_write(struct promout *o);
void metrics_free(void);
/* gen_ai.provider.name of a stream's dialect ("openai", ... "_other"), as
 * the label sets have it (the OTLP spans' too). */
const char *metrics_provider_name(unsigned dialect);

/* For tests: the series the label sets may export now, and the bound. */
uint64_t metrics_series_used(void);

#endif
