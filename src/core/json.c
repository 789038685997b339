/* SPDX-License-Identifier: Apache-2.0 */
/* jsmn's code, static in this file; json.h then brings only what the
 * other files see. */
#define JSMN_STATIC
#define JSMN_PARENT_LINKS
#include <jsmn.h>

#include "json.h"

#include <limits.h>
#include <string.h>

/* How deep the sparse pass looks into members too big for their share. */
#define SPARSE_DEPTH 4
/* jsmn counts in int: longer text is read up to here. */
#define JSON_MAX (INT_MAX / 2)

struct sparse {
	const char *s;
	jsmntok_t *t;
	int n, cap;
};

static int skip_ws(const char *s, int len, int pos)
{
	while (pos < len && (s[pos] == ' ' || s[pos] == '\t' ||
	    s[pos] == '\r' || s[pos] == '\n' || s[pos] == ','))
		pos++;
	return pos;
}

/* Just past the string opening at pos, or -1 when the text ends first. */
static int string_end(const char *s, int len, int pos)
{
	for (pos++; pos < len; pos++) {
		if (s[pos] == '\\')
			pos++;
		else if (s[pos] == '"')
			return pos + 1;
	}
	return -1;
}

/* Just past the value at pos, or -1 when the text ends first. */
static int value_end(const char *s, int len, int pos)
{
	int depth = 0;

	if (s[pos] == '"')
		return string_end(s, len, pos);
	if (s[pos] != '{' && s[pos] != '[') {
		while (pos < len && s[pos] != '\0' &&
		    strchr(",]}: \t\r\n", s[pos]) == NULL)
			pos++;
		return pos;
	}
	for (; pos < len; pos++) {
		if (s[pos] == '"') {
			pos = string_end(s, len, pos);
			if (pos < 0)
				return -1;
			pos--;
		} else if (s[pos] == '{' || s[pos] == '[') {
			depth++;
		} else if ((s[pos] == '}' || s[pos] == ']') && --depth == 0) {
			return pos + 1;
		}
	}
	return -1;
}

static int sparse_add(struct sparse *sp, jsmntype_t type, int start, int end,
    int parent)
{
	if (sp->n >= sp->cap)
		return -1;
	sp->t[sp->n] = (jsmntok_t){ .type = type, .start = start, .end = end,
	    .size = 0, .parent = parent };
	if (parent >= 0)
		sp->t[parent].size++;
	return sp->n++;
}

static void sparse_container(struct sparse *sp, int pos, int end, int parent,
    int depth);

/* Adds the value at [pos, end): parsed by jsmn with half the tokens left,
 * so that later members keep room; if it needs more, one level down;
 * else one opaque token. */
static void sparse_value(struct sparse *sp, int pos, int end, int parent,
    int depth)
{
	jsmntok_t *t = sp->t + sp->n;
	int share = (sp->cap - sp->n + 1) / 2, cap = sp->cap, r;
	jsmn_parser jp;
	char c = sp->s[pos];

	if (c == '"') {
		sparse_add(sp, JSMN_STRING, pos + 1, end - 1, parent);
		return;
	}
	if (c != '{' && c != '[') {
		sparse_add(sp, JSMN_PRIMITIVE, pos, end, parent);
		return;
	}
	if (share < 1)
		return;
	jsmn_init(&jp);
	r = jsmn_parse(&jp, sp->s + pos, (size_t)(end - pos), t, (unsigned)share);
	if (r > 0) {
		for (int k = 0; k < r; k++) {
			t[k].start += pos;
			t[k].end = t[k].end < 0 ? -1 : t[k].end + pos;
			t[k].parent = t[k].parent < 0 ? parent : t[k].parent + sp->n;
		}
		if (parent >= 0)
			sp->t[parent].size++;
		sp->n += r;
	} else if (r == JSMN_ERROR_NOMEM && depth < SPARSE_DEPTH) {
		sp->cap = sp->n + share;
		sparse_container(sp, pos, end, parent, depth + 1);
		sp->cap = cap;
	} else {
		sparse_add(sp, JSMN_UNDEFINED, pos, end, parent);
	}
}

