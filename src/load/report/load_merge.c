/* SPDX-License-Identifier: Apache-2.0 */
#include "load_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_shard.h"
#include "load_slo.h"

/* ---- one plan's shards, each once ---------------------------------------- */

/* Each document a shard's, with its samples, of one count; each index once.
 * Returns the problems found. */
static int check_shards(const struct load_doc *d, size_t n, FILE *err)
{
	uint32_t count = 0;
	size_t *seen;
	int bad = 0;

	/* the count of the first shard's document: the others' against it */
	for (size_t i = 0; i < n && count == 0; i++)
		if (d[i].r.merged == 0)
			count = d[i].conf.shards;
	for (size_t i = 0; i < n; i++) {
		if (d[i].r.merged > 0) {
			fprintf(err, "%s: a merged document, not a shard's\n", d[i].path);
			bad++;
		} else if (d[i].conf.shards == 0) {
			fprintf(err, "%s: not a shard's document (tokentap-load --shard I/N "
			    "--json FILE writes one)\n", d[i].path);
			bad++;
		} else if (!d[i].has_samples) {
			fprintf(err, "%s: saved with --no-samples: a merge computes every "
			    "figure from every request\n", d[i].path);
			bad++;
		} else if (d[i].conf.shards != count) {
			fprintf(err, "%s is shard %u/%u, where the first is of %u: the shard "
			    "counts differ\n", d[i].path, d[i].conf.shard, d[i].conf.shards,
			    count);
			bad++;
		}
	}
	if (bad > 0 || count == 0)
		return bad + (count == 0);
	seen = calloc(count, sizeof(*seen));
	if (seen == NULL) {
		fprintf(err, "merge: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t k = d[i].conf.shard;
		if (seen[k] != 0) {
			fprintf(err, "shard %u/%u twice: %s and %s\n", k, count,
			    d[seen[k] - 1].path, d[i].path);
			bad++;
		}
		seen[k] = i + 1;
	}
	for (uint32_t k = 0; k < count; k++)
		if (seen[k] == 0) {
			fprintf(err, "shard %u/%u missing: %u documents expected, %zu given\n",
			    k, count, count, n);
			bad++;
		}
	free(seen);
	return bad;
}

/* ---- one plan ------------------------------------------------------------ */

static void say(FILE *err, const struct load_doc *a, const struct load_doc *b,
    const char *where, const char *what, const char *va, const char *vb)
{
	fprintf(err, "%s and %s are not one plan: %s%s%s %s in the first, %s in the "
	    "second\n", a->path, b->path, where ? where : "", where ? ": " : "", what,
	    va, vb);
}

static int num_differs(FILE *err, const struct load_doc *a, const struct load_doc *b,
    const char *where, const char *what, double x, double y)
{
	char vx[32], vy[32];

	if (x == y || (isnan(x) && isnan(y)))
		return 0;
	snprintf(vx, sizeof vx, "%.10g", x);
	snprintf(vy, sizeof vy, "%.10g", y);
	say(err, a, b, where, what, vx, vy);
	return 1;
}

/* The parameters of a level (as load_read reads them back). */
static int conf_differs(FILE *err, const struct load_doc *a, const struct load_doc *b,
    const char *where, const struct load_conf *x, const struct load_conf *y)
{
	int n = 0;

#define NUM(what, f) n += num_differs(err, a, b, where, what, (double)x->f, (double)y->f)
	NUM("concurrency", concurrency);
	NUM("rate", rate);
	NUM("arrivals", arrivals);
	NUM("burstiness", burstiness);
	NUM("duration (us)", duration_us);
	NUM("requests (-n)", count);
	NUM("warm-up (us)", warmup_us);
	NUM("warm-up requests", warmup_count);
	NUM("cool-down", cooldown);
	NUM("prompt tokens (min)", prompt_tokens.min);
	NUM("prompt tokens (max)", prompt_tokens.max);
	NUM("max tokens (min)", max_tokens.min);
	NUM("max tokens (max)", max_tokens.max);
	NUM("timeout (us)", timeout_us);
	NUM("seed", seed);
	NUM("ramp (us)", ramp_us);
	NUM("continuous usage", continuous_usage);
	NUM("prefixes", prefixes);
	NUM("prefix tokens", prefix_tokens);
	NUM("prefix zipf", prefix_zipf);
#undef NUM
	return n;
}

static int str_differs(FILE *err, const struct load_doc *a, const struct load_doc *b,
    const char *what, const char *x, const char *y)
{
	char vx[80], vy[80];

	if (strcmp(x ? x : "", y ? y : "") == 0)
		return 0;
	/* a document's text: quoted, and only its printable ASCII */
	snprintf(vx, sizeof vx, "\"%.60s\"", x ? x : "");
	snprintf(vy, sizeof vy, "\"%.60s\"", y ? y : "");
	for (char *p = vx; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	for (char *p = vy; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	say(err, a, b, NULL, what, vx, vy);
	return 1;
}

/* The SLO's targets as one line ("none" without), to say and compare. */
static const char *slo_text(const struct load_slo *slo, char *buf, size_t len)
{
	size_t at = 0;

	snprintf(buf, len, "%s", slo->n == 0 ? "none" : "");
	for (size_t i = 0; i < slo->n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s<=%.9g", i ? " " : "",
		    slo->v[i].name, slo->v[i].limit);
	if (slo->n > 0 && at < len)
		snprintf(buf + at, len - at, " at %.4g", slo->confidence);
	return buf;
}

/* The percentiles reported, as one line. */
static const char *pcts_text(const struct load_pcts *p, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < p->n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%.17g", i ? "," : "", p->p[i]);
	return buf;
}

/* b against a: every difference said; returns how many. */
static int plan_differs(FILE *err, const struct load_doc *a, const struct load_doc *b)
{
	static const char *const kinds[] = {"run", "sweep", "capacity"};
	char sa[LOAD_SLO_MAX * 48], sb[sizeof sa], pa[LOAD_MAX_PCTS * 24], pb[sizeof pa];
	int n = 0;

	if (a->r.kind != b->r.kind) {
		say(err, a, b, NULL, "the kind", kinds[a->r.kind], kinds[b->r.kind]);
		return 1;
	}
	n += str_differs(err, a, b, "the target", a->conf.url, b->conf.url);
	n += str_differs(err, a, b, "the model", a->conf.model, b->conf.model);
	n += str_differs(err, a, b, "the dialect", dialect_names[load_conf_dialect(&a->conf)],
	    dialect_names[load_conf_dialect(&b->conf)]);
	n += num_differs(err, a, b, NULL, "the prompts' bytes per token",
	    a->r.psize.bytes_per_token, b->r.psize.bytes_per_token);
	n += str_differs(err, a, b, "the SLO", slo_text(&a->r.slo, sa, sizeof sa),
	    slo_text(&b->r.slo, sb, sizeof sb));
	n += str_differs(err, a, b, "the percentiles", pcts_text(&a->r.pcts, pa, sizeof pa),
	    pcts_text(&b->r.pcts, pb, sizeof pb));
	n += num_differs(err, a, b, NULL, "the levels", (double)a->r.nlevels,
	    (double)b->r.nlevels);
	for (size_t i = 0; i < a->r.nlevels && i < b->r.nlevels; i++) {
		const struct load_level *x = &a->r.levels[i], *y = &b->r.levels[i];
		char where[100];
		snprintf(where, sizeof where, "level %zu", i);
		n += num_differs(err, a, b, where, "the key", x->key, y->key);
		n += num_differs(err, a, b, where, "the value", x->value, y->value);
		n += conf_differs(err, a, b, where, &x->conf, &y->conf);
	}
	if (n == 0 && strcmp(a->r.plan, b->r.plan) != 0) {
		fprintf(err, "%s and %s are not one plan: their digests differ (the "
		    "prompts or trace file, or the headers sent)\n", a->path, b->path);
		n++;
	}
	return n;
}

/* ---- the join ------------------------------------------------------------- */

/* A level's start on the wall clock (us since the epoch). */
static double wall_us(const struct load_doc *d, size_t level)
{
	return (double)d->r.wall_start_ms * 1e3 + d->r.levels[level].started_s * 1e6;
}

struct ref {
	const struct load_sample *s;
	const struct loadstats *st;
	uint64_t shift;
};

/* In the plan's order: by seq (each seq is one shard's). */
static int by_seq(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->s->seq != y->s->seq)
		return x->s->seq < y->s->seq ? -1 : 1;
	return x->s->start_us < y->s->start_us ? -1 : x->s->start_us > y->s->start_us;
}

/* Every shard's samples of level j, shifted onto one timeline, into lv. */
static int pool(struct load_level *lv, const struct load_doc *d, size_t n, size_t j,
    const uint64_t *shift)
{
	struct ref *v;
	size_t total = 0, k = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		total += d[i].r.levels[j].st.n;
	v = calloc(total + 1, sizeof(*v));
	if (v == NULL)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct loadstats *st = &d[i].r.levels[j].st;
		for (size_t q = 0; q < st->n; q++)
			v[k++] = (struct ref){ &st->v[q], st, shift[i] };
	}
	qsort(v, total, sizeof(*v), by_seq);
	for (k = 0; k < total && rc == 0; k++) {
		struct load_sample s = *v[k].s;
		s.start_us += v[k].shift;
		if (s.first_token_us >= 0)
			s.first_token_us += (int64_t)v[k].shift;
		if (s.last_token_us >= 0)
			s.last_token_us += (int64_t)v[k].shift;
		rc = loadstats_record(&lv->st, &s, v[k].st->itl + s.itl_off, s.itl_n);
	}
	free(v);
	return rc;
}

/* The run facts of level j: summed over the shards (their CPU, connections,
 * waits), the largest of their lates, the latest end; the window common to
 * all: from the latest start to the earliest end, the time all of them
 * ran; a level of a count (-n, no -d) to the latest end, as one machine's
 * window runs to its count's last answer (to the earliest, the shards'
 * last answers would fall out of it). Returns -1 when the windows do not
 * overlap. */
static int facts(struct load_level *lv, const struct load_doc *d, size_t n, size_t j,
    const uint64_t *shift)
{
	struct load_run_info *o = &lv->info;
	const struct load_conf *c = &d[0].r.levels[j].conf;
	int by_count = c->count > 0 && c->duration_us == 0;
	uint64_t ws = 0, we = by_count ? 0 : UINT64_MAX;

	o->read_late_p99_ms = o->read_late_max_ms = NAN;
	for (size_t i = 0; i < n; i++) {
		const struct load_run_info *x = &d[i].r.levels[j].info;
		if (shift[i] + x->window_start_us > ws)
			ws = shift[i] + x->window_start_us;
		if (by_count ? shift[i] + x->window_end_us > we :
		    shift[i] + x->window_end_us < we)
			we = shift[i] + x->window_end_us;
		if (shift[i] + x->elapsed_us > o->elapsed_us)
			o->elapsed_us = shift[i] + x->elapsed_us;
		o->connections += x->connections;
		o->queued += x->queued;
		o->warmup_requests += x->warmup_requests;
		o->cooldown_requests += x->cooldown_requests;
		o->max_in_flight += x->max_in_flight;
		/* a read document keeps its CPU in its generator's figures */
		o->cpu_s += d[i].r.levels[j].sum.gen.cpu_s;
		o->interrupted |= x->interrupted;
		/* the worst shard's (NaN: one that could not tell) */
		if (!isnan(x->read_late_max_ms) && !(x->read_late_max_ms <= o->read_late_max_ms))
			o->read_late_max_ms = x->read_late_max_ms;
		if (!isnan(x->read_late_p99_ms) && !(x->read_late_p99_ms <= o->read_late_p99_ms))
			o->read_late_p99_ms = x->read_late_p99_ms;
	}
	o->start_us = d[0].r.levels[j].info.start_us;
	o->read_late_stamps = d[0].r.levels[j].info.read_late_stamps;
	o->window_start_us = ws;
	o->window_end_us = we;
	return we > ws ? 0 : -1;
}

/* Level j of every shard as one level of m. */
static int join_level(struct load_merged *m, const struct load_doc *d, size_t n,
    size_t j, FILE *err)
{
	const struct load_level *first = &d[0].r.levels[j];
	struct load_level *lv;
	uint64_t shift[LOAD_SHARD_MAX];
	double origin = INFINITY;

	for (size_t i = 0; i < n; i++)
		origin = fmin(origin, wall_us(&d[i], j));
	for (size_t i = 0; i < n; i++) {
		shift[i] = (uint64_t)llround(wall_us(&d[i], j) - origin);
		m->r.merged_skew_s = fmax(m->r.merged_skew_s, (double)shift[i] / 1e6);
	}
	lv = load_result_add(&m->r, first->key, first->value, &first->conf);
	if (lv == NULL) {
		fprintf(err, "merge: out of memory\n");
		return -1;
	}
	snprintf(lv->label, sizeof lv->label, "%s", first->label);
	lv->runs = 1;
	lv->started_s = (origin - (double)m->r.wall_start_ms * 1e3) / 1e6;
	if (facts(lv, d, n, j, shift) < 0) {
		fprintf(err, "merge: the shards' windows of level %zu do not overlap (they "
		    "started %.3f s apart): they did not run at the same time\n", j,
		    m->r.merged_skew_s);
		return -1;
	}
	if (pool(lv, d, n, j, shift) < 0 || load_result_summarise(&m->r, lv) < 0) {
		fprintf(err, "merge: out of memory\n");
		return -1;
	}
	return 0;
}

int load_merge(struct load_merged *m, const struct load_doc *docs, size_t n,
    int argc, char **argv, FILE *err)
{
	const struct load_result *a = &docs[0].r;
	int bad;

	memset(m, 0, sizeof(*m));
	if (n == 0 || (bad = check_shards(docs, n, err)) > 0)
		return -1;
	for (size_t i = 1; i < n; i++)
		bad += plan_differs(err, &docs[0], &docs[i]);
	if (bad > 0)
		return -1;
	if (load_conf_copy(&m->conf, &docs[0].conf) < 0) {
		fprintf(err, "merge: out of memory\n");
		return -1;
	}
	m->conf.shard = m->conf.shards = 0;
	load_result_init(&m->r, a->kind, &m->conf, argc, argv);
	snprintf(m->r.run_id, sizeof m->r.run_id, "%s", a->run_id);
	m->r.pcts = a->pcts;
	m->r.slo = a->slo;
	m->r.slice_us = a->slice_us;
	m->r.sweep_key = a->sweep_key;
	m->r.stop_reason = a->stop_reason;
	m->r.mono_start_us = a->mono_start_us;
	m->r.merged = (unsigned)n;
	memcpy(m->r.plan, a->plan, sizeof m->r.plan);
	for (size_t i = 0; i < n; i++) {
		if (docs[i].r.wall_start_ms < m->r.wall_start_ms)
			m->r.wall_start_ms = docs[i].r.wall_start_ms;
		m->r.interrupted |= docs[i].r.interrupted;
	}
	for (size_t j = 0; j < a->nlevels; j++)
		if (join_level(m, docs, n, j, err) < 0) {
			load_merged_free(m);
			return -1;
		}
	if (m->r.kind == LOAD_KIND_SWEEP && m->r.sweep_key == LOAD_KEY_PROMPT_TOKENS)
		load_result_input_fit(&m->r);
	return 0;
}

void load_merged_free(struct load_merged *m)
{
	load_result_free(&m->r);
	load_conf_free(&m->conf);
	memset(m, 0, sizeof(*m));
}
