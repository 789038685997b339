/* SPDX-License-Identifier: Apache-2.0 */
/* Spans as OTLP writes them (trace/v1/trace.proto, collector's
 * ExportTraceServiceRequest): one span per request, the GenAI semantic
 * conventions' inference span (docs/alerts-and-metrics.md, "OpenTelemetry":
 * the version, the kind and why, every attribute and event). Pure: from span
 * records (span.h) into an encoder (otlpenc.h). */
#ifndef TOKENTAP_OTLPSPAN_H
#define TOKENTAP_OTLPSPAN_H

#include <stddef.h>

#include "otlpenc.h"
#include "span.h"

/* The semantic conventions the spans and metrics follow (schema_url). */
#define OTLP_SCHEMA_URL "https://opentelemetry.io/schemas/1.41.0"

/* Resource attributes, key and string value each. */
struct otlp_kv {
	const char *key, *value;
};

/* Resource {1 attributes} as field `field` of the message open in e. */
void otlp_resource(struct otlpenc *e, unsigned field, const struct otlp_kv *res,
    size_t n_res);
/* InstrumentationScope {1 name, 2 version}: tokentap's. */
void otlp_scope(struct otlpenc *e, unsigned field);

/* A whole ExportTraceServiceRequest of n spans under one resource. */
void otlpspan_request(struct otlpenc *e, const struct otlp_kv *res, size_t n_res,
    const struct span *const *spans, size_t n);
/* Frees what the encoder keeps between requests (at exit). */
void otlpspan_release(void);
/* The span's name: "{gen_ai.operation.name} {gen_ai.request.model}". */
void otlpspan_name(const struct span *s, char *buf, size_t len);

#endif
