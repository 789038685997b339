/* SPDX-License-Identifier: Apache-2.0 */
/* JSON documents tokentap-load reads: one line of a JSONL file (a trace,
 * an access log, prompts) or an admin response. A line is checked whole,
 * and a problem is placed at its byte, so the readers can report
 * FILE:LINE:COL; then its members are read by name. */
#ifndef TOKENTAP_LOAD_JSONL_H
#define TOKENTAP_LOAD_JSONL_H

#include <stddef.h>
#include <stdio.h>

struct load_jl_tok;

struct load_jl {
	const char *s;
	size_t len;
	struct load_jl_tok *t;
	int n, cap;
};

/* JSON types, as the readers ask for them. */
enum load_jl_type { LOAD_JL_OBJECT, LOAD_JL_ARRAY, LOAD_JL_STRING, LOAD_JL_OTHER };

void load_jl_init(struct load_jl *j);
void load_jl_free(struct load_jl *j);
/* Tokenizes one JSON value s[0..len) (trailing blanks allowed). Returns 0,
 * or -1 with *at the offset of the problem and *why what it is. */
int load_jl_parse(struct load_jl *j, const char *s, size_t len, size_t *at,
    const char **why);

enum load_jl_type load_jl_type(const struct load_jl *j, int tok);
/* The byte offset where token tok starts (for an error's column). */
size_t load_jl_off(const struct load_jl *j, int tok);
/* The members of object obj: each call gives the next key token after
 * *key (start with -1) and returns 1, or 0 at the end. The value is the
 * token after its key. */
int load_jl_next(const struct load_jl *j, int obj, int *key);
/* The value token of key in object obj, or -1. */
int load_jl_get(const struct load_jl *j, int obj, const char *key);
/* 1 when the key token tok is that name. */
int load_jl_is(const struct load_jl *j, int tok, const char *name);
/* The elements of array arr, like load_jl_next. */
int load_jl_elem(const struct load_jl *j, int arr, int *el);
/* A number; 0, or -1 when tok is not one. */
int load_jl_num(const struct load_jl *j, int tok, double *v);
int load_jl_null(const struct load_jl *j, int tok);
/* A string's text, unescaped, malloc'd (*len set when len is not NULL);
 * NULL when tok is not a string or memory ran out. */
char *load_jl_str(const struct load_jl *j, int tok, size_t *len);

/* Reads path line by line: fn(arg, line, len, lineno) for each line that
 * is not blank; it returns 0 to go on, -1 when it reported a problem (the
 * reading goes on, to report them all, up to max_problems), -2 to stop.
 * Returns 0, or -1 after any problem (or a file that could not be read:
 * reported to err). */
int load_jl_read_file(const char *path, FILE *err, int max_problems,
    int (*fn)(void *arg, const char *line, size_t len, size_t lineno), void *arg);

#endif
