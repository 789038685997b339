/* SPDX-License-Identifier: Apache-2.0 */
#include "sse.h"

#include "eol.h"

#include <stdlib.h>
#include <string.h>

/* Where a span lies. */
enum { AT_NONE, AT_FEED, AT_SCRATCH };

/* How far the current line has been read when a feed ends inside it. */
enum { ST_START, ST_NAME, ST_SPACE, ST_VALUE, ST_IGNORE };

enum { F_OTHER, F_DATA, F_EVENT, F_ID };

#define SCRATCH_MIN 1024

static const char bom_bytes[3] = { '\xEF', '\xBB', '\xBF' };

/*
 * Scratch layout: the data (joined lines) from offset 0, then the value of
 * an "event" / "id" line that a feed boundary cut (pend), and at the very
 * end the finished type and id values, packed. With type and id at the
 * end the data grows without moving them; that top region moves only when
 * the buffer grows, or by the other value's length when one is replaced.
 */

void sse_init(struct sse_parser *p, enum sse_mode mode, size_t max_event_bytes,
    sse_event_fn fn, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->max_event_bytes = max_event_bytes;
	p->fn = fn;
	p->arg = arg;
}

void sse_free(struct sse_parser *p)
{
	free(p->scratch);
	p->scratch = NULL;
	p->scratch_cap = 0;
	p->top_len = 0;
	p->pend_len = 0;
}

static size_t data_in_scratch(const struct sse_parser *p)
{
	return p->data.at == AT_SCRATCH ? p->data.len : 0;
}

/* Whether adding n bytes would take the event past max_event_bytes; the
 * count is the same however the event was split, so an event is skipped
 * or kept alike when fed whole or byte by byte. */
static int too_big(const struct sse_parser *p, size_t n)
{
	size_t size = p->data.len + p->type.len + p->id.len + p->pend_len;

	return size > p->max_event_bytes || n > p->max_event_bytes - size;
}

/* Makes room for `need` bytes of scratch in all. */
static int scratch_reserve(struct sse_parser *p, size_t need)
{
	size_t cap, max = p->max_event_bytes;
	char *buf;

	if (need <= p->scratch_cap)
		return 0;
	if (need > max)
		return -1;
	cap = p->scratch_cap ? p->scratch_cap : SCRATCH_MIN;
	while (cap < need)
		cap = cap > max / 2 ? max : cap * 2;
	if (cap > max)
		cap = max;
	buf = realloc(p->scratch, cap);
	if (buf == NULL)
		return -1;
	if (p->top_len > 0)
		memmove(buf + cap - p->top_len, buf + p->scratch_cap - p->top_len,
		    p->top_len);
	p->scratch = buf;
	p->scratch_cap = cap;
	return 0;
}

static const char *span_ptr(const struct sse_parser *p, const struct sse_span *s)
{
	if (s->len == 0)
		return "";
	if (s->at == AT_FEED)
		return s->ptr;
	if (s == &p->data)
		return p->scratch;
	return p->scratch + p->scratch_cap - s->rel;
}

static void event_reset(struct sse_parser *p)
{
	memset(&p->data, 0, sizeof(p->data));
	memset(&p->type, 0, sizeof(p->type));
	memset(&p->id, 0, sizeof(p->id));
	p->pend_len = 0;
	p->top_len = 0;
	p->has_data = 0;
	p->has_id = 0;
	p->oversize = 0;
}

/* Drops what the event holds; its remaining lines are read but not kept. */
static void set_oversize(struct sse_parser *p)
{
	event_reset(p);
	p->oversize = 1;
	if (p->state == ST_SPACE || p->state == ST_VALUE)
		p->state = ST_IGNORE;
}

/* Forgets the type or id value; a value packed below it in the top region
 * moves up so the region stays contiguous. */
static void top_drop(struct sse_parser *p, struct sse_span *s)
{
	struct sse_span *o = s == &p->type ? &p->id : &p->type;
	char *end;

	if (s->at == AT_SCRATCH) {
		if (o->at == AT_SCRATCH && o->rel > s->rel) {
			end = p->scratch + p->scratch_cap;
			memmove(end - o->rel + s->len, end - o->rel, o->len);
			o->rel -= s->len;
		}
		p->top_len -= s->len;
	}
	memset(s, 0, sizeof(*s));
}

