/* SPDX-License-Identifier: Apache-2.0 */
/* The history's file: the store as it is, so that a restart goes on where
 * the last run stopped.
 *
 *   "tokentap-history 1\n", then varints:
 *   written_at (wall µs)
 *   the outcomes' names in the order the steps count them (n, then each
 *     as length and bytes): read by name, so that a tokentap whose list
 *     differs still reads them (an outcome it does not know is left out)
 *   the tiers (n, then each step and keep, µs)
 *   open_from, then closed[k] of each coarser tier (history_int.h)
 *   the series (n, then each: kind, name as length and bytes, active
 *     (zigzag), the two open steps (length and encoding, 0: empty), then
 *     per tier the steps kept (n, then each: age = closed[k] - 1 - index,
 *     length, encoding))
 *   a CRC-32 (zlib's) of every byte before it, 4 bytes little-endian.
 *
 * The reader checks every part (the steps as history_decode does) and
 * takes all or nothing. */
#include "history_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "promproto.h"

#define MAGIC "tokentap-history 1\n"
#define MAGIC_LEN (sizeof MAGIC - 1)

static void put_str(struct pb *b, const char *s)
{
	size_t n = strlen(s);

	pb_varint(b, n);
	pb_raw(b, s, n);
}

static void put_blob(struct pb *b, const uint8_t *p, size_t n)
{
	pb_varint(b, n);
	pb_raw(b, p, n);
}

/* An open step's encoding, its length first. */
static void put_open(struct pb *b, const struct history_sum *s)
{
	static struct pb tmp;

	tmp.n = 0;
	tmp.oom = 0;
	history_encode(&tmp, s);
	b->oom |= tmp.oom;
	put_blob(b, tmp.p, tmp.n);
}

/* The bytes so far go out (and into the CRC) once they are this many: the
 * file never needs its size in memory. */
#define CHUNK (256 * 1024)

struct sink {
	struct pb b;
	uLong crc;
	int (*write)(void *arg, const void *p, size_t n);
	void *arg;
	int failed;
};

static void flush(struct sink *s)
{
	s->crc = crc32(s->crc, s->b.p, (uInt)s->b.n);
	if (s->b.oom || (s->b.n > 0 && s->write(s->arg, s->b.p, s->b.n) < 0))
		s->failed = 1;
	s->b.n = 0;
}

int history_save(const struct history *h, uint64_t now_wall,
    int (*write)(void *arg, const void *p, size_t n), void *arg)
{
	static struct sink s;
	struct pb *b = &s.b;
	uint8_t crc[4];

	b->n = 0;
	b->oom = 0;
	s.crc = crc32(0L, Z_NULL, 0);
	s.write = write;
	s.arg = arg;
	s.failed = 0;

	pb_raw(b, MAGIC, MAGIC_LEN);
	pb_varint(b, now_wall);
	pb_varint(b, OUTCOME_COUNT);
	for (int o = 0; o < OUTCOME_COUNT; o++)
		put_str(b, meter_outcome_name((enum meter_outcome)o));
	pb_varint(b, h->n_tiers);
	for (size_t k = 0; k < h->n_tiers; k++) {
		pb_varint(b, h->tier[k].step_us);
		pb_varint(b, h->tier[k].keep_us);
	}
	pb_varint(b, h->started);
	pb_varint(b, h->open_from);
	for (size_t k = 1; k < h->n_tiers; k++)
		pb_varint(b, h->closed[k]);
	pb_varint(b, h->n);
	for (size_t i = 0; i < h->n; i++) {
		const struct history_series *se = h->v[i];
		pb_varint(b, se->kind);
		put_str(b, se->name);
		pb_varint(b, ((uint64_t)se->active << 1) ^ (uint64_t)(se->active >> 63));
		put_open(b, &se->open[0]);
		put_open(b, &se->open[1]);
		for (size_t k = 0; k < h->n_tiers; k++) {
			uint64_t n = 0, from;
			if (se->ring[k] == NULL) {
				pb_varint(b, 0);
				continue;
			}
			from = h->closed[k] > h->slots[k] ? h->closed[k] - h->slots[k] : 0;
			for (uint64_t idx = from; idx < h->closed[k]; idx++)
				n += se->ring[k][idx % h->slots[k]] != NULL;
			pb_varint(b, n);
			for (uint64_t idx = h->closed[k]; idx-- > from;) {
				const struct history_blob *x = se->ring[k][idx % h->slots[k]];
				if (x == NULL)
					continue;
				pb_varint(b, h->closed[k] - 1 - idx);
				put_blob(b, x->b, x->len);
				if (b->n >= CHUNK)
					flush(&s);
			}
		}
	}
	flush(&s);
	for (int i = 0; i < 4; i++)
		crc[i] = (uint8_t)(s.crc >> (8 * i));
	return s.failed || write(arg, crc, sizeof crc) < 0 ? -1 : 0;
}

