/* SPDX-License-Identifier: Apache-2.0 */
#include "load_trace.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "load_jsonl.h"
#include "util.h"

#define MAX_PROBLEMS 20
/* What a replay can mean: a trace of at most 30 days (at --trace-speed 1),
 * an access log's times from 1970 to 2099, a request of at most a day. A
 * number past them is a mistake, not a month of waiting. */
#define MAX_SPAN_MS (LOAD_TRACE_MAX_SPAN_US / 1e3)
#define MIN_TS_MS 0.0                    /* 1970-01-01T00:00:00Z */
#define MAX_TS_MS 4102444800e3           /* 2100-01-01T00:00:00Z */
#define MAX_DURATION_MS 86400e3

struct reader {
	struct load_trace *t;
	const char *path;
	const char *route;
	FILE *err;
	struct load_jl j;
	double *at_ms;               /* each entry's arrival, before the shift */
	size_t at_cap;
};

static void problem(struct reader *rd, size_t line, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void problem(struct reader *rd, size_t line, size_t off, const char *fmt, ...)
{
	va_list ap;

	fprintf(rd->err, "%s:%zu:%zu: ", rd->path, line, off + 1);
	va_start(ap, fmt);
	vfprintf(rd->err, fmt, ap);
	va_end(ap);
	fputc('\n', rd->err);
}

static int add_entry(struct reader *rd, const struct load_trace_entry *e, double at_ms)
{
	struct load_trace *t = rd->t;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct load_trace_entry *v = realloc(t->v, cap * sizeof(*v));
		double *a = realloc(rd->at_ms, cap * sizeof(*a));
		if (v != NULL)
			t->v = v;
		if (a != NULL)
			rd->at_ms = a;
		if (v == NULL || a == NULL)
			return -1;
		t->cap = cap;
	}
	t->v[t->n] = *e;
	rd->at_ms[t->n++] = at_ms;
	return 0;
}

