/* SPDX-License-Identifier: Apache-2.0 */
/* The table-driven YAML reader (yconf.h): it walks libyaml's node tree
 * along a table of keys, converts and range-checks each value, expands
 * ${NAME}, and collects every problem with its position instead of
 * stopping at the first. */
#include "yconf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* ---- problems ---------------------------------------------------------- */

void yconf_oom(struct yconf *ld)
{
	ld->oom = 1;
	ld->n_problems++;
}

void yconf_err_at(struct yconf *ld, size_t line, size_t col, const char *fmt, ...)
{
	struct yconf_problem *e;
	va_list ap;
	int n;

	ld->n_problems++;
	if (ld->n_listed == ld->cap_listed) {
		size_t cap = ld->cap_listed ? 2 * ld->cap_listed : 16;
		e = realloc(ld->problems, cap * sizeof *e);
		if (e == NULL) {
			ld->oom = 1;
			return;
		}
		ld->problems = e;
		ld->cap_listed = cap;
	}
	e = &ld->problems[ld->n_listed];
	va_start(ap, fmt);
	n = vasprintf(&e->msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		ld->oom = 1;
		return;
	}
	e->line = line + 1;
	e->col = col + 1;
	e->seq = ld->n_listed++;
}

static int err_cmp(const void *a, const void *b)
{
	const struct yconf_problem *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : 1;
}

/* Prints the problems in file order: routes are read last (they inherit the
 * global sections), so discovery order is not file order. */
size_t yconf_finish(struct yconf *ld, FILE *out)
{
	size_t n = ld->n_problems;

	if (ld->n_listed > 0)
		qsort(ld->problems, ld->n_listed, sizeof *ld->problems, err_cmp);
	for (size_t i = 0; i < ld->n_listed; i++) {
		if (out != NULL)
			fprintf(out, "%s:%zu:%zu: %s\n", ld->name, ld->problems[i].line,
			    ld->problems[i].col, ld->problems[i].msg);
		free(ld->problems[i].msg);
	}
	if (ld->oom && out != NULL)
		fprintf(out, "%s:1:1: out of memory\n", ld->name);
	free(ld->problems);
	ld->problems = NULL;
	ld->n_listed = ld->cap_listed = 0;
	ld->n_problems = 0;
	ld->oom = 0;
	return n;
}

/* ---- nodes and scalars --------------------------------------------------- */

yaml_node_t *yconf_node(struct yconf *ld, int id)
{
	return yaml_document_get_node(ld->doc, id);
}

const char *yconf_kind(const yaml_node_t *n)
{
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	return "a single value";
}

/* An empty value (`key:`) or ~ / null: "as if absent" for sections, lists
 * and optional strings, so a section whose keys are all commented out works. */
int yconf_is_null(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	return *v == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	    strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static int env_name_ok(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9')))
			return 0;
	}
	return 1;
}

/* ${NAME} is replaced in one pass: a variable's value is never expanded
 * again, so it may hold "${" and "$" freely. */
