/* The config loader's insides, shared by config.c (life cycle, entry
 * points), config_load.c (the generic walker: problems, scalars, typed keys)
 * and config_schema.c (the table of SPEC §2 and its special rules). Nothing
 * outside config*.c includes this. */
#ifndef TOKENTAP_CONFIG_LOAD_H
#define TOKENTAP_CONFIG_LOAD_H

#include <stdio.h>

#include <yaml.h>

#include "config.h"

#define CONF_PATH_LEN 256

enum conf_ktype {
	CONF_KT_DURATION,    /* uint64_t, µs */
	CONF_KT_SIZE,        /* uint64_t, bytes */
	CONF_KT_UINT,        /* uint64_t */
	CONF_KT_FLOAT,       /* double */
	CONF_KT_BOOL,        /* int */
	CONF_KT_STRING,      /* char *, owned */
	CONF_KT_MAP,         /* struct conf_kv * with its count at n_off */
	CONF_KT_SECTION,     /* a nested mapping filling the struct at off */
	CONF_KT_FUNC,        /* anything else: fn does the work */
};

#define CONF_KF_REQUIRED 0x01
#define CONF_KF_LATE     0x02 /* applied after the mapping's other keys */
#define CONF_KF_OPEN_LO  0x04 /* CONF_KT_FLOAT: flo itself is out of range */
#define CONF_KF_OPEN_HI  0x08
#define CONF_KF_HEADER   0x10 /* header names (map keys, or a string's value) */
#define CONF_KF_SHA256   0x20 /* map values are SHA-256 hex digests */

struct conf_loader;

struct conf_key {
	const char *name;
	enum conf_ktype type;
	unsigned flags;
	size_t off;             /* the field, from the section's base */
	size_t n_off;           /* CONF_KT_MAP: the count field */
	uint64_t lo, hi;        /* DURATION / SIZE / UINT bounds; hi 0: none */
	double flo, fhi;        /* FLOAT bounds */
	const struct conf_section *sub;
	void (*fn)(struct conf_loader *ld, yaml_node_t *v, void *base, const char *path);
};

struct conf_section {
	const struct conf_key *keys;
	size_t n_keys;
	/* cross-key rules, run after the mapping's keys were applied */
	void (*check)(struct conf_loader *ld, yaml_node_t *m, void *base, const char *path);
};

struct conf_err {
	size_t line, col, seq;
	char *msg;
};

struct conf_loader {
	const char *name;       /* the file, as the caller named it */
	const char *text;
	yaml_document_t *doc;
	struct conf *c;
	struct conf_err *errs;
	size_t n_errs, cap_errs;
	size_t n_problems;      /* errs plus those lost to a failed allocation */
	int oom;
};

/* The top-level mapping (config_schema.c). */
extern const struct conf_section conf_top_section;

/* Problems: line and col count from 0, as libyaml's marks do. */
void conf_err_at(struct conf_loader *ld, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define conf_err(ld, node, ...) \
	conf_err_at((ld), (node)->start_mark.line, (node)->start_mark.column, __VA_ARGS__)
void conf_oom(struct conf_loader *ld);
void conf_syntax_error(struct conf_loader *ld, const yaml_parser_t *p, size_t len);
/* Prints the problems in file order to out (may be NULL) and frees them. */
void conf_flush(struct conf_loader *ld, FILE *out);

yaml_node_t *conf_node(struct conf_loader *ld, int id);
const char *conf_kind(const yaml_node_t *n);
int conf_is_null(const yaml_node_t *n);
yaml_node_t *conf_map_find(struct conf_loader *ld, yaml_node_t *m, const char *name);
int conf_is_list(struct conf_loader *ld, yaml_node_t *v, const char *path, const char *what);
/* A scalar's text with ${NAME} expanded, as a new string; NULL after
 * reporting a problem ("want" names the expected value, for a list or
 * mapping found instead). */
char *conf_scalar(struct conf_loader *ld, yaml_node_t *n, const char *path, const char *want);
int conf_parse_uint(const char *s, uint64_t *out);

/* Allocation that records "out of memory" as a problem. */
void *conf_grow(struct conf_loader *ld, void *arr, size_t n, size_t size);
char *conf_strdup(struct conf_loader *ld, const char *s);

void conf_convert(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *v,
    const char *s, void *field, const char *path);
void conf_apply_value(struct conf_loader *ld, const struct conf_key *k, yaml_node_t *v,
    void *base, const char *path);
void conf_apply_mapping(struct conf_loader *ld, yaml_node_t *m, const struct conf_section *sec,
    void *base, const char *path);
void conf_apply_list(struct conf_loader *ld, yaml_node_t *v, const char *path, void **arr,
    size_t *n, size_t size, const struct conf_section *sec,
    void (*init)(struct conf_loader *ld, void *item));

/* Frees c's listen entries (config.c). */
void conf_listen_free(struct conf *c);

#endif
