/* SPDX-License-Identifier: Apache-2.0 */
#include "load_compare.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_boot.h"
#include "load_prefix.h"
#include "load_session.h"
#include "util.h"

/* The per-request metrics (a sample each, or a gap each for itl). */
enum family { FAM_TTFT, FAM_TTFO, FAM_TPOT, FAM_ITL, FAM_E2E, FAM_ERRORS, FAM_LEVEL,
	FAM_COUNT };

static const char *const fam_names[] = {"ttft", "ttfo", "tpot", "itl", "e2e"};

/* Figures of the level only: no per-request sample, no interval. */
static const char *const level_figs[] = {"requests_per_s", "output_tokens_per_s",
	"total_tokens_per_s", "goodput_per_s"};

static const struct { const char *from, *to; } aliases[] = {
	{"e2el_", "e2e_"}, {"output_throughput", "output_tokens_per_s"},
	{"request_throughput", "requests_per_s"},
	{"total_token_throughput", "total_tokens_per_s"},
};

void load_cmp_opts_init(struct load_cmp_opts *o)
{
	static const char *const rows[] = {"ttft_p50", "ttft_p95", "tpot_p50", "tpot_p95",
		"itl_p50", "itl_p95", "e2e_p50", "e2e_p95", "output_tokens_per_s",
		"requests_per_s", "error_rate"};

	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < UTIL_ARRAY_LEN(rows); i++)
		snprintf(o->metrics[o->nmetrics++], sizeof o->metrics[0], "%s", rows[i]);
	o->alpha = 0.05;
	o->resamples = 2000;
	o->seed = 1;
}

/* The family of a canonical name, and its statistic. */
static enum family family_of(const char *name, struct load_stat *st)
{
	const char *us = strchr(name, '_');

	memset(st, 0, sizeof(*st));
	if (strcmp(name, "error_rate") == 0) {
		st->mean = 1;
		return FAM_ERRORS;
	}
	for (size_t i = 0; i < UTIL_ARRAY_LEN(level_figs); i++)
		if (strcmp(name, level_figs[i]) == 0)
			return FAM_LEVEL;
	for (int f = FAM_TTFT; us != NULL && f <= FAM_E2E; f++) {
		if (strlen(fam_names[f]) != (size_t)(us - name) ||
		    strncmp(name, fam_names[f], (size_t)(us - name)) != 0)
			continue;
		if (strcmp(us + 1, "mean") == 0) {
			st->mean = 1;
			return (enum family)f;
		}
		if (us[1] == 'p') {
			char *end;
			errno = 0;
			st->pct = strtod(us + 2, &end);
			if (us[2] >= '0' && us[2] <= '9' && *end == '\0' && errno == 0 &&
			    st->pct > 0 && st->pct <= 100)
				return (enum family)f;
		}
	}
	return FAM_COUNT;
}

const char *load_cmp_metric(const char *name, char *buf, size_t len, const char **err)
{
	struct load_stat st;

	snprintf(buf, len, "%s", name);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(aliases); i++) {
		size_t n = strlen(aliases[i].from);
		if (strncmp(name, aliases[i].from, n) == 0 &&
		    (aliases[i].from[n - 1] == '_' || name[n] == '\0')) {
			snprintf(buf, len, "%s%s", aliases[i].to, name + n);
			break;
		}
	}
	if (family_of(buf, &st) == FAM_COUNT) {
		*err = "unknown figure (ttft, ttfo, tpot, itl or e2e with _pNN or _mean; "
		    "error_rate, output_tokens_per_s, requests_per_s, total_tokens_per_s, "
		    "goodput_per_s)";
		return NULL;
	}
	return buf;
}