/* ---- reading -------------------------------------------------------------- */

struct in {
	const uint8_t *p, *end, *start;
	char *why;
	size_t why_len;
	int failed;
};

static int bad(struct in *r, const char *what)
{
	if (!r->failed)
		snprintf(r->why, r->why_len, "%s at byte %zu", what,
		    (size_t)(r->p - r->start));
	r->failed = 1;
	return -1;
}

static int get(struct in *r, uint64_t *v, uint64_t max, const char *what)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t c;
		if (r->p >= r->end)
			return bad(r, "cut short");
		c = *r->p++;
		if (shift == 63 && c > 1)
			break;
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			if (x > max)
				return bad(r, what);
			*v = x;
			return 0;
		}
	}
	return bad(r, what);
}

/* n bytes (a length first) left in place: *p points at them. */
static int get_bytes(struct in *r, const uint8_t **p, uint64_t *n, uint64_t max,
    const char *what)
{
	if (get(r, n, max, what) < 0)
		return -1;
	if ((uint64_t)(r->end - r->p) < *n)
		return bad(r, "cut short");
	*p = r->p;
	r->p += *n;
	return 0;
}

static int get_name(struct in *r, char *out, size_t cap, const char *what)
{
	const uint8_t *p;
	uint64_t n;

	if (get_bytes(r, &p, &n, cap - 1, what) < 0)
		return -1;
	if (memchr(p, '\0', n) != NULL)
		return bad(r, what);
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* A step's bytes checked, and turned into our outcomes' order. */
static int get_step(struct in *r, const int *map, size_t n_map, struct history_sum *s)
{
	char why[160];
	const uint8_t *p;
	uint64_t n;

	history_sum_clear(s);
	if (get_bytes(r, &p, &n, UINT32_MAX, "a step too long") < 0)
		return -1;
	if (history_decode(p, n, map, n_map, s, why, sizeof why) < 0) {
		r->p = p;
		return bad(r, why);
	}
	return 0;
}

static int read_series(struct in *r, struct history *h, const int *map, size_t n_map)
{
	static struct history_sum s;
	struct history_series *se;
	char name[HISTORY_NAME_MAX];
	uint64_t kind, active, n, age;

	if (get(r, &kind, HISTORY_SLO, "an unknown kind of series") < 0 ||
	    get_name(r, name, sizeof name, "a series' name too long") < 0 ||
	    get(r, &active, UINT64_MAX, "a count over 64 bits") < 0)
		return -1;
	if ((kind == HISTORY_INSTANCE) != (name[0] == '\0'))
		return bad(r, "a series without a name");
	if (kind != HISTORY_INSTANCE && history_series_get(h, (enum history_kind)kind,
	    name, 0) != NULL)
		return bad(r, "a series twice");
	if ((se = history_series_get(h, (enum history_kind)kind, name, 1)) == NULL)
		return bad(r, "too many series");
	se->active = (int64_t)(active >> 1) ^ -(int64_t)(active & 1);
	for (int d = 0; d < 2; d++) {
		if (get_step(r, map, n_map, &s) < 0)
			return -1;
		history_sum_clear(&se->open[d]);
		if (history_sum_merge(&se->open[d], &s) < 0)
			return bad(r, "out of memory");
	}
	for (size_t k = 0; k < h->n_tiers; k++) {
		if (get(r, &n, h->slots[k], "more steps than the tier keeps") < 0)
			return -1;
		for (uint64_t i = 0; i < n; i++) {
			struct history_blob *b;
			uint64_t idx;
			int oom = 0;
			if (get(r, &age, h->slots[k] - 1, "a step older than the tier keeps") < 0)
				return -1;
			if (age >= h->closed[k])
				return bad(r, "a step before the clock's start");
			idx = h->closed[k] - 1 - age;
			if (se->ring[k] != NULL && se->ring[k][idx % h->slots[k]] != NULL)
				return bad(r, "a step twice");
			if (get_step(r, map, n_map, &s) < 0)
				return -1;
			b = history_blob_of(&s, &oom);
			if (oom || (b != NULL && history_put(h, se, k, idx, b) < 0))
				return bad(r, "out of memory");
		}
	}
	return 0;
}

static int same_tiers(const struct history *h, const struct conf_history_step *t, size_t n)
{
	if (h->n_tiers != n)
		return 0;
	for (size_t k = 0; k < n; k++)
		if (h->tier[k].step_us != t[k].step_us || h->tier[k].keep_us != t[k].keep_us)
			return 0;
	return 1;
}

/* The file's own store, as it was written. */
static struct history *read_store(struct in *r, uint64_t now_wall)
{
	struct conf_history_step tiers[HISTORY_TIERS_MAX];
	int map[64];
	uint64_t written, n_out, n_tiers, started, n, v;
	struct history *h = NULL;
	const char *wrong;

	if (get(r, &written, UINT64_MAX, "a time over 64 bits") < 0)
		return NULL;
	if (written > now_wall + HISTORY_AHEAD_US) {
		snprintf(r->why, r->why_len, "written %llu s after this clock's now "
		    "(a clock set back, or another host's file)",
		    (unsigned long long)((written - now_wall) / 1000000));
		return NULL;
	}
	if (get(r, &n_out, 64, "too many outcomes") < 0)
		return NULL;
	for (uint64_t i = 0; i < n_out; i++) {
		char name[32];
		if (get_name(r, name, sizeof name, "an outcome's name too long") < 0)
			return NULL;
		map[i] = -1;
		for (int o = 0; o < OUTCOME_COUNT; o++)
			if (strcmp(name, meter_outcome_name((enum meter_outcome)o)) == 0)
				map[i] = o;
	}
	if (get(r, &n_tiers, HISTORY_TIERS_MAX, "too many tiers") < 0)
		return NULL;
	for (uint64_t k = 0; k < n_tiers; k++)
		if (get(r, &tiers[k].step_us, UINT32_MAX * 1000000ull, "a step too long") < 0 ||
		    get(r, &tiers[k].keep_us, UINT32_MAX * 1000000ull, "a span too long") < 0)
			return NULL;
	if ((wrong = conf_history_check(tiers, (size_t)n_tiers)) != NULL) {
		bad(r, wrong);
		return NULL;
	}
	if ((h = history_new(tiers, (size_t)n_tiers)) == NULL) {
		bad(r, "out of memory");
		return NULL;
	}
	if (get(r, &started, 1, "a flag that is not one") < 0 ||
	    get(r, &h->open_from, UINT64_MAX, "a step index over 64 bits") < 0)
		goto fail;
	h->started = (int)started;
	h->closed[0] = h->open_from;
	if (n_tiers > 0 && h->open_from > written / tiers[0].step_us) {
		bad(r, "steps after the time it was written");
		goto fail;
	}
	for (size_t k = 1; k < n_tiers; k++) {
		if (get(r, &v, UINT64_MAX, "a step index over 64 bits") < 0)
			goto fail;
		/* a coarse step is closed as soon as the finer ones under it are */
		if (v != h->closed[k - 1] / (tiers[k].step_us / tiers[k - 1].step_us)) {
			bad(r, "tiers closed out of step");
			goto fail;
		}
		h->closed[k] = v;
	}
	if (get(r, &n, HISTORY_SERIES_MAX, "too many series") < 0)
		goto fail;
	for (uint64_t i = 0; i < n; i++)
		if (read_series(r, h, map, (size_t)n_out) < 0)
			goto fail;
	if (r->p != r->end) {
		bad(r, "bytes after the last series");
		goto fail;
	}
	return h;
fail:
	history_free(h);
	return NULL;
}

struct history *history_load(const uint8_t *p, size_t len, const struct conf_history_step *t,
    size_t n, uint64_t now_wall, char *why, size_t why_len)
{
	struct in r = { p, p + len, p, why, why_len, 0 };
	struct history *h, *nh;
	uLong c;

	if (len < MAGIC_LEN + 4 || memcmp(p, MAGIC, MAGIC_LEN - 2) != 0) {
		snprintf(why, why_len, "not a tokentap history file");
		return NULL;
	}
	if (memcmp(p, MAGIC, MAGIC_LEN) != 0) {
		snprintf(why, why_len, "a version of the file this tokentap does not read");
		return NULL;
	}
	c = crc32(0L, Z_NULL, 0);
	c = crc32(c, p, (uInt)(len - 4));
	if ((uint32_t)c != ((uint32_t)p[len - 4] | (uint32_t)p[len - 3] << 8 |
	    (uint32_t)p[len - 2] << 16 | (uint32_t)p[len - 1] << 24)) {
		snprintf(why, why_len, "its checksum does not match (the file is damaged)");
		return NULL;
	}
	r.p += MAGIC_LEN;
	r.end -= 4;
	if ((h = read_store(&r, now_wall)) == NULL)
		return NULL;
	if (same_tiers(h, t, n)) {
		history_advance(h, now_wall);
		return h;
	}
	nh = history_retier(h, t, n, now_wall);
	if (nh == NULL) {
		history_free(h);
		snprintf(why, why_len, "out of memory");
	}
	return nh;
}
