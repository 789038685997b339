/* The generic half of the config loader: it walks libyaml's node tree
 * along a table of keys (config_load.h), converts and range-checks each
 * value, expands ${NAME}, and collects every problem with its position
 * instead of stopping at the first. */
#include "config_load.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* ---- problems ---------------------------------------------------------- */

void conf_oom(struct conf_loader *ld)
{
	ld->oom = 1;
	ld->n_problems++;
}

void conf_err_at(struct conf_loader *ld, size_t line, size_t col, const char *fmt, ...)
{
	struct conf_err *e;
	va_list ap;
	int n;

	ld->n_problems++;
	if (ld->n_errs == ld->cap_errs) {
		size_t cap = ld->cap_errs ? 2 * ld->cap_errs : 16;
		e = realloc(ld->errs, cap * sizeof *e);
		if (e == NULL) {
			ld->oom = 1;
			return;
		}
		ld->errs = e;
		ld->cap_errs = cap;
	}
	e = &ld->errs[ld->n_errs];
	va_start(ap, fmt);
	n = vasprintf(&e->msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		ld->oom = 1;
		return;
	}
	e->line = line + 1;
	e->col = col + 1;
	e->seq = ld->n_errs++;
}

static int err_cmp(const void *a, const void *b)
{
	const struct conf_err *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : 1;
}

/* Prints the problems in file order: routes are read last (they inherit the
 * global sections), so discovery order is not file order. */
void conf_flush(struct conf_loader *ld, FILE *out)
{
	if (ld->n_errs > 0)
		qsort(ld->errs, ld->n_errs, sizeof *ld->errs, err_cmp);
	for (size_t i = 0; i < ld->n_errs; i++) {
		if (out != NULL)
			fprintf(out, "%s:%zu:%zu: %s\n", ld->name, ld->errs[i].line,
			    ld->errs[i].col, ld->errs[i].msg);
		free(ld->errs[i].msg);
	}
	if (ld->oom && out != NULL)
		fprintf(out, "%s:1:1: out of memory\n", ld->name);
	free(ld->errs);
	ld->errs = NULL;
	ld->n_errs = ld->cap_errs = 0;
}

/* ---- nodes and scalars --------------------------------------------------- */

yaml_node_t *conf_node(struct conf_loader *ld, int id)
{
	return yaml_document_get_node(ld->doc, id);
}

const char *conf_kind(const yaml_node_t *n)
{
	if (n->type == YAML_MAPPING_NODE)
		return "a mapping";
	if (n->type == YAML_SEQUENCE_NODE)
		return "a list";
	return "a single value";
}

/* An empty value (`key:`) or ~ / null: "as if absent" for sections, lists
 * and optional strings, so a section whose keys are all commented out works. */
int conf_is_null(const yaml_node_t *n)
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
char *conf_scalar(struct conf_loader *ld, yaml_node_t *n, const char *path,
    const char *expected)
{
	const char *s = (const char *)n->data.scalar.value, *p, *end;
	char *out = NULL, *name;
	size_t outlen = 0;
	int bad = 0;
	FILE *f;

	if (n->type != YAML_SCALAR_NODE) {
		conf_err(ld, n, "%s: expected %s, got %s", path, expected, conf_kind(n));
		return NULL;
	}
	if (memchr(s, '\0', n->data.scalar.length) != NULL) {
		conf_err(ld, n, "%s: contains a NUL character", path);
		return NULL;
	}
	f = open_memstream(&out, &outlen);
	if (f == NULL) {
		conf_oom(ld);
		return NULL;
	}
	while ((p = strstr(s, "${")) != NULL) {
		fwrite(s, 1, (size_t)(p - s), f);
		end = strchr(p + 2, '}');
		if (end == NULL) {
			conf_err(ld, n, "%s: unterminated '${' (expected ${NAME})", path);
			bad = 1;
			s = p + strlen(p);
			break;
		}
		name = strndup(p + 2, (size_t)(end - p - 2));
		if (name == NULL) {
			conf_oom(ld);
			bad = 1;
		} else if (!env_name_ok(name, strlen(name))) {
			conf_err(ld, n, "%s: '${%.64s}' is not a valid environment variable "
			    "name", path, name);
			bad = 1;
		} else if (getenv(name) == NULL) {
			conf_err(ld, n, "%s: environment variable %s is not set", path, name);
			bad = 1;
		} else {
			fputs(getenv(name), f);
		}
		free(name);
		s = end + 1;
	}
	fputs(s, f);
	if (fclose(f) != 0 && !bad) {
		conf_oom(ld);
		bad = 1;
	}
	if (bad) {
		free(out);
		return NULL;
	}
	return out;
}

