#include "load_scen.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "util.h"

#define NAME_MAX_LEN 64

struct reader {
	const char *path;
	FILE *err;
	int errors;
	int url_fixed;
	yaml_document_t doc;
};

/* Keys that set a run's parameters, at the top level and in a scenario. */
static const char *const conf_keys[] = {
	"target", "dialect", "model", "concurrency", "rate", "arrivals",
	"duration", "requests", "timeout", "prompt_tokens", "max_tokens",
	"headers", "seed", NULL
};
static const char *const top_keys[] = {"scenarios", NULL};
static const char *const scen_keys[] = {"name", "targets", "baseline", NULL};

static const char *const stat_names[] = {
	[LOAD_S_P50] = "p50", [LOAD_S_P90] = "p90", [LOAD_S_P95] = "p95",
	[LOAD_S_P99] = "p99", [LOAD_S_MEAN] = "mean", [LOAD_S_MAX] = "max",
};
static const char *const metric_names[] = {
	[LOAD_M_TTFT] = "ttft", [LOAD_M_TPOT] = "tpot", [LOAD_M_ITL] = "itl",
};

static void problem(struct reader *rd, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct reader *rd, const yaml_node_t *n, const char *fmt, ...)
{
	va_list ap;

	fprintf(rd->err, "%s:%zu:%zu: ", rd->path,
	    n != NULL ? n->start_mark.line + 1 : 1,
	    n != NULL ? n->start_mark.column + 1 : 1);
	va_start(ap, fmt);
	vfprintf(rd->err, fmt, ap);
	va_end(ap);
	fputc('\n', rd->err);
	rd->errors++;
}

static yaml_node_t *node(struct reader *rd, int idx)
{
	return yaml_document_get_node(&rd->doc, idx);
}

/* The text of a scalar node, or NULL (reported) when n is not one or
 * holds a NUL. */
static const char *scalar(struct reader *rd, const yaml_node_t *n, const char *what)
{
	const char *s;

	if (n->type != YAML_SCALAR_NODE) {
		problem(rd, n, "%s: expected a single value", what);
		return NULL;
	}
	s = (const char *)n->data.scalar.value;
	if (strlen(s) != n->data.scalar.length) {
		problem(rd, n, "%s: NUL character in value", what);
		return NULL;
	}
	return s;
}

static int in_list(const char *const *list, const char *key)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, key) == 0)
			return 1;
	return 0;
}

/* "unknown key", with the closest allowed key when it is close. */
static void unknown_key(struct reader *rd, const yaml_node_t *n, const char *key,
    const char *const *a, const char *const *b)
{
	const char *best = NULL;
	size_t best_d = 3;

	for (int pass = 0; pass < 2; pass++) {
		for (const char *const *k = pass ? b : a; k != NULL && *k; k++) {
			size_t d = util_edit_distance(key, *k);
			if (d < best_d) {
				best_d = d;
				best = *k;
			}
		}
	}
	if (best != NULL)
		problem(rd, n, "unknown key \"%s\" (did you mean \"%s\"?)", key, best);
	else
		problem(rd, n, "unknown key \"%s\"", key);
}

static void conf_error(struct reader *rd, const yaml_node_t *n, const char *key,
    const char *err)
{
	problem(rd, n, "%s: %s", key, err);
}

static void read_headers(struct reader *rd, const yaml_node_t *n,
    struct load_conf *c)
{
	const char *err;

	if (n->type != YAML_MAPPING_NODE) {
		problem(rd, n, "headers: expected a mapping of name: value");
		return;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	    p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(rd, p->key), *v = node(rd, p->value);
		const char *name = scalar(rd, k, "headers"), *value;
		if (name == NULL || (value = scalar(rd, v, name)) == NULL)
			continue;
		if (load_conf_set_header(c, name, value, &err) < 0)
			problem(rd, k, "headers: %s", err);
	}
}

