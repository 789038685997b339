/* SPDX-License-Identifier: Apache-2.0 */
/* The scenario file's reader: the core's table-driven YAML reader (yconf.h)
 * along the tables below, with the setters the command line uses. */
#include "load_scen.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "load_body.h"
#include "load_prefix.h"
#include "load_session.h"
#include "load_slo.h"
#include "util.h"
#include "yconf.h"

#define NAME_MAX_LEN 64

/* The reader's user. */
struct reader {
	struct load_scen_file *f;
	int url_fixed;
	yaml_node_t *list;      /* the scenarios, read once the top level is */
};

static const char *const stat_names[] = {
	[LOAD_S_P50] = "p50", [LOAD_S_P90] = "p90", [LOAD_S_P95] = "p95",
	[LOAD_S_P99] = "p99", [LOAD_S_MEAN] = "mean", [LOAD_S_MAX] = "max",
};
static const char *const metric_names[] = {
	[LOAD_M_TTFT] = "ttft", [LOAD_M_TPOT] = "tpot", [LOAD_M_ITL] = "itl",
};

/* ---- run parameters: the top level's and each scenario's ------------- */

/* A parameter set from its text by one of load_conf's setters. */
static void set_with(struct yconf *ld, yaml_node_t *v, const char *path, void *c,
    int (*set)(struct load_conf *c, const char *s, const char **err))
{
	char *s = yconf_scalar(ld, v, path, "a single value");
	const char *err;

	if (s != NULL && set(c, s, &err) < 0)
		yconf_err(ld, v, "%s: %s", path, err);
	free(s);
}

/* With a URL on the command line, the file's is still checked. */
static void target_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	const struct reader *rd = ld->user;
	struct load_conf probe;

	if (!rd->url_fixed) {
		set_with(ld, v, path, field, load_conf_set_url);
		return;
	}
	memset(&probe, 0, sizeof(probe));
	set_with(ld, v, path, &probe, load_conf_set_url);
	free(probe.url);
	free(probe.path);
}

static void model_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	set_with(ld, v, path, field, load_conf_set_model);
}

/* 0 turns a top-level rate off: closed loop. */
static int set_rate(struct load_conf *c, const char *s, const char **err)
{
	if (strcmp(s, "0") == 0) {
		c->rate = 0;
		return 0;
	}
	return load_conf_parse_rate(s, &c->rate, err);
}

static void rate_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	set_with(ld, v, path, field, set_rate);
}

static void dialect_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	struct load_conf *c = field;
	int d = yconf_enum(ld, v, path, "dialect", dialect_names, DIALECT_COUNT);

	if (d >= 0)
		c->dialect = (enum dialect_id)d;
}

static void arrivals_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	static const char *const names[] = {"poisson", "uniform", "constant", "gamma"};
	static const enum load_arrivals kinds[] = {LOAD_ARR_POISSON, LOAD_ARR_CONSTANT,
		LOAD_ARR_CONSTANT, LOAD_ARR_GAMMA};
	struct load_conf *c = field;
	int a = yconf_enum(ld, v, path, "arrivals", names, 4);

	if (a >= 0)
		c->arrivals = kinds[a];
}

static void burstiness_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	set_with(ld, v, path, field, load_conf_set_burstiness);
}

static void concurrency_fn(struct yconf *ld, yaml_node_t *v, void *field,
    const char *path)
{
	static const struct yconf_key k = { .type = YCONF_UINT, .lo = 1, .hi = 100000 };
	struct load_conf *c = field;
	uint64_t n;

	if (yconf_apply_value(ld, &k, v, &n, path) == 0) {
		c->concurrency = (unsigned)n;
		c->concurrency_set = 1;
	}
}

/* prompt_tokens, max_tokens: "N" or "MIN-MAX". */
static void range_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	char *s = yconf_scalar(ld, v, path, "a single value");
	const char *err;

	if (s != NULL && load_conf_parse_range(s, field, &err) < 0)
		yconf_err(ld, v, "%s: %s", path, err);
	free(s);
}