/* The value node of key name in mapping m, or NULL. */
yaml_node_t *conf_map_find(struct conf_loader *ld, yaml_node_t *m, const char *name)
{
	if (m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	    p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = conf_node(ld, p->key);
		if (k->type == YAML_SCALAR_NODE &&
		    strcmp((char *)k->data.scalar.value, name) == 0)
			return conf_node(ld, p->value);
	}
	return NULL;
}

static const char *in_path(const char *path)
{
	return *path ? " in " : "";
}

/* The key of pair p as text; NULL (reported unless quiet) when it is not a
 * scalar or repeats an earlier key of the mapping. */
static const char *pair_key(struct conf_loader *ld, yaml_node_t *m, yaml_node_pair_t *p,
    const char *path, int icase, int quiet)
{
	yaml_node_t *k = conf_node(ld, p->key);
	const char *name = (const char *)k->data.scalar.value;

	if (k->type != YAML_SCALAR_NODE) {
		if (!quiet)
			conf_err(ld, k, "expected a key name%s%s, got %s", in_path(path), path,
			    conf_kind(k));
		return NULL;
	}
	for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < p; q++) {
		yaml_node_t *e = conf_node(ld, q->key);
		const char *prev = (const char *)e->data.scalar.value;
		if (e->type != YAML_SCALAR_NODE)
			continue;
		if (icase ? strcasecmp(prev, name) != 0 : strcmp(prev, name) != 0)
			continue;
		if (!quiet)
			conf_err(ld, k, "duplicate key '%.64s'%s%s (first at line %zu)", name,
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
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || strchr("!#$%&'*+-.^_`|~", *s) != NULL))
			return 0;
	return 1;
}

void *conf_grow(struct conf_loader *ld, void *arr, size_t n, size_t size)
{
	char *p = realloc(arr, (n + 1) * size);
	if (p == NULL) {
		conf_oom(ld);
		return NULL;
	}
	memset(p + n * size, 0, size);
	return p;
}

char *conf_strdup(struct conf_loader *ld, const char *s)
{
	char *d = strdup(s);
	if (d == NULL)
		conf_oom(ld);
	return d;
}

int conf_is_list(struct conf_loader *ld, yaml_node_t *v, const char *path, const char *what)
{
	if (v->type == YAML_SEQUENCE_NODE)
		return 1;
	conf_err(ld, v, "%s: expected a list of %s, got %s", path, what, conf_kind(v));
	return 0;
}

/* ---- typed values ---------------------------------------------------- */

static const char *want(const struct conf_key *k)
{
	switch (k->type) {
	case CONF_KT_DURATION: return "a duration like 1500ms, 2s, 1m";
	case CONF_KT_SIZE: return "a size like 4096, 16k, 1m";
	case CONF_KT_UINT: return "a whole number";
	case CONF_KT_FLOAT: return "a number";
	case CONF_KT_BOOL: return "true or false";
	case CONF_KT_MAP: return "a mapping of names to strings";
	case CONF_KT_SECTION: return "a mapping";
	default: return "a string";
	}
}

int conf_parse_uint(const char *s, uint64_t *out)
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

/* Converts s for a number, duration, size or bool key into its field. */
void conf_convert(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *v,
    const char *s, void *field, const char *path)
{
	uint64_t u = 0;
	double d = 0;
	int b = 0, rc;

	switch (k->type) {
	case CONF_KT_DURATION: rc = util_parse_duration_us(s, &u); break;
	case CONF_KT_SIZE: rc = util_parse_size(s, &u); break;
	case CONF_KT_UINT: rc = conf_parse_uint(s, &u); break;
	case CONF_KT_FLOAT: rc = parse_float(s, &d); break;
	default: rc = parse_bool(s, &b); break;
	}
	if (rc != 0) {
		conf_err(ld, v, "%s: expected %s, got '%.64s'", path, want(k), s);
		return;
	}
	if (k->type == CONF_KT_BOOL) {
		*(int *)field = b;
	} else if (k->type == CONF_KT_FLOAT) {
		if (d < k->flo || d > k->fhi || ((k->flags & CONF_KF_OPEN_LO) && d == k->flo) ||
		    ((k->flags & CONF_KF_OPEN_HI) && d == k->fhi)) {
			conf_err(ld, v, "%s: %s is out of range %c%g, %g%c", path, s,
			    k->flags & CONF_KF_OPEN_LO ? '(' : '[', k->flo, k->fhi,
			    k->flags & CONF_KF_OPEN_HI ? ')' : ']');
			return;
		}
		*(double *)field = d;
	} else if (k->type == CONF_KT_DURATION && u < k->lo) {
		conf_err(ld, v, "%s: must be greater than 0", path);
	} else if (u < k->lo || (k->hi != 0 && u > k->hi)) {
		if (k->hi != 0)
			conf_err(ld, v, "%s: %s is out of range [%llu, %llu]", path, s,
			    (unsigned long long)k->lo, (unsigned long long)k->hi);
		else
			conf_err(ld, v, "%s: %s is below the minimum %llu", path, s,
			    (unsigned long long)k->lo);
	} else {
		*(uint64_t *)field = u;
	}
}