/* Copies a value that lives in the fed buffer to the top region. */
static int top_put(struct sse_parser *p, struct sse_span *s)
{
	size_t used = data_in_scratch(p) + p->pend_len + p->top_len;

	if (s->len == 0) {
		s->at = AT_NONE;
		return 0;
	}
	if (scratch_reserve(p, used + s->len) < 0)
		return -1;
	p->top_len += s->len;
	memcpy(p->scratch + p->scratch_cap - p->top_len, s->ptr, s->len);
	s->rel = p->top_len;
	s->at = AT_SCRATCH;
	return 0;
}

/* Moves the pending value, now complete, to the top region as s. */
static void pend_commit(struct sse_parser *p, struct sse_span *s)
{
	size_t n = p->pend_len;

	memset(s, 0, sizeof(*s));
	if (n == 0)
		return;
	memmove(p->scratch + p->scratch_cap - p->top_len - n,
	    p->scratch + data_in_scratch(p), n);
	p->top_len += n;
	p->pend_len = 0;
	s->len = n;
	s->rel = p->top_len;
	s->at = AT_SCRATCH;
}

static int data_to_scratch(struct sse_parser *p)
{
	if (p->data.at != AT_FEED)
		return 0;
	if (p->data.len > 0) {
		if (scratch_reserve(p, p->data.len + p->pend_len + p->top_len) < 0)
			return -1;
		memcpy(p->scratch, p->data.ptr, p->data.len);
	}
	p->data.at = AT_SCRATCH;
	return 0;
}

/* Appends to the data, or to the pending value when pend is set. */
static void scratch_append(struct sse_parser *p, int pend, const char *s,
    size_t n)
{
	size_t off = data_in_scratch(p) + (pend ? p->pend_len : 0);

	if (n == 0)
		return;
	if (scratch_reserve(p, off + n + p->top_len) < 0) {
		set_oversize(p);
		return;
	}
	memcpy(p->scratch + off, s, n);
	if (pend)
		p->pend_len += n;
	else
		p->data.len += n;
}

/* The feed is about to end: what still points into it moves to scratch. */
static void spill(struct sse_parser *p)
{
	if (data_to_scratch(p) < 0)
		goto fail;
	if (p->type.at == AT_FEED && top_put(p, &p->type) < 0)
		goto fail;
	if (p->id.at == AT_FEED && top_put(p, &p->id) < 0)
		goto fail;
	return;
fail:
	set_oversize(p);
}

static void dispatch(struct sse_parser *p)
{
	struct sse_event ev;

	if (p->oversize) {
		p->oversized++;
	} else if (!p->has_data) {
		/* a keep-alive of the kind Dify sends: counted, not dispatched */
		if (p->type.len == 4 && memcmp(span_ptr(p, &p->type), "ping", 4) == 0)
			p->pings++;
	} else {
		ev.type = span_ptr(p, &p->type);
		ev.type_len = p->type.len;
		ev.data = span_ptr(p, &p->data);
		ev.data_len = p->data.len;
		ev.id = span_ptr(p, &p->id);
		ev.id_len = p->id.len;
		ev.has_id = p->has_id;
		p->events++;
		if (p->fn != NULL)
			p->fn(p->arg, &ev);
	}
	event_reset(p);
}

static int field_of(const char *s, size_t n)
{
	if (n == 4 && memcmp(s, "data", 4) == 0)
		return F_DATA;
	if (n == 5 && memcmp(s, "event", 5) == 0)
		return F_EVENT;
	if (n == 2 && memcmp(s, "id", 2) == 0)
		return F_ID;
	return F_OTHER;
}

/* A field line whose value lies whole in the fed buffer: the common case,
 * kept zero-copy unless data lines have to be joined. */
static void value_whole(struct sse_parser *p, int f, const char *v, size_t n)
{
	if (f == F_EVENT)
		top_drop(p, &p->type);
	if (f == F_DATA && p->has_data)
		n++;    /* the LF joining it to the data so far */
	if (too_big(p, n)) {
		set_oversize(p);
		return;
	}
	switch (f) {
	case F_DATA:
		if (!p->has_data) {
			p->has_data = 1;
			p->data = (struct sse_span){ .ptr = v, .len = n, .at = AT_FEED };
			break;
		}
		if (data_to_scratch(p) < 0 ||
		    scratch_reserve(p, p->data.len + n + p->top_len) < 0) {
			set_oversize(p);
			break;
		}
		scratch_append(p, 0, "\n", 1);
		scratch_append(p, 0, v, n - 1);
		break;
	case F_EVENT:
		p->type = (struct sse_span){ .ptr = v, .len = n, .at = AT_FEED };
		break;
	case F_ID:
		if (n > 0 && memchr(v, '\0', n) != NULL)
			break;
		top_drop(p, &p->id);
		p->id = (struct sse_span){ .ptr = v, .len = n, .at = AT_FEED };
		p->has_id = 1;
		break;
	}
}

