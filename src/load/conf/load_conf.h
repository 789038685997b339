/* SPDX-License-Identifier: Apache-2.0 */
/* The parameters of one tokentap-load run, as the command line or a
 * scenario sets them, and the parsers of their text forms. Pure. */
#ifndef TOKENTAP_LOAD_CONF_H
#define TOKENTAP_LOAD_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "dialect_names.h"

#define LOAD_CONF_MAX_HEADERS 64
#define LOAD_CONF_MAX_TOKENS 1000000u

/* A count drawn per request, uniformly in [min, max]. */
struct load_range {
	uint32_t min, max;
};

struct load_header {
	char *name;
	char *value;
};

/* Open-loop arrivals: the gaps between intended send times. */
enum load_arrivals {
	LOAD_ARR_POISSON,       /* exponential gaps (gamma, shape 1) */
	LOAD_ARR_CONSTANT,      /* every 1/rate ("uniform" is its old name) */
	LOAD_ARR_GAMMA          /* gamma gaps, shape = burstiness (vLLM, AIPerf) */
};

/* A think time (load_session.h): constant, uniform in [a, b], or
 * exponential of mean a. */
enum load_think_kind { LOAD_THINK_CONST, LOAD_THINK_UNIFORM, LOAD_THINK_EXP };
struct load_think {
	enum load_think_kind kind;
	uint64_t a_us, b_us;
};

struct load_trace;
struct load_prompts;
struct load_sessions;

struct load_conf {
	char *url;                   /* as given */
	char host[256];              /* without brackets for IPv6 */
	unsigned port;
	char *path;                  /* request target: path and query */
	enum dialect_id dialect;     /* DIALECT_AUTO: from the path */
	char *model;
	unsigned concurrency;        /* closed loop: users; open loop: max connections */
	int concurrency_set;
	double rate;                 /* > 0: open loop, requests per second */
	enum load_arrivals arrivals;
	double burstiness;           /* gamma's shape: 1 Poisson, < 1 burstier */
	uint64_t duration_us;        /* 0: no limit */
	uint64_t count;              /* 0: no limit */
	uint64_t timeout_us;         /* per request, from its (scheduled) start */
	struct load_range prompt_tokens;
	struct load_range max_tokens;
	double bytes_per_token;      /* a synthetic prompt's bytes a token: 4, or
	                              * --bytes-per-token, or --calibrate's */
	struct load_header headers[LOAD_CONF_MAX_HEADERS];
	size_t nheaders;
	uint64_t seed;
	uint64_t ramp_us;            /* closed loop: users start spread over this */
	int lag;                     /* time the events of tokentap-mock --stamp */
	uint64_t warmup_us;          /* requests sent this long after the start, */
	uint64_t warmup_count;       /* or the first this many, are in no figure */
	int cooldown;                /* after the window, keep the load on until
	                              * its last request ended (in no figure) */
	int continuous_usage;        /* ask for a usage on every chunk (OpenAI) */
	/* --prefixes: each request's prompt opens with one of P shared
	 * prefixes of prefix_tokens, drawn uniformly or by zipf (load_prefix.h) */
	uint32_t prefixes;           /* 0: none */
	uint32_t prefix_tokens;
	double prefix_zipf;          /* 0: uniform, else zipf's exponent S */
	/* --shard I/N: this process sends the plan's requests I, I + N, ...
	 * (load_shard.h); shards 0: the whole plan */
	uint32_t shard, shards;
	/* https */
	int tls;                     /* from the URL */
	int tls_verify;              /* check the certificate (default on) */
	char *ca_file;               /* NULL: the system store */
	char *sni;                   /* NULL: the URL's host */
	/* borrowed: owned by the caller, outlive the run */
	const struct load_trace *trace;      /* open loop from a trace */
	double trace_speed;          /* > 1 replays faster */
	const struct load_prompts *prompts;  /* prompt texts, else synthetic */
	/* conversations (load_session.h): each user holds sessions of turns
	 * (min 0: none), a think time between them; or replays these */
	struct load_range turns;
	struct load_think think;
	const struct load_sessions *sessions;
};

/* Defaults: 10 users, 10 s, timeout 60 s, 100 prompt / 100 output tokens. */
int load_conf_init(struct load_conf *c);
void load_conf_free(struct load_conf *c);
/* A deep copy; dst is overwritten. Returns 0 or -1. */
int load_conf_copy(struct load_conf *dst, const struct load_conf *src);

/* The setters below return 0, or -1 with *err naming the problem. */
/* "http[s]://host[:port][/path]" */
int load_conf_set_url(struct load_conf *c, const char *url, const char **err);
int load_conf_set_model(struct load_conf *c, const char *model, const char **err);
int load_conf_set_dialect(struct load_conf *c, const char *name, const char **err);
/* "N" or "MIN-MAX" */
int load_conf_parse_range(const char *s, struct load_range *r, const char **err);
/* Replaces a header of the same name (case-insensitive) or adds one. */
int load_conf_set_header(struct load_conf *c, const char *name,
    const char *value, const char **err);
/* "Name: value" */
int load_conf_add_header_line(struct load_conf *c, const char *line,
    const char **err);
/* A positive integer up to max. */
int load_conf_parse_uint(const char *s, uint64_t max, uint64_t *out,
    const char **err);
/* A positive number (requests per second). */
int load_conf_parse_rate(const char *s, double *out, const char **err);
/* poisson | constant | uniform | gamma */
int load_conf_set_arrivals(struct load_conf *c, const char *s, const char **err);
/* The gamma shape: a number above 0 (1 is Poisson). */
int load_conf_set_burstiness(struct load_conf *c, const char *s, const char **err);
int load_conf_set_ca_file(struct load_conf *c, const char *path, const char **err);
int load_conf_set_sni(struct load_conf *c, const char *name, const char **err);
/* The arrivals for people and the JSON: "poisson", "constant", "gamma". */
const char *load_conf_arrivals_name(const struct load_conf *c);

/* Uniform in [r->min, r->max], from rng.h's generator. */
uint32_t load_conf_draw(const struct load_range *r, uint64_t *state);

/* The dialect requests are written and measured in: the configured one, or
 * the one the path implies (raw where nothing matches). */
enum dialect_id load_conf_dialect(const struct load_conf *c);
/* The header named name, or NULL. */
const char *load_conf_header(const struct load_conf *c, const char *name);

#endif