int load_cmp_parse_metrics(struct load_cmp_opts *o, const char *s, char *err,
    size_t errlen)
{
	char copy[1024], *save = NULL;
	size_t n = 0;

	if (strlen(s) >= sizeof copy) {
		snprintf(err, errlen, "the list is too long");
		return -1;
	}
	snprintf(copy, sizeof copy, "%s", s);
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		const char *why;
		if (n == LOAD_CMP_MAX_METRICS) {
			snprintf(err, errlen, "at most %d figures", LOAD_CMP_MAX_METRICS);
			return -1;
		}
		if (load_cmp_metric(t, o->metrics[n], sizeof o->metrics[0], &why) == NULL) {
			snprintf(err, errlen, "'%.40s': %s", t, why);
			return -1;
		}
		n++;
	}
	if (n == 0) {
		snprintf(err, errlen, "no figure named");
		return -1;
	}
	o->nmetrics = n;
	return 0;
}

/* One rule: NAME>+X% | NAME<-X% | NAME>+Xms (us, ms, s) | error_rate>+X%. */
static int parse_rule(struct load_cmp_rule *r, const char *s, char *err, size_t errlen)
{
	const char *op = strpbrk(s, "<>"), *why;
	char name[64], *end;
	struct load_stat st;
	enum family fam;
	double x;

	memset(r, 0, sizeof(*r));
	snprintf(r->text, sizeof r->text, "%s", s);
	if (op == NULL || op == s || (size_t)(op - s) >= sizeof name) {
		snprintf(err, errlen, "'%.60s': expected FIGURE>+X%% or FIGURE<-X%% (e.g. "
		    "tpot_p50>+10%%, output_tokens_per_s<-5%%, ttft_p95>+20ms)", s);
		return -1;
	}
	memcpy(name, s, (size_t)(op - s));
	name[op - s] = '\0';
	if (load_cmp_metric(name, r->metric, sizeof r->metric, &why) == NULL) {
		snprintf(err, errlen, "'%.60s': %s", s, why);
		return -1;
	}
	fam = family_of(r->metric, &st);
	r->up = *op == '>';
	op++;
	if (*op == '=') {
		snprintf(err, errlen, "'%.60s': > or < alone (a change beyond the limit fails)", s);
		return -1;
	}
	if ((*op == '-' && r->up) || (*op == '+' && !r->up)) {
		snprintf(err, errlen, "'%.60s': a rise is >+X, a fall <-X", s);
		return -1;
	}
	if (*op == '+' || *op == '-')
		op++;
	errno = 0;
	x = strtod(op, &end);
	if (end == op || errno != 0 || !isfinite(x) || x <= 0) {
		snprintf(err, errlen, "'%.60s': a limit above 0 expected after %c", s,
		    r->up ? '>' : '<');
		return -1;
	}
	if (strcmp(end, "%") == 0) {
		r->limit = x / 100;
		/* the error rate's change is in points: A's rate may be 0 */
		r->relative = fam != FAM_ERRORS;
		return 0;
	}
	if (fam <= FAM_E2E && (strcmp(end, "ms") == 0 || strcmp(end, "s") == 0 ||
	    strcmp(end, "us") == 0)) {
		r->limit = strcmp(end, "s") == 0 ? x * 1e3 : strcmp(end, "us") == 0 ? x / 1e3 : x;
		return 0;
	}
	snprintf(err, errlen, "'%.60s': the limit takes %%%s", s,
	    fam <= FAM_E2E ? ", or a duration's unit (ms, s, us)" : "");
	return -1;
}

int load_cmp_parse_rules(struct load_cmp_opts *o, const char *s, char *err,
    size_t errlen)
{
	char copy[1024], *save = NULL;
	size_t before = o->nrules;

	if (strlen(s) >= sizeof copy) {
		snprintf(err, errlen, "the rules are too long");
		return -1;
	}
	snprintf(copy, sizeof copy, "%s", s);
	for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		if (o->nrules == LOAD_CMP_MAX_RULES) {
			snprintf(err, errlen, "at most %d rules", LOAD_CMP_MAX_RULES);
			return -1;
		}
		if (parse_rule(&o->rules[o->nrules], t, err, errlen) < 0)
			return -1;
		o->nrules++;
	}
	if (o->nrules == before) {
		snprintf(err, errlen, "no rule (e.g. tpot_p50>+10%%)");
		return -1;
	}
	return 0;
}