static void line_whole(struct sse_parser *p, const char *s, size_t n)
{
	const char *colon, *v, *end = s + n;
	int f;

	if (n == 0) {
		dispatch(p);
		return;
	}
	/* the common lines without a search: a comment, a data line */
	if (s[0] == ':') {
		p->comments++;
		return;
	}
	if (n >= 5 && memcmp(s, "data:", 5) == 0) {
		colon = s + 4;
		f = F_DATA;
	} else {
		colon = memchr(s, ':', n);
		f = field_of(s, colon ? (size_t)(colon - s) : n);
	}
	if (f == F_OTHER || p->oversize)
		return;
	v = colon ? colon + 1 : end;
	if (v < end && *v == ' ') {
		v++;
		p->data_space += f == F_DATA;
	} else {
		p->data_bare += f == F_DATA;
	}
	value_whole(p, f, v, (size_t)(end - v));
}

/* The name of a split line is known (its colon or its end was reached). */
static void field_begin(struct sse_parser *p)
{
	p->field = p->name_len <= sizeof(p->name) ?
	    field_of(p->name, p->name_len) : F_OTHER;
	p->state = ST_SPACE;
	if (p->field == F_EVENT)
		top_drop(p, &p->type);
	if (p->field == F_OTHER || p->oversize) {
		p->state = ST_IGNORE;
		return;
	}
	p->pend_len = 0;
	if (p->field != F_DATA)
		return;
	if (!p->has_data) {
		p->has_data = 1;
		p->data.at = AT_SCRATCH;
		return;
	}
	if (too_big(p, 1) || data_to_scratch(p) < 0) {
		set_oversize(p);
		/* the line that makes the event too big still counts its space
		 * or none in the wire report, as line_whole counts it */
		p->state = ST_SPACE;
		return;
	}
	scratch_append(p, 0, "\n", 1);
}

static void field_end(struct sse_parser *p)
{
	if (p->field == F_EVENT) {
		pend_commit(p, &p->type);
	} else if (p->field == F_ID) {
		if (p->pend_len > 0 && memchr(p->scratch + data_in_scratch(p),
		    '\0', p->pend_len) != NULL) {
			p->pend_len = 0;
			return;
		}
		top_drop(p, &p->id);
		pend_commit(p, &p->id);
		p->has_id = 1;
	}
}

/* Reads the part of a line that this feed holds, the line's end excluded. */
static void line_part(struct sse_parser *p, const char *s, size_t n)
{
	const char *colon;
	size_t k, room;

	while (n > 0) {
		switch (p->state) {
		case ST_START:
			p->comments += s[0] == ':';
			/* fall through */
		case ST_NAME:
			colon = memchr(s, ':', n);
			k = colon ? (size_t)(colon - s) : n;
			room = p->name_len < sizeof(p->name) ?
			    sizeof(p->name) - p->name_len : 0;
			if (room > 0)
				memcpy(p->name + p->name_len, s, k < room ? k : room);
			p->name_len += k;
			p->state = ST_NAME;
			if (colon == NULL)
				return;
			s += k + 1;
			n -= k + 1;
			field_begin(p);
			break;
		case ST_SPACE:
			if (*s == ' ') {
				s++;
				n--;
				p->data_space += p->field == F_DATA;
			} else {
				p->data_bare += p->field == F_DATA;
			}
			p->state = p->oversize ? ST_IGNORE : ST_VALUE;
			break;
		case ST_VALUE:
			if (too_big(p, n))
				set_oversize(p);
			else
				scratch_append(p, p->field != F_DATA, s, n);
			return;
		default:
			return;
		}
	}
}

static void line_end(struct sse_parser *p)
{
	if (p->state == ST_START)
		dispatch(p);
	else if (p->state == ST_NAME)
		field_begin(p);
	if (p->state == ST_SPACE)          /* "data:" and the line's end */
		p->data_bare += p->field == F_DATA;
	if (p->state == ST_SPACE || p->state == ST_VALUE)
		field_end(p);
	p->state = ST_START;
	p->name_len = 0;
}

static size_t find(const char *buf, size_t from, size_t len, char c)
{
	const char *hit = memchr(buf + from, c, len - from);

	return hit ? (size_t)(hit - buf) : len;
}

/* Nothing of an event read yet: no field, nothing skipped. */
static int event_empty(const struct sse_parser *p)
{
	return !p->has_data && !p->has_id && !p->oversize &&
	    p->type.at == AT_NONE && p->type.len == 0;
}

