/* SPDX-License-Identifier: Apache-2.0 */
#include "load_conf.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect.h"
#include "jsonw.h"
#include "rng.h"
#include "url.h"
#include "util.h"

int load_conf_init(struct load_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->concurrency = 10;
	c->duration_us = 10 * 1000000ull;
	c->timeout_us = 60 * 1000000ull;
	c->prompt_tokens.min = c->prompt_tokens.max = 100;
	c->max_tokens.min = c->max_tokens.max = 100;
	c->bytes_per_token = 4;
	c->prefix_tokens = 512;
	c->seed = 1;
	c->burstiness = 1;
	c->tls_verify = 1;
	c->trace_speed = 1;
	c->model = strdup("tokentap-load");
	return c->model != NULL ? 0 : -1;
}

void load_conf_free(struct load_conf *c)
{
	free(c->url);
	free(c->path);
	free(c->model);
	free(c->ca_file);
	free(c->sni);
	for (size_t i = 0; i < c->nheaders; i++) {
		free(c->headers[i].name);
		free(c->headers[i].value);
	}
	memset(c, 0, sizeof(*c));
}

/* strdup that keeps NULL. Returns 0, or -1 when out of memory. */
static int dup_or_null(char **dst, const char *src)
{
	*dst = NULL;
	if (src == NULL)
		return 0;
	*dst = strdup(src);
	return *dst != NULL ? 0 : -1;
}

int load_conf_copy(struct load_conf *dst, const struct load_conf *src)
{
	int rc = 0;

	*dst = *src;
	rc |= dup_or_null(&dst->url, src->url);
	rc |= dup_or_null(&dst->path, src->path);
	rc |= dup_or_null(&dst->model, src->model);
	rc |= dup_or_null(&dst->ca_file, src->ca_file);
	rc |= dup_or_null(&dst->sni, src->sni);
	for (size_t i = 0; i < src->nheaders; i++) {
		rc |= dup_or_null(&dst->headers[i].name, src->headers[i].name);
		rc |= dup_or_null(&dst->headers[i].value, src->headers[i].value);
	}
	if (rc != 0) {
		load_conf_free(dst);
		return -1;
	}
	return 0;
}

/* The target (url.h): credentials go in a header, since the URL is
 * printed in the report. */
int load_conf_set_url(struct load_conf *c, const char *url, const char **err)
{
	struct url u;
	char *copy = NULL, *target = NULL;

	if ((*err = url_parse(url, &u)) != NULL)
		return -1;
	if (u.user != NULL) {
		*err = "credentials in the URL are not supported: give an Authorization "
		    "header";
	} else if (asprintf(&target, "%s%s%s", *u.path ? u.path : "/", u.query ? "?" : "",
	    u.query ? u.query : "") < 0) {
		target = NULL;
		*err = "out of memory";
	} else if ((copy = strdup(url)) == NULL) {
		*err = "out of memory";
	}
	if (*err == NULL) {
		free(c->url);
		free(c->path);
		c->url = copy;
		c->path = target;
		snprintf(c->host, sizeof(c->host), "%s", u.host);
		c->port = u.port;
		c->tls = u.tls;
	} else {
		free(target);
	}
	url_free(&u);
	return *err == NULL ? 0 : -1;
}

/* Only text a JSON string takes as it is (jsonw_plain_len), so the model
 * can go into request bodies unescaped. */
int load_conf_set_model(struct load_conf *c, const char *model, const char **err)
{
	size_t len = strlen(model);
	char *m;

	if (len == 0 || len > 200) {
		*err = "the model name must have 1 to 200 characters";
		return -1;
	}
	if (jsonw_plain_len(model, len) != len) {
		*err = "the model name may not hold quotes, backslashes, control "
		    "characters or ill-formed UTF-8";
		return -1;
	}
	m = strdup(model);
	if (m == NULL) {
		*err = "out of memory";
		return -1;
	}
	free(c->model);
	c->model = m;
	return 0;
}

int load_conf_set_dialect(struct load_conf *c, const char *name, const char **err)
{
	int d = dialect_by_name(name);

	if (d < 0) {
		*err = "unknown dialect (auto, openai, openai-responses, anthropic, "
		    "dify, gemini, tgi, ollama, raw)";
		return -1;
	}
	c->dialect = (enum dialect_id)d;
	return 0;
}

/* A decimal number in [0, max]; *end gets the first byte after it. */
static int parse_num(const char *s, uint64_t max, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	*end = s;
	return 0;
}

int load_conf_parse_uint(const char *s, uint64_t max, uint64_t *out,
    const char **err)
{
	const char *end;

	if (parse_num(s, max, out, &end) < 0 || *end != '\0' || *out == 0) {
		*err = "expected a positive whole number";
		return -1;
	}
	return 0;
}

int load_conf_parse_range(const char *s, struct load_range *r, const char **err)
{
	uint64_t lo, hi;
	const char *end;

	*err = "expected N or MIN-MAX (whole numbers, MIN <= MAX)";
	if (parse_num(s, LOAD_CONF_MAX_TOKENS, &lo, &end) < 0)
		return -1;
	hi = lo;
	if (*end == '-' && parse_num(end + 1, LOAD_CONF_MAX_TOKENS, &hi, &end) < 0)
		return -1;
	if (*end != '\0' || hi < lo || hi == 0)
		return -1;
	r->min = (uint32_t)lo;
	r->max = (uint32_t)hi;
	return 0;
}

