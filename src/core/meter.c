/* SPDX-License-Identifier: Apache-2.0 */
#include "meter.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonw.h"
#include "util.h"

#define BODY_MAX (1024 * 1024)
/* Events that may tell an `auto` stream's dialect before it counts as raw */
#define SNIFF_EVENTS 4

void meter_init(struct meter *m, uint64_t t0, enum dialect_id dialect)
{
	/* all but the parser, its decoder, body and memo (kept across
	 * requests), and the cold block at the end, from t_req on */
	memset(m, 0, offsetof(struct meter, sse));
	memset(&m->t_req, 0, sizeof *m - offsetof(struct meter, t_req));
	m->t0 = t0;
	m->dialect = dialect;
	m->reported_out = -1;
	m->reported_in = -1;
	m->reported_reasoning = -1;
	m->first_event_tokens = -1;
	m->dec = NULL;
	m->body = NULL;
	m->body_len = m->body_cap = 0;
	m->parse = METER_PARSE_NONE;
	m->memo.holes = 0;
}

void meter_set_dialect(struct meter *m, enum dialect_id d, int sniff)
{
	m->dialect = d;
	m->sniff = sniff ? SNIFF_EVENTS : 0;
}

/* No event told the dialect: the stream is raw, and its first n events
 * were tokens (docs/contract.md §4: every event is one) from the first on. */
static void sniffed_raw(struct meter *m, uint64_t n)
{
	m->sniff = 0;
	m->dialect = DIALECT_RAW;
	if (n == 0)
		return;
	m->t_first_token = m->t_first_output = m->t_first_event;
	m->t_last_token = m->t_last_event;
	/* their reads were not judged: no floor of their own (the start) */
	m->fo.floor = m->lt.floor = 0;
	m->fo.kernel = m->lt.kernel = 0;
	m->token_events = n;
}

/* While the dialect is being sniffed: 1 when this event decided nothing
 * and is only counted; when the last chance passes, the events before it
 * become the raw stream's first tokens and this one is classified. */
static int sniffing(struct meter *m, const struct sse_event *ev)
{
	enum dialect_id d = dialect_sniff(ev);

	if (d != DIALECT_RAW) {
		m->dialect = d;
		m->sniff = 0;
		return 0;
	}
	if (--m->sniff > 0)
		return 1;
	sniffed_raw(m, m->events - 1);
	return 0;
}

void meter_offer_model(struct meter *m, enum meter_model_src src,
    const char *model, size_t len)
{
	char text[4 * METER_MODEL_MAX];

	if (src <= m->model_src || len == 0)
		return;
	/* a JSON string's contents: "meta-llama\/Llama" is meta-llama/Llama,
	 * one label value however the client escaped it */
	if (src == MODEL_REQUEST || src == MODEL_RESPONSE) {
		len = json_unescape(text, sizeof text, model, len < sizeof text ? len :
		    sizeof text);
		model = text;
	}
	/* a client's or a backend's bytes: clean, once, for every output */
	m->model_len = jsonw_clean(m->model, sizeof m->model, model, len);
	m->model_src = src;
}

/* The model a response names: kept apart, once (a stream names it in
 * every chunk), and offered as the label. */
static void response_model(struct meter *m, const char *model, size_t len)
{
	char text[4 * METER_MODEL_MAX];
	size_t n = json_unescape(text, sizeof text, model, len < sizeof text ? len :
	    sizeof text);

	m->response_model_len = jsonw_clean(m->response_model, sizeof m->response_model,
	    text, n);
	if (m->model_src < MODEL_RESPONSE)
		meter_offer_model(m, MODEL_RESPONSE, model, len);
}

/* The finish reasons of an event or a body (dialect.h), kept each once. */
static void finish_reasons(struct meter *m, const struct dialect_info *info)
{
	for (unsigned i = 0; i < info->n_finish && i < DIALECT_FINISH_MAX; i++) {
		char r[METER_FINISH_LEN + 1];
		size_t n = info->finish[i].len < METER_FINISH_LEN ? info->finish[i].len :
		    METER_FINISH_LEN;
		unsigned k;

		for (size_t b = 0; b < n; b++) {
			char c = info->finish[i].s[b];
			r[b] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' ?
			    c : '_';
		}
		r[n] = '\0';
		for (k = 0; k < m->n_finish && strcmp(m->finish[k], r) != 0; k++)
			;
		if (k == m->n_finish && m->n_finish < METER_FINISH_MAX)
			memcpy(m->finish[m->n_finish++], r, n + 1);
	}
}

