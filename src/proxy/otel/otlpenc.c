/* SPDX-License-Identifier: Apache-2.0 */
#include "otlpenc.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "tracectx.h"

/* The buffer of the last protobuf request, kept for the next: an export
 * of 512 spans is half a megabyte, grown step by step and freed again
 * each time otherwise. The main thread's alone (the exporters run there). */
static struct pb spare;
#define SPARE_MAX (8u << 20)

int otlpenc_begin(struct otlpenc *e, int json)
{
	memset(e, 0, sizeof *e);
	e->json = json;
	if (!json) {
		e->pb = spare;
		e->pb.n = 0;
		memset(&spare, 0, sizeof spare);
		return 0;
	}
	if ((e->js = evbuffer_new()) == NULL) {
		e->oom = 1;
		return -1;
	}
	evbuffer_add(e->js, "{", 1);
	return 0;
}

static void js(struct otlpenc *e, const char *s, size_t n)
{
	if (evbuffer_add(e->js, s, n) != 0)
		e->oom = 1;
}

static void js_s(struct otlpenc *e, const char *s)
{
	js(e, s, strlen(s));
}

/* The array of the level's open repeated field ends when another field
 * follows (or the message ends). */
static void js_end_array(struct otlpenc *e)
{
	if (e->lv[e->depth].array != 0) {
		js(e, "]", 1);
		e->lv[e->depth].array = 0;
	}
}

/* "name": before a value; rep: an element of that repeated field. */
static void js_key(struct otlpenc *e, unsigned field, const char *name, int rep)
{
	if (rep && e->lv[e->depth].array == field) {
		js(e, ",", 1);
		return;
	}
	js_end_array(e);
	if (e->lv[e->depth].fields++ > 0)
		js(e, ",", 1);
	js(e, "\"", 1);
	js_s(e, name);
	js(e, "\":", 2);
	if (rep) {
		js(e, "[", 1);
		e->lv[e->depth].array = field;
	}
}

void otlpenc_reserve(struct otlpenc *e, size_t bytes)
{
	if (!e->json)
		pb_reserve(&e->pb, bytes);
}

int otlpenc_finish(struct otlpenc *e, struct evbuffer *out)
{
	int oom = e->oom || e->pb.oom;

	if (e->json) {
		while (e->depth > 0)
			otlpenc_close(e, 0);
		js_end_array(e);
		js(e, "}", 1);
		oom |= e->oom || evbuffer_add_buffer(out, e->js) != 0;
	} else if (!oom && evbuffer_add(out, e->pb.p, e->pb.n) != 0) {
		oom = 1;
	}
	otlpenc_free(e);
	return oom ? -1 : 0;
}

void otlpenc_free(struct otlpenc *e)
{
	if (e->js != NULL)
		evbuffer_free(e->js);
	if (!e->pb.oom && e->pb.cap <= SPARE_MAX && spare.p == NULL) {
		spare = e->pb;
		spare.n = 0;
	} else {
		pb_free(&e->pb);
	}
	memset(e, 0, sizeof *e);
}

void otlpenc_release(void)
{
	pb_free(&spare);
}

size_t otlpenc_open(struct otlpenc *e, unsigned field, const char *name, int rep)
{
	if (!e->json)
		return pb_open(&e->pb, field);
	js_key(e, field, name, rep);
	js(e, "{", 1);
	if (e->depth + 1 < OTLPENC_DEPTH) {
		e->depth++;
		e->lv[e->depth].fields = 0;
		e->lv[e->depth].array = 0;
	} else {
		e->oom = 1;       /* no message of OTLP nests this deep */
	}
	return 0;
}

void otlpenc_close(struct otlpenc *e, size_t mark)
{
	if (!e->json) {
		pb_close(&e->pb, mark);
		return;
	}
	js_end_array(e);
	js(e, "}", 1);
	if (e->depth > 0)
		e->depth--;
}

/* s made valid UTF-8 without control bytes, cut at 4 KiB: every string
 * OTLP gets is a name, a model or a tracestate. */
#define STR_MAX 4096

void otlpenc_str(struct otlpenc *e, unsigned field, const char *name, const char *s,
    size_t n)
{
	char clean[STR_MAX];

	if (n > STR_MAX - 1)
		n = STR_MAX - 1;
	if (e->json) {
		/* the JSON writer escapes and replaces what it must */
		js_key(e, field, name, 0);
		if (jsonw_strn(e->js, s, n) != 0)
			e->oom = 1;
		return;
	}
	/* most strings are names and ids, valid as they are: checked at
	 * the JSON writer's speed, cleaned only when they are not */
	if (jsonw_plain_len(s, n) != n) {
		n = jsonw_clean(clean, sizeof clean, s, n);
		s = clean;
	}
	pb_bytes(&e->pb, field, s, n);
}