char *yconf_scalar(struct yconf *ld, yaml_node_t *n, const char *path,
    const char *expected)
{
	const char *s = (const char *)n->data.scalar.value, *p, *end;
	char *out = NULL, *name;
	size_t outlen = 0;
	int bad = 0;
	FILE *f;

	if (n->type != YAML_SCALAR_NODE) {
		yconf_err(ld, n, "%s: expected %s, got %s", path, expected, yconf_kind(n));
		return NULL;
	}
	if (memchr(s, '\0', n->data.scalar.length) != NULL) {
		yconf_err(ld, n, "%s: contains a NUL character", path);
		return NULL;
	}
	if (!(ld->flags & YCONF_EXPAND_ENV)) {
		out = strdup(s);
		if (out == NULL)
			yconf_oom(ld);
		return out;
	}
	f = open_memstream(&out, &outlen);
	if (f == NULL) {
		yconf_oom(ld);
		return NULL;
	}
	while ((p = strstr(s, "${")) != NULL) {
		fwrite(s, 1, (size_t)(p - s), f);
		end = strchr(p + 2, '}');
		if (end == NULL) {
			yconf_err(ld, n, "%s: unterminated '${' (expected ${NAME})", path);
			bad = 1;
			s = p + strlen(p);
			break;
		}
		name = strndup(p + 2, (size_t)(end - p - 2));
		if (name == NULL) {
			yconf_oom(ld);
			bad = 1;
		} else if (!env_name_ok(name, strlen(name))) {
			yconf_err(ld, n, "%s: '${%.64s}' is not a valid environment variable "
			    "name", path, name);
			bad = 1;
		} else if (getenv(name) == NULL) {
			yconf_err(ld, n, "%s: environment variable %s is not set", path, name);
			bad = 1;
		} else {
			fputs(getenv(name), f);
		}
		free(name);
		s = end + 1;
	}
	fputs(s, f);
	if (fclose(f) != 0 && !bad) {
		yconf_oom(ld);
		bad = 1;
	}
	if (bad) {
		free(out);
		return NULL;
	}
	return out;
}

/* The value node of key name in mapping m, or NULL. */
yaml_node_t *yconf_map_find(struct yconf *ld, yaml_node_t *m, const char *name)
{
	if (m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	    p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yconf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((char *)k->data.scalar.value, name) == 0)
			return yconf_node(ld, p->value);
	}
	return NULL;
}

static const char *in_path(const char *path)
{
	return *path ? " in " : "";
}

/* The key of pair p as text; NULL (reported unless quiet) when it is not a
 * scalar or repeats an earlier key of the mapping. */
static const char *pair_key(struct yconf *ld, yaml_node_t *m, yaml_node_pair_t *p,
    const char *path, int icase, int quiet)
{
	yaml_node_t *k = yconf_node(ld, p->key);
	const char *name = (const char *)k->data.scalar.value;

	if (k->type != YAML_SCALAR_NODE) {
		if (!quiet)
			yconf_err(ld, k, "expected a key name%s%s, got %s", in_path(path), path,
			    yconf_kind(k));
		return NULL;
	}
	for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
		yaml_node_t *e = yconf_node(ld, q->key);
		const char *prev = (const char *)e->data.scalar.value;
		if (e->type != YAML_SCALAR_NODE)
			continue;
		if (icase ? strcasecmp(prev, name) != 0 : strcmp(prev, name) != 0)
			continue;
		if (!quiet)
			yconf_err(ld, k, "duplicate key '%.64s'%s%s (first at line %zu)", name,
			    in_path(path), path, e->start_mark.line + 1);
		return NULL;
	}
	return name;
}

/* RFC 9110 token. */
static int is_token(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s; s++)
		if (!util_is_tchar((unsigned char)*s))
			return 0;
	return 1;
}

void *yconf_grow(struct yconf *ld, void *arr, size_t n, size_t size)
{
	char *p = realloc(arr, (n + 1) * size);
	if (p == NULL) {
		yconf_oom(ld);
		return NULL;
	}
	memset(p + n * size, 0, size);
	return p;
}

char *yconf_strdup(struct yconf *ld, const char *s)
{
	char *d = strdup(s);
	if (d == NULL)
		yconf_oom(ld);
	return d;
}

int yconf_is_list(struct yconf *ld, yaml_node_t *v, const char *path, const char *what)
{
	if (v->type == YAML_SEQUENCE_NODE)
		return 1;
	yconf_err(ld, v, "%s: expected a list of %s, got %s", path, what, yconf_kind(v));
	return 0;
}

/* ---- typed values ---------------------------------------------------- */

