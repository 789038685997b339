/* SPDX-License-Identifier: Apache-2.0 */
/* jsmn's code, static here, strict and with parent links (the core's
 * json.c keeps its own); json.h after it adds only the unescaping. */
#define JSMN_STATIC
#define JSMN_STRICT
#define JSMN_PARENT_LINKS
#include <jsmn.h>

#include "load_jsonl.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct load_jl_tok {
	jsmntok_t t;
};

#define LINE_MAX_BYTES (64u << 20)

void load_jl_init(struct load_jl *j)
{
	memset(j, 0, sizeof(*j));
}

void load_jl_free(struct load_jl *j)
{
	free(j->t);
	load_jl_init(j);
}

static const jsmntok_t *tok(const struct load_jl *j, int i)
{
	return &j->t[i].t;
}

/* ---- a strict check first: jsmn lets ",," and the like through ------- */

#define MAX_NESTING 128

struct check {
	const char *s;
	size_t len, pos;
	const char *why;
	int depth;
};

static int check_fail(struct check *c, const char *why)
{
	if (c->pos >= c->len)
		why = "JSON cut short";
	c->why = why;
	return -1;
}

static void blanks(struct check *c)
{
	while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' ||
	    c->s[c->pos] == '\r' || c->s[c->pos] == '\n'))
		c->pos++;
}

static int is_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
	    (ch >= 'A' && ch <= 'F');
}

static int check_string(struct check *c)
{
	c->pos++;                                  /* the quote */
	while (c->pos < c->len) {
		unsigned char ch = (unsigned char)c->s[c->pos];
		if (ch == '"') {
			c->pos++;
			return 0;
		}
		if (ch < 0x20)
			return check_fail(c, "a control character in a string (escape it)");
		if (ch == '\\') {
			c->pos++;
			if (c->pos >= c->len)
				return check_fail(c, "");
			if (c->s[c->pos] == 'u') {
				for (int i = 1; i <= 4; i++)
					if (c->pos + (size_t)i >= c->len ||
					    !is_hex(c->s[c->pos + (size_t)i])) {
						c->pos += (size_t)i;
						return check_fail(c, "a \\u escape takes 4 hex digits");
					}
				c->pos += 4;
			} else if (strchr("\"\\/bfnrt", c->s[c->pos]) == NULL) {
				return check_fail(c, "an unknown escape in a string");
			}
		}
		c->pos++;
	}
	return check_fail(c, "");
}

static int digits(struct check *c)
{
	size_t from = c->pos;

	while (c->pos < c->len && c->s[c->pos] >= '0' && c->s[c->pos] <= '9')
		c->pos++;
	return c->pos > from ? 0 : check_fail(c, "a number expected");
}

static int check_number(struct check *c)
{
	if (c->s[c->pos] == '-')
		c->pos++;
	if (c->pos < c->len && c->s[c->pos] == '0')
		c->pos++;
	else if (digits(c) < 0)
		return -1;
	if (c->pos < c->len && c->s[c->pos] == '.') {
		c->pos++;
		if (digits(c) < 0)
			return -1;
	}
	if (c->pos < c->len && (c->s[c->pos] == 'e' || c->s[c->pos] == 'E')) {
		c->pos++;
		if (c->pos < c->len && (c->s[c->pos] == '+' || c->s[c->pos] == '-'))
			c->pos++;
		if (digits(c) < 0)
			return -1;
	}
	return 0;
}

static int check_value(struct check *c);

/* An object or an array after its opening bracket. */
static int check_container(struct check *c, char close)
{
	if (++c->depth > MAX_NESTING)
		return check_fail(c, "nested too deep");
	c->pos++;
	blanks(c);
	if (c->pos < c->len && c->s[c->pos] == close) {
		c->pos++;
		c->depth--;
		return 0;
	}
	for (;;) {
		if (close == '}') {
			if (c->pos >= c->len || c->s[c->pos] != '"')
				return check_fail(c, "a member name (a string) expected");
			if (check_string(c) < 0)
				return -1;
			blanks(c);
			if (c->pos >= c->len || c->s[c->pos] != ':')
				return check_fail(c, "':' expected after a member name");
			c->pos++;
		}
		if (check_value(c) < 0)
			return -1;
		blanks(c);
		if (c->pos < c->len && c->s[c->pos] == close) {
			c->pos++;
			c->depth--;
			return 0;
		}
		if (c->pos >= c->len || c->s[c->pos] != ',')
			return check_fail(c, close == '}' ? "',' or '}' expected" :
			    "',' or ']' expected");
		c->pos++;
		blanks(c);
	}
}