void otlpenc_id(struct otlpenc *e, unsigned field, const char *name, const uint8_t *b,
    size_t n)
{
	char hex[2 * 16 + 3];

	if (!e->json) {
		pb_bytes(&e->pb, field, b, n);
		return;
	}
	if (n > 16)
		n = 16;
	hex[0] = '"';
	tracectx_hex(b, n, hex + 1);
	hex[2 * n + 1] = '"';
	js_key(e, field, name, 0);
	js(e, hex, 2 * n + 2);
}

static void js_num(struct otlpenc *e, unsigned field, const char *name, const char *fmt,
    ...) __attribute__((format(printf, 4, 5)));

static void js_num(struct otlpenc *e, unsigned field, const char *name, const char *fmt,
    ...)
{
	char buf[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	js_key(e, field, name, 0);
	js(e, buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : 0);
}

void otlpenc_u64(struct otlpenc *e, unsigned field, const char *name, uint64_t v)
{
	if (!e->json)
		pb_uint(&e->pb, field, v);
	else
		js_num(e, field, name, "\"%" PRIu64 "\"", v);
}

void otlpenc_i64(struct otlpenc *e, unsigned field, const char *name, int64_t v)
{
	if (!e->json)
		pb_uint(&e->pb, field, (uint64_t)v);   /* int64: two's complement */
	else
		js_num(e, field, name, "\"%" PRId64 "\"", v);
}

void otlpenc_fixed64(struct otlpenc *e, unsigned field, const char *name, uint64_t v)
{
	if (!e->json)
		pb_fixed64(&e->pb, field, v);
	else
		js_num(e, field, name, "\"%" PRIu64 "\"", v);
}

void otlpenc_fixed32(struct otlpenc *e, unsigned field, const char *name, uint32_t v)
{
	if (e->json) {
		js_num(e, field, name, "%" PRIu32, v);
		return;
	}
	pb_fixed32(&e->pb, field, v);
}

void otlpenc_enum(struct otlpenc *e, unsigned field, const char *name, unsigned v)
{
	if (!e->json)
		pb_uint(&e->pb, field, v);
	else
		js_num(e, field, name, "%u", v);
}

void otlpenc_sint(struct otlpenc *e, unsigned field, const char *name, int32_t v)
{
	if (!e->json)
		pb_sint(&e->pb, field, v);
	else
		js_num(e, field, name, "%" PRId32, v);
}

/* The shortest text that reads back as v; proto3 JSON's strings for the
 * values that are no numbers. */
static void js_double(struct otlpenc *e, double v)
{
	char t[40];

	if (isnan(v)) {
		js_s(e, "\"NaN\"");
		return;
	}
	if (isinf(v)) {
		js_s(e, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
		return;
	}
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(t, sizeof t, "%.*g", digits, v);
		if (strtod(t, NULL) == v)
			break;
	}
	js_s(e, t);
}

void otlpenc_double(struct otlpenc *e, unsigned field, const char *name, double v)
{
	if (!e->json) {
		pb_double(&e->pb, field, v);
		return;
	}
	js_key(e, field, name, 0);
	js_double(e, v);
}

void otlpenc_bool(struct otlpenc *e, unsigned field, const char *name, int v)
{
	if (!e->json) {
		pb_uint(&e->pb, field, v != 0);
		return;
	}
	js_key(e, field, name, 0);
	js_s(e, v ? "true" : "false");
}

void otlpenc_u64s(struct otlpenc *e, unsigned field, const char *name,
    const uint64_t *v, size_t n, int fixed)
{
	char buf[32];

	if (!e->json) {
		size_t m;
		if (n == 0)
			return;
		m = pb_open(&e->pb, field);
		for (size_t i = 0; i < n; i++) {
			if (fixed)
				pb_raw64(&e->pb, v[i]);
			else
				pb_varint(&e->pb, v[i]);
		}
		pb_close(&e->pb, m);
		return;
	}
	js_key(e, field, name, 0);
	js(e, "[", 1);
	for (size_t i = 0; i < n; i++) {
		int k = snprintf(buf, sizeof buf, "%s\"%" PRIu64 "\"", i ? "," : "", v[i]);
		js(e, buf, (size_t)k);
	}
	js(e, "]", 1);
}

void otlpenc_doubles(struct otlpenc *e, unsigned field, const char *name,
    const double *v, size_t n)
{
	if (!e->json) {
		size_t m;
		uint64_t u;
		if (n == 0)
			return;
		m = pb_open(&e->pb, field);
		for (size_t i = 0; i < n; i++) {
			memcpy(&u, &v[i], 8);
			pb_raw64(&e->pb, u);
		}
		pb_close(&e->pb, m);
		return;
	}
	js_key(e, field, name, 0);
	js(e, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			js(e, ",", 1);
		js_double(e, v[i]);
	}
	js(e, "]", 1);
}

/* ---- attributes ----------------------------------------------------------- */

static size_t attr_open(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    size_t *val)
{
	size_t kv = otlpenc_open(e, field, "attributes", 1);
	otlpenc_str(e, 1, "key", key, klen);
	*val = otlpenc_open(e, 2, "value", 0);
	return kv;
}

static void attr_close(struct otlpenc *e, size_t kv, size_t val)
{
	otlpenc_close(e, val);
	otlpenc_close(e, kv);
}

/* A KeyValue {1 key, 2 AnyValue {value}} in protobuf, its sizes known up
 * front: one reservation, no length written back (a span has two dozen
 * of them). value: the AnyValue's one field, tag and payload, vlen
 * bytes (vstr: a string of slen bytes follows them). Keys are tokentap's
 * own names: not checked. */
static void pb_attr(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    const uint8_t *value, size_t vlen, const char *vstr, size_t slen)
{
	struct pb *b = &e->pb;
	size_t av = vlen + slen;
	size_t kv = 1 + pb_varint_len(klen) + klen + 1 + pb_varint_len(av) + av;

	if (pb_reserve(b, kv + 20) < 0)
		return;
	pb_put_varint(b, (uint64_t)field << 3 | PB_LEN);
	pb_put_varint(b, kv);
	pb_put_varint(b, 1 << 3 | PB_LEN);
	pb_put_varint(b, klen);
	pb_put_bytes(b, key, klen);
	pb_put_varint(b, 2 << 3 | PB_LEN);
	pb_put_varint(b, av);
	pb_put_bytes(b, value, vlen);
	if (slen > 0)
		pb_put_bytes(b, vstr, slen);
}

/* a varint field at out; returns its length */
static size_t scalar(uint8_t *out, unsigned field, uint64_t v)
{
	size_t n = 0;
	out[n++] = (uint8_t)(field << 3 | PB_VARINT);
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

void otlpenc_attr_str_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    const char *v, int checked)
{
	char clean[STR_MAX];
	uint8_t head[11];
	size_t n = strlen(v), h;

	if (e->json) {
		size_t val, kv = attr_open(e, field, key, klen, &val);
		otlpenc_str(e, 1, "stringValue", v, n);
		attr_close(e, kv, val);
		return;
	}
	if (n > STR_MAX - 1)
		n = STR_MAX - 1;
	if (checked && jsonw_plain_len(v, n) != n) {
		n = jsonw_clean(clean, sizeof clean, v, n);
		v = clean;
	}
	/* AnyValue.string_value: tag, length, then the bytes */
	h = scalar(head, 1, n);
	head[0] = 1 << 3 | PB_LEN;
	pb_attr(e, field, key, klen, head, h, v, n);
}

void otlpenc_attr_int_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    int64_t v)
{
	uint8_t val[11];

	if (e->json) {
		size_t av, kv = attr_open(e, field, key, klen, &av);
		otlpenc_i64(e, 3, "intValue", v);
		attr_close(e, kv, av);
		return;
	}
	pb_attr(e, field, key, klen, val, scalar(val, 3, (uint64_t)v), NULL, 0);
}