const char *meter_finish_reason(const struct meter *m)
{
	return m->n_finish > 0 ? m->finish[0] : NULL;
}

/* A token event after the first, gap µs after the token before it. The
 * read's timestamp is the read's identity: the same one means the same
 * read, so clumps are counted with no clock read and no counter per read. */
static void next_token(struct meter *m, uint64_t gap)
{
	if (gap == 0)
		m->clumped++;
	else
		lhist_add(m->gap_hist, METER_GAP_BUCKETS, gap);
	if (gap > m->itl_max_us)
		m->itl_max_us = gap;
	/* a stall the sweep did not see (it looks now and then) */
	if (m->stall_us != 0 && gap >= m->stall_us && !m->stalled)
		m->stalls++;
	if (m->itl_fn != NULL)
		m->itl_fn(m->itl_arg, gap);
}

/* The token-free time since the last token up to now, the client's holds
 * left out: how long tokentap was reading and no token came. */
static uint64_t reading_gap(const struct meter *m, uint64_t now)
{
	uint64_t held = meter_held_us(m, now) - m->held_last;
	uint64_t gap = now > m->t_last_token ? now - m->t_last_token : 0;
	return gap > held ? gap - held : 0;
}

/* A token after a hold: the gap is the client's as much as the model's
 * (what was made meanwhile came in one read when reading resumed), so it
 * is no ITL sample; only the time tokentap was reading counts as token-free
 * (gap_max, stalls). */
static void token_after_hold(struct meter *m)
{
	uint64_t gap = reading_gap(m, m->now);

	if (gap > m->gap_max_us)
		m->gap_max_us = gap;
	if (m->stall_us != 0 && gap >= m->stall_us && !m->stalled)
		m->stalls++;
}

/* A keep-alive of any kind (an SSE comment, a ping, an empty delta), n
 * of them in the read at now. */
static void keepalive(struct meter *m, uint64_t n)
{
	if (m->keepalives == 0)
		m->ka_first = m->now;
	m->ka_last = m->now;
	m->keepalives += n;
}

/* What an event's count says of chunks and tokens: continuous usage, and
 * the first token event's tokens (its count less the one before it):
 * for an event with a count, or the first token event. */
static void count_event(struct meter *m, const struct dialect_info *info)
{
	if (info->output_tokens >= 0) {
		m->usage_events++;
		m->usage_token_events += info->token != 0;
	}
	if (!info->token || m->token_events != 1)
		return;                 /* the first token event was counted just now */
	if (info->output_tokens >= 0)
		m->first_event_tokens = info->output_tokens -
		    (m->reported_out > 0 ? m->reported_out : 0);
	else if (dialect_one_token_per_event(m->dialect))
		m->first_event_tokens = 1;
}

/* Only line ends in [p, end)? */
static int line_ends(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != '\r' && *p != '\n')
			return 0;
	return 1;
}

/* Is the event's data reported in place and followed in the feed by line
 * ends only (its own, and the blank line)? Then it is the feed's last: the
 * read's last too when the feed ended it (meter_read_end). An event copied
 * from several feeds or joined from several data lines is not judged:
 * doubted. */
static int ends_feed(const struct meter *m, const struct sse_event *ev)
{
	const char *end = ev->data != NULL ? ev->data + ev->data_len : NULL;

	return m->now_whole && m->feed != NULL && end != NULL && ev->data >= m->feed &&
	    end <= m->feed_end && m->feed_end - end <= 4 && line_ends(end, m->feed_end);
}

/* The first token's event, at its read: the doubt's inputs. */
static void first_token_read(struct meter *m, const struct sse_event *ev)
{
	m->ft_floor = m->now_floor;
	m->ft_kernel = m->now_kernel;
	m->ft_whole = m->now_whole;
	m->ft_last = ends_feed(m, ev);
	m->ft_end = m->feed_end;
	m->points_due |= PENDING_FT;
	m->ft_pending = 1;
}