static int check_value(struct check *c)
{
	static const char *const words[] = {"true", "false", "null"};

	blanks(c);
	if (c->pos >= c->len)
		return check_fail(c, "");
	switch (c->s[c->pos]) {
	case '{':
		return check_container(c, '}');
	case '[':
		return check_container(c, ']');
	case '"':
		return check_string(c);
	default:
		break;
	}
	if (c->s[c->pos] == '-' || (c->s[c->pos] >= '0' && c->s[c->pos] <= '9'))
		return check_number(c);
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(words[i]);
		if (c->len - c->pos >= n && memcmp(c->s + c->pos, words[i], n) == 0) {
			c->pos += n;
			return 0;
		}
	}
	return check_fail(c, "invalid JSON");
}

int load_jl_parse(struct load_jl *j, const char *s, size_t len, size_t *at,
    const char **why)
{
	struct check c = { s, len, 0, NULL, 0 };
	jsmn_parser p;
	int n = 0;

	*at = 0;
	j->n = 0;
	if (len > INT_MAX / 2) {
		*why = "line too long";
		return -1;
	}
	if (check_value(&c) == 0) {
		blanks(&c);
		if (c.pos < len)
			c.why = "more than one JSON value on the line";
	}
	if (c.why != NULL) {
		*at = c.pos;
		*why = c.why;
		return -1;
	}
	for (;;) {
		/* jsmn only counts without an array: there is always one */
		if (j->cap > 0) {
			jsmn_init(&p);
			n = jsmn_parse(&p, s, len, (jsmntok_t *)j->t, (unsigned)j->cap);
			if (n != JSMN_ERROR_NOMEM)
				break;
		}
		{
			int cap = j->cap ? j->cap * 4 : 64;
			struct load_jl_tok *t = realloc(j->t, (size_t)cap * sizeof(*t));
			if (t == NULL) {
				*why = "out of memory";
				return -1;
			}
			j->t = t;
			j->cap = cap;
		}
	}
	j->s = s;
	j->len = len;
	if (n <= 0) {
		/* strict jsmn takes no bare number or literal: one token then */
		size_t b = 0;
		while (b < len && (s[b] == ' ' || s[b] == '\t'))
			b++;
		if (b == len || strchr("{[\"", s[b]) != NULL) {
			*why = "invalid JSON";
			return -1;
		}
		j->t[0].t = (jsmntok_t){ .type = JSMN_PRIMITIVE, .start = (int)b,
		    .end = (int)c.pos, .size = 0, .parent = -1 };
		n = 1;
	}
	j->n = n;
	return 0;
}

enum load_jl_type load_jl_type(const struct load_jl *j, int i)
{
	switch (tok(j, i)->type) {
	case JSMN_OBJECT:
		return LOAD_JL_OBJECT;
	case JSMN_ARRAY:
		return LOAD_JL_ARRAY;
	case JSMN_STRING:
		return LOAD_JL_STRING;
	default:
		return LOAD_JL_OTHER;
	}
}

size_t load_jl_off(const struct load_jl *j, int i)
{
	int s = tok(j, i)->start;

	/* a string token starts after its quote */
	if (tok(j, i)->type == JSMN_STRING && s > 0)
		s--;
	return (size_t)s;
}

/* The first token after k that is not inside it: tokens are in the order
 * they start, so a binary search skips k's subtree (a saved document's
 * thousands of samples) in one step. */