/* prefixes, prefix_tokens: 1 to 1000000 (a uint32_t of load_conf). */
static void u32_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	static const struct yconf_key k = { .type = YCONF_UINT, .lo = 1, .hi = 1000000 };
	uint64_t n;

	if (yconf_apply_value(ld, &k, v, &n, path) == 0)
		*(uint32_t *)field = (uint32_t)n;
}

/* prefix_dist: uniform or zipf:S. */
static void prefix_dist_fn(struct yconf *ld, yaml_node_t *v, void *field,
    const char *path)
{
	char *s = yconf_scalar(ld, v, path, "a single value");
	const char *err;

	if (s != NULL && load_prefix_parse_dist(s, field, &err) < 0)
		yconf_err(ld, v, "%s: %s", path, err);
	free(s);
}

/* turns: K, MIN-MAX or uniform:MIN-MAX (conversations). */
static void turns_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	char *s = yconf_scalar(ld, v, path, "a single value");
	const char *err;

	if (s != NULL && load_session_parse_turns(s, field, &err) < 0)
		yconf_err(ld, v, "%s: %s", path, err);
	free(s);
}

/* think_time: DUR, uniform:MIN-MAX or exp:MEAN. */
static void think_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	char *s = yconf_scalar(ld, v, path, "a single value");
	const char *err;

	if (s != NULL && load_think_parse(s, field, &err) < 0)
		yconf_err(ld, v, "%s: %s", path, err);
	free(s);
}

/* A header of the top level is replaced by a scenario's of the same name. */
static void header_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e)
{
	const char *err;

	if (load_conf_set_header((struct load_conf *)((char *)base + k->off), e->name,
	    e->text, &err) < 0)
		yconf_err(ld, e->key, "%s: %s", e->path, err);
	free(e->text);
}

/* A count without a duration runs until the count. */
static void apply_limits(struct yconf *ld, yaml_node_t *m, struct load_conf *c)
{
	if (yconf_map_find(ld, m, "requests") != NULL &&
	    yconf_map_find(ld, m, "duration") == NULL)
		c->duration_us = 0;
}

#define RUN(at, f) ((at) + offsetof(struct load_conf, f))
/* The keys of the struct load_conf at offset at in a section's base. */
#define RUN_KEYS(at) \
	{ .name = "target", .type = YCONF_FUNC, .off = at, .fn = target_fn }, \
	{ .name = "dialect", .type = YCONF_FUNC, .off = at, .fn = dialect_fn }, \
	{ .name = "model", .type = YCONF_FUNC, .off = at, .fn = model_fn }, \
	{ .name = "concurrency", .type = YCONF_FUNC, .off = at, .fn = concurrency_fn }, \
	{ .name = "rate", .type = YCONF_FUNC, .off = at, .fn = rate_fn }, \
	{ .name = "arrivals", .type = YCONF_FUNC, .off = at, .fn = arrivals_fn }, \
	{ .name = "burstiness", .type = YCONF_FUNC, .off = at, .fn = burstiness_fn }, \
	{ .name = "warmup", .type = YCONF_DURATION, .off = RUN(at, warmup_us) }, \
	{ .name = "cooldown", .type = YCONF_BOOL, .off = RUN(at, cooldown) }, \
	{ .name = "warmup_requests", .type = YCONF_UINT, .off = RUN(at, warmup_count), \
	    .hi = UINT64_MAX / 10 }, \
	{ .name = "duration", .type = YCONF_DURATION, .off = RUN(at, duration_us), .lo = 1 }, \
	{ .name = "requests", .type = YCONF_UINT, .off = RUN(at, count), .lo = 1, \
	    .hi = UINT64_MAX / 10 }, \
	{ .name = "timeout", .type = YCONF_DURATION, .off = RUN(at, timeout_us), .lo = 1 }, \
	{ .name = "prompt_tokens", .type = YCONF_FUNC, .off = RUN(at, prompt_tokens), \
	    .fn = range_fn }, \
	{ .name = "max_tokens", .type = YCONF_FUNC, .off = RUN(at, max_tokens), \
	    .fn = range_fn }, \
	{ .name = "prefixes", .type = YCONF_FUNC, .off = RUN(at, prefixes), \
	    .fn = u32_fn }, \
	{ .name = "prefix_tokens", .type = YCONF_FUNC, .off = RUN(at, prefix_tokens), \
	    .fn = u32_fn }, \
	{ .name = "prefix_dist", .type = YCONF_FUNC, .off = RUN(at, prefix_zipf), \
	    .fn = prefix_dist_fn }, \
	{ .name = "turns", .type = YCONF_FUNC, .off = RUN(at, turns), .fn = turns_fn }, \
	{ .name = "think_time", .type = YCONF_FUNC, .off = RUN(at, think), .fn = think_fn }, \
	{ .name = "headers", .type = YCONF_MAP, .flags = YCONF_HEADER, .off = at, \
	    .put = header_put }, \
	{ .name = "seed", .type = YCONF_UINT, .off = RUN(at, seed), .lo = 1, \
	    .hi = UINT64_MAX / 10 }