static const char *want(const struct yconf_key *k)
{
	switch (k->type) {
	case YCONF_DURATION: return "a duration like 1500ms, 2s, 1m";
	case YCONF_SIZE: return "a size like 4096, 16k, 1m";
	case YCONF_UINT: return "a whole number";
	case YCONF_FLOAT: return "a number";
	case YCONF_BOOL: return "true or false";
	case YCONF_MAP: return "a mapping of names to strings";
	case YCONF_SECTION: return "a mapping";
	default: return "a string";
	}
}

int yconf_parse_uint(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int parse_float(const char *s, double *out)
{
	char *end;
	*out = strtod(s, &end);
	return end == s || *end != '\0' || !isfinite(*out) ? -1 : 0;
}

static int parse_bool(const char *s, int *out)
{
	if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 || strcasecmp(s, "on") == 0)
		*out = 1;
	else if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
	    strcasecmp(s, "off") == 0)
		*out = 0;
	else
		return -1;
	return 0;
}

int yconf_convert(struct yconf *ld, const struct yconf_key *k, yaml_node_t *v,
    const char *s, void *field, const char *path)
{
	uint64_t u = 0;
	double d = 0;
	int b = 0, rc;

	switch (k->type) {
	case YCONF_DURATION: rc = util_parse_duration_us(s, &u); break;
	case YCONF_SIZE: rc = util_parse_size(s, &u); break;
	case YCONF_UINT: rc = yconf_parse_uint(s, &u); break;
	case YCONF_FLOAT: rc = parse_float(s, &d); break;
	default: rc = parse_bool(s, &b); break;
	}
	if (rc != 0) {
		yconf_err(ld, v, "%s: expected %s, got '%.64s'", path, want(k), s);
		return -1;
	}
	if (k->type == YCONF_BOOL) {
		*(int *)field = b;
	} else if (k->type == YCONF_FLOAT) {
		if (d < k->flo || d > k->fhi || ((k->flags & YCONF_OPEN_LO) && d == k->flo) ||
		    ((k->flags & YCONF_OPEN_HI) && d == k->fhi)) {
			yconf_err(ld, v, "%s: %s is out of range %c%g, %g%c", path, s,
			    k->flags & YCONF_OPEN_LO ? '(' : '[', k->flo, k->fhi,
			    k->flags & YCONF_OPEN_HI ? ')' : ']');
			return -1;
		}
		*(double *)field = d;
	} else if (k->type == YCONF_DURATION && u < k->lo) {
		yconf_err(ld, v, "%s: must be greater than 0", path);
		return -1;
	} else if (u < k->lo || (k->hi != 0 && u > k->hi)) {
		if (k->hi != 0)
			yconf_err(ld, v, "%s: %s is out of range [%llu, %llu]", path, s,
			    (unsigned long long)k->lo, (unsigned long long)k->hi);
		else
			yconf_err(ld, v, "%s: %s is below the minimum %llu", path, s,
			    (unsigned long long)k->lo);
		return -1;
	} else {
		*(uint64_t *)field = u;
	}
	return 0;
}

static int no_line_break(struct yconf *ld, yaml_node_t *v, const char *s,
    const char *path)
{
	if (strpbrk(s, "\r\n") == NULL)
		return 1;
	yconf_err(ld, v, "%s: must not contain CR or LF", path);
	return 0;
}

/* A header's value (RFC 9110 §5.5: visible characters, space and tab):
 * CR and LF would split the head, NUL cut it where it is sent, the other
 * control characters and DEL are refused by peers, or worse, taken. The
 * value is never echoed: it is often a credential. */
static int header_value_ok(struct yconf *ld, yaml_node_t *v, const char *s,
    const char *path)
{
	if (!no_line_break(ld, v, s, path))
		return 0;
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
			yconf_err(ld, v, "%s: must not contain a control character (byte "
			    "0x%02X)", path, *p);
			return 0;
		}
	return 1;
}