/* The first output token's event (once a request), alike. */
static void first_output_read(struct meter *m, const struct sse_event *ev)
{
	m->t_first_output = m->now;
	m->fo.floor = m->now_floor;
	m->fo.kernel = m->now_kernel;
	m->fo.last = (uint8_t)ends_feed(m, ev);
	m->fo.end = m->feed_end;
	m->points_due |= PENDING_FO;
	m->ft_pending = 1;
}

/* A token event (reasoning: of the reasoning, not the output), at its
 * read. */
static inline void token_seen(struct meter *m, const struct sse_event *ev,
    int reasoning)
{
	/* the last token's doubt: its read is judged at its end, once
	 * (meter_read_end), not here */
	m->lt_end = (const char *)((uintptr_t)ev->data + ev->data_len);
	m->ft_pending = 1;
	if (m->token_events == 0) {
		m->t_first_token = m->now;
		m->held_first = m->held_us;
		first_token_read(m, ev);
	} else if (m->held_us != m->held_last) {
		token_after_hold(m);
	} else {
		next_token(m, m->now - m->t_last_token);
	}
	if (m->t_first_output == 0 && !reasoning)
		first_output_read(m, ev);
	m->t_last_token = m->now;
	m->held_last = m->held_us;
	m->token_events++;
}

/* One dispatched event, at the time of the read that completed it. */
static void on_event(void *arg, const struct sse_event *ev)
{
	struct meter *m = arg;
	struct dialect_info info;
	const char *model;
	size_t model_len;

	m->events++;
	if (m->event_read_at != m->now) {
		m->event_read_at = m->now;
		m->event_reads++;
	}
	if (m->t_first_event == 0)
		m->t_first_event = m->now;
	if (m->sniff > 0 && sniffing(m, ev)) {
		m->t_last_event = m->now;
		return;
	}
	m->t_last_event = m->now;
	if (m->token_events == 0) {
		dialect_classify_memo(m->dialect, ev, &m->memo, &info);
	} else if (dialect_memo_token(m->dialect, ev, &m->memo, &model, &model_len)) {
		/* most of a stream's events: a token the memo tells, nothing
		 * else in it (no count, finish, error or end), and not the
		 * first (count_event's): what the reading below does with
		 * such an event, without a dialect_info to fill and test */
		token_seen(m, ev, 0);
		if (model_len > 0 && m->response_model_len == 0)
			response_model(m, model, model_len);
		return;
	} else {
		dialect_classify_parse(m->dialect, ev, &m->memo, &info);
	}
	if (info.token)
		token_seen(m, ev, info.reasoning);
	if (info.output_tokens >= 0 || (info.token && m->token_events == 1))
		count_event(m, &info);
	if (info.keepalive != 0) {
		m->pings += info.keepalive == DIALECT_PING;
		m->empty_deltas += info.keepalive == DIALECT_EMPTY;
		keepalive(m, 1);
	}
	/* counts are cumulative where a dialect repeats them: the last wins */
	if (info.output_tokens >= 0)
		m->reported_out = info.output_tokens;
	if (info.input_tokens >= 0)
		m->reported_in = info.input_tokens;
	if (info.reasoning_tokens >= 0)
		m->reported_reasoning = info.reasoning_tokens;
	if (info.end)
		m->end_seen = 1;
	if (info.error)
		m->error_seen = 1;
	if (info.model_len > 0 && m->response_model_len == 0)
		response_model(m, info.model, info.model_len);
	if (info.n_finish > 0)
		finish_reasons(m, &info);
}

/* "text/event-stream" with any parameters, compared without case. */
static int media_type_is(const char *ct, size_t len, const char *want)
{
	size_t n = strlen(want);
	size_t i;
	if (len < n || strncasecmp(ct, want, n) != 0)
		return 0;
	for (i = n; i < len && (ct[i] == ' ' || ct[i] == '\t'); i++)
		;
	return i == len || ct[i] == ';';
}

/* "application/problem+json" and the like (RFC 6839). */
static int json_suffix(const char *ct, size_t len)
{
	const char *semi = memchr(ct, ';', len);
	size_t n = semi ? (size_t)(semi - ct) : len;
	while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
		n--;
	return n > 5 && strncasecmp(ct + n - 5, "+json", 5) == 0;
}

