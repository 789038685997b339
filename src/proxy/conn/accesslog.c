/* SPDX-License-Identifier: Apache-2.0 */
#include "accesslog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vitals.h"
#include "jsonw.h"
#include "logfile.h"
#include "meter.h"
#include "tracectx.h"
#include "util.h"

/* The file and its losses: logfile.c. */
#define LOG (logfile_of(LOGFILE_ACCESS))

int accesslog_open(const char *path)
{
	if (path == NULL) {
		accesslog_close();
		return 0;
	}
	return logfile_open(LOG, path);
}

int accesslog_reopen(void)
{
	return logfile_reopen(LOG);
}

void accesslog_close(void)
{
	logfile_close(LOG);
}

/* ---- fields, written with the core's bounded JSON writer ---------------- */

/* ,"name": (names are the log's own: nothing to escape; no printf, which
 * costs more than the rest of a field) */
static inline void field_name(struct jsonw_buf *b, const char *name)
{
	jsonw_buf_add(b, ",\"", 2);
	jsonw_buf_puts(b, name);
	jsonw_buf_add(b, "\":", 2);
}

static inline void field_str(struct jsonw_buf *b, const char *name, const char *v)
{
	field_name(b, name);
	jsonw_buf_str(b, v, v != NULL ? strlen(v) : 0);
}

/* Durations in ms with up to 3 decimals; negative means undefined. */
static inline void field_ms(struct jsonw_buf *b, const char *name, int64_t us)
{
	field_name(b, name);
	jsonw_buf_ms(b, us);
}

static inline void field_int(struct jsonw_buf *b, const char *name, int64_t v)
{
	field_name(b, name);
	jsonw_buf_int(b, v);
}

/* A phase runs from the latest earlier point to its own, never negative;
 * undefined where its point did not happen. */
static int64_t phase(uint64_t *last, uint64_t point)
{
	int64_t d;
	if (point == 0)
		return -1;
	d = point > *last ? (int64_t)(point - *last) : 0;
	if (point > *last)
		*last = point;
	return d;
}

static void put_phases(struct jsonw_buf *b, const struct meter *m)
{
	uint64_t last = m->t0;
	int64_t client = phase(&last, m->t_req);
	int64_t connect = phase(&last, m->t_conn);
	int64_t send = phase(&last, m->t_sent);
	int64_t head = phase(&last, m->t_head);
	int64_t first_event = phase(&last, m->t_first_event);
	int64_t first_token = phase(&last, m->t_first_token);

	jsonw_buf_puts(b, ",\"phases\":{\"client_ms\":");
	jsonw_buf_ms(b, client);
	field_ms(b, "connect_ms", connect);
	field_ms(b, "tls_ms", m->conn_reused || m->tls_us == 0 ? -1 : (int64_t)m->tls_us);
	field_ms(b, "send_ms", send);
	field_ms(b, "upstream_head_ms", head);
	field_ms(b, "first_event_ms", first_event);
	field_ms(b, "first_token_ms", first_token);
	jsonw_buf_puts(b, "}");
}

/* Parameters whose values are credentials (docs/contract.md §5): compared
 * without case; the config may name more (access_log_mask). */
static const char *const credentials[] = {
	"key", "api_key", "apikey", "api-key", "token", "access_token", "sig",
	"signature", "auth", "password", "secret",
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A parameter's name as a server reads it: its percent-escapes decoded
 * (k%65y is key). 0 when it cannot be a credential's (too long). */
static size_t decode_name(const char *p, size_t len, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		if (c == '%' && i + 2 < len && hexval(p[i + 1]) >= 0 &&
		    hexval(p[i + 2]) >= 0) {
			c = (char)(hexval(p[i + 1]) * 16 + hexval(p[i + 2]));
			i += 2;
		}
		if (o == cap)
			return 0;
		out[o++] = c;
	}
	return o;
}

static int is_credential(const char *name, size_t len, char *const *more,
    size_t n_more)
{
	char buf[64];

	len = decode_name(name, len, buf, sizeof buf);
	if (len == 0)
		return 0;
	for (size_t i = 0; i < UTIL_ARRAY_LEN(credentials); i++)
		if (util_ieq(buf, len, credentials[i]))
			return 1;
	for (size_t i = 0; i < n_more; i++)
		if (util_ieq(buf, len, more[i]))
			return 1;
	return 0;
}

/* What ends a parameter: in the query '&' and ';' (as HTML 4 and many
 * servers read it); in the path '/', ';' (matrix parameters) and the '?'. */
static int ends_param(char c, int query)
{
	return c == '&' || c == ';' || (!query && (c == '/' || c == '?'));
}