static int read_duration(struct reader *rd, const yaml_node_t *v,
    const char *key, const char *s, uint64_t *out)
{
	if (util_parse_duration_us(s, out) < 0 || *out == 0) {
		problem(rd, v, "%s: expected a duration above 0 (e.g. 500ms, 20s, 2m)",
		    key);
		return -1;
	}
	return 0;
}

/* Which of duration / requests an entry set: a count without a duration
 * runs until the count. */
struct limits_seen {
	int duration, requests;
};

/* One run parameter. Returns 0, or 1 when key is not a run parameter. */
static int conf_key(struct reader *rd, const char *key, const yaml_node_t *v,
    struct load_conf *c, struct limits_seen *seen)
{
	const char *s, *err = NULL;
	uint64_t u;

	if (!in_list(conf_keys, key))
		return 1;
	if (strcmp(key, "headers") == 0) {
		read_headers(rd, v, c);
		return 0;
	}
	if ((s = scalar(rd, v, key)) == NULL)
		return 0;
	if (strcmp(key, "target") == 0) {
		struct load_conf probe;
		if (rd->url_fixed) {
			/* still checked, though the command line's URL is used */
			memset(&probe, 0, sizeof(probe));
			if (load_conf_set_url(&probe, s, &err) < 0)
				conf_error(rd, v, key, err);
			free(probe.url);
			free(probe.path);
		} else if (load_conf_set_url(c, s, &err) < 0) {
			conf_error(rd, v, key, err);
		}
	} else if (strcmp(key, "dialect") == 0) {
		if (load_conf_set_dialect(c, s, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (strcmp(key, "model") == 0) {
		if (load_conf_set_model(c, s, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (strcmp(key, "concurrency") == 0) {
		if (load_conf_parse_uint(s, 100000, &u, &err) < 0) {
			conf_error(rd, v, key, err);
		} else {
			c->concurrency = (unsigned)u;
			c->concurrency_set = 1;
		}
	} else if (strcmp(key, "rate") == 0) {
		/* 0 turns a top-level rate off: closed loop */
		if (strcmp(s, "0") == 0)
			c->rate = 0;
		else if (load_conf_parse_rate(s, &c->rate, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (strcmp(key, "arrivals") == 0) {
		if (load_conf_set_arrivals(c, s, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (strcmp(key, "duration") == 0) {
		seen->duration = 1;
		read_duration(rd, v, key, s, &c->duration_us);
	} else if (strcmp(key, "timeout") == 0) {
		read_duration(rd, v, key, s, &c->timeout_us);
	} else if (strcmp(key, "requests") == 0) {
		seen->requests = 1;
		if (load_conf_parse_uint(s, UINT64_MAX / 10, &c->count, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (strcmp(key, "seed") == 0) {
		if (load_conf_parse_uint(s, UINT64_MAX / 10, &c->seed, &err) < 0)
			conf_error(rd, v, key, err);
	} else if (load_conf_parse_range(s, strcmp(key, "prompt_tokens") == 0 ?
	    &c->prompt_tokens : &c->max_tokens, &err) < 0) {
		conf_error(rd, v, key, err);
	}
	return 0;
}

static void apply_limits(struct load_conf *c, const struct limits_seen *seen)
{
	if (seen->requests && !seen->duration)
		c->duration_us = 0;
}

/* "ttft_p95" and friends; returns 0 or -1. */
static int target_kind(const char *name, struct load_target *t)
{
	if (strcmp(name, "error_rate") == 0) {
		t->metric = LOAD_M_ERROR_RATE;
		t->stat = LOAD_S_RATE;
		return 0;
	}
	if (strcmp(name, "ttft_degradation") == 0 ||
	    strcmp(name, "tpot_degradation") == 0) {
		t->metric = name[1] == 't' ? LOAD_M_TTFT : LOAD_M_TPOT;
		t->stat = LOAD_S_DEGRADATION;
		return 0;
	}
	for (int m = LOAD_M_TTFT; m <= LOAD_M_ITL; m++) {
		size_t n = strlen(metric_names[m]);
		if (strncmp(name, metric_names[m], n) != 0 || name[n] != '_')
			continue;
		for (int s = LOAD_S_P50; s <= LOAD_S_MAX; s++) {
			if (strcmp(name + n + 1, stat_names[s]) == 0) {
				t->metric = (enum load_metric)m;
				t->stat = (enum load_stat)s;
				return 0;
			}
		}
	}
	return -1;
}

/* A fraction: "0.2" or "20%". */
static int parse_fraction(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (end == s || errno != 0 || !isfinite(*out) || *out < 0)
		return -1;
	if (*end == '%') {
		*out /= 100;
		end++;
	}
	return *end == '\0' ? 0 : -1;
}

static void read_target(struct reader *rd, const yaml_node_t *k,
    const yaml_node_t *v, struct load_scenario *sc)
{
	const char *name = scalar(rd, k, "targets"), *s;
	struct load_target t;
	uint64_t us;

	if (name == NULL || (s = scalar(rd, v, name)) == NULL)
		return;
	memset(&t, 0, sizeof(t));
	if (strlen(name) >= sizeof(t.name) || target_kind(name, &t) < 0) {
		problem(rd, k, "unknown target \"%s\" (ttft_p50 .. ttft_p99, "
		    "ttft_mean, ttft_max, the same for tpot and itl, error_rate, "
		    "ttft_degradation, tpot_degradation)", name);
		return;
	}
	strcpy(t.name, name);
	if (t.stat == LOAD_S_RATE || t.stat == LOAD_S_DEGRADATION) {
		if (parse_fraction(s, &t.limit) < 0) {
			problem(rd, v, "%s: expected a fraction (0.2 or 20%%)", name);
			return;
		}
	} else {
		/* a bare number would be seconds: too easy to misread here */
		size_t n = strlen(s);
		if (n == 0 || (s[n - 1] >= '0' && s[n - 1] <= '9') ||
		    util_parse_duration_us(s, &us) < 0) {
			problem(rd, v, "%s: expected a duration with a unit (e.g. 500ms)",
			    name);
			return;
		}
		t.limit = (double)us;
	}
	if (sc->ntargets == LOAD_SCEN_MAX_TARGETS) {
		problem(rd, k, "too many targets (at most %d)", LOAD_SCEN_MAX_TARGETS);
		return;
	}
	for (size_t i = 0; i < sc->ntargets; i++) {
		if (strcmp(sc->targets[i].name, t.name) == 0) {
			problem(rd, k, "target \"%s\" given twice", t.name);
			return;
		}
	}
	sc->targets[sc->ntargets++] = t;
}

static void read_targets(struct reader *rd, const yaml_node_t *n,
    struct load_scenario *sc)
{
	if (n->type != YAML_MAPPING_NODE) {
		problem(rd, n, "targets: expected a mapping, e.g. {ttft_p95: 500ms}");
		return;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	    p < n->data.mapping.pairs.top; p++)
		read_target(rd, node(rd, p->key), node(rd, p->value), sc);
}

static void read_baseline(struct reader *rd, const yaml_node_t *v,
    struct load_scen_file *f, struct load_scenario *sc)
{
	const char *s = scalar(rd, v, "baseline");

	if (s == NULL)
		return;
	sc->baseline = load_scen_find(f, s);
	if (sc->baseline < 0)
		problem(rd, v, "baseline: no scenario \"%s\" before this one", s);
}

static void read_name(struct reader *rd, const yaml_node_t *v,
    struct load_scen_file *f, struct load_scenario *sc)
{
	const char *s = scalar(rd, v, "name");

	if (s == NULL)
		return;
	if (*s == '\0' || strlen(s) > NAME_MAX_LEN) {
		problem(rd, v, "name: 1 to %d characters", NAME_MAX_LEN);
		return;
	}
	if (load_scen_find(f, s) >= 0) {
		problem(rd, v, "name: scenario \"%s\" already defined", s);
		return;
	}
	sc->name = strdup(s);
	if (sc->name == NULL)
		problem(rd, v, "out of memory");
}

/* Reads one list entry into f->v[f->n] (counted only when it has a name). */
static void read_scenario(struct reader *rd, const yaml_node_t *n,
    const struct load_conf *top, struct load_scen_file *f)
{
	struct load_scenario *sc = &f->v[f->n];
	struct limits_seen seen = {0, 0};
	int degradation = 0, named = 0;

	memset(sc, 0, sizeof(*sc));
	sc->baseline = -1;
	if (n->type != YAML_MAPPING_NODE) {
		problem(rd, n, "a scenario is a mapping with at least a name");
		return;
	}
	if (load_conf_copy(&sc->conf, top) < 0) {
		problem(rd, n, "out of memory");
		return;
	}
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	    p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(rd, p->key), *v = node(rd, p->value);
		const char *key = scalar(rd, k, "key");
		if (key == NULL || conf_key(rd, key, v, &sc->conf, &seen) == 0)
			continue;
		if (strcmp(key, "name") == 0) {
			named = 1;
			read_name(rd, v, f, sc);
		} else if (strcmp(key, "targets") == 0) {
			read_targets(rd, v, sc);
		} else if (strcmp(key, "baseline") == 0) {
			read_baseline(rd, v, f, sc);
		} else {
			unknown_key(rd, k, key, conf_keys, scen_keys);
		}
	}
	apply_limits(&sc->conf, &seen);
	for (size_t i = 0; i < sc->ntargets; i++)
		degradation |= sc->targets[i].stat == LOAD_S_DEGRADATION;
	if (!named)
		problem(rd, n, "a scenario needs a name");
	else if (sc->name != NULL && degradation && sc->baseline < 0)
		problem(rd, n, "scenario \"%s\": a degradation target needs a baseline",
		    sc->name);
	if (sc->conf.url == NULL)
		problem(rd, n, "no target URL: give \"target\" or a URL on the "
		    "command line");
	if (sc->name == NULL) {
		load_conf_free(&sc->conf);
		return;
	}
	f->n++;
}

static void read_top(struct reader *rd, const yaml_node_t *root,
    struct load_conf *top, struct load_scen_file *f)
{
	const yaml_node_t *list = NULL;
	struct limits_seen seen = {0, 0};

	for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
	    p < root->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node(rd, p->key), *v = node(rd, p->value);
		const char *key = scalar(rd, k, "key");
		if (key == NULL || conf_key(rd, key, v, top, &seen) == 0)
			continue;
		if (strcmp(key, "scenarios") == 0)
			list = v;
		else
			unknown_key(rd, k, key, conf_keys, top_keys);
	}
	apply_limits(top, &seen);
	if (list == NULL || list->type != YAML_SEQUENCE_NODE ||
	    list->data.sequence.items.top == list->data.sequence.items.start) {
		problem(rd, list != NULL ? list : root,
		    "scenarios: expected a list of at least one scenario");
		return;
	}
	f->v = calloc((size_t)(list->data.sequence.items.top -
	    list->data.sequence.items.start), sizeof(*f->v));
	if (f->v == NULL) {
		problem(rd, list, "out of memory");
		return;
	}
	for (yaml_node_item_t *it = list->data.sequence.items.start;
	    it < list->data.sequence.items.top; it++)
		read_scenario(rd, node(rd, *it), top, f);
}

static int parse_file(struct reader *rd, FILE *in)
{
	yaml_parser_t parser;
	int rc = 0;

	if (!yaml_parser_initialize(&parser)) {
		fprintf(rd->err, "%s:1:1: out of memory\n", rd->path);
		return -1;
	}
	yaml_parser_set_input_file(&parser, in);
	if (!yaml_parser_load(&parser, &rd->doc)) {
		fprintf(rd->err, "%s:%zu:%zu: %s%s%s\n", rd->path,
		    parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		    parser.problem ? parser.problem : "YAML error",
		    parser.context ? " " : "", parser.context ? parser.context : "");
		rc = -1;
	}
	yaml_parser_delete(&parser);
	return rc;
}

int load_scen_read(const char *path, const struct load_conf *base, int url_fixed,
    struct load_scen_file *f, FILE *err)
{
	struct reader rd;
	struct load_conf top;
	yaml_node_t *root;
	FILE *in;

	memset(&rd, 0, sizeof(rd));
	rd.path = path;
	rd.err = err;
	rd.url_fixed = url_fixed;
	memset(f, 0, sizeof(*f));
	in = fopen(path, "rb");
	if (in == NULL) {
		fprintf(err, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	if (parse_file(&rd, in) < 0) {
		fclose(in);
		return -1;
	}
	fclose(in);
	if (load_conf_copy(&top, base) < 0) {
		yaml_document_delete(&rd.doc);
		fprintf(err, "%s: out of memory\n", path);
		return -1;
	}
	root = yaml_document_get_root_node(&rd.doc);
	if (root == NULL)
		problem(&rd, NULL, "empty file: expected a mapping with \"scenarios\"");
	else if (root->type != YAML_MAPPING_NODE)
		problem(&rd, root, "expected a mapping with \"scenarios\"");
	else
		read_top(&rd, root, &top, f);
	load_conf_free(&top);
	yaml_document_delete(&rd.doc);
	if (rd.errors > 0) {
		load_scen_free(f);
		return -1;
	}
	return 0;
}

void load_scen_free(struct load_scen_file *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->v[i].name);
		load_conf_free(&f->v[i].conf);
	}
	free(f->v);
	f->v = NULL;
	f->n = 0;
}

int load_scen_find(const struct load_scen_file *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].name != NULL && strcmp(f->v[i].name, name) == 0)
			return (int)i;
	return -1;
}

static const struct hist *metric_hist(const struct loadstats *st,
    enum load_metric m)
{
	return m == LOAD_M_TTFT ? &st->ttft : m == LOAD_M_TPOT ? &st->tpot : &st->itl;
}

/* A statistic of a histogram in µs; -1 when it has no samples. */
static double hist_stat(const struct hist *h, enum load_stat s)
{
	static const double q[] = {0.50, 0.90, 0.95, 0.99};

	if (h->count == 0)
		return -1;
	if (s == LOAD_S_MEAN)
		return hist_mean(h);
	if (s == LOAD_S_MAX)
		return (double)h->max;
	return hist_quantile(h, q[s]);
}

int load_scen_value(const struct load_target *t, const struct loadstats *st,
    const struct loadstats *baseline, double *value)
{
	double cur, ref;
	enum load_stat s;

	if (t->stat == LOAD_S_RATE) {
		if (st->requests == 0)
			return -1;
		*value = loadstats_error_rate(st);
		return 0;
	}
	if (t->stat != LOAD_S_DEGRADATION) {
		*value = hist_stat(metric_hist(st, t->metric), t->stat);
		return *value < 0 ? -1 : 0;
	}
	if (baseline == NULL)
		return -1;
	/* the figures SPEC §5's trend follows: TTFT p95, TPOT p50 */
	s = t->metric == LOAD_M_TTFT ? LOAD_S_P95 : LOAD_S_P50;
	cur = hist_stat(metric_hist(st, t->metric), s);
	ref = hist_stat(metric_hist(baseline, t->metric), s);
	if (cur < 0 || ref <= 0)
		return -1;
	*value = cur / ref - 1;
	return 0;
}

int load_scen_met(const struct load_target *t, double value)
{
	return value <= t->limit;
}

void load_scen_format(const struct load_target *t, double v, char *out,
    size_t len)
{
	if (t->stat == LOAD_S_RATE || t->stat == LOAD_S_DEGRADATION)
		snprintf(out, len, "%.2f %%", v * 100);
	else
		snprintf(out, len, "%.2f ms", v / 1000);
}