void meter_response_head(struct meter *m, unsigned status,
    const char *content_type, size_t ct_len, const char *content_encoding,
    size_t ce_len, size_t max_event_bytes, uint64_t now)
{
	m->status = status;
	m->t_head = now;
	m->max_event_bytes = max_event_bytes;
	m->encoding = decode_kind(content_encoding, ce_len);
	if (m->encoding != DECODE_IDENTITY) {
		m->dec = decode_new(m->encoding);
		if (m->dec == NULL) {
			/* forwarded as it is, not parsed */
			m->unmeasured = m->encoding == DECODE_UNSUPPORTED ?
			    METER_UNMEASURED_CODING : METER_UNMEASURED_MEMORY;
			return;
		}
	}
	if (content_type != NULL &&
	    media_type_is(content_type, ct_len, "text/event-stream")) {
		m->parse = METER_PARSE_SSE;
	} else if ((content_type != NULL &&
	    media_type_is(content_type, ct_len, "application/x-ndjson")) ||
	    (m->dialect == DIALECT_OLLAMA && status < 300 && !(content_type != NULL &&
	    media_type_is(content_type, ct_len, "application/json")))) {
		m->parse = METER_PARSE_NDJSON;
	}
	if (m->parse != METER_PARSE_NONE) {
		m->stream = 1;
		sse_init(&m->sse, m->parse == METER_PARSE_SSE ? SSE_MODE_EVENTS :
		    SSE_MODE_NDJSON, max_event_bytes, on_event, m);
	} else {
		/* only a JSON body has a usage to read: any other (a file, an
		 * image) is not copied */
		m->json_body = m->dialect != DIALECT_RAW && content_type != NULL &&
		    (media_type_is(content_type, ct_len, "application/json") ||
		    json_suffix(content_type, ct_len));
	}
}

/* A JSON body that is not a stream is kept (first 1 MiB) for its usage. */
static void keep_body(struct meter *m, const char *p, size_t len)
{
	if (m->body_len + len > BODY_MAX)
		len = BODY_MAX - m->body_len;
	if (len == 0)
		return;
	if (m->body_len + len > m->body_cap) {
		size_t cap = m->body_cap ? m->body_cap : 4096;
		char *nb;
		while (cap < m->body_len + len)
			cap *= 2;
		nb = realloc(m->body, cap);
		if (nb == NULL)
			return;
		m->body = nb;
		m->body_cap = cap;
	}
	memcpy(m->body + m->body_len, p, len);
	m->body_len += len;
}

static void decoded(void *arg, const char *p, size_t len)
{
	struct meter *m = arg;
	if (m->parse != METER_PARSE_NONE)
		sse_feed(&m->sse, p, len);
	else if (m->json_body)
		keep_body(m, p, len);
}

void meter_body(struct meter *m, const char *p, size_t len, uint64_t now)
{
	uint64_t ka;

	m->now = now;
	m->feed = m->dec == NULL && p != NULL ? p : NULL;
	m->feed_end = p != NULL ? p + len : NULL;
	if (m->dec == NULL) {
		/* decoded()'s work, without its call: this is every read */
		if (m->unmeasured)
			m->unmeasured_body |= len > 0;
		else if (m->parse != METER_PARSE_NONE)
			sse_feed(&m->sse, p, len);
		else if (m->json_body)
			keep_body(m, p, len);
	} else if (decode_feed(m->dec, p, len, decoded, m) < 0) {
		/* a body whose coding breaks is measured no further */
		m->unmeasured = METER_UNMEASURED_DECODE;
		m->unmeasured_body = 1;
	}
	/* the parser's keep-alives (comments, data-less pings) of this read */
	if (m->parse != METER_PARSE_NONE &&
	    (ka = m->sse.comments + m->sse.pings) != m->ka_parser) {
		keepalive(m, ka - m->ka_parser);
		m->ka_parser = ka;
	}
}

enum meter_unmeasured meter_unmeasured(const struct meter *m)
{
	return m->unmeasured_body ? m->unmeasured : METER_MEASURED;
}