static int no_line_break(struct conf_loader *ld, yaml_node_t *v, const char *s,
    const char *path)
{
	if (strpbrk(s, "\r\n") == NULL)
		return 1;
	conf_err(ld, v, "%s: must not contain CR or LF", path);
	return 0;
}

static void apply_string(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *v,
    char **field, const char *path)
{
	char *s;
	if (conf_is_null(v)) {
		if (k->flags & CONF_KF_REQUIRED)
			conf_err(ld, v, "%s: must not be empty", path);
		return;
	}
	s = conf_scalar(ld, v, path, want(k));
	if (s == NULL)
		return;
	if (*s == '\0')
		conf_err(ld, v, "%s: must not be empty", path);
	else if ((k->flags & CONF_KF_HEADER) && !is_token(s))
		conf_err(ld, v, "%s: '%.64s' is not a valid header name", path, s);
	else if (no_line_break(ld, v, s, path)) {
		free(*field);
		*field = s;
		return;
	}
	free(s);
}

static int sha256_hex_ok(char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		if (s[n] >= 'A' && s[n] <= 'F')
			s[n] = (char)(s[n] - 'A' + 'a');
		else if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	}
	return n == 64;
}

/* A mapping of names to strings, order kept. Values are never echoed in
 * messages: they are often credentials. */
static void apply_map(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *m,
    void *base, const char *path)
{
	struct conf_kv **arr = (struct conf_kv **)((char *)base + k->off);
	size_t *n = (size_t *)((char *)base + k->n_off);
	int header = (k->flags & CONF_KF_HEADER) != 0;
	char sub[CONF_PATH_LEN];

	if (m->type != YAML_MAPPING_NODE) {
		conf_err(ld, m, "%s: expected %s, got %s", path, want(k), conf_kind(m));
		return;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	    p < m->data.mapping.pairs.top; p++) {
		const char *name = pair_key(ld, m, p, path, header, 0);
		yaml_node_t *v = conf_node(ld, p->value);
		struct conf_kv *kv;
		char *s;

		if (name == NULL)
			continue;
		snprintf(sub, sizeof sub, "%s.%s", path, name);
		if (header && !is_token(name)) {
			conf_err(ld, conf_node(ld, p->key), "%s: '%.64s' is not a valid "
			    "header name", path, name);
			continue;
		}
		if (*name == '\0') {
			conf_err(ld, conf_node(ld, p->key), "%s: a name must not be empty",
			    path);
			continue;
		}
		s = conf_is_null(v) ? conf_strdup(ld, "") : conf_scalar(ld, v, sub, "a string");
		if (s == NULL)
			continue;
		if ((header && !no_line_break(ld, v, s, sub)) ||
		    ((k->flags & CONF_KF_SHA256) && !sha256_hex_ok(s))) {
			if (k->flags & CONF_KF_SHA256)
				conf_err(ld, v, "%s: expected the SHA-256 of the key as 64 hex "
				    "characters", sub);
			free(s);
			continue;
		}
		kv = conf_grow(ld, *arr, *n, sizeof *kv);
		if (kv == NULL || (kv[*n].name = conf_strdup(ld, name)) == NULL) {
			if (kv != NULL)
				*arr = kv;
			free(s);
			continue;
		}
		*arr = kv;
		kv[(*n)++].value = s;
	}
}