/* ---- a scenario's own keys ------------------------------------------- */

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

/* The limit of t from s; 0 or -1 after reporting it. */
static int target_limit(struct yconf *ld, struct yconf_entry *e, struct load_target *t)
{
	const char *s = e->text;
	size_t n = strlen(s);
	uint64_t us;

	if (t->stat == LOAD_S_RATE || t->stat == LOAD_S_DEGRADATION) {
		if (parse_fraction(s, &t->limit) == 0)
			return 0;
		yconf_err(ld, e->value, "%s: expected a fraction (0.2 or 20%%)", e->path);
		return -1;
	}
	/* a bare number would be seconds: too easy to misread here */
	if (n == 0 || (s[n - 1] >= '0' && s[n - 1] <= '9') ||
	    util_parse_duration_us(s, &us) < 0) {
		yconf_err(ld, e->value, "%s: expected a duration with a unit (e.g. 500ms)",
		    e->path);
		return -1;
	}
	t->limit = (double)us;
	return 0;
}

static void target_put(struct yconf *ld, const struct yconf_key *k, void *base,
    struct yconf_entry *e)
{
	struct load_scenario *sc = base;
	struct load_target t;

	(void)k;
	memset(&t, 0, sizeof(t));
	if (strlen(e->name) >= sizeof(t.name) || target_kind(e->name, &t) < 0) {
		yconf_err(ld, e->key, "unknown target \"%.64s\" in %.*s (ttft_p50 .. ttft_p99, "
		    "ttft_mean, ttft_max, the same for tpot and itl, error_rate, "
		    "ttft_degradation, tpot_degradation)", e->name,
		    (int)(strlen(e->path) - strlen(e->name) - 1), e->path);
	} else if (target_limit(ld, e, &t) == 0) {
		if (sc->ntargets == LOAD_SCEN_MAX_TARGETS) {
			yconf_err(ld, e->key, "%s: too many targets (at most %d)", e->path,
			    LOAD_SCEN_MAX_TARGETS);
		} else {
			strcpy(t.name, e->name);
			sc->targets[sc->ntargets++] = t;
		}
	}
	free(e->text);
}

static void name_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	const struct reader *rd = ld->user;
	struct load_scenario *sc = field;
	char *s = yconf_scalar(ld, v, path, "a single value");

	if (s == NULL)
		return;
	if (*s == '\0' || strlen(s) > NAME_MAX_LEN)
		yconf_err(ld, v, "%s: 1 to %d characters", path, NAME_MAX_LEN);
	else if (load_scen_find(rd->f, s) >= 0)
		yconf_err(ld, v, "%s: scenario \"%s\" already defined", path, s);
	else {
		free(sc->name);
		sc->name = s;
		return;
	}
	free(s);
}

static void baseline_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	const struct reader *rd = ld->user;
	struct load_scenario *sc = field;
	char *s = yconf_scalar(ld, v, path, "a single value");

	if (s == NULL)
		return;
	sc->baseline = load_scen_find(rd->f, s);
	if (sc->baseline < 0)
		yconf_err(ld, v, "%s: no scenario \"%.64s\" before this one", path, s);
	free(s);
}