const char *meter_unmeasured_name(enum meter_unmeasured u)
{
	static const char *const names[METER_UNMEASURED_COUNT] = {
		NULL, "coding", "decode_error", "no_memory"
	};
	return (unsigned)u < METER_UNMEASURED_COUNT ? names[u] : NULL;
}

void meter_end(struct meter *m, uint64_t now)
{
	meter_unhold(m, now);
	m->t_end = now;
	if (m->sniff > 0)
		sniffed_raw(m, m->events);
	if (m->stream && m->token_events > 0) {
		/* the gap after the last token counts too: a stream cut while
		 * its tokens had stopped (and tokentap was reading) */
		uint64_t tail = reading_gap(m, now);
		if (m->itl_max_us > m->gap_max_us)
			m->gap_max_us = m->itl_max_us;
		if (tail > m->gap_max_us)
			m->gap_max_us = tail;
		if (m->stall_us != 0 && tail >= m->stall_us && !m->stalled)
			m->stalls++;
	}
	if (m->parse == METER_PARSE_NONE && m->body_len > 0) {
		struct dialect_info info;
		dialect_classify_body(m->dialect, m->body, m->body_len, &info);
		if (info.output_tokens >= 0)
			m->reported_out = info.output_tokens;
		if (info.input_tokens >= 0)
			m->reported_in = info.input_tokens;
		if (info.reasoning_tokens >= 0)
			m->reported_reasoning = info.reasoning_tokens;
		if (info.error)
			m->error_seen = 1;
		if (info.model_len > 0)
			response_model(m, info.model, info.model_len);
		finish_reasons(m, &info);
	}
}

void meter_hold(struct meter *m, uint64_t now)
{
	if (m->held_from == 0 && m->t_end == 0)
		m->held_from = now;
}

void meter_unhold(struct meter *m, uint64_t now)
{
	if (m->held_from == 0)
		return;
	m->held_us += now > m->held_from ? now - m->held_from : 0;
	m->held_from = 0;
}

uint64_t meter_held_us(const struct meter *m, uint64_t now)
{
	return m->held_us + (m->held_from != 0 && now > m->held_from ?
	    now - m->held_from : 0);
}

int meter_client_paced(const struct meter *m)
{
	return m->token_events > 1 && m->held_last != m->held_first;
}

void meter_free(struct meter *m)
{
	decode_free(m->dec);
	m->dec = NULL;
	if (m->parse != METER_PARSE_NONE)
		sse_free(&m->sse);
	m->parse = METER_PARSE_NONE;
	free(m->body);
	m->body = NULL;
	m->body_len = m->body_cap = 0;
}

/* Only a chunk's CRLF between a feed's end and its read's end? */
static int ends_read(const char *feed_end, const char *end)
{
	return end != NULL && end >= feed_end && end - feed_end <= 2 &&
	    line_ends(feed_end, end);
}

/* The first token's and the first output token's reads' ends: once or
 * twice a request. */
static void points_read_end(struct meter *m, const char *end, unsigned due)
{
	if ((due & PENDING_FT) && !ends_read(m->ft_end, end))
		m->ft_last = 0;
	if ((due & PENDING_FO) && !ends_read(m->fo.end, end))
		m->fo.last = 0;
}

/* Only line ends in [e, end), 6 at most: an event's line end and blank
 * line, and a chunk's CRLF (end NULL, or before e: no). The common tails
 * (LF LF and a chunk's CRLF; LF LF alone) are compared at once: every
 * read with a token asks. */
static inline int tail_line_ends(const char *e, const char *end)
{
	uintptr_t n = (uintptr_t)end - (uintptr_t)e;

	if (n == 4 && memcmp(e, "\n\n\r\n", 4) == 0)
		return 1;
	if (n == 2 && memcmp(e, "\n\n", 2) == 0)
		return 1;
	return n <= 6 && line_ends(e, end);
}