/* A token count: a whole number from 0 to the limit, or null (0: draw). */
static int tokens(struct reader *rd, size_t line, int tok, const char *key, uint32_t *out)
{
	double v;

	if (load_jl_null(&rd->j, tok)) {
		*out = 0;
		return 0;
	}
	if (load_jl_num(&rd->j, tok, &v) < 0 || v < 0 || v != floor(v) ||
	    v > LOAD_CONF_MAX_TOKENS) {
		problem(rd, line, load_jl_off(&rd->j, tok),
		    "%s: expected a whole number of tokens (0 to 1000000) or null", key);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

static void free_headers(struct load_header *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
}

/* "headers": {"Name": "value", ...}: names and values as -H takes them. */
static int headers(struct reader *rd, size_t line, int obj, struct load_trace_entry *e)
{
	struct load_conf probe;
	const char *why = NULL;
	int k = -1, rc = 0;

	if (load_jl_type(&rd->j, obj) != LOAD_JL_OBJECT) {
		problem(rd, line, load_jl_off(&rd->j, obj), "%s: expected an object of "
		    "header names and string values", "headers");
		return -1;
	}
	memset(&probe, 0, sizeof(probe));
	while (rc == 0 && load_jl_next(&rd->j, obj, &k)) {
		char *name = load_jl_str(&rd->j, k, NULL);
		char *value = load_jl_str(&rd->j, k + 1, NULL);

		if (value == NULL) {
			problem(rd, line, load_jl_off(&rd->j, k + 1), "headers.%s: expected a "
			    "string", name ? name : "?");
			rc = -1;
		} else if (name == NULL || load_conf_set_header(&probe, name, value, &why) < 0) {
			problem(rd, line, load_jl_off(&rd->j, k), "headers: %s",
			    why ? why : "out of memory");
			rc = -1;
		}
		free(name);
		free(value);
	}
	if (rc == 0 && probe.nheaders > 0) {
		e->headers = calloc(probe.nheaders, sizeof(*e->headers));
		if (e->headers == NULL) {
			rc = -1;
		} else {
			memcpy(e->headers, probe.headers, probe.nheaders * sizeof(*e->headers));
			e->nheaders = probe.nheaders;
			probe.nheaders = 0;
		}
	}
	for (size_t i = 0; i < probe.nheaders; i++) {
		free(probe.headers[i].name);
		free(probe.headers[i].value);
	}
	return rc;
}

/* A line's JSON, or a problem where it breaks. */
static int parse_line(struct reader *rd, const char *line, size_t len, size_t lineno)
{
	const char *why;
	size_t at;

	if (load_jl_parse(&rd->j, line, len, &at, &why) < 0) {
		problem(rd, lineno, at, "%s", why);
		return -1;
	}
	if (load_jl_type(&rd->j, 0) != LOAD_JL_OBJECT) {
		problem(rd, lineno, 0, "%s", "expected a JSON object");
		return -1;
	}
	return 0;
}

static const char *const trace_keys[] = {
	"offset_ms", "prompt_tokens", "output_tokens", "headers",
	"timestamp", "input_length", "output_length", "hash_ids",
};

static const char *closest(const char *name, const char *const *keys, size_t n)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (size_t i = 0; i < n; i++) {
		size_t d = util_edit_distance(name, keys[i]);
		if (d < best_d) {
			best_d = d;
			best = keys[i];
		}
	}
	return best;
}

static int trace_line(void *arg, const char *line, size_t len, size_t lineno)
{
	struct reader *rd = arg;
	struct load_trace_entry e;
	double offset = -1;
	int k = -1, bad = 0;

	if (parse_line(rd, line, len, lineno) < 0)
		return -1;
	memset(&e, 0, sizeof(e));
	e.line = lineno;
	while (load_jl_next(&rd->j, 0, &k)) {
		int v = k + 1;
		if (load_jl_is(&rd->j, k, "offset_ms") || load_jl_is(&rd->j, k, "timestamp")) {
			if (load_jl_num(&rd->j, v, &offset) < 0 || offset < 0 ||
			    offset > MAX_SPAN_MS) {
				problem(rd, lineno, load_jl_off(&rd->j, v), "%s: expected a time in "
				    "ms from 0 to %.0f (30 days)", "offset_ms", MAX_SPAN_MS);
				offset = -1;
				bad = 1;
			}
		} else if (load_jl_is(&rd->j, k, "prompt_tokens") ||
		    load_jl_is(&rd->j, k, "input_length")) {
			bad |= tokens(rd, lineno, v, "prompt_tokens", &e.prompt_tokens) < 0;
		} else if (load_jl_is(&rd->j, k, "output_tokens") ||
		    load_jl_is(&rd->j, k, "output_length")) {
			bad |= tokens(rd, lineno, v, "output_tokens", &e.max_tokens) < 0;
		} else if (load_jl_is(&rd->j, k, "headers")) {
			bad |= headers(rd, lineno, v, &e) < 0;
		} else if (!load_jl_is(&rd->j, k, "hash_ids")) {
			char *name = load_jl_str(&rd->j, k, NULL);
			const char *hint = name ? closest(name, trace_keys,
			    UTIL_ARRAY_LEN(trace_keys)) : NULL;
			fprintf(rd->err, "%s:%zu:%zu: unknown key '%.64s'%s%s%s (offset_ms, "
			    "prompt_tokens, output_tokens, headers)\n", rd->path, lineno,
			    load_jl_off(&rd->j, k) + 1, name ? name : "?",
			    hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
			free(name);
			bad = 1;
		}
	}
	if (!bad && offset < 0) {
		problem(rd, lineno, 0, "%s", "no \"offset_ms\": when to send the request");
		bad = 1;
	}
	if (!bad && add_entry(rd, &e, offset) < 0) {
		problem(rd, lineno, 0, "%s", "out of memory");
		free_headers(e.headers, e.nheaders);
		return -2;
	}
	if (bad)
		free_headers(e.headers, e.nheaders);
	return bad ? -1 : 0;
}

/* A number member that may be null or absent: -1 then. */
static int opt_num(struct reader *rd, size_t lineno, const char *key, double *out)
{
	int v = load_jl_get(&rd->j, 0, key);

	*out = -1;
	if (v < 0 || load_jl_null(&rd->j, v))
		return 0;
	if (load_jl_num(&rd->j, v, out) < 0 || *out < 0) {
		problem(rd, lineno, load_jl_off(&rd->j, v), "%s: expected a number >= 0 "
		    "or null", key);
		return -1;
	}
	return 0;
}

static int log_line(void *arg, const char *line, size_t len, size_t lineno)
{
	struct reader *rd = arg;
	struct load_trace_entry e;
	double ts, dur, in, out;
	char *s;
	int v;

	if (parse_line(rd, line, len, lineno) < 0)
		return -1;
	if (rd->route != NULL) {
		v = load_jl_get(&rd->j, 0, "route");
		s = v >= 0 ? load_jl_str(&rd->j, v, NULL) : NULL;
		if (s == NULL || strcmp(s, rd->route) != 0) {
			free(s);
			return 0;
		}
		free(s);
	}
	v = load_jl_get(&rd->j, 0, "ts");
	s = v >= 0 ? load_jl_str(&rd->j, v, NULL) : NULL;
	if (s == NULL || load_trace_rfc3339_ms(s, &ts) < 0) {
		problem(rd, lineno, v >= 0 ? load_jl_off(&rd->j, v) : 0, "%s",
		    "ts: expected an RFC 3339 time (an access-log line of tokentap)");
		free(s);
		return -1;
	}
	free(s);
	if (ts < MIN_TS_MS || ts >= MAX_TS_MS) {
		problem(rd, lineno, load_jl_off(&rd->j, v), "%s", "ts: expected a time from "
		    "1970 to 2099");
		return -1;
	}
	if (opt_num(rd, lineno, "duration_ms", &dur) < 0 ||
	    opt_num(rd, lineno, "input_tokens", &in) < 0 ||
	    opt_num(rd, lineno, "output_tokens", &out) < 0)
		return -1;
	if (dur > MAX_DURATION_MS) {
		problem(rd, lineno, load_jl_off(&rd->j, load_jl_get(&rd->j, 0, "duration_ms")),
		    "duration_ms: expected at most %.0f (a day)", MAX_DURATION_MS);
		return -1;
	}
	memset(&e, 0, sizeof(e));
	e.line = lineno;
	e.prompt_tokens = in > 0 && in <= LOAD_CONF_MAX_TOKENS ? (uint32_t)in : 0;
	e.max_tokens = out > 0 && out <= LOAD_CONF_MAX_TOKENS ? (uint32_t)out : 0;
	/* the line is written as the request ends: it began duration_ms before */
	if (add_entry(rd, &e, ts - (dur > 0 ? dur : 0)) < 0) {
		problem(rd, lineno, 0, "%s", "out of memory");
		return -2;
	}
	return 0;
}

struct order {
	double at;
	size_t i;
};

/* By arrival, then by the file's order: qsort is not stable, the index
 * makes it so. */
static int by_arrival(const void *a, const void *b)
{
	const struct order *x = a, *y = b;

	if (x->at != y->at)
		return x->at < y->at ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

int load_trace_order(const double *at, size_t n, size_t *idx)
{
	struct order *o = malloc(n * sizeof(*o) + 1);

	if (o == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		o[i] = (struct order){ at[i], i };
	qsort(o, n, sizeof(*o), by_arrival);
	for (size_t i = 0; i < n; i++)
		idx[i] = o[i].i;
	free(o);
	return 0;
}

/* Sorts by arrival (stable: the file's order among equals) and makes the
 * offsets relative to the first. Returns 0, or -1 after reporting a span
 * over the limit or memory run out. */
static int finish(struct reader *rd)
{
	struct load_trace *t = rd->t;
	size_t *idx = malloc(t->n * sizeof(*idx) + 1);
	struct load_trace_entry *v = malloc(t->n * sizeof(*v) + 1);
	double first, last;

	if (idx == NULL || v == NULL || load_trace_order(rd->at_ms, t->n, idx) < 0) {
		fprintf(rd->err, "%s: out of memory\n", rd->path);
		free(idx);
		free(v);
		return -1;
	}
	first = rd->at_ms[idx[0]];
	last = rd->at_ms[idx[t->n - 1]];
	if (last - first > MAX_SPAN_MS) {
		problem(rd, t->v[idx[t->n - 1]].line, 0, "the requests span %.1f days, from "
		    "line %zu to this one; a replay spans at most 30", (last - first) / 86400e3,
		    t->v[idx[0]].line);
		free(idx);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < t->n; i++) {
		v[i] = t->v[idx[i]];
		v[i].offset_us = (uint64_t)llround((rd->at_ms[idx[i]] - first) * 1000.0);
	}
	free(t->v);
	t->v = v;
	t->cap = t->n;
	free(idx);
	return 0;
}

static int read_with(struct load_trace *t, const char *path, const char *route,
    FILE *err, int access_log)
{
	struct reader rd = { .t = t, .path = path, .route = route, .err = err };
	int rc;

	memset(t, 0, sizeof(*t));
	t->access_log = access_log;
	load_jl_init(&rd.j);
	rc = load_jl_read_file(path, err, MAX_PROBLEMS, access_log ? log_line : trace_line,
	    &rd);
	load_jl_free(&rd.j);
	if (rc == 0 && t->n == 0) {
		fprintf(err, "%s:1:1: no requests%s%s\n", path, route ? " of route " : "",
		    route ? route : "");
		rc = -1;
	}
	if (rc == 0 && finish(&rd) < 0)
		rc = -1;
	if (rc == 0)
		t->path = strdup(path);
	free(rd.at_ms);
	if (rc < 0 || t->path == NULL) {
		load_trace_free(t);
		return -1;
	}
	return 0;
}

int load_trace_read(struct load_trace *t, const char *path, FILE *err)
{
	return read_with(t, path, NULL, err, 0);
}

int load_trace_read_access_log(struct load_trace *t, const char *path,
    const char *route, FILE *err)
{
	return read_with(t, path, route, err, 1);
}

void load_trace_free(struct load_trace *t)
{
	for (size_t i = 0; i < t->n; i++)
		free_headers(t->v[i].headers, t->v[i].nheaders);
	free(t->v);
	free(t->path);
	memset(t, 0, sizeof(*t));
}

uint64_t load_trace_span_us(const struct load_trace *t)
{
	return t->n ? t->v[t->n - 1].offset_us : 0;
}

int load_trace_check_speed(const struct load_trace *t, double speed, FILE *err)
{
	double span = (double)load_trace_span_us(t) / speed;

	if (speed > 0 && span <= (double)LOAD_TRACE_MAX_SPAN_US)
		return 0;
	fprintf(err, "%s: at --trace-speed %g the requests span %.1f days; a replay "
	    "spans at most 30\n", t->path, speed, span / 86400e6);
	return -1;
}

/* Days from 1970-01-01 of a civil date (Howard Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int num(const char **s, int n, unsigned *out)
{
	*out = 0;
	for (int i = 0; i < n; i++, (*s)++) {
		if (**s < '0' || **s > '9')
			return -1;
		*out = *out * 10 + (unsigned)(**s - '0');
	}
	return 0;
}

int load_trace_rfc3339_ms(const char *s, double *ms)
{
	unsigned y, mo, d, h, mi, sec;
	double frac = 0, scale = 0.1;

	if (num(&s, 4, &y) < 0 || *s++ != '-' || num(&s, 2, &mo) < 0 || *s++ != '-' ||
	    num(&s, 2, &d) < 0 || (*s != 'T' && *s != 't' && *s != ' ') ||
	    (s++, num(&s, 2, &h)) < 0 || *s++ != ':' || num(&s, 2, &mi) < 0 ||
	    *s++ != ':' || num(&s, 2, &sec) < 0)
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++, scale /= 10)
			frac += (*s - '0') * scale;
	}
	if (!((*s == 'Z' || *s == 'z') && s[1] == '\0'))
		return -1;
	*ms = ((double)days_from_civil(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 +
	    sec + frac) * 1000.0;
	return 0;
}