void conf_apply_value(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *v,
    void *base, const char *path)
{
	void *field = (char *)base + k->off;
	char *s;

	switch (k->type) {
	case CONF_KT_SECTION:
		if (!conf_is_null(v))
			conf_apply_mapping(ld, v, k->sub, field, path);
		return;
	case CONF_KT_MAP:
		if (!conf_is_null(v))
			apply_map(ld, k, v, base, path);
		return;
	case CONF_KT_FUNC:
		k->fn(ld, v, base, path);
		return;
	case CONF_KT_STRING:
		apply_string(ld, k, v, field, path);
		return;
	default:
		break;
	}
	if (conf_is_null(v)) {
		conf_err(ld, v, "%s: expected %s, got an empty value", path, want(k));
		return;
	}
	s = conf_scalar(ld, v, path, want(k));
	if (s != NULL)
		conf_convert(ld, k, v, s, field, path);
	free(s);
}

static void unknown_key(struct conf_loader *ld, yaml_node_t *kn,
    const struct conf_section *sec, const char *name, const char *path)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (size_t i = 0; i < sec->n_keys; i++) {
		size_t d = util_edit_distance(name, sec->keys[i].name);
		if (d < best_d) {
			best_d = d;
			best = sec->keys[i].name;
		}
	}
	if (best != NULL)
		conf_err(ld, kn, "unknown key '%.64s'%s%s; did you mean '%s'?", name,
		    in_path(path), path, best);
	else
		conf_err(ld, kn, "unknown key '%.64s'%s%s", name, in_path(path), path);
}

/* CONF_KF_LATE keys are applied in a second pass, so the routes can inherit
 * the global timeouts and thresholds wherever those appear in the file. */
void conf_apply_mapping(struct conf_loader *ld, yaml_node_t *m,
    const struct conf_section *sec, void *base, const char *path)
{
	char sub[CONF_PATH_LEN];

	if (m->type != YAML_MAPPING_NODE) {
		conf_err(ld, m, "%s: expected a mapping, got %s", path, conf_kind(m));
		return;
	}
	for (int late = 0; late < 2; late++) {
		for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
		    p < m->data.mapping.pairs.top; p++) {
			const char *name = pair_key(ld, m, p, path, 0, late);
			const struct conf_key *k = NULL;

			if (name == NULL)
				continue;
			for (size_t i = 0; i < sec->n_keys && k == NULL; i++)
				if (strcmp(sec->keys[i].name, name) == 0)
					k = &sec->keys[i];
			if (k == NULL) {
				if (!late)
					unknown_key(ld, conf_node(ld, p->key), sec, name, path);
				continue;
			}
			if (!(k->flags & CONF_KF_LATE) != !late)
				continue;
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", name);
			conf_apply_value(ld, k, conf_node(ld, p->value), base, sub);
		}
	}
	for (size_t i = 0; i < sec->n_keys; i++) {
		const struct conf_key *k = &sec->keys[i];
		if ((k->flags & CONF_KF_REQUIRED) && conf_map_find(ld, m, k->name) == NULL)
			conf_err(ld, m, "missing required key '%s'%s%s", k->name,
			    in_path(path), path);
	}
	if (sec->check != NULL)
		sec->check(ld, m, base, path);
}

/* Each item of list v becomes one element of *arr; init fills its defaults. */
void conf_apply_list(struct conf_loader *ld, yaml_node_t *v, const char *path, void **arr,
    size_t *n, size_t size, const struct conf_section *sec,
    void (*init)(struct conf_loader *ld, void *item))
{
	char sub[CONF_PATH_LEN];

	for (yaml_node_item_t *it = v->data.sequence.items.start;
	    it < v->data.sequence.items.top; it++) {
		char *p = conf_grow(ld, *arr, *n, size);
		if (p == NULL)
			return;
		*arr = p;
		p += (*n)++ * size;
		if (init != NULL)
			init(ld, p);
		snprintf(sub, sizeof sub, "%s[%zu]", path, *n - 1);
		conf_apply_mapping(ld, conf_node(ld, *it), sec, p, sub);
	}
}

void conf_syntax_error(struct conf_loader *ld, const yaml_parser_t *p, size_t len)
{
	size_t line = p->problem_mark.line, col = p->problem_mark.column;

	if (p->error == YAML_MEMORY_ERROR) {
		conf_oom(ld);
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
		conf_err_at(ld, line, col, "YAML syntax error: %s (%s at line %zu, column %zu)",
		    p->problem ? p->problem : "?", p->context, p->context_mark.line + 1,
		    p->context_mark.column + 1);
	else
		conf_err_at(ld, line, col, "YAML syntax error: %s",
		    p->problem ? p->problem : "?");
}