void meter_read_end(struct meter *m, const char *end)
{
	const char *e = m->lt_end;

	m->ft_pending = 0;
	if (m->points_due) {
		points_read_end(m, end, m->points_due);
		m->points_due = 0;
	}
	/* a token came in this read (only tokens ask for its end): the last
	 * so far. Its event is the read's last where its data lies in the
	 * last feed and only line ends (its own, the blank line, a chunk's
	 * CRLF: a next chunk's size line is none) follow it to the read's
	 * end. */
	m->lt.floor = m->now_floor;
	m->lt.kernel = m->now_kernel & m->now_whole;
	m->lt.last = m->feed != NULL && e > m->feed && e <= m->feed_end &&
	    tail_line_ends(e, end);
}

/* The doubt of a point at t whose bytes came after floor: 0 where they
 * were complete in a kernel-stamped read (the stamp is their own); no
 * floor before the request's first byte, the start (no answer comes
 * before the question). */
static int64_t doubt_of(const struct meter *m, uint64_t t, uint64_t floor,
    int complete)
{
	if (complete)
		return 0;
	if (floor < m->t0)
		floor = m->t0;
	return t > floor ? (int64_t)(t - floor) : 0;
}

int64_t meter_ttft_doubt_us(const struct meter *m)
{
	if (meter_ttft_us(m) < 0)
		return -1;
	/* complete: its event ended the read, and the read was judged; no
	 * floor of its own (a sniffed stream's first event turned out to be
	 * its first token): the request's start */
	return doubt_of(m, m->t_first_token, m->ft_floor,
	    m->ft_kernel && m->ft_last && !(m->points_due & PENDING_FT));
}

int64_t meter_start_doubt_us(const struct meter *m)
{
	if (m->t0_floor == 0 || m->t0_floor > m->t0)
		return -1;
	return (int64_t)(m->t0 - m->t0_floor);
}

void meter_head_read(struct meter *m, int ended)
{
	m->hd.floor = m->now_floor;
	m->hd.kernel = m->now_kernel;
	m->hd.last = (uint8_t)(m->now_whole && ended);
}

int64_t meter_head_doubt_us(const struct meter *m)
{
	if (m->t_head == 0)
		return -1;
	return doubt_of(m, m->t_head, m->hd.floor, m->hd.kernel && m->hd.last);
}

int64_t meter_ttfo_doubt_us(const struct meter *m)
{
	if (meter_ttfo_us(m) < 0)
		return -1;
	return doubt_of(m, m->t_first_output, m->fo.floor,
	    m->fo.kernel && m->fo.last && !(m->points_due & PENDING_FO));
}

/* Its read judged at its end; a read whose end never came (the response
 * ended within it) is not: the window from the floor of the last read
 * judged, older, so no later than the truth. */
int64_t meter_last_token_doubt_us(const struct meter *m)
{
	if (meter_ttft_us(m) < 0)
		return -1;
	return doubt_of(m, m->t_last_token, m->lt.floor,
	    m->lt.kernel && m->lt.last && !m->ft_pending);
}

int64_t meter_ttft_us(const struct meter *m)
{
	if (!m->stream || m->t_first_token == 0)
		return -1;
	return (int64_t)(m->t_first_token - m->t0);
}

int64_t meter_ttfo_us(const struct meter *m)
{
	if (!m->stream || m->t_first_output == 0)
		return -1;
	return (int64_t)(m->t_first_output - m->t0);
}

/* t - t_req: 0 when t came first, -1 without either. */
static int64_t since_request(const struct meter *m, uint64_t t)
{
	if (!m->stream || t == 0 || m->t_req == 0)
		return -1;
	return t > m->t_req ? (int64_t)(t - m->t_req) : 0;
}

int64_t meter_ttft_server_us(const struct meter *m)
{
	return since_request(m, m->t_first_token);
}

int64_t meter_ttfo_server_us(const struct meter *m)
{
	return since_request(m, m->t_first_output);
}

int64_t meter_duration_server_us(const struct meter *m)
{
	return m->t_req != 0 && m->t_end > m->t_req ? (int64_t)(m->t_end - m->t_req) : 0;
}

int64_t meter_reasoning_tokens(const struct meter *m)
{
	return m->reported_reasoning;
}

int meter_tokens_from_usage(const struct meter *m)
{
	return m->reported_out >= 0;
}

int64_t meter_output_tokens(const struct meter *m)
{
	if (m->reported_out >= 0)
		return m->reported_out;
	if (!m->stream)
		return -1;
	return (int64_t)m->token_events;
}