/* ---- the comparison --------------------------------------------------------- */

struct row {
	char metric[32];
	enum family fam;
	struct load_stat st;
	struct load_boot_ci ci;
	int sampled;                 /* from the samples (else the documents' figures) */
};

size_t load_cmp_first_run(const struct load_level *lv)
{
	const struct loadstats *st = &lv->st;
	unsigned char *seen;
	size_t i;

	if (lv->runs <= 1 || st->n == 0)
		return st->n;
	/* the runs ran one after the other, each numbering its requests from
	 * 0, and the samples are in the order they ended: the first run's
	 * are those before a number comes again */
	seen = calloc(st->n, 1);
	if (seen == NULL)
		return st->n;
	for (i = 0; i < st->n; i++) {
		uint64_t q = st->v[i].seq;
		if (q < st->n && seen[q])
			break;
		if (q < st->n)
			seen[q] = 1;
	}
	free(seen);
	return i;
}

/* The per-request values of a family over a level's measured requests
 * (unsorted); *n 0 when it has none. */
static double *values(const struct load_level *lv, enum family f, size_t *n)
{
	const struct loadstats *st = &lv->st;
	size_t cap = f == FAM_ITL ? st->nitl : st->n, k = 0;
	size_t end = load_cmp_first_run(lv);
	double *v = malloc((cap + 1) * sizeof(double));

	*n = 0;
	if (v == NULL)
		return NULL;
	for (size_t i = 0; i < end; i++) {
		const struct load_sample *s = &st->v[i];
		double x = -1;
		if (!loadstats_counted(s))
			continue;
		if (f == FAM_ERRORS) {
			v[k++] = s->outcome != OUTCOME_OK;
			continue;
		}
		if (s->outcome != OUTCOME_OK)
			continue;
		if (f == FAM_ITL) {
			for (uint32_t g = 0; g < s->itl_n; g++)
				v[k++] = (double)st->itl[s->itl_off + g] / 1e3;
			continue;
		}
		x = f == FAM_TTFT ? (double)s->ttft_us : f == FAM_TTFO ? (double)s->ttfo_us :
		    f == FAM_TPOT ? s->tpot_us : (double)s->duration_us;
		if (x >= 0)
			v[k++] = x / 1e3;
	}
	*n = k;
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* A level's own figure (the document's), the median for p50 if need be. */
static double stored(const struct load_level *lv, const struct load_result *r,
    const char *metric)
{
	double v = NAN;

	if (load_summary_value(&lv->sum, &r->pcts, metric, &v) == 0 && !isnan(v))
		return v;
	if (strlen(metric) > 4 && strcmp(metric + strlen(metric) - 4, "_p50") == 0) {
		const struct load_dist *d[] = {&lv->sum.ttft, &lv->sum.ttfo, &lv->sum.tpot,
			&lv->sum.itl, &lv->sum.e2e};
		struct load_stat st;
		enum family f = family_of(metric, &st);
		if (f <= FAM_E2E)
			return d[f]->median;
	}
	return NAN;
}