static void apply_string(struct yconf *ld, const struct yconf_key *k, yaml_node_t *v,
    char **field, const char *path)
{
	char *s;
	if (yconf_is_null(v)) {
		if (k->flags & YCONF_REQUIRED)
			yconf_err(ld, v, "%s: must not be empty", path);
		return;
	}
	s = yconf_scalar(ld, v, path, want(k));
	if (s == NULL)
		return;
	if (*s == '\0')
		yconf_err(ld, v, "%s: must not be empty", path);
	else if ((k->flags & YCONF_HEADER) && !is_token(s))
		yconf_err(ld, v, "%s: '%.64s' is not a valid header name", path, s);
	else if (no_line_break(ld, v, s, path)) {
		free(*field);
		*field = s;
		return;
	}
	free(s);
}

/* A mapping of names to strings, in file order to k->put. Values are
 * never echoed in messages: they are often credentials. */
static void apply_map(struct yconf *ld, const struct yconf_key *k, yaml_node_t *m,
    void *base, const char *path)
{
	int header = (k->flags & YCONF_HEADER) != 0;
	char sub[YCONF_PATH_LEN];

	if (m->type != YAML_MAPPING_NODE) {
		yconf_err(ld, m, "%s: expected %s, got %s", path, want(k), yconf_kind(m));
		return;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	    p < m->data.mapping.pairs.top; p++) {
		const char *name = pair_key(ld, m, p, path, header, 0);
		yaml_node_t *v = yconf_node(ld, p->value);
		struct yconf_entry e;
		char *s;

		if (name == NULL)
			continue;
		snprintf(sub, sizeof sub, "%s.%s", path, name);
		if (header && !is_token(name)) {
			yconf_err(ld, yconf_node(ld, p->key), "%s: '%.64s' is not a valid "
			    "header name", path, name);
			continue;
		}
		if (*name == '\0') {
			yconf_err(ld, yconf_node(ld, p->key), "%s: a name must not be empty",
			    path);
			continue;
		}
		s = yconf_is_null(v) ? yconf_strdup(ld, "") : yconf_scalar(ld, v, sub, "a string");
		if (s == NULL)
			continue;
		if (header && !header_value_ok(ld, v, s, sub)) {
			free(s);
			continue;
		}
		e = (struct yconf_entry){ yconf_node(ld, p->key), v, name, s, sub };
		k->put(ld, k, base, &e);
	}
}

int yconf_apply_value(struct yconf *ld, const struct yconf_key *k, yaml_node_t *v,
    void *base, const char *path)
{
	void *field = (char *)base + k->off;
	char *s;
	int rc = -1;

	switch (k->type) {
	case YCONF_SECTION:
		if (!yconf_is_null(v))
			yconf_apply_mapping(ld, v, k->sub, field, path);
		return 0;
	case YCONF_MAP:
		if (!yconf_is_null(v))
			apply_map(ld, k, v, base, path);
		return 0;
	case YCONF_FUNC:
		k->fn(ld, v, field, path);
		return 0;
	case YCONF_STRING:
		apply_string(ld, k, v, field, path);
		return 0;
	default:
		break;
	}
	if (yconf_is_null(v)) {
		yconf_err(ld, v, "%s: expected %s, got an empty value", path, want(k));
		return -1;
	}
	s = yconf_scalar(ld, v, path, want(k));
	if (s != NULL)
		rc = yconf_convert(ld, k, v, s, field, path);
	free(s);
	return rc;
}

/* Keeps in *best the name closest to s so far, when it is close enough to
 * be a "did you mean". */
struct closest {
	const char *name;
	size_t d;
};

static void consider(struct closest *best, const char *s, const char *name)
{
	size_t d = util_edit_distance(s, name);
	if (d < best->d) {
		best->d = d;
		best->name = name;
	}
}