int64_t meter_input_tokens(const struct meter *m)
{
	return m->reported_in;
}

/* The tokens made between the first token event and the last, which TPOT
 * divides that time by: N - 1 where each event is one token (docs/contract.md
 * §4), N less the first event's tokens where the stream's count says the
 * events carry several; the first event's own where it was told (continuous
 * usage), else the mean per event (*estimated): a backend that batches (vLLM's
 * --stream-interval) sends its first token in an event with others, and N - 1
 * would charge the first event's tokens to the time after it. -1 where there
 * is no such time (fewer than two tokens, or one event). */
static double tokens_after_first(const struct meter *m, int *estimated)
{
	int64_t n = meter_output_tokens(m);

	*estimated = 0;
	if (n < 2)
		return -1;
	if (!meter_tokens_from_usage(m) || (uint64_t)n == m->token_events)
		return (double)(n - 1);
	if (m->token_events < 2)
		return -1;
	if (m->first_event_tokens >= 0)
		return n > m->first_event_tokens ? (double)(n - m->first_event_tokens) : -1;
	*estimated = 1;
	return (double)n - (double)n / (double)m->token_events;
}

int64_t meter_tpot_us(const struct meter *m)
{
	int estimated;
	double after = tokens_after_first(m, &estimated);

	if (!m->stream || m->t_first_token == 0 || after <= 0 || meter_client_paced(m))
		return -1;
	return (int64_t)((double)(m->t_last_token - m->t_first_token) / after);
}

int meter_tpot_estimated(const struct meter *m)
{
	int estimated;
	return meter_tpot_us(m) >= 0 && tokens_after_first(m, &estimated) > 0 &&
	    estimated;
}

double meter_speed_tokens(const struct meter *m)
{
	int estimated;
	return m->stream ? tokens_after_first(m, &estimated) : -1;
}

enum meter_tokens meter_token_source(const struct meter *m)
{
	if (m->reported_out >= 0)
		return m->token_events > 0 && m->usage_token_events == m->token_events ?
		    TOKENS_CONTINUOUS : TOKENS_USAGE;
	return m->stream ? TOKENS_EVENTS : TOKENS_NONE;
}

const char *meter_tokens_name(enum meter_tokens t)
{
	static const char *const names[] = { NULL, "events", "usage", "continuous_usage" };
	return (unsigned)t < 4 ? names[t] : NULL;
}

double meter_tokens_per_event(const struct meter *m)
{
	if (m->reported_out < 0 || !m->stream || m->token_events == 0)
		return -1;
	return (double)m->reported_out / (double)m->token_events;
}

void meter_wire(const struct meter *m, struct meter_wire *w)
{
	memset(w, 0, sizeof *w);
	if (m->parse == METER_PARSE_NONE)
		return;
	w->stream = 1;
	w->coding = (uint8_t)m->encoding;
	if (dialect_has_end_marker(m->dialect))
		w->end = m->end_seen ? WIRE_END_SEEN : WIRE_END_MISSING;
	w->usage = m->usage_events == 0 ? WIRE_USAGE_NONE :
	    m->usage_token_events > 0 ? WIRE_USAGE_EVERY : WIRE_USAGE_FINAL;
	w->error_in_2xx = m->error_seen && m->status >= 200 && m->status < 300;
	w->lf = (uint32_t)m->sse.lf;
	w->crlf = (uint32_t)m->sse.crlf;
	w->cr = (uint32_t)m->sse.cr;
	w->data_space = (uint32_t)m->sse.data_space;
	w->data_bare = (uint32_t)m->sse.data_bare;
	w->comments = (uint32_t)m->sse.comments;
	w->pings = (uint32_t)(m->pings + m->sse.pings);
	w->empty_deltas = (uint32_t)m->empty_deltas;
	if (m->keepalives > 1) {
		w->ka_gaps = (uint32_t)(m->keepalives - 1);
		w->ka_span_us = m->ka_last - m->ka_first;
	}
	w->events = (uint32_t)m->events;
	w->event_reads = (uint32_t)m->event_reads;
}

/* ---- clumping ------------------------------------------------------------ */

double meter_clump_share(const struct meter *m)
{
	if (!m->stream || m->token_events < 2)
		return -1;
	return (double)m->clumped / (double)(m->token_events - 1);
}