/* The common event whole in the feed: one "data:" line from s, its LF at
 * eol and the blank line's right after, no CR in either. Dispatched from
 * here, as line_whole, value_whole and dispatch would have: no field is
 * stored, no span reset, and the blank line is not searched for. 0: not
 * that event (the lines are read one by one). */
static int event_whole(struct sse_parser *p, const char *s, size_t eol,
    size_t len)
{
	struct sse_event ev;
	const char *v = s + 5, *end = s + eol;

	if (eol < 5 || eol + 1 >= len || end[1] != '\n' ||
	    memcmp(s, "data:", 5) != 0 || !event_empty(p))
		return 0;
	v += v < end && *v == ' ';
	if ((size_t)(end - v) > p->max_event_bytes)
		return 0;      /* skipped, and counted, the usual way */
	p->data_space += v > s + 5;
	p->data_bare += v == s + 5;
	ev = (struct sse_event){ .type = "", .data = v, .data_len = (size_t)(end - v),
	    .id = "" };
	p->events++;
	if (p->fn != NULL)
		p->fn(p->arg, &ev);
	return 1;
}

/*
 * The common feed, read in one pass: lines that end in LF, each a comment,
 * a blank line or the one "data:" line of an event whose blank line
 * follows it, nothing of an event read before (the parser at a line's
 * start, no field kept, no CR held). A line of those shapes takes one scan
 * (eol_find: its LF, and that no CR comes first) and a few tests; the same
 * rules as line_whole and event_whole give, so the counters and events are
 * the same. Stops, leaving the rest to the line by line loop, at anything
 * else: a line the feed cuts, a CR, another field, an event of several
 * lines, one too big.
 */
static void feed_lines(struct sse_parser *p, const char *buf, size_t len);

static inline __attribute__((always_inline)) void feed_fast_with(
    struct sse_parser *p, const char *buf, size_t len, int avx2)
{
	const char *s = buf, *end = buf + len, *lf, *v;
	uint64_t lfs = 0, comments = 0;
	struct sse_event ev = { .type = "", .id = "" };

	(void)avx2;
	while (s < end && (lf =
#ifdef EOL_AVX2
	    avx2 ? eol_find_avx2(s, end) :
#endif
	    eol_find(s, end)) < end && *lf == '\n') {
		if (lf == s || *s == ':') {
			/* a blank line with nothing read dispatches nothing */
			comments += lf != s;
			lfs++;
			s = lf + 1;
			continue;
		}
		if (lf - s < 5 || lf + 1 == end || lf[1] != '\n' ||
		    memcmp(s, "data:", 5) != 0)
			break;
		v = s + 5;
		v += v < lf && *v == ' ';
		if ((size_t)(lf - v) > p->max_event_bytes)
			break;
		p->data_space += v > s + 5;
		p->data_bare += v == s + 5;
		ev.data = v;
		ev.data_len = (size_t)(lf - v);
		p->events++;
		if (p->fn != NULL)
			p->fn(p->arg, &ev);
		lfs += 2;
		s = lf + 2;
	}
	p->lf += lfs;
	p->comments += comments;
	if (s < end)
		feed_lines(p, s, (size_t)(end - s));
}

/* The line by line loop: any feed, from a line's start or within one. */
static void feed_lines(struct sse_parser *p, const char *buf, size_t len)
{
	size_t pos = 0, lf, cr, eol;
	uint64_t lfs = 0;          /* LF line ends: counted here, added once */

	if (len == 0)
		return;
	if (p->cr_end) {
		p->cr_end = 0;
		if (buf[0] == '\n') {
			pos = 1;
			p->crlf++;
		} else {
			p->cr++;
		}
	}
	/* CR is rare: each byte left is searched once for each of CR and LF
	 * (glibc's memchr takes 32 bytes a step where it can) */
	cr = find(buf, pos, len, '\r');
	lf = find(buf, pos, len, '\n');
	while (pos < len) {
		if (lf < pos)
			lf = find(buf, pos, len, '\n');
		if (cr < pos)
			cr = find(buf, pos, len, '\r');
		eol = lf < cr ? lf : cr;
		if (eol == len) {
			spill(p);
			line_part(p, buf + pos, len - pos);
			p->lf += lfs;
			return;
		}
		if (p->state == ST_START) {
			/* the blank line too, when no CR comes before it */
			if (buf[eol] == '\n' && eol + 1 < cr &&
			    event_whole(p, buf + pos, eol - pos, len - pos)) {
				pos = eol + 2;
				lfs += 2;
				continue;
			}
			line_whole(p, buf + pos, eol - pos);
		} else {
			line_part(p, buf + pos, eol - pos);
			line_end(p);
		}
		pos = eol + 1;
		if (buf[eol] == '\n') {
			lfs++;
		} else if (pos == len) {
			p->cr_end = 1;
		} else if (buf[pos] == '\n') {
			pos++;
			p->crlf++;
		} else {
			p->cr++;
		}
	}
	p->lf += lfs;
	spill(p);
}

