/* SPDX-License-Identifier: Apache-2.0 */
/* One writer for OTLP's two encodings (OTLP/HTTP: binary protobuf or
 * proto3 JSON, opentelemetry-proto's field numbers and names): the
 * exporters describe each message once, field by field, and this writes
 * it either on the project's protobuf writer (pb.h, the one that writes
 * /metrics' protobuf) or as JSON as OTLP/JSON wants it (lowerCamelCase
 * names, trace and span ids as hex, 64-bit integers as decimal strings,
 * enums as numbers). Strings are made valid UTF-8 (jsonw_clean) in both.
 * Pure: a growable buffer, no I/O. */
#ifndef TOKENTAP_OTLPENC_H
#define TOKENTAP_OTLPENC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pb.h"

struct evbuffer;

#define OTLPENC_DEPTH 12

struct otlpenc {
	int json;
	struct pb pb;                 /* protobuf */
	struct evbuffer *js;          /* JSON */
	int oom;
	unsigned depth;
	struct {
		unsigned fields;          /* written at this level (commas) */
		unsigned array;           /* the repeated field whose array is open */
	} lv[OTLPENC_DEPTH];
};

/* Starts a message (the request); json: OTLP/JSON, else protobuf. */
int otlpenc_begin(struct otlpenc *e, int json);
/* Room for about `bytes` of protobuf up front (a batch's spans), so the
 * buffer is not grown, and copied, step by step. */
void otlpenc_reserve(struct otlpenc *e, size_t bytes);
/* The encoded request into out (taken from e); -1 when memory ran out
 * anywhere on the way. e is empty again either way. */
int otlpenc_finish(struct otlpenc *e, struct evbuffer *out);
void otlpenc_free(struct otlpenc *e);
/* Frees the buffer kept between requests (at exit). */
void otlpenc_release(void);

/* A nested message: returns the mark for otlpenc_close. rep: a repeated
 * field (JSON: an element of its array). */
size_t otlpenc_open(struct otlpenc *e, unsigned field, const char *name, int rep);
void otlpenc_close(struct otlpenc *e, size_t mark);

void otlpenc_str(struct otlpenc *e, unsigned field, const char *name, const char *s,
    size_t n);
/* bytes: trace_id, span_id (JSON: hex) */
void otlpenc_id(struct otlpenc *e, unsigned field, const char *name, const uint8_t *b,
    size_t n);
/* uint64 / int64 (varint), fixed64; JSON: a decimal string */
void otlpenc_u64(struct otlpenc *e, unsigned field, const char *name, uint64_t v);
void otlpenc_i64(struct otlpenc *e, unsigned field, const char *name, int64_t v);
void otlpenc_fixed64(struct otlpenc *e, unsigned field, const char *name, uint64_t v);
/* fixed32 (Span.flags) */
void otlpenc_fixed32(struct otlpenc *e, unsigned field, const char *name, uint32_t v);
/* an enum or a uint32; sint32 (zigzag); JSON: a number */
void otlpenc_enum(struct otlpenc *e, unsigned field, const char *name, unsigned v);
void otlpenc_sint(struct otlpenc *e, unsigned field, const char *name, int32_t v);
void otlpenc_double(struct otlpenc *e, unsigned field, const char *name, double v);
void otlpenc_bool(struct otlpenc *e, unsigned field, const char *name, int v);
/* packed repeated: uint64 (varints) or fixed64; double */
void otlpenc_u64s(struct otlpenc *e, unsigned field, const char *name,
    const uint64_t *v, size_t n, int fixed);
void otlpenc_doubles(struct otlpenc *e, unsigned field, const char *name,
    const double *v, size_t n);

/* KeyValue {1 key, 2 value AnyValue {1 string, 2 bool, 3 int, 4 double}}
 * as an element of the repeated field `field` ("attributes"). The _n
 * forms take the key's length; the inline ones let the compiler count a
 * literal key's. otlpenc_attr_clean: a value already clean (tokentap's
 * own, or jsonw_clean'd where it came in), written unchecked. */
void otlpenc_attr_str_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    const char *v, int checked);
void otlpenc_attr_int_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    int64_t v);
void otlpenc_attr_double_n(struct otlpenc *e, unsigned field, const char *key,
    size_t klen, double v);
void otlpenc_attr_bool_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    int v);
static inline void otlpenc_attr_str(struct otlpenc *e, unsigned field, const char *key,
    const char *v)
{
	otlpenc_attr_str_n(e, field, key, strlen(key), v, 1);
}
static inline void otlpenc_attr_clean(struct otlpenc *e, unsigned field, const char *key,
    const char *v)
{
	otlpenc_attr_str_n(e, field, key, strlen(key), v, 0);
}
static inline void otlpenc_attr_int(struct otlpenc *e, unsigned field, const char *key,
    int64_t v)
{
	otlpenc_attr_int_n(e, field, key, strlen(key), v);
}
static inline void otlpenc_attr_double(struct otlpenc *e, unsigned field, const char *key,
    double v)
{
	otlpenc_attr_double_n(e, field, key, strlen(key), v);
}
static inline void otlpenc_attr_bool(struct otlpenc *e, unsigned field, const char *key,
    int v)
{
	otlpenc_attr_bool_n(e, field, key, strlen(key), v);
}
/* an array of strings (AnyValue 5 ArrayValue {1 values}) */
void otlpenc_attr_strs(struct otlpenc *e, unsigned field, const char *key,
    const char *const *v, size_t n);

#endif