int load_conf_parse_rate(const char *s, double *out, const char **err)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0 ||
	    v > 1e6) {
		*err = "expected a rate in requests per second (above 0, up to 1e6)";
		return -1;
	}
	*out = v;
	return 0;
}

int load_conf_set_arrivals(struct load_conf *c, const char *s, const char **err)
{
	if (strcmp(s, "poisson") == 0) {
		c->arrivals = LOAD_ARR_POISSON;
	} else if (strcmp(s, "constant") == 0 || strcmp(s, "uniform") == 0) {
		c->arrivals = LOAD_ARR_CONSTANT;
	} else if (strcmp(s, "gamma") == 0) {
		c->arrivals = LOAD_ARR_GAMMA;
	} else {
		*err = "arrivals: poisson, constant (or uniform) or gamma";
		return -1;
	}
	return 0;
}

int load_conf_set_burstiness(struct load_conf *c, const char *s, const char **err)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0 ||
	    v > 1000) {
		*err = "expected a number above 0 (1: Poisson, below 1: burstier, "
		    "above 1: more regular), up to 1000";
		return -1;
	}
	c->burstiness = v;
	return 0;
}

const char *load_conf_arrivals_name(const struct load_conf *c)
{
	switch (c->arrivals) {
	case LOAD_ARR_CONSTANT:
		return "constant";
	case LOAD_ARR_GAMMA:
		return "gamma";
	default:
		return "poisson";
	}
}

/* A string option replaced whole. */
static int set_str(char **dst, const char *s, const char **err)
{
	char *v = strdup(s);

	if (v == NULL) {
		*err = "out of memory";
		return -1;
	}
	free(*dst);
	*dst = v;
	return 0;
}

int load_conf_set_ca_file(struct load_conf *c, const char *path, const char **err)
{
	if (*path == '\0') {
		*err = "expected a file name";
		return -1;
	}
	return set_str(&c->ca_file, path, err);
}

int load_conf_set_sni(struct load_conf *c, const char *name, const char **err)
{
	if (*name == '\0' || strlen(name) > 253 || strpbrk(name, " \t\r\n/") != NULL) {
		*err = "expected a host name";
		return -1;
	}
	return set_str(&c->sni, name, err);
}

/* RFC 9110 token characters. */
static int is_tchar(unsigned char ch)
{
	return isalnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

int load_conf_set_header(struct load_conf *c, const char *name,
    const char *value, const char **err)
{
	struct load_header *h = NULL;
	char *n, *v;

	if (*name == '\0') {
		*err = "empty header name";
		return -1;
	}
	for (const char *s = name; *s; s++) {
		if (!is_tchar((unsigned char)*s)) {
			*err = "bad character in header name";
			return -1;
		}
	}
	for (const char *s = value; *s; s++) {
		if (*s == '\r' || *s == '\n') {
			*err = "a header value may not hold CR or LF";
			return -1;
		}
	}
	for (size_t i = 0; i < c->nheaders && h == NULL; i++)
		if (strcasecmp(c->headers[i].name, name) == 0)
			h = &c->headers[i];
	if (h == NULL && c->nheaders == LOAD_CONF_MAX_HEADERS) {
		*err = "too many headers";
		return -1;
	}
	n = strdup(name);
	v = strdup(value);
	if (n == NULL || v == NULL) {
		free(n);
		free(v);
		*err = "out of memory";
		return -1;
	}
	if (h == NULL) {
		h = &c->headers[c->nheaders++];
	} else {
		free(h->name);
		free(h->value);
	}
	h->name = n;
	h->value = v;
	return 0;
}

int load_conf_add_header_line(struct load_conf *c, const char *line,
    const char **err)
{
	const char *colon = strchr(line, ':');
	char name[256];
	size_t n;

	if (colon == NULL || colon == line || (size_t)(colon - line) >= sizeof(name)) {
		*err = "expected \"Name: value\"";
		return -1;
	}
	n = (size_t)(colon - line);
	memcpy(name, line, n);
	name[n] = '\0';
	colon++;
	while (*colon == ' ' || *colon == '\t')
		colon++;
	return load_conf_set_header(c, name, colon, err);
}

enum dialect_id load_conf_dialect(const struct load_conf *c)
{
	if (c->dialect != DIALECT_AUTO)
		return c->dialect;
	if (c->path == NULL)
		return DIALECT_RAW;
	return dialect_for_path(c->path, strlen(c->path));
}

const char *load_conf_header(const struct load_conf *c, const char *name)
{
	for (size_t i = 0; i < c->nheaders; i++)
		if (strcasecmp(c->headers[i].name, name) == 0)
			return c->headers[i].value;
	return NULL;
}

uint32_t load_conf_draw(const struct load_range *r, uint64_t *state)
{
	uint64_t span = (uint64_t)r->max - r->min + 1;

	return r->min + (uint32_t)(rng_next(state) % span);
}