static int skip(const struct load_jl *j, int k)
{
	int lo = k + 1, hi = j->n, end = tok(j, k)->end;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (tok(j, mid)->start < end)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The next direct child of parent after token after (-1: the first). A
 * member's value is its key's child: skipped like any other subtree. */
static int next_child(const struct load_jl *j, int parent, int after)
{
	int i = after < 0 ? parent + 1 : skip(j, after);

	while (i < j->n && tok(j, i)->start < tok(j, parent)->end) {
		if (tok(j, i)->parent == parent)
			return i;
		i = skip(j, i);
	}
	return -1;
}

int load_jl_next(const struct load_jl *j, int obj, int *key)
{
	int k;

	if (tok(j, obj)->type != JSMN_OBJECT)
		return 0;
	k = next_child(j, obj, *key);
	if (k < 0 || k + 1 >= j->n)
		return 0;
	*key = k;
	return 1;
}

int load_jl_is(const struct load_jl *j, int i, const char *name)
{
	const jsmntok_t *t = tok(j, i);
	size_t n = strlen(name);

	return t->type == JSMN_STRING && (size_t)(t->end - t->start) == n &&
	    memcmp(j->s + t->start, name, n) == 0;
}

int load_jl_get(const struct load_jl *j, int obj, const char *key)
{
	int k = -1;

	while (load_jl_next(j, obj, &k))
		if (load_jl_is(j, k, key))
			return k + 1;
	return -1;
}

int load_jl_elem(const struct load_jl *j, int arr, int *el)
{
	int k;

	if (tok(j, arr)->type != JSMN_ARRAY)
		return 0;
	k = next_child(j, arr, *el);
	if (k < 0)
		return 0;
	*el = k;
	return 1;
}

int load_jl_null(const struct load_jl *j, int i)
{
	const jsmntok_t *t = tok(j, i);

	return t->type == JSMN_PRIMITIVE && j->s[t->start] == 'n';
}

int load_jl_num(const struct load_jl *j, int i, double *v)
{
	const jsmntok_t *t = tok(j, i);
	char buf[64], *end;
	size_t n = (size_t)(t->end - t->start);

	if (t->type != JSMN_PRIMITIVE || n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, j->s + t->start, n);
	buf[n] = '\0';
	if (!(buf[0] == '-' || (buf[0] >= '0' && buf[0] <= '9')))
		return -1;
	errno = 0;
	*v = strtod(buf, &end);
	return *end == '\0' && errno == 0 && isfinite(*v) ? 0 : -1;
}

char *load_jl_str(const struct load_jl *j, int i, size_t *len)
{
	const jsmntok_t *t = tok(j, i);
	size_t n, cap;
	char *out;

	if (t->type != JSMN_STRING)
		return NULL;
	n = (size_t)(t->end - t->start);
	cap = n * 2 + 1;         /* \uXXXX undone never grows past its escape */
	out = malloc(cap);
	if (out == NULL)
		return NULL;
	n = json_unescape(out, cap, j->s + t->start, n);
	if (len != NULL)
		*len = n;
	return out;
}

/* A file read line by line in chunks, never more than a line's limit
 * held: getline would read a file without a newline (/dev/zero) whole
 * before its length could be checked. */
struct lines {
	FILE *f;
	char in[1 << 16];
	size_t pos, n;
	char *line;
	size_t cap;
};

enum { LINE_END = -1, LINE_READ_ERROR = -2, LINE_TOO_LONG = -3 };

/* The next line into l->line (its newline dropped, NUL-terminated): its
 * length, or LINE_END, LINE_READ_ERROR, LINE_TOO_LONG (over max bytes:
 * the reading stops there). */
static long long next_line(struct lines *l, size_t max)
{
	size_t len = 0;

	for (;;) {
		const char *nl;
		size_t take;

		if (l->pos == l->n) {
			l->pos = 0;
			l->n = fread(l->in, 1, sizeof l->in, l->f);
			if (l->n == 0) {
				if (ferror(l->f))
					return LINE_READ_ERROR;
				return len > 0 ? (long long)len : LINE_END;
			}
		}
		nl = memchr(l->in + l->pos, '\n', l->n - l->pos);
		take = nl ? (size_t)(nl - (l->in + l->pos)) : l->n - l->pos;
		if (take > max - len)
			return LINE_TOO_LONG;
		if (len + take + 1 > l->cap) {
			size_t cap = l->cap ? l->cap : 256;
			char *p;
			while (cap < len + take + 1)
				cap *= 2;
			p = realloc(l->line, cap);
			if (p == NULL)
				return LINE_READ_ERROR;
			l->line = p;
			l->cap = cap;
		}
		memcpy(l->line + len, l->in + l->pos, take);
		len += take;
		l->line[len] = '\0';
		l->pos += take + (nl != NULL);
		if (nl != NULL)
			return (long long)len;
	}
}

int load_jl_read_file(const char *path, FILE *err, int max_problems,
    int (*fn)(void *arg, const char *line, size_t len, size_t lineno), void *arg)
{
	struct lines *l = calloc(1, sizeof(*l));
	size_t lineno = 0;
	long long got;
	int problems = 0, rc;

	if (l == NULL) {
		fprintf(err, "%s: out of memory\n", path);
		return -1;
	}
	l->f = fopen(path, "r");
	if (l->f == NULL) {
		fprintf(err, "%s: %s\n", path, strerror(errno));
		free(l);
		return -1;
	}
	while ((got = next_line(l, LINE_MAX_BYTES)) >= 0) {
		size_t len = (size_t)got, k = 0;
		char *line = l->line;

		lineno++;
		while (len > 0 && line[len - 1] == '\r')
			len--;
		while (k < len && (line[k] == ' ' || line[k] == '\t'))
			k++;
		if (k == len)
			continue;
		rc = fn(arg, line, len, lineno);
		if (rc == -2) {
			problems++;
			break;
		}
		if (rc < 0 && ++problems >= max_problems) {
			fprintf(err, "%s: too many problems, stopping\n", path);
			break;
		}
	}
	if (got == LINE_TOO_LONG) {
		fprintf(err, "%s:%zu:1: a line longer than %u MiB (one JSON value a line; "
		    "is this a JSON-lines file?)\n", path, lineno + 1, LINE_MAX_BYTES >> 20);
		problems++;
	} else if (got == LINE_READ_ERROR) {
		fprintf(err, "%s:%zu: read failed%s%s\n", path, lineno + 1,
		    ferror(l->f) ? ": " : ", or out of memory",
		    ferror(l->f) ? strerror(errno) : "");
		problems++;
	}
	free(l->line);
	fclose(l->f);
	free(l);
	return problems ? -1 : 0;
}