/* The common feed goes to feed_fast, twice compiled: for AVX2, its scan
 * inlined, on the CPUs that have it (the scan and its calls took 173 of
 * the 2,500 instructions an event, about 100 this way), and for any CPU.
 * Each a tail call: no frame here. */
#ifdef EOL_AVX2
__attribute__((target("avx2")))
static void feed_fast_avx2(struct sse_parser *p, const char *buf, size_t len)
{
	feed_fast_with(p, buf, len, 1);
}
#endif

static __attribute__((noinline)) void feed_fast_any(struct sse_parser *p,
    const char *buf, size_t len)
{
	feed_fast_with(p, buf, len, 0);
}

static void feed_events(struct sse_parser *p, const char *buf, size_t len)
{
	if (len == 0)
		return;
	if (p->cr_end || p->state != ST_START || !event_empty(p))
		feed_lines(p, buf, len);
#ifdef EOL_AVX2
	else if (eol_has_avx2)
		feed_fast_avx2(p, buf, len);
#endif
	else
		feed_fast_any(p, buf, len);
}

static void nd_store(struct sse_parser *p, const char *s, size_t n)
{
	if (p->oversize)
		return;
	if (too_big(p, n))
		set_oversize(p);
	else
		scratch_append(p, 0, s, n);
}

/* Takes part of a line split across feeds; at_lf: the line ends after it.
 * A CR at the end of a part is held back until the next byte shows whether
 * it belongs to a CRLF. */
static void nd_take(struct sse_parser *p, const char *s, size_t n, int at_lf)
{
	p->data.at = AT_SCRATCH;
	p->state = ST_VALUE;
	if (p->cr_end) {
		p->cr_end = 0;
		if (n > 0 || !at_lf)
			nd_store(p, "\r", 1);
	}
	if (n > 0 && s[n - 1] == '\r') {
		n--;
		p->cr_end = !at_lf;
	}
	nd_store(p, s, n);
}

static void nd_line(struct sse_parser *p, const char *s, size_t n)
{
	if (p->oversize) {
		p->oversized++;
	} else if (n > 0) {
		if (n > p->max_event_bytes) {
			p->oversized++;
		} else {
			p->has_data = 1;
			p->data = (struct sse_span){ .ptr = s, .len = n, .at = AT_FEED };
			dispatch(p);
		}
	}
	event_reset(p);
	p->state = ST_START;
}

static void feed_ndjson(struct sse_parser *p, const char *buf, size_t len)
{
	const char *s = buf, *end = buf + len, *lf;
	size_t n;

	while (s < end) {
		lf = memchr(s, '\n', (size_t)(end - s));
		if (lf == NULL) {
			nd_take(p, s, (size_t)(end - s), 0);
			return;
		}
		n = (size_t)(lf - s);
		if ((n > 0 && s[n - 1] == '\r') || (n == 0 && p->cr_end))
			p->crlf++;
		else
			p->lf++;
		if (p->state == ST_START) {
			if (n > 0 && s[n - 1] == '\r')
				n--;
			nd_line(p, s, n);
		} else {
			nd_take(p, s, n, 1);
			nd_line(p, p->scratch, p->data.len);
		}
		s = lf + 1;
	}
}

static void feed_body(struct sse_parser *p, const char *buf, size_t len)
{
	if (p->mode == SSE_MODE_NDJSON)
		feed_ndjson(p, buf, len);
	else
		feed_events(p, buf, len);
}

void sse_feed(struct sse_parser *p, const char *buf, size_t len)
{
	size_t i = 0;
	int held;

	if (p->bom >= 0 && len > 0) {
		while (i < len && p->bom < 3 && buf[i] == bom_bytes[p->bom]) {
			p->bom++;
			i++;
		}
		if (p->bom < 3 && i == len)
			return;    /* so far a prefix of the BOM: wait */
		held = p->bom < 3 ? p->bom : 0;
		p->bom = -1;
		/* Not a BOM after all: the bytes held back are text. */
		if (held > 0)
			feed_body(p, bom_bytes, (size_t)held);
		buf += i;
		len -= i;
	}
	feed_body(p, buf, len);
}
