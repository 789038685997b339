/* SPDX-License-Identifier: Apache-2.0 */
#include "ere.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the parse: pattern -> tree ------------------------------------------ */

#define ERE_MAX_DEPTH 256      /* nested groups */

enum { N_EMPTY, N_CHAR, N_ANY, N_SET, N_ASSERT, N_CAT, N_ALT, N_REP };
enum { A_BOL, A_EOL, A_WORDB, A_NWORDB, A_WBEG, A_WEND };

struct node {
	uint8_t type;
	uint8_t c;                 /* N_CHAR: the byte; N_ASSERT: A_* */
	int a, b;                  /* children; N_SET: a is the set */
	int min, max;              /* N_REP; max -1: no bound */
};

struct parser {
	const char *p, *start;
	struct node *nodes;
	int n, cap;
	uint8_t (*sets)[32];
	unsigned n_sets;
	int depth;
	char *err;
	size_t errlen;
	int failed;
};

static int fail(struct parser *ps, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct parser *ps, const char *at, const char *fmt, ...)
{
	char why[160];
	va_list ap;

	if (ps->failed++)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	snprintf(ps->err, ps->errlen, "%s (at offset %d)", why, (int)(at - ps->start));
	return -1;
}

static int node_new(struct parser *ps, int type)
{
	if (ps->n == ps->cap) {
		int cap = ps->cap ? ps->cap * 2 : 32;
		struct node *v = realloc(ps->nodes, (size_t)cap * sizeof *v);
		if (v == NULL)
			return fail(ps, ps->p, "out of memory");
		ps->nodes = v;
		ps->cap = cap;
	}
	memset(&ps->nodes[ps->n], 0, sizeof ps->nodes[0]);
	ps->nodes[ps->n].type = (uint8_t)type;
	return ps->n++;
}

static int node2(struct parser *ps, int type, int a, int b)
{
	int k = node_new(ps, type);
	if (k >= 0) {
		ps->nodes[k].a = a;
		ps->nodes[k].b = b;
	}
	return k;
}

static int set_new(struct parser *ps)
{
	uint8_t (*v)[32] = realloc(ps->sets, (ps->n_sets + 1) * sizeof *v);
	if (v == NULL)
		return fail(ps, ps->p, "out of memory");
	ps->sets = v;
	memset(v[ps->n_sets], 0, sizeof v[0]);
	return (int)ps->n_sets++;
}