int64_t meter_clump_gap_us(const struct meter *m)
{
	if (!m->stream)
		return -1;
	return lhist_median(m->gap_hist, METER_GAP_BUCKETS);
}

/* The rule (see docs/measurement.md, "Clumping"): with enough token events to
 * judge, most of them came in the same read as the token before, and the
 * reads that carried them were far apart. MEASURED below. */
#define BUFFERED_MIN_TOKENS 16
#define BUFFERED_SHARE 0.5
#define BUFFERED_GAP_US 50000

int meter_buffered(const struct meter *m)
{
	if (!m->stream || m->unmeasured || m->token_events < BUFFERED_MIN_TOKENS ||
	    meter_client_paced(m))
		return -1;
	return meter_clump_share(m) >= BUFFERED_SHARE &&
	    meter_clump_gap_us(m) >= BUFFERED_GAP_US;
}

/* ---- stalls --------------------------------------------------------------- */

int64_t meter_token_gap_us(const struct meter *m, uint64_t now)
{
	if (!m->stream || m->unmeasured || m->t_end != 0 || m->token_events == 0 ||
	    now < m->t_last_token)
		return -1;
	return (int64_t)reading_gap(m, now);
}

int meter_stall_sweep(struct meter *m, uint64_t now)
{
	int64_t gap;

	if (m->stalled) {
		if (m->t_last_token == m->stall_ref && m->t_end == 0)
			return 0;
		m->stalled = 0;
		return -1;
	}
	gap = meter_token_gap_us(m, now);
	if (m->stall_us == 0 || gap < 0 || (uint64_t)gap < m->stall_us)
		return 0;
	m->stalled = 1;
	m->stall_ref = m->t_last_token;
	m->stalls++;
	return 1;
}

static const char *const outcome_names[OUTCOME_COUNT] = {
	"ok", "client_abort", "client_timeout", "upstream_abort", "upstream_error",
	"timeout", "connect_error", "rejected"
};

const char *meter_outcome_name(enum meter_outcome o)
{
	return (unsigned)o < OUTCOME_COUNT ? outcome_names[o] : "?";
}

enum meter_outcome meter_outcome(const struct meter *m, enum meter_end how)
{
	switch (how) {
	case METER_END_CONNECT:
		return OUTCOME_CONNECT_ERROR;
	case METER_END_TIMEOUT:
		return OUTCOME_TIMEOUT;
	case METER_END_REJECTED:
		return OUTCOME_REJECTED;
	case METER_END_CLIENT:
		return OUTCOME_CLIENT_ABORT;
	case METER_END_CLIENT_TIMEOUT:
		return OUTCOME_CLIENT_TIMEOUT;
	default:
		break;
	}
	if ((m->t_head != 0 && m->status >= 400) || m->error_seen ||
	    how == METER_END_MALFORMED)
		return OUTCOME_UPSTREAM_ERROR;
	/* what decides is the stream's end marker, where the dialect has one:
	 * a stream cut after it lost nothing, one framed to its end without
	 * it was cut short all the same */
	if (m->t_head == 0)
		return OUTCOME_UPSTREAM_ABORT;
	if (how == METER_END_CLOSED)
		return m->stream && m->end_seen ? OUTCOME_OK : OUTCOME_UPSTREAM_ABORT;
	if (m->stream && dialect_has_end_marker(m->dialect) && !m->end_seen)
		return OUTCOME_UPSTREAM_ABORT;
	return OUTCOME_OK;
}

int meter_outcome_client(enum meter_outcome o)
{
	return o == OUTCOME_CLIENT_ABORT || o == OUTCOME_CLIENT_TIMEOUT;
}

int meter_no_token(const struct meter *m, enum meter_outcome o)
{
	if (m->token_events > 0 || m->unmeasured || m->status == 101)
		return 0;
	switch (o) {
	case OUTCOME_OK:
		return m->stream;
	case OUTCOME_CLIENT_ABORT:
	case OUTCOME_UPSTREAM_ABORT:
	case OUTCOME_UPSTREAM_ERROR:
	case OUTCOME_TIMEOUT:
		return 1;
	default:
		return 0;
	}
}