/* The object or array at pos, ending at end, member by member. */
static void sparse_container(struct sparse *sp, int pos, int end, int parent,
    int depth)
{
	int obj = sp->s[pos] == '{', self, key, vend;

	self = sparse_add(sp, obj ? JSMN_OBJECT : JSMN_ARRAY, pos, end, parent);
	if (self < 0)
		return;
	for (pos = skip_ws(sp->s, end, pos + 1); pos < end &&
	    sp->s[pos] != '}' && sp->s[pos] != ']';
	    pos = skip_ws(sp->s, end, vend)) {
		key = self;
		if (obj) {
			vend = sp->s[pos] == '"' ? string_end(sp->s, end, pos) : -1;
			if (vend < 0 || sp->n + 2 > sp->cap)
				return;
			key = sparse_add(sp, JSMN_STRING, pos + 1, vend - 1, self);
			pos = vend;
			while (pos < end && sp->s[pos] != ':')
				pos++;
			pos = skip_ws(sp->s, end, pos + 1);
			if (pos >= end)
				return;
		}
		vend = value_end(sp->s, end, pos);
		if (vend <= pos || sp->n >= sp->cap)
			return;
		sparse_value(sp, pos, vend, key, depth);
	}
}

static int json_sparse(struct json *j, int cap)
{
	struct sparse sp = { .s = j->s, .t = j->t, .n = 0, .cap = cap };
	int pos = skip_ws(j->s, j->len, 0), end;

	if (pos >= j->len || (j->s[pos] != '{' && j->s[pos] != '['))
		return 0;
	end = value_end(j->s, j->len, pos);
	sparse_container(&sp, pos, end < 0 ? j->len : end, -1, 0);
	if (end < 0 && sp.n > 0)
		sp.t[0].end = -1;    /* truncated text: the root stays open */
	return sp.n;
}

int json_parse(struct json *j, const char *s, size_t len, jsmntok_t *t,
    int cap)
{
	jsmn_parser jp;
	int r;

	j->s = s;
	j->len = len > JSON_MAX ? JSON_MAX : (int)len;
	j->t = t;
	jsmn_init(&jp);
	r = jsmn_parse(&jp, s, (size_t)j->len, t, (unsigned)cap);
	j->n = r == JSMN_ERROR_NOMEM ? json_sparse(j, cap) : (int)jp.toknext;
	return j->n;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (unsigned)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			*v |= (unsigned)((c | 0x20) - 'a' + 10);
		else
			return -1;
	}
	return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* One "\u" escape at s (s[0] == 'u', at least 5 bytes), a surrogate pair
 * as one: the code point, and the bytes read in *in. */
static unsigned u_escape(const char *s, size_t n, size_t *in)
{
	unsigned hi, lo;

	if (hex4(s + 1, &hi) < 0) {
		*in = 1;                /* not an escape: the rest as it is */
		return 0xfffd;
	}
	*in = 5;
	if (hi < 0xd800 || hi > 0xdfff)
		return hi;
	if (hi <= 0xdbff && n >= 11 && s[5] == '\\' && s[6] == 'u' &&
	    hex4(s + 7, &lo) == 0 && lo >= 0xdc00 && lo <= 0xdfff) {
		*in = 11;
		return 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
	}
	return 0xfffd;
}

size_t json_unescape(char *dst, size_t cap, const char *src, size_t n)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	size_t i = 0, o = 0, in;
	char buf[4];

	if (cap == 0)
		return 0;
	while (i < n) {
		size_t len = 1;
		const char *put = src + i, *e;
		if (src[i] != '\\') {
			in = 1;
		} else if (i + 1 == n) {
			break;
		} else if (src[i + 1] == 'u') {
			if (n - i < 6)
				break;                  /* cut short */
			len = utf8_put(buf, u_escape(src + i + 1, n - i - 1, &in));
			in++;
			put = buf;
		} else if ((e = strchr(from, src[i + 1])) != NULL) {
			in = 2;
			put = &to[e - from];
		} else {
			in = 2;
			put = src + i + 1;          /* not JSON: the byte as it is */
		}
		if (o + len >= cap)
			break;
		memcpy(dst + o, put, len);
		o += len;
		i += in;
	}
	dst[o] = '\0';
	return o;
}