size_t accesslog_mask_target(const char *t, size_t len, char *const *more,
    size_t n_more, char *out, size_t cap)
{
	size_t o = 0, i = 0;
	int query = 0;

	if (cap < 8)
		return 0;
	cap -= 1;            /* room to cut within */
	while (i < len && o < cap) {
		size_t end = i, eq;
		while (end < len && !ends_param(t[end], query))
			end++;
		for (eq = i; eq < end && t[eq] != '='; eq++)
			;
		if (eq < end && is_credential(t + i, eq - i, more, n_more)) {
			size_t n = eq - i + 1;
			if (o + n + 3 > cap)
				break;           /* never half a value: nothing more */
			memcpy(out + o, t + i, n);
			memcpy(out + o + n, "***", 3);
			o += n + 3;
		} else {
			size_t n = end - i;
			if (o + n > cap)
				n = cap - o;
			memcpy(out + o, t + i, n);
			o += n;
		}
		i = end;
		if (i < len && o < cap) {
			query |= t[i] == '?';
			out[o++] = t[i++];
		}
	}
	return o;
}

/* The request target with the values of credential parameters masked. */
static void put_target(struct jsonw_buf *b, const char *t, size_t len,
    char *const *more, size_t n_more)
{
	char out[2048];

	jsonw_buf_str(b, out, accesslog_mask_target(t, len, more, n_more, out, sizeof out));
}

/* "attempts": every attempt left for another replica, and why. */
static void put_attempts(struct jsonw_buf *b, const struct accesslog_entry *e)
{
	jsonw_buf_puts(b, ",\"attempts\":[");
	for (unsigned i = 0; i < e->n_attempts; i++) {
		const struct accesslog_attempt *a = &e->attempts[i];
		jsonw_buf_puts(b, i ? ",{" : "{");
		jsonw_buf_puts(b, "\"upstream\":");
		jsonw_buf_str(b, a->upstream, strlen(a->upstream));
		field_str(b, "reason", a->reason);
		field_int(b, "status", a->status ? (int64_t)a->status : -1);
		field_ms(b, "ms", (int64_t)a->us);
		jsonw_buf_puts(b, "}");
	}
	jsonw_buf_puts(b, "]");
}

static void put_exceeded(struct jsonw_buf *b, unsigned bits)
{
	static const char *const names[] = {
		"ttft_warning", "ttft_critical", "tpot_warning", "tpot_critical",
		"ttfo_warning", "ttfo_critical"
	};
	int first = 1;
	jsonw_buf_puts(b, ",\"exceeded\":[");
	for (unsigned i = 0; i < UTIL_ARRAY_LEN(names); i++) {
		if (!(bits & (1u << i)))
			continue;
		if (!first)
			jsonw_buf_puts(b, ",");
		jsonw_buf_puts(b, "\"");
		jsonw_buf_puts(b, names[i]);
		jsonw_buf_puts(b, "\"");
		first = 0;
	}
	jsonw_buf_puts(b, "]");
}

/* Stream health: the first answer token, reasoning, stalls, the client's
 * holds, clumping. */
static void put_health(struct jsonw_buf *b, const struct meter *m,
    const struct sample *s)
{
	double share = meter_clump_share(m);
	int buffered = meter_buffered(m);

	field_ms(b, "ttfo_ms", s->ttfo_us);
	field_ms(b, "ttfo_doubt_ms", s->ttfo_us < 0 ? -1 : meter_ttfo_doubt_us(m));
	field_ms(b, "ttfo_server_ms", s->ttfo_server_us);
	field_int(b, "reasoning_tokens", meter_reasoning_tokens(m));
	field_int(b, "stalls", m->stream ? (int64_t)m->stalls : -1);
	field_ms(b, "gap_max_ms", m->stream && m->token_events > 0 ?
	    (int64_t)m->gap_max_us : -1);
	/* the time the client held the response back (meter_hold) */
	field_ms(b, "client_held_ms", m->t_head != 0 ?
	    (int64_t)meter_held_us(m, m->t_end) : -1);
	if (share >= 0) {
		jsonw_buf_puts(b, ",\"clumped\":");
		jsonw_buf_fixed(b, share, 3);
	} else {
		jsonw_buf_puts(b, ",\"clumped\":null");
	}
	field_ms(b, "clump_gap_ms", meter_clump_gap_us(m));
	jsonw_buf_puts(b, buffered < 0 ? ",\"buffered\":null" :
	    buffered ? ",\"buffered\":true" : ",\"buffered\":false");
}

/* "trace_id", "span_id": the trace the request was in, as hex (the W3C
 * form every tracing backend searches by), null without one. */
static void put_trace(struct jsonw_buf *b, const struct accesslog_entry *e)
{
	char hex[33];

	if (e->trace_id == NULL || e->span_id == NULL) {
		jsonw_buf_puts(b, ",\"trace_id\":null,\"span_id\":null");
		return;
	}
	tracectx_hex(e->trace_id, 16, hex);
	field_str(b, "trace_id", hex);
	tracectx_hex(e->span_id, 8, hex);
	field_str(b, "span_id", hex);
}