/* Fills the rows of one pair of levels: one bootstrap per family. */
static int compare_level(const struct load_result *ra, const struct load_level *a,
    const struct load_result *rb, const struct load_level *b, struct row *rows,
    size_t nrows, const struct load_cmp_opts *o)
{
	for (int f = FAM_TTFT; f < FAM_LEVEL; f++) {
		struct load_stat st[LOAD_CMP_MAX_METRICS];
		struct load_boot_ci ci[LOAD_CMP_MAX_METRICS];
		size_t idx[LOAD_CMP_MAX_METRICS], ns = 0, na, nb;
		double *va, *vb;
		int rc;

		for (size_t i = 0; i < nrows; i++)
			if (rows[i].fam == (enum family)f) {
				st[ns] = rows[i].st;
				idx[ns++] = i;
			}
		if (ns == 0)
			continue;
		va = values(a, (enum family)f, &na);
		vb = values(b, (enum family)f, &nb);
		if (va == NULL || vb == NULL) {
			free(va);
			free(vb);
			return -1;
		}
		qsort(va, na, sizeof(double), cmp_double);
		qsort(vb, nb, sizeof(double), cmp_double);
		rc = na > 0 && nb > 0 ? load_boot_change(va, na, vb, nb, st, ns,
		    f != FAM_ERRORS, o->resamples, o->alpha, o->seed, ci) : 0;
		free(va);
		free(vb);
		if (rc < 0)
			return -1;
		for (size_t k = 0; k < ns; k++) {
			struct row *r = &rows[idx[k]];
			r->sampled = na > 0 && nb > 0;
			if (r->sampled) {
				r->ci = ci[k];
				continue;
			}
			/* no samples: the documents' own figures, no interval */
			r->ci.a = f == FAM_ERRORS ? a->sum.error_rate : stored(a, ra, r->metric);
			r->ci.b = f == FAM_ERRORS ? b->sum.error_rate : stored(b, rb, r->metric);
			r->ci.change = f == FAM_ERRORS ? r->ci.b - r->ci.a :
			    r->ci.a != 0 ? r->ci.b / r->ci.a - 1 : NAN;
			r->ci.lo = r->ci.hi = NAN;
			r->ci.significant = 0;
		}
	}
	for (size_t i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		if (r->fam != FAM_LEVEL)
			continue;
		r->ci.a = stored(a, ra, r->metric);
		r->ci.b = stored(b, rb, r->metric);
		r->ci.change = r->ci.a != 0 ? r->ci.b / r->ci.a - 1 : NAN;
		r->ci.lo = r->ci.hi = NAN;
		r->ci.significant = 0;
		r->sampled = 0;
	}
	return 0;
}

/* ---- matching --------------------------------------------------------------- */

static int same_level(const struct load_level *a, const struct load_level *b)
{
	if (a->key != b->key)
		return 0;
	if (a->key == LOAD_KEY_NONE)
		return 1;
	return fabs(a->value - b->value) <= 1e-9 * fmax(1, fabs(a->value));
}

/* ---- the workloads -------------------------------------------------------- */

static int same_num(double a, double b)
{
	return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-9 * fmax(1, fabs(a));
}

static const char *mode_of(const struct load_conf *c)
{
	return c->rate > 0 || c->trace != NULL ? "open" : "closed";
}

static void range_text(char *buf, size_t len, const struct load_range *r)
{
	if (r->min == r->max)
		snprintf(buf, len, "%u", r->min);
	else
		snprintf(buf, len, "%u-%u", r->min, r->max);
}

/* --turns: "none" or "3 turns, think uniform:1s-3s". */
static void turns_text(char *buf, size_t len, const struct load_conf *c)
{
	char think[64];

	if (c->turns.min == 0) {
		snprintf(buf, len, "none");
		return;
	}
	load_think_name(&c->think, think, sizeof think);
	if (c->turns.min == c->turns.max)
		snprintf(buf, len, "%u turns, think %s", c->turns.min, think);
	else
		snprintf(buf, len, "%u-%u turns, think %s", c->turns.min, c->turns.max, think);
}

/* --prefixes: "none" or "4 x 512 tokens, zipf:1.1". */
static void prefixes_text(char *buf, size_t len, const struct load_conf *c)
{
	char dist[32];

	if (c->prefixes == 0) {
		snprintf(buf, len, "none");
		return;
	}
	load_prefix_dist_name(c->prefix_zipf, dist, sizeof dist);
	snprintf(buf, len, "%u x %u tokens, %s", c->prefixes, c->prefix_tokens, dist);
}

/* Prints each way the workloads of a and b differ, under label; returns
 * how many. */