void otlpenc_attr_double_n(struct otlpenc *e, unsigned field, const char *key,
    size_t klen, double v)
{
	uint8_t val[9];
	uint64_t u;

	if (e->json) {
		size_t av, kv = attr_open(e, field, key, klen, &av);
		otlpenc_double(e, 4, "doubleValue", v);
		attr_close(e, kv, av);
		return;
	}
	memcpy(&u, &v, 8);
	val[0] = 4 << 3 | PB_I64;
	for (int i = 0; i < 8; i++)            /* little-endian whatever the host */
		val[1 + i] = (uint8_t)(u >> (8 * i));
	pb_attr(e, field, key, klen, val, sizeof val, NULL, 0);
}

void otlpenc_attr_bool_n(struct otlpenc *e, unsigned field, const char *key, size_t klen,
    int v)
{
	uint8_t val[2] = { 2 << 3 | PB_VARINT, v != 0 };

	if (e->json) {
		size_t av, kv = attr_open(e, field, key, klen, &av);
		otlpenc_bool(e, 2, "boolValue", v);
		attr_close(e, kv, av);
		return;
	}
	pb_attr(e, field, key, klen, val, sizeof val, NULL, 0);
}

void otlpenc_attr_strs(struct otlpenc *e, unsigned field, const char *key,
    const char *const *v, size_t n)
{
	size_t val, kv = attr_open(e, field, key, strlen(key), &val);
	size_t arr = otlpenc_open(e, 5, "arrayValue", 0);

	for (size_t i = 0; i < n; i++) {
		size_t one = otlpenc_open(e, 1, "values", 1);
		otlpenc_str(e, 1, "stringValue", v[i], strlen(v[i]));
		otlpenc_close(e, one);
	}
	otlpenc_close(e, arr);
	attr_close(e, kv, val);
}