static void set_add(uint8_t *set, unsigned c)
{
	set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

static int is_word(unsigned c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_';
}

/* The C locale's character classes, by byte. */
static int in_class(const char *name, unsigned c)
{
	int lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
	int digit = c >= '0' && c <= '9', graph = c >= 0x21 && c <= 0x7e;

	if (strcmp(name, "alpha") == 0)
		return lower || upper;
	if (strcmp(name, "digit") == 0)
		return digit;
	if (strcmp(name, "alnum") == 0)
		return lower || upper || digit;
	if (strcmp(name, "upper") == 0)
		return upper;
	if (strcmp(name, "lower") == 0)
		return lower;
	if (strcmp(name, "space") == 0)
		return c == ' ' || (c >= '\t' && c <= '\r');
	if (strcmp(name, "blank") == 0)
		return c == ' ' || c == '\t';
	if (strcmp(name, "punct") == 0)
		return graph && !lower && !upper && !digit;
	if (strcmp(name, "print") == 0)
		return graph || c == ' ';
	if (strcmp(name, "graph") == 0)
		return graph;
	if (strcmp(name, "cntrl") == 0)
		return c < 0x20 || c == 0x7f;
	if (strcmp(name, "xdigit") == 0)
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
	return -1;
}

/* One element of a bracket expression: a byte (*c), or a class added to
 * set (returns 1); -1 on error. */
static int bracket_elem(struct parser *ps, uint8_t *set, unsigned *c)
{
	const char *at = ps->p;

	if (ps->p[0] == '[' && (ps->p[1] == ':' || ps->p[1] == '=' || ps->p[1] == '.')) {
		char kind = ps->p[1], name[16];
		const char *end = ps->p + 2;
		size_t len;

		while (*end != '\0' && !(end[0] == kind && end[1] == ']'))
			end++;
		if (*end == '\0')
			return fail(ps, at, "unmatched [%c", kind);
		len = (size_t)(end - (ps->p + 2));
		ps->p = end + 2;
		if (kind != ':') {
			/* a collating element or an equivalence class: in the C
			 * locale, one byte */
			if (len != 1)
				return fail(ps, at, "[%c%.*s%c] is not one character", kind,
				    (int)len, at + 2, kind);
			*c = (unsigned char)at[2];
			return 0;
		}
		if (len >= sizeof name)
			return fail(ps, at, "unknown character class [:%.*s:]", (int)len, at + 2);
		memcpy(name, at + 2, len);
		name[len] = '\0';
		if (in_class(name, 'a') < 0)
			return fail(ps, at, "unknown character class [:%s:]", name);
		for (unsigned k = 0; k < 256; k++)
			if (in_class(name, k))
				set_add(set, k);
		return 1;
	}
	*c = (unsigned char)*ps->p++;
	return 0;
}

/* [...] after its '[': a set of bytes. */
static int parse_bracket(struct parser *ps)
{
	const char *open = ps->p - 1;
	int k = node_new(ps, N_SET), s = set_new(ps), negate = 0, first = 1;
	uint8_t *set;

	if (k < 0 || s < 0)
		return -1;
	set = ps->sets[s];
	ps->nodes[k].a = s;
	if (*ps->p == '^') {
		negate = 1;
		ps->p++;
	}
	for (;;) {
		unsigned lo, hi;
		const char *at = ps->p;
		int r;

		if (*ps->p == '\0')
			return fail(ps, open, "unmatched [");
		if (*ps->p == ']' && !first)
			break;
		first = 0;
		if ((r = bracket_elem(ps, set, &lo)) < 0)
			return -1;
		if (r == 1)
			continue;
		if (ps->p[0] != '-' || ps->p[1] == ']' || ps->p[1] == '\0') {
			set_add(set, lo);
			continue;
		}
		ps->p++;                   /* a range */
		if ((r = bracket_elem(ps, set, &hi)) < 0)
			return -1;
		if (r == 1 || hi < lo)
			return fail(ps, at, "invalid range in [...]");
		for (unsigned c = lo; c <= hi; c++)
			set_add(set, c);
	}
	ps->p++;                           /* ']' */
	if (negate)
		for (int i = 0; i < 32; i++)
			set[i] = (uint8_t)~set[i];
	return k;
}

static int parse_alt(struct parser *ps);

/* \x: a class, an assertion or the character; *repeatable 0 after an
 * assertion. Back-references are refused: no matcher that stays linear
 * can have them. */
static int parse_escape(struct parser *ps, int *repeatable)
{
	const char *at = ps->p - 1;
	unsigned char c = (unsigned char)*ps->p;
	static const char asserts[] = "bB<>`'";
	static const uint8_t kinds[] = { A_WORDB, A_NWORDB, A_WBEG, A_WEND, A_BOL, A_EOL };
	const char *a;
	int k;

	if (c == '\0')
		return fail(ps, at, "trailing backslash");
	ps->p++;
	if (c >= '0' && c <= '9')
		return fail(ps, at, "back-reference \\%c refused: matching one can take "
		    "exponential time", c);
	if ((a = strchr(asserts, c)) != NULL) {
		if ((k = node_new(ps, N_ASSERT)) >= 0)
			ps->nodes[k].c = kinds[a - asserts];
		*repeatable = 0;
		return k;
	}
	if (c == 'w' || c == 'W' || c == 's' || c == 'S') {
		int s;
		if ((k = node_new(ps, N_SET)) < 0 || (s = set_new(ps)) < 0)
			return -1;
		ps->nodes[k].a = s;
		for (unsigned b = 0; b < 256; b++) {
			int in = c == 'w' || c == 'W' ? is_word(b) : in_class("space", b);
			if (in == (c == 'w' || c == 's'))
				set_add(ps->sets[s], b);
		}
		return k;
	}
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return fail(ps, at, "\\%c is not POSIX (glibc reads it as '%c'; for "
		    "digits write [0-9])", c, c);
	if ((k = node_new(ps, N_CHAR)) >= 0)
		ps->nodes[k].c = c;
	return k;
}

static int parse_atom(struct parser *ps, int *repeatable)
{
	const char *at = ps->p;
	char c = *ps->p++;
	int k;

	*repeatable = 1;
	switch (c) {
	case '(':
		if (++ps->depth > ERE_MAX_DEPTH)
			return fail(ps, at, "groups nested deeper than %d", ERE_MAX_DEPTH);
		if (*ps->p == ')')
			k = node_new(ps, N_EMPTY);
		else
			k = parse_alt(ps);
		if (k < 0)
			return -1;
		if (*ps->p != ')')
			return fail(ps, at, "unmatched (");
		ps->p++;
		ps->depth--;
		return k;
	case '.':
		return node_new(ps, N_ANY);
	case '^':
	case '$':
		if ((k = node_new(ps, N_ASSERT)) >= 0)
			ps->nodes[k].c = c == '^' ? A_BOL : A_EOL;
		*repeatable = 0;
		return k;
	case '[':
		return parse_bracket(ps);
	case '\\':
		return parse_escape(ps, repeatable);
	case '*':
	case '+':
	case '?':
	case '{':
		return fail(ps, at, "'%c' repeats nothing", c);
	default:
		if ((k = node_new(ps, N_CHAR)) >= 0)
			ps->nodes[k].c = (uint8_t)c;
		return k;
	}
}

static int parse_number(const char **p)
{
	int v = -1;
	while (**p >= '0' && **p <= '9') {
		v = (v < 0 ? 0 : v) * 10 + (**p - '0');
		if (v > 100000)
			v = 100000;
		(*p)++;
	}
	return v;
}

/* {m}, {m,}, {,n}, {m,n} after its '{'. */
static int parse_interval(struct parser *ps, int *min, int *max)
{
	const char *at = ps->p - 1;
	int lo = parse_number(&ps->p), hi = lo;

	if (*ps->p == ',') {
		ps->p++;
		hi = parse_number(&ps->p);
		if (lo < 0 && hi < 0)
			return fail(ps, at, "invalid {,}");
		if (lo < 0)
			lo = 0;
	}
	if (*ps->p == '\0')
		return fail(ps, at, "unmatched {");
	if (*ps->p != '}' || lo < 0)
		return fail(ps, at, "invalid content of {}");
	ps->p++;
	if (lo > ERE_DUP_MAX || hi > ERE_DUP_MAX)
		return fail(ps, at, "a count over %d", ERE_DUP_MAX);
	if (hi >= 0 && hi < lo)
		return fail(ps, at, "invalid content of {} (%d > %d)", lo, hi);
	*min = lo;
	*max = hi;
	return 0;
}

static int parse_piece(struct parser *ps)
{
	int repeatable, k = parse_atom(ps, &repeatable);

	while (k >= 0 && (*ps->p == '*' || *ps->p == '+' || *ps->p == '?' || *ps->p == '{')) {
		const char *at = ps->p;
		char op = *ps->p++;
		int min = 0, max = -1, r;

		if (!repeatable)
			return fail(ps, at, "'%c' after an anchor", op);
		if (op == '+')
			min = 1;
		else if (op == '?')
			max = 1;
		else if (op == '{' && parse_interval(ps, &min, &max) < 0)
			return -1;
		if ((r = node2(ps, N_REP, k, 0)) < 0)
			return -1;
		ps->nodes[r].min = min;
		ps->nodes[r].max = max;
		k = r;
	}
	return k;
}

static int parse_cat(struct parser *ps)
{
	int k = -2;

	while (*ps->p != '\0' && *ps->p != '|') {
		int piece;
		if (*ps->p == ')') {
			if (ps->depth == 0)
				return fail(ps, ps->p, "unmatched ) (write \\) for the character)");
			break;
		}
		if ((piece = parse_piece(ps)) < 0)
			return -1;
		k = k == -2 ? piece : node2(ps, N_CAT, k, piece);
		if (k < 0)
			return -1;
	}
	return k == -2 ? node_new(ps, N_EMPTY) : k;
}

static int parse_alt(struct parser *ps)
{
	int k = parse_cat(ps);

	while (k >= 0 && *ps->p == '|') {
		int r;
		ps->p++;
		if ((r = parse_cat(ps)) < 0)
			return -1;
		k = node2(ps, N_ALT, k, r);
	}
	return k;
}

/* ---- the program ---------------------------------------------------------- */

enum { I_CHAR, I_ANY, I_SET, I_ASSERT, I_SPLIT, I_JMP, I_MATCH };

struct ere_inst {
	uint8_t op;
	uint8_t c;                 /* I_CHAR: the byte; I_ASSERT: A_* */
	uint16_t x, y;             /* I_SPLIT: both; I_JMP: x; I_SET: x the set */
};

/* Instructions a tree takes, counted out; saturates past the bound. */
static long size_of(const struct node *nodes, int k)
{
	const struct node *n = &nodes[k];
	long s, r;

	switch (n->type) {
	case N_EMPTY:
		return 0;
	case N_CAT:
		s = size_of(nodes, n->a) + size_of(nodes, n->b);
		break;
	case N_ALT:
		s = size_of(nodes, n->a) + size_of(nodes, n->b) + 2;
		break;
	case N_REP:
		r = size_of(nodes, n->a);
		/* min copies, then a loop (split, body, jump) or max - min
		 * optional ones (split, body) */
		s = n->min * r + (n->max < 0 ? r + 2 : (long)(n->max - n->min) * (r + 1));
		break;
	default:
		return 1;
	}
	return s > ERE_MAX_INST ? ERE_MAX_INST + 1 : s;
}

struct emitter {
	const struct node *nodes;
	struct ere_inst *prog;
	unsigned n;
};

static unsigned emit1(struct emitter *e, uint8_t op, uint8_t c, unsigned x, unsigned y)
{
	struct ere_inst *i = &e->prog[e->n];
	i->op = op;
	i->c = c;
	i->x = (uint16_t)x;
	i->y = (uint16_t)y;
	return e->n++;
}

static void emit(struct emitter *e, int k)
{
	const struct node *n = &e->nodes[k];
	unsigned split, jmp, first;

	switch (n->type) {
	case N_EMPTY:
		return;
	case N_CHAR:
		emit1(e, I_CHAR, n->c, 0, 0);
		return;
	case N_ANY:
		emit1(e, I_ANY, 0, 0, 0);
		return;
	case N_SET:
		emit1(e, I_SET, 0, (unsigned)n->a, 0);
		return;
	case N_ASSERT:
		emit1(e, I_ASSERT, n->c, 0, 0);
		return;
	case N_CAT:
		emit(e, n->a);
		emit(e, n->b);
		return;
	case N_ALT:
		split = emit1(e, I_SPLIT, 0, 0, 0);
		e->prog[split].x = (uint16_t)e->n;
		emit(e, n->a);
		jmp = emit1(e, I_JMP, 0, 0, 0);
		e->prog[split].y = (uint16_t)e->n;
		emit(e, n->b);
		e->prog[jmp].x = (uint16_t)e->n;
		return;
	case N_REP:
		for (int i = 0; i < n->min; i++)
			emit(e, n->a);
		if (n->max < 0) {
			split = emit1(e, I_SPLIT, 0, 0, 0);
			e->prog[split].x = (uint16_t)e->n;
			emit(e, n->a);
			emit1(e, I_JMP, 0, split, 0);
			e->prog[split].y = (uint16_t)e->n;
			return;
		}
		/* each optional copy may be the last: its split goes to the end;
		 * a copy is its split and the body, size_of exactly (the whole
		 * program is within the bound, so nothing saturated) */
		first = e->n;
		for (int i = n->min; i < n->max; i++) {
			split = emit1(e, I_SPLIT, 0, 0, 0);
			e->prog[split].x = (uint16_t)e->n;
			emit(e, n->a);
		}
		for (unsigned at = first; at < e->n; at += (unsigned)size_of(e->nodes, n->a) + 1)
			e->prog[at].y = (uint16_t)e->n;
		return;
	}
}

int ere_compile(struct ere *re, const char *pattern, char *err, size_t errlen)
{
	struct parser ps = { .p = pattern, .start = pattern, .err = err, .errlen = errlen };
	struct emitter e;
	int root;
	long size;

	memset(re, 0, sizeof *re);
	if (errlen > 0)
		err[0] = '\0';
	/* the parse and the tree walks recurse: bounded by the length */
	if (strlen(pattern) > ERE_MAX_INST)
		root = fail(&ps, pattern + ERE_MAX_INST, "longer than %d bytes", ERE_MAX_INST);
	else
		root = parse_alt(&ps);
	if (root >= 0 && *ps.p != '\0')
		root = fail(&ps, ps.p, "unmatched )");
	if (root < 0)
		goto fail;
	size = size_of(ps.nodes, root) + 1;
	if (size > ERE_MAX_INST) {
		fail(&ps, pattern, "counted out it takes more than %d positions "
		    "(nested or large {m,n})", ERE_MAX_INST);
		goto fail;
	}
	if ((re->prog = calloc((size_t)size, sizeof *re->prog)) == NULL) {
		fail(&ps, pattern, "out of memory");
		goto fail;
	}
	e.nodes = ps.nodes;
	e.prog = re->prog;
	e.n = 0;
	emit(&e, root);
	emit1(&e, I_MATCH, 0, 0, 0);
	re->n = e.n;
	re->sets = ps.sets;
	re->n_sets = ps.n_sets;
	free(ps.nodes);
	return 0;
fail:
	free(ps.nodes);
	free(ps.sets);
	free(re->prog);
	memset(re, 0, sizeof *re);
	return -1;
}

void ere_free(struct ere *re)
{
	free(re->prog);
	free(re->sets);
	memset(re, 0, sizeof *re);
}

/* ---- matching: every live instruction once per byte ----------------------- */

struct threads {
	uint16_t *list;
	unsigned n;
};

struct run {
	const struct ere *re;
	const unsigned char *s;
	size_t len;
	uint32_t *mark;            /* the step an instruction was last added in */
	uint16_t *stack;
	uint32_t step;
};

static int assert_holds(const struct run *r, unsigned kind, size_t pos)
{
	int before = pos > 0 && is_word(r->s[pos - 1]);
	int after = pos < r->len && is_word(r->s[pos]);

	switch (kind) {
	case A_BOL:
		return pos == 0;
	case A_EOL:
		return pos == r->len;
	case A_WORDB:
		return before != after;
	case A_NWORDB:
		return before == after;
	case A_WBEG:
		return !before && after;
	default:
		return before && !after;
	}
}

/* Adds pc and what it reaches without reading a byte, at position pos. */
static void add(struct run *r, struct threads *t, unsigned pc, size_t pos)
{
	unsigned sp = 0;

	r->stack[sp++] = (uint16_t)pc;
	while (sp > 0) {
		const struct ere_inst *i;
		pc = r->stack[--sp];
		if (r->mark[pc] == r->step)
			continue;
		r->mark[pc] = r->step;
		i = &r->re->prog[pc];
		switch (i->op) {
		case I_JMP:
			r->stack[sp++] = i->x;
			break;
		case I_SPLIT:
			r->stack[sp++] = i->y;
			r->stack[sp++] = i->x;
			break;
		case I_ASSERT:
			if (assert_holds(r, i->c, pos))
				r->stack[sp++] = (uint16_t)(pc + 1);
			break;
		default:
			t->list[t->n++] = (uint16_t)pc;
		}
	}
}

static int takes(const struct ere *re, const struct ere_inst *i, unsigned char c)
{
	switch (i->op) {
	case I_CHAR:
		return i->c == c;
	case I_ANY:
		return 1;
	case I_SET:
		return (re->sets[i->x][c >> 3] >> (c & 7)) & 1;
	default:
		return 0;
	}
}

/* ERE_STACK_INST: programs this small match without an allocation */
#define ERE_STACK_INST 256

int ere_match(const struct ere *re, const char *s, size_t len)
{
	uint16_t small16[4 * ERE_STACK_INST + 1];
	uint32_t small32[ERE_STACK_INST];
	uint16_t *w16 = small16;
	uint32_t *w32 = small32;
	struct threads cur, next, tmp;
	struct run r = { .re = re, .s = (const unsigned char *)s, .len = len };
	int matched = 0;

	if (re->prog == NULL)
		return 0;
	if (re->n > ERE_STACK_INST) {
		w16 = malloc((4 * (size_t)re->n + 1) * sizeof *w16);
		w32 = calloc(re->n, sizeof *w32);
		if (w16 == NULL || w32 == NULL) {
			free(w16);
			free(w32);
			return 0;
		}
	} else {
		memset(small32, 0, sizeof small32);
	}
	cur.list = w16;
	next.list = w16 + re->n;
	r.stack = w16 + 2 * re->n;     /* 2n + 1: each instruction, once
	                                * marked, pushes at most two */
	r.mark = w32;
	cur.n = next.n = 0;
	r.step = 1;
	add(&r, &cur, 0, 0);
	for (size_t pos = 0; pos < len && cur.n > 0; pos++) {
		r.step++;
		next.n = 0;
		for (unsigned k = 0; k < cur.n; k++) {
			const struct ere_inst *i = &re->prog[cur.list[k]];
			if (takes(re, i, r.s[pos]))
				add(&r, &next, cur.list[k] + 1u, pos + 1);
		}
		tmp = cur;
		cur = next;
		next = tmp;
	}
	for (unsigned k = 0; k < cur.n && !matched; k++)
		matched = re->prog[cur.list[k]].op == I_MATCH;
	if (w16 != small16) {
		free(w16);
		free(w32);
	}
	return matched;
}