static int workload_diffs(FILE *out, const char *label, const struct load_conf *a,
    const struct load_conf *b)
{
	char x[96], y[96];
	int n = 0;

#define DIFF(what, fa, fb) do { \
	fprintf(out, "workload differs%s%s: %s %s in A, %s in B\n", label ? " at " : "", \
	    label ? label : "", what, fa, fb); \
	n++; \
} while (0)
	if (strcmp(a->url ? a->url : "", b->url ? b->url : "") != 0)
		DIFF("target", a->url ? a->url : "-", b->url ? b->url : "-");
	if (load_conf_dialect(a) != load_conf_dialect(b))
		DIFF("dialect", dialect_names[load_conf_dialect(a)],
		    dialect_names[load_conf_dialect(b)]);
	if (strcmp(a->model ? a->model : "", b->model ? b->model : "") != 0)
		DIFF("model", a->model ? a->model : "-", b->model ? b->model : "-");
	if (label == NULL)
		return n;
	if (strcmp(mode_of(a), mode_of(b)) != 0)
		DIFF("mode", mode_of(a), mode_of(b));
	if (a->concurrency != b->concurrency) {
		snprintf(x, sizeof x, "%u", a->concurrency);
		snprintf(y, sizeof y, "%u", b->concurrency);
		DIFF(a->rate > 0 ? "connections (-c)" : "concurrency", x, y);
	}
	if (!same_num(a->rate, b->rate)) {
		snprintf(x, sizeof x, "%.10g/s", a->rate);
		snprintf(y, sizeof y, "%.10g/s", b->rate);
		DIFF("rate", x, y);
	}
	if (a->rate > 0 && b->rate > 0 && (a->arrivals != b->arrivals ||
	    (a->arrivals == LOAD_ARR_GAMMA && !same_num(a->burstiness, b->burstiness)))) {
		snprintf(x, sizeof x, "%s %g", load_conf_arrivals_name(a), a->burstiness);
		snprintf(y, sizeof y, "%s %g", load_conf_arrivals_name(b), b->burstiness);
		DIFF("arrivals", x, y);
	}
	if (a->seed != b->seed) {
		snprintf(x, sizeof x, "%llu", (unsigned long long)a->seed);
		snprintf(y, sizeof y, "%llu", (unsigned long long)b->seed);
		DIFF("seed", x, y);
	}
	if (a->prompt_tokens.min != b->prompt_tokens.min ||
	    a->prompt_tokens.max != b->prompt_tokens.max) {
		range_text(x, sizeof x, &a->prompt_tokens);
		range_text(y, sizeof y, &b->prompt_tokens);
		DIFF("prompt tokens", x, y);
	}
	if (a->max_tokens.min != b->max_tokens.min || a->max_tokens.max != b->max_tokens.max) {
		range_text(x, sizeof x, &a->max_tokens);
		range_text(y, sizeof y, &b->max_tokens);
		DIFF("max tokens", x, y);
	}
	if (a->prefixes != b->prefixes || (a->prefixes > 0 &&
	    (a->prefix_tokens != b->prefix_tokens || !same_num(a->prefix_zipf, b->prefix_zipf)))) {
		prefixes_text(x, sizeof x, a);
		prefixes_text(y, sizeof y, b);
		DIFF("shared prefixes", x, y);
	}
	if (a->turns.min != b->turns.min || a->turns.max != b->turns.max ||
	    (a->turns.min > 0 && memcmp(&a->think, &b->think, sizeof a->think) != 0)) {
		turns_text(x, sizeof x, a);
		turns_text(y, sizeof y, b);
		DIFF("conversations", x, y);
	}
#undef DIFF
	return n;
}

/* ---- printing ----------------------------------------------------------------- */

static void value(FILE *f, const struct row *r, double v)
{
	if (!isfinite(v))
		fprintf(f, " %11s", "-");
	else if (r->fam == FAM_ERRORS)
		fprintf(f, " %9.2f %%", 100 * v);
	else
		fprintf(f, " %11.3f", v);
}

