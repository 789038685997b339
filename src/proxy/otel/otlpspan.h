/* SPDX-License-Identifier: Apache-2.0 */
/* Spans as OTLP writes them (trace/v1/trace.proto, collector's
 * ExportTraceServiceRequest): two spans per request, the HTTP server
 * conventions' SERVER span of the request tokentap received and, its
 * child, the GenAI semantic conventions' inference span of the call to
 * the model (docs/alerts-and-metrics.md, "OpenTelemetry": the version, the kinds and why,
 * every attribute and event). Pure: from span records (span.h) into an
 * encoder (otlpenc.h). */
#ifndef TOKENTAP_OTLPSPAN_H
#define TOKENTAP_OTLPSPAN_H

#include <stddef.h>

#include "otlpenc.h"
#include "span.h"

/* The semantic conventions the spans and metrics follow (schema_url). */
#define OTLP_SCHEMA_URL "https://opentelemetry.io/schemas/1.41.0"

/* The spans one request's record (span.h) is written as: the SERVER
 * span of the request tokentap received and the CLIENT span of its call
 * to the model; the export's counters count spans. */
#define OTLPSPAN_PER_REQUEST 2

/* Resource attributes, key and string value each. */
struct otlp_kv {
	const char *key, *value;
};

/* Resource {1 attributes} as field `field` of the message open in e. */
void otlp_resource(struct otlpenc *e, unsigned field, const struct otlp_kv *res,
    size_t n_res);
/* InstrumentationScope {1 name, 2 version}: tokentap's. */
void otlp_scope(struct otlpenc *e, unsigned field);

/* A whole ExportTraceServiceRequest of n requests' spans under one
 * resource. */
void otlpspan_request(struct otlpenc *e, const struct otlp_kv *res, size_t n_res,
    const struct span *const *spans, size_t n);
/* Frees what the encoder keeps between requests (at exit). */
void otlpspan_release(void);
/* The span's name: "{gen_ai.operation.name} {gen_ai.request.model}". */
void otlpspan_name(const struct span *s, char *buf, size_t len);

#endif