size_t accesslog_format(const struct accesslog_entry *e, char *buf, size_t len)
{
	struct jsonw_buf b;
	const struct meter *m = e->m;
	int64_t n = e->s->output_tokens;

	if (len == 0)
		return 0;
	jsonw_buf_init(&b, buf, len - 1);           /* the newline's byte kept */
	jsonw_buf_puts(&b, "{\"ts\":");
	jsonw_buf_time(&b, util_wall_ms());
	field_str(&b, "request_id", e->request_id);
	put_trace(&b, e);
	field_str(&b, "client", e->client);
	field_str(&b, "route", e->route);
	field_str(&b, "tenant", e->tenant);
	field_str(&b, "model", e->model);
	field_str(&b, "method", e->method);
	jsonw_buf_puts(&b, ",\"path\":");
	put_target(&b, e->target, e->target_len, e->mask, e->n_mask);
	field_int(&b, "status", e->s->status ? (int64_t)e->s->status : -1);
	jsonw_buf_puts(&b, m->stream ? ",\"stream\":true" : ",\"stream\":false");
	field_str(&b, "dialect", dialect_names[m->dialect]);
	field_str(&b, "outcome", meter_outcome_name((enum meter_outcome)e->s->outcome));
	/* the first the response gave (the span has them all); clean */
	field_str(&b, "finish_reason", meter_finish_reason(m));
	field_ms(&b, "ttft_ms", e->s->ttft_us);
	/* the first token came within [ttft - doubt, ttft] (meter.h) */
	field_ms(&b, "ttft_doubt_ms", e->s->ttft_doubt_us);
	/* the other stamped points' doubts, by the same rule: the request's
	 * first byte (t0), the response head, the last token */
	field_ms(&b, "start_doubt_ms", meter_start_doubt_us(m));
	field_ms(&b, "head_doubt_ms", meter_head_doubt_us(m));
	field_ms(&b, "last_token_doubt_ms", meter_last_token_doubt_us(m));
	field_ms(&b, "ttft_server_ms", e->s->ttft_server_us);   /* from t_req */
	field_ms(&b, "tpot_ms", e->s->tpot_us);
	field_ms(&b, "itl_max_ms", m->token_events >= 2 ? (int64_t)m->itl_max_us : -1);
	field_int(&b, "output_tokens", n);
	field_int(&b, "input_tokens", e->s->input_tokens);
	field_str(&b, "token_source", n < 0 ? NULL :
	    meter_tokens_name((enum meter_tokens)e->s->token_source));
	/* chunks are not tokens: token-bearing events, the first one's
	 * tokens where told, tokens per event where counted, and whether
	 * TPOT's divisor is an estimate (meter_tpot_estimated) */
	field_int(&b, "token_events", m->stream ? (int64_t)m->token_events : -1);
	field_int(&b, "first_event_tokens", e->s->first_event_tokens);
	if (meter_tokens_per_event(m) >= 0) {
		jsonw_buf_puts(&b, ",\"tokens_per_event\":");
		jsonw_buf_fixed(&b, meter_tokens_per_event(m), 2);
	} else {
		jsonw_buf_puts(&b, ",\"tokens_per_event\":null");
	}
	jsonw_buf_puts(&b, e->s->tpot_us < 0 ? ",\"tpot_estimated\":null" :
	    e->s->tpot_estimated ? ",\"tpot_estimated\":true" : ",\"tpot_estimated\":false");
	field_str(&b, "unmeasured", meter_unmeasured_name(meter_unmeasured(m)));
	put_health(&b, m, e->s);
	field_int(&b, "events", (int64_t)m->events);
	field_int(&b, "bytes_in", (int64_t)e->bytes_in);
	field_int(&b, "bytes_out", (int64_t)e->bytes_out);
	field_ms(&b, "duration_ms", m->t_end >= m->t0 ? (int64_t)(m->t_end - m->t0) : -1);
	field_ms(&b, "overhead_ms", e->vitals ? vitals_overhead_us(e->vitals) : -1);
	put_phases(&b, m);
	/* where the times came from (rxtime.h): every one the kernel's, none,
	 * or some (a read without a stamp, a clock step) */
	field_str(&b, "timestamps", m->stamps_loop == 0 && m->stamps_kernel > 0 ? "kernel" :
	    m->stamps_kernel == 0 ? "loop" : "mixed");
	field_int(&b, "concurrency", e->s->concurrency);
	field_str(&b, "upstream", e->upstream);
	put_attempts(&b, e);
	put_exceeded(&b, e->s->exceeded);
	jsonw_buf_puts(&b, "}");
	/* a line cut short by the cap still ends with a newline */
	buf[b.len++] = '\n';
	return b.len;
}

/* 8 KiB hold any line a client can cause: what it controls takes at most
 * about 4 KiB escaped (the target, at most 1 KiB with only '"' and '\\' to
 * escape; the tenant, 64 bytes; the model, 128), the rest about 1 KiB. Only
 * very long route names or upstream URLs in the configuration can cut a
 * line, and a cut line still ends with a newline and is valid UTF-8. */
void accesslog_write(const struct accesslog_entry *e)
{
	char line[8192];
	size_t n;

	if (!logfile_enabled(LOG))
		return;
	n = accesslog_format(e, line, sizeof line);
	logfile_write(LOG, line, n);
}