/* The change as the row reads it: % of A, or points for the error rate. */
static void change_text(char *buf, size_t len, const struct row *r, double c)
{
	if (!isfinite(c))
		snprintf(buf, len, "-");
	else if (r->fam == FAM_ERRORS)
		snprintf(buf, len, "%+.2f pt", 100 * c);
	else
		snprintf(buf, len, "%+.1f %%", 100 * c);
}

/* The rule's measure of a row's change: relative, ms, or points. */
static double rule_change(const struct load_cmp_rule *u, const struct row *r)
{
	if (u->relative)
		return r->ci.change;
	return r->ci.b - r->ci.a;
}

static int rule_fails(const struct load_cmp_rule *u, const struct row *r)
{
	double d = rule_change(u, r);
	int beyond = u->up ? d > u->limit : d < -u->limit;
	int tested = isfinite(r->ci.lo) && isfinite(r->ci.hi);

	if (!isfinite(d) || !beyond)
		return 0;
	/* without an interval (a level's figure, a document without samples)
	 * the limit alone judges: a CI job must not pass for want of samples */
	if (!tested)
		return 1;
	return u->up ? r->ci.lo > 0 : r->ci.hi < 0;
}

static void header(FILE *f, const char *tag, const char *name, const struct load_result *r)
{
	fprintf(f, "%s  %s: %s of %s, model %s, %zu level%s\n", tag, name,
	    r->kind == LOAD_KIND_SWEEP ? "sweep" : r->kind == LOAD_KIND_CAPACITY ?
	    "capacity search" : "run", r->conf->url, r->conf->model, r->nlevels,
	    r->nlevels == 1 ? "" : "s");
}

