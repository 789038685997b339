/* SPDX-License-Identifier: Apache-2.0 */
/* A table-driven reader of YAML settings files, shared by tokentap's
 * config (src/proxy/config_schema.c holds its tables) and tokentap-load's
 * scenario files (src/load/load_scen.c). libyaml loads the document; each
 * mapping is walked along a table of keys (name, type, flags, bounds, a
 * function for what needs code, a check of the whole mapping); values are
 * converted and range-checked; every problem is collected with its place
 * and printed in file order as FILE:LINE:COL: message, an unknown key with
 * the closest known one ("did you mean"). A message names the key by its
 * path from the top, "routes[0].upstream". */
#ifndef TOKENTAP_YCONF_H
#define TOKENTAP_YCONF_H

#include <stdint.h>
#include <stdio.h>

#include <yaml.h>

#define YCONF_PATH_LEN 256

enum yconf_type {
	YCONF_DURATION,      /* uint64_t, µs */
	YCONF_SIZE,          /* uint64_t, bytes */
	YCONF_UINT,          /* uint64_t */
	YCONF_FLOAT,         /* double */
	YCONF_BOOL,          /* int */
	YCONF_STRING,        /* char *, owned */
	YCONF_MAP,           /* a mapping of names to strings: put takes each */
	YCONF_SECTION,       /* a nested mapping filling the struct at off */
	YCONF_FUNC,          /* anything else: fn does the work */
};

/* Key flags. */
#define YCONF_REQUIRED 0x01
#define YCONF_LATE     0x02 /* applied after the mapping's other keys */
#define YCONF_OPEN_LO  0x04 /* YCONF_FLOAT: flo itself is out of range */
#define YCONF_OPEN_HI  0x08
#define YCONF_HEADER   0x10 /* header names (map keys, or a string's value) */

/* Reader flags. */
#define YCONF_EXPAND_ENV 0x01 /* ${NAME} in a value is the environment's */

struct yconf;
struct yconf_key;

/* One entry of a YCONF_MAP mapping, its name checked (a string, not
 * empty, not repeated, a header name under YCONF_HEADER) and its value
 * read (expanded; "" for an empty one). */
struct yconf_entry {
	yaml_node_t *key, *value;
	const char *name;
	char *text;             /* put owns it */
	const char *path;       /* "set_headers.Authorization" */
};

struct yconf_key {
	const char *name;
	enum yconf_type type;
	unsigned flags;
	size_t off;             /* the field (FUNC: what fn gets), from the base */
	size_t n_off;           /* a second field, for put (a count) */
	uint64_t lo, hi;        /* DURATION / SIZE / UINT bounds; hi 0: none */
	double flo, fhi;        /* FLOAT bounds */
	const struct yconf_section *sub;
	void (*fn)(struct yconf *ld, yaml_node_t *v, void *field, const char *path);
	void (*put)(struct yconf *ld, const struct yconf_key *k, void *base,
	    struct yconf_entry *e);
};

struct yconf_section {
	const struct yconf_key *keys;
	size_t n_keys;
	/* cross-key rules, run after the mapping's keys were applied */
	void (*check)(struct yconf *ld, yaml_node_t *m, void *base, const char *path);
};

struct yconf_problem {
	size_t line, col, seq;
	char *msg;
};

/* A reader: the caller sets name, flags and user, then calls yconf_parse
 * or yconf_parse_file, then yconf_finish. */
struct yconf {
	const char *name;       /* the file, as the caller named it */
	unsigned flags;
	void *user;             /* the caller's */
	const char *text;
	size_t len;
	yaml_document_t *doc;
	struct yconf_problem *problems;
	size_t n_listed, cap_listed;
	size_t n_problems;      /* the listed ones and those lost to a failed
	                         * allocation */
	int oom;
};

/* Loads text, one YAML document, and applies its top-level mapping to base
 * along top. An empty document sets nothing. Returns 1 when there was a
 * top-level mapping, else 0 (a problem was recorded if it was not empty). */
int yconf_parse(struct yconf *ld, const char *text, size_t len,
    const struct yconf_section *top, void *base);
/* The same for the file ld->name. */
int yconf_parse_file(struct yconf *ld, const struct yconf_section *top, void *base);
/* Prints the problems in file order to out (may be NULL), frees them and
 * returns how many there were (0: the file is good). */
size_t yconf_finish(struct yconf *ld, FILE *out);

/* Problems: line and col count from 0, as libyaml's marks do. */
void yconf_err_at(struct yconf *ld, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define yconf_err(ld, node, ...) \
	yconf_err_at((ld), (node)->start_mark.line, (node)->start_mark.column, __VA_ARGS__)
void yconf_oom(struct yconf *ld);

yaml_node_t *yconf_node(struct yconf *ld, int id);
const char *yconf_kind(const yaml_node_t *n);
/* An empty value (`key:`) or ~ / null: "as if absent". */
int yconf_is_null(const yaml_node_t *n);
yaml_node_t *yconf_map_find(struct yconf *ld, yaml_node_t *m, const char *name);
int yconf_is_list(struct yconf *ld, yaml_node_t *v, const char *path, const char *what);
/* A scalar's text (${NAME} expanded under YCONF_EXPAND_ENV), as a new
 * string; NULL after reporting a problem ("want" names the expected value,
 * for a list or mapping found instead). */
char *yconf_scalar(struct yconf *ld, yaml_node_t *n, const char *path, const char *want);
int yconf_parse_uint(const char *s, uint64_t *out);
/* The index of v's value in names[n], or -1 after reporting it with the
 * valid names and the closest one; what names the kind ("dialect"). */
int yconf_enum(struct yconf *ld, yaml_node_t *v, const char *path, const char *what,
    const char *const *names, size_t n);

/* Allocation that records "out of memory" as a problem. */
void *yconf_grow(struct yconf *ld, void *arr, size_t n, size_t size);
char *yconf_strdup(struct yconf *ld, const char *s);

/* Converts s for a number, duration, size or bool key into its field.
 * Returns 0, or -1 after reporting a problem. */
int yconf_convert(struct yconf *ld, const struct yconf_key *k, yaml_node_t *v,
    const char *s, void *field, const char *path);
/* Applies v to the field of k in base. Returns 0, or -1 when a scalar key
 * reported a problem (sections, maps and FUNC keys return 0). */
int yconf_apply_value(struct yconf *ld, const struct yconf_key *k, yaml_node_t *v,
    void *base, const char *path);
void yconf_apply_mapping(struct yconf *ld, yaml_node_t *m, const struct yconf_section *sec,
    void *base, const char *path);
/* Each item of list v becomes one element of *arr; init fills its defaults. */
void yconf_apply_list(struct yconf *ld, yaml_node_t *v, const char *path, void **arr,
    size_t *n, size_t size, const struct yconf_section *sec,
    void (*init)(struct yconf *ld, void *item));

#endif