int yconf_enum(struct yconf *ld, yaml_node_t *v, const char *path, const char *what,
    const char *const *names, size_t n)
{
	char *s = yconf_is_null(v) ? NULL : yconf_scalar(ld, v, path, "a name");
	char list[256] = "";
	struct closest best = { NULL, 3 };
	size_t used = 0;
	int found = -1;

	if (yconf_is_null(v))
		yconf_err(ld, v, "%s: expected a %s, got an empty value", path, what);
	if (s == NULL)
		return -1;
	for (size_t i = 0; i < n && found < 0; i++) {
		if (strcmp(s, names[i]) == 0)
			found = (int)i;
		consider(&best, s, names[i]);
		if (used < sizeof list)
			used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
			    i ? ", " : "", names[i]);
	}
	if (found < 0 && best.name != NULL)
		yconf_err(ld, v, "%s: unknown %s '%.64s' (valid: %s); did you mean '%s'?", path,
		    what, s, list, best.name);
	else if (found < 0)
		yconf_err(ld, v, "%s: unknown %s '%.64s' (valid: %s)", path, what, s, list);
	free(s);
	return found;
}

static void unknown_key(struct yconf *ld, yaml_node_t *kn,
    const struct yconf_section *sec, const char *name, const char *path)
{
	struct closest best = { NULL, 3 };

	for (size_t i = 0; i < sec->n_keys; i++)
		consider(&best, name, sec->keys[i].name);
	if (best.name != NULL)
		yconf_err(ld, kn, "unknown key '%.64s'%s%s; did you mean '%s'?", name,
		    in_path(path), path, best.name);
	else
		yconf_err(ld, kn, "unknown key '%.64s'%s%s", name, in_path(path), path);
}

/* YCONF_LATE keys are applied in a second pass, so the routes can inherit
 * the global timeouts and thresholds wherever those appear in the file. */
void yconf_apply_mapping(struct yconf *ld, yaml_node_t *m,
    const struct yconf_section *sec, void *base, const char *path)
{
	char sub[YCONF_PATH_LEN];

	if (m->type != YAML_MAPPING_NODE) {
		yconf_err(ld, m, "%s: expected a mapping, got %s", path, yconf_kind(m));
		return;
	}
	for (int late = 0; late < 2; late++) {
		for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
		    p < m->data.mapping.pairs.top; p++) {
			const char *name = pair_key(ld, m, p, path, 0, late);
			const struct yconf_key *k = NULL;

			if (name == NULL)
				continue;
			for (size_t i = 0; i < sec->n_keys && k == NULL; i++)
				if (strcmp(sec->keys[i].name, name) == 0)
					k = &sec->keys[i];
			if (k == NULL) {
				if (!late)
					unknown_key(ld, yconf_node(ld, p->key), sec, name, path);
				continue;
			}
			if (!(k->flags & YCONF_LATE) != !late)
				continue;
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", name);
			yconf_apply_value(ld, k, yconf_node(ld, p->value), base, sub);
		}
	}
	for (size_t i = 0; i < sec->n_keys; i++) {
		const struct yconf_key *k = &sec->keys[i];
		if ((k->flags & YCONF_REQUIRED) && yconf_map_find(ld, m, k->name) == NULL)
			yconf_err(ld, m, "missing required key '%s'%s%s", k->name,
			    in_path(path), path);
	}
	if (sec->check != NULL)
		sec->check(ld, m, base, path);
}

/* Each item of list v becomes one element of *arr; init fills its defaults. */
void yconf_apply_list(struct yconf *ld, yaml_node_t *v, const char *path, void **arr,
    size_t *n, size_t size, const struct yconf_section *sec,
    void (*init)(struct yconf *ld, void *item))
{
	char sub[YCONF_PATH_LEN];

	for (yaml_node_item_t *it = v->data.sequence.items.start;
	    it < v->data.sequence.items.top; it++) {
		char *p = yconf_grow(ld, *arr, *n, size);
		if (p == NULL)
			return;
		*arr = p;
		p += (*n)++ * size;
		if (init != NULL)
			init(ld, p);
		snprintf(sub, sizeof sub, "%s[%zu]", path, *n - 1);
		yconf_apply_mapping(ld, yconf_node(ld, *it), sec, p, sub);
	}
}