int load_compare(FILE *out, const struct load_result *a, const char *aname,
    const struct load_result *b, const char *bname, const struct load_cmp_opts *o)
{
	struct row rows[LOAD_CMP_MAX_METRICS + LOAD_CMP_MAX_RULES];
	size_t nrows = 0, matched = 0;
	int *pair = calloc(a->nlevels + 1, sizeof(int)), *used = calloc(b->nlevels + 1,
	    sizeof(int));
	int failed[LOAD_CMP_MAX_RULES] = {0}, status = 0, differ;
	char worst[LOAD_CMP_MAX_RULES][160];

	if (pair == NULL || used == NULL) {
		free(pair);
		free(used);
		fprintf(out, "compare: out of memory\n");
		return -1;
	}
	/* the rows: those asked for, then each rule's figure not among them */
	for (size_t i = 0; i < o->nmetrics + o->nrules; i++) {
		const char *m = i < o->nmetrics ? o->metrics[i] : o->rules[i - o->nmetrics].metric;
		int dup = 0;
		for (size_t k = 0; k < nrows; k++)
			dup |= strcmp(rows[k].metric, m) == 0;
		if (dup)
			continue;
		memset(&rows[nrows], 0, sizeof(rows[0]));
		snprintf(rows[nrows].metric, sizeof rows[0].metric, "%s", m);
		rows[nrows].fam = family_of(m, &rows[nrows].st);
		nrows++;
	}
	for (size_t i = 0; i < a->nlevels; i++) {
		pair[i] = -1;
		for (size_t k = 0; k < b->nlevels && pair[i] < 0; k++)
			if (!used[k] && same_level(&a->levels[i], &b->levels[k])) {
				pair[i] = (int)k;
				used[k] = 1;
				matched++;
			}
	}
	header(out, "A", aname, a);
	header(out, "B", bname, b);
	differ = workload_diffs(out, NULL, a->conf, b->conf);
	for (size_t i = 0; i < a->nlevels; i++)
		if (pair[i] >= 0)
			differ += workload_diffs(out, a->levels[i].label, &a->levels[i].conf,
			    &b->levels[pair[i]].conf);
	if (differ > 0 && !o->allow_different) {
		fprintf(out, "compare: A and B ran different workloads (above): their "
		    "figures are not comparable; --allow-different compares them anyway\n");
		free(pair);
		free(used);
		return LOAD_CMP_DIFFERENT;
	}
	if (matched == 0) {
		fprintf(out, "compare: no level of A matches a level of B (levels are matched "
		    "by what they set: concurrency 16 with concurrency 16, a run with a run)\n");
		free(pair);
		free(used);
		return -1;
	}
	fprintf(out, "change: B / A - 1 (error_rate: B - A in points); interval: %.4g %% "
	    "bootstrap over %zu resamples of each level's measured requests; * significant "
	    "(the interval excludes 0)\n\n", 100 * (1 - o->alpha), o->resamples);
	fprintf(out, "%-24s %-20s %11s %11s %10s  %-22s\n", "level", "figure", "A", "B",
	    "change", "interval");
	for (size_t i = 0; i < o->nrules; i++)
		worst[i][0] = '\0';
	for (size_t i = 0; i < a->nlevels; i++) {
		const struct load_level *la = &a->levels[i], *lb;
		if (pair[i] < 0)
			continue;
		lb = &b->levels[pair[i]];
		if (la->runs > 1 || lb->runs > 1)
			fprintf(out, "%s: runs pooled, %u in A and %u in B: repeats of one "
			    "seed are not independent draws, so the intervals are of each "
			    "one's first run\n", la->label, la->runs ? la->runs : 1,
			    lb->runs ? lb->runs : 1);
		if (compare_level(a, la, b, lb, rows, nrows, o) < 0) {
			fprintf(out, "compare: out of memory\n");
			status = -1;
			break;
		}
		for (size_t k = 0; k < nrows; k++) {
			const struct row *r = &rows[k];
			char c[32], lo[32], hi[32], iv[80], verdict[96] = "";
			change_text(c, sizeof c, r, r->ci.change);
			if (isfinite(r->ci.lo)) {
				change_text(lo, sizeof lo, r, r->ci.lo);
				change_text(hi, sizeof hi, r, r->ci.hi);
				snprintf(iv, sizeof iv, "[%s, %s]%s", lo, hi, r->ci.significant ? " *" : "");
			} else {
				snprintf(iv, sizeof iv, "%s", r->fam == FAM_LEVEL ? "(a level's figure)" :
				    r->sampled ? "(too few samples)" : r->fam == FAM_ITL ?
				    "(gaps not saved)" : "(no samples)");
			}
			for (size_t u = 0; u < o->nrules; u++) {
				if (strcmp(o->rules[u].metric, r->metric) != 0 ||
				    !rule_fails(&o->rules[u], r))
					continue;
				failed[u]++;
				snprintf(verdict + strlen(verdict), sizeof verdict - strlen(verdict),
				    "  FAIL %s", o->rules[u].text);
				snprintf(worst[u] + strlen(worst[u]), sizeof worst[u] - strlen(worst[u]),
				    "%s%s (%s)", worst[u][0] ? ", " : "", la->label, c);
			}
			fprintf(out, "%-24.24s %-20s", k == 0 ? la->label : "", r->metric);
			value(out, r, r->ci.a);
			value(out, r, r->ci.b);
			fprintf(out, " %10s  %-22s%s\n", c, iv, verdict);
		}
	}
	for (size_t i = 0; i < a->nlevels; i++)
		if (pair[i] < 0)
			fprintf(out, "only in A: %s (not compared)\n", a->levels[i].label);
	for (size_t k = 0; k < b->nlevels; k++)
		if (!used[k])
			fprintf(out, "only in B: %s (not compared)\n", b->levels[k].label);
	if (status == 0 && o->nrules > 0) {
		fputc('\n', out);
		for (size_t u = 0; u < o->nrules; u++) {
			if (failed[u])
				fprintf(out, "fail-on %s: FAILED at %s\n", o->rules[u].text, worst[u]);
			else
				fprintf(out, "fail-on %s: passed at %zu level%s\n", o->rules[u].text,
				    matched, matched == 1 ? "" : "s");
			if (failed[u])
				status = 1;
		}
	}
	free(pair);
	free(used);
	return status;
}