static void scenario_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	struct load_scenario *sc = base;
	int degradation = 0;

	(void)path;
	apply_limits(ld, m, &sc->conf);
	for (size_t i = 0; i < sc->ntargets; i++)
		degradation |= sc->targets[i].stat == LOAD_S_DEGRADATION;
	if (sc->name != NULL && degradation && sc->baseline < 0)
		yconf_err(ld, m, "scenario \"%s\": a degradation target needs a baseline",
		    sc->name);
	if (sc->conf.url == NULL)
		yconf_err(ld, m, "no target URL: give \"target\" or a URL on the "
		    "command line");
	/* conversations: as --turns on the command line */
	if (sc->conf.turns.min == 0 && (sc->conf.think.a_us > 0 ||
	    sc->conf.think.kind != LOAD_THINK_CONST))
		yconf_err(ld, m, "scenario \"%s\": think_time goes with turns",
		    sc->name ? sc->name : "?");
	if (sc->conf.turns.min > 0 && (sc->conf.rate > 0 || sc->conf.prefixes > 0))
		yconf_err(ld, m, "scenario \"%s\": turns are held by users: no rate or "
		    "prefixes", sc->name ? sc->name : "?");
	if (sc->conf.turns.min > 0 && sc->conf.url != NULL && !load_body_chat(&sc->conf))
		yconf_err(ld, m, "scenario \"%s\": turns need a chat API's messages "
		    "(OpenAI /v1/chat/completions, Anthropic /v1/messages, Ollama "
		    "/api/chat)", sc->name ? sc->name : "?");
}

#define SCEN(f) offsetof(struct load_scenario, f)
static const struct yconf_key scenario_keys[] = {
	{ .name = "name", .type = YCONF_FUNC, .flags = YCONF_REQUIRED, .fn = name_fn },
	{ .name = "targets", .type = YCONF_MAP, .put = target_put },
	{ .name = "baseline", .type = YCONF_FUNC, .fn = baseline_fn },
	RUN_KEYS(SCEN(conf)),
};
static const struct yconf_section scenario_section = {
	scenario_keys, UTIL_ARRAY_LEN(scenario_keys), scenario_check
};

/* ---- the top level ---------------------------------------------------- */

static void scenarios_fn(struct yconf *ld, yaml_node_t *v, void *field, const char *path)
{
	struct reader *rd = ld->user;

	(void)field;
	if (v->type != YAML_SEQUENCE_NODE ||
	    v->data.sequence.items.top == v->data.sequence.items.start)
		yconf_err(ld, v, "%s: expected a list of at least one scenario", path);
	else
		rd->list = v;
}

/* Each scenario starts from the top level's parameters; its name, as a
 * baseline, is known to the ones after it. */
static void read_scenarios(struct yconf *ld, yaml_node_t *list, const struct load_conf *top)
{
	struct load_scen_file *f = ((struct reader *)ld->user)->f;
	yaml_node_item_t *items = list->data.sequence.items.start;
	size_t n = (size_t)(list->data.sequence.items.top - items);
	char path[YCONF_PATH_LEN];

	f->v = calloc(n, sizeof(*f->v));
	if (f->v == NULL) {
		yconf_oom(ld);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct load_scenario *sc = &f->v[i];
		yaml_node_t *item = yconf_node(ld, items[i]);

		f->n = i;
		sc->baseline = -1;
		snprintf(path, sizeof(path), "scenarios[%zu]", i);
		if (item->type != YAML_MAPPING_NODE)
			yconf_err(ld, item, "%s: a scenario is a mapping with at least a name",
			    path);
		else if (load_conf_copy(&sc->conf, top) < 0)
			yconf_oom(ld);
		else
			yconf_apply_mapping(ld, item, &scenario_section, sc, path);
	}
	f->n = n;
}

/* The scenarios are read after the top level's keys, wherever these are. */
static void top_check(struct yconf *ld, yaml_node_t *m, void *base, const char *path)
{
	const struct reader *rd = ld->user;

	(void)path;
	apply_limits(ld, m, base);
	if (rd->list != NULL)
		read_scenarios(ld, rd->list, base);
}