/* ---- documents ----------------------------------------------------------- */

static void syntax_error(struct yconf *ld, const yaml_parser_t *p, size_t len)
{
	size_t line = p->problem_mark.line, col = p->problem_mark.column;

	if (p->error == YAML_MEMORY_ERROR) {
		yconf_oom(ld);
		return;
	}
	/* A reader (encoding) error has no mark, only a byte offset. */
	if (p->error == YAML_READER_ERROR) {
		line = col = 0;
		for (size_t i = 0; i < p->problem_offset && i < len; i++, col++)
			if (ld->text[i] == '\n') {
				line++;
				col = (size_t)-1;
			}
	}
	if (p->context != NULL)
		yconf_err_at(ld, line, col, "YAML syntax error: %s (%s at line %zu, column %zu)",
		    p->problem ? p->problem : "?", p->context, p->context_mark.line + 1,
		    p->context_mark.column + 1);
	else
		yconf_err_at(ld, line, col, "YAML syntax error: %s",
		    p->problem ? p->problem : "?");
}

/* One document: a second one is a mistake (a stray "---"). */
static int load_documents(struct yconf *ld, yaml_parser_t *parser,
    const struct yconf_section *top, void *base)
{
	yaml_document_t doc;
	yaml_node_t *root;
	int walked = 0;

	if (!yaml_parser_load(parser, &doc)) {
		syntax_error(ld, parser, ld->len);
		return 0;
	}
	ld->doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (root != NULL && root->type == YAML_MAPPING_NODE) {
		yconf_apply_mapping(ld, root, top, base, "");
		walked = 1;
	} else if (root != NULL && !yconf_is_null(root)) {
		yconf_err(ld, root, "expected a mapping of settings at the top level, got %s",
		    yconf_kind(root));
	}
	yaml_document_delete(&doc);
	ld->doc = NULL;
	if (root == NULL)
		return walked;
	if (!yaml_parser_load(parser, &doc)) {
		syntax_error(ld, parser, ld->len);
		return walked;
	}
	root = yaml_document_get_root_node(&doc);
	if (root != NULL)
		yconf_err(ld, root, "only one YAML document is allowed");
	yaml_document_delete(&doc);
	return walked;
}

int yconf_parse(struct yconf *ld, const char *text, size_t len,
    const struct yconf_section *top, void *base)
{
	yaml_parser_t parser;
	int walked;

	if (!yaml_parser_initialize(&parser)) {
		yconf_oom(ld);
		return 0;
	}
	ld->text = text;
	ld->len = len;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	walked = load_documents(ld, &parser, top, base);
	yaml_parser_delete(&parser);
	return walked;
}

/* The whole file in memory: a reader error's place is a byte offset. */
static char *read_file(struct yconf *ld, size_t *len)
{
	FILE *f = fopen(ld->name, "rb"), *mem;
	char *text = NULL, buf[8192];
	size_t n;
	int err;

	*len = 0;
	if (f == NULL) {
		yconf_err_at(ld, 0, 0, "cannot open: %s", strerror(errno));
		return NULL;
	}
	mem = open_memstream(&text, len);
	if (mem == NULL) {
		yconf_oom(ld);
		fclose(f);
		return NULL;
	}
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, mem);
	err = ferror(f) ? errno : 0;
	if (fclose(mem) != 0 && err == 0)
		err = ENOMEM;
	fclose(f);
	if (err != 0) {
		yconf_err_at(ld, 0, 0, "cannot read: %s", strerror(err));
		free(text);
		return NULL;
	}
	return text;
}

int yconf_parse_file(struct yconf *ld, const struct yconf_section *top, void *base)
{
	size_t len;
	char *text = read_file(ld, &len);
	int walked;

	if (text == NULL)
		return 0;
	walked = yconf_parse(ld, text, len, top, base);
	ld->text = NULL;
	free(text);
	return walked;
}