static const struct yconf_key top_keys[] = {
	{ .name = "scenarios", .type = YCONF_FUNC, .flags = YCONF_REQUIRED,
	    .fn = scenarios_fn },
	RUN_KEYS(0),
};
static const struct yconf_section top_section = {
	top_keys, UTIL_ARRAY_LEN(top_keys), top_check
};

int load_scen_read(const char *path, const struct load_conf *base, int url_fixed,
    struct load_scen_file *f, FILE *err)
{
	struct reader rd = { f, url_fixed, NULL };
	struct yconf ld = { .name = path, .user = &rd };
	struct load_conf top;

	memset(f, 0, sizeof(*f));
	if (load_conf_copy(&top, base) < 0) {
		yconf_oom(&ld);
	} else {
		if (!yconf_parse_file(&ld, &top_section, &top) && ld.n_problems == 0)
			yconf_err_at(&ld, 0, 0, "empty file: expected a mapping with "
			    "\"scenarios\"");
		load_conf_free(&top);
	}
	if (yconf_finish(&ld, err) > 0) {
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

/* The figure of one statistic of a metric (µs), exact from the samples,
 * by the SLO module's rule; -1 when there is none. */
static double stat_us(const struct loadstats *st, enum load_metric m, enum load_stat s)
{
	static const double q[] = {50, 90, 95, 99};
	static const enum load_slo_metric sm[] = {
		[LOAD_M_TTFT] = LOAD_SLO_TTFT, [LOAD_M_TPOT] = LOAD_SLO_TPOT,
		[LOAD_M_ITL] = LOAD_SLO_ITL,
	};
	struct load_slo one;
	struct load_slo_result res;

	memset(&one, 0, sizeof(one));
	one.n = 1;
	one.v[0].metric = sm[m];
	one.v[0].limit = INFINITY;
	if (s == LOAD_S_MEAN) {
		one.v[0].stat = LOAD_SLO_MEAN;
	} else if (s == LOAD_S_MAX) {
		one.v[0].stat = LOAD_SLO_MAX_STAT;
	} else {
		one.v[0].stat = LOAD_SLO_PCT;
		one.v[0].pct = q[s];
	}
	if (load_slo_eval(&one, st, &res) < 0 || isnan(res.v[0].value))
		return -1;
	return res.v[0].value * 1e3;
}

int load_scen_value(const struct load_target *t, const struct loadstats *st,
    const struct loadstats *baseline, double *value)
{
	double cur, ref;
	enum load_stat s;

	if (t->stat == LOAD_S_RATE) {
		uint64_t n = 0, bad = 0;
		for (size_t i = 0; i < st->n; i++) {
			if (!loadstats_counted(&st->v[i]))
				continue;
			n++;
			bad += st->v[i].outcome != OUTCOME_OK;
		}
		if (n == 0)
			return -1;
		*value = (double)bad / (double)n;
		return 0;
	}
	if (t->stat != LOAD_S_DEGRADATION) {
		*value = stat_us(st, t->metric, t->stat);
		return *value < 0 ? -1 : 0;
	}
	if (baseline == NULL)
		return -1;
	/* the figures docs/contract.md §5's trend follows: TTFT p95, TPOT
	 * p50 */
	s = t->metric == LOAD_M_TTFT ? LOAD_S_P95 : LOAD_S_P50;
	cur = stat_us(st, t->metric, s);
	ref = stat_us(baseline, t->metric, s);
	if (cur < 0 || ref <= 0)
		return -1;
	*value = cur / ref - 1;
	return 0;
}

void load_scen_goodput(const struct load_scenario *sc, struct goodput_targets *out)
{
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < sc->ntargets; i++) {
		const struct load_target *t = &sc->targets[i];
		int g = t->metric == LOAD_M_TTFT ? GOODPUT_TTFT :
		    t->metric == LOAD_M_TPOT ? GOODPUT_TPOT : -1;
		if (g < 0 || t->stat == LOAD_S_RATE || t->stat == LOAD_S_DEGRADATION)
			continue;
		if ((uint64_t)t->limit > out->us[g])
			out->us[g] = (uint64_t)t->limit;
	}
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
