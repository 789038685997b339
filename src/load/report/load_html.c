/* SPDX-License-Identifier: Apache-2.0 */
#include "load_html.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_html_verdict.h"
#include "load_prefix_use.h"
#include "load_turns.h"
#include "load_report.h"
#include "load_svg.h"
#include "util.h"

/* A series of a chart against load: a figure by load_summary_value's name. */
struct spec {
	const char *name;            /* "ttft_p95" */
	const char *label;           /* "TTFT p95" */
	int cls, style;
};

static const char css[] =
    ":root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--mute:#6b6b70;--grid:#e3e3e8;"
    "--panel:#f7f7f9;--c0:#2f6fdf;--c1:#e0662a;--c2:#2a9d5c;--c3:#9b51e0;--c4:#d63384;"
    "--c5:#8a8a00;--c6:#0b9bb5;--c7:#777;--bad:#d62839}\n"
    "@media (prefers-color-scheme:dark){:root{--fg:#e8e8ea;--bg:#151517;--mute:#9a9aa2;"
    "--grid:#2c2c31;--panel:#1d1d21}}\n"
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--fg);"
    "background:var(--bg);margin:0;padding:20px 28px}\n"
    "h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}h2{font-size:16px;margin:0 0 6px}\n"
    ".sub,.note{color:var(--mute);margin:2px 0 8px}code{font-size:12px;word-break:break-all}\n"
    ".panels{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(560px,100%),1fr));"
    "gap:16px}\n"
    ".panel{background:var(--panel);border-radius:8px;padding:14px 16px;min-width:0}\n"
    ".panel.wide{grid-column:1/-1}.panel.short{align-self:start}.verdict li{margin:2px 0}\n"
    ".scroll{overflow-x:auto}table{border-collapse:collapse;font-variant-numeric:"
    "tabular-nums;font-size:13px}th,td{padding:3px 8px;text-align:right;white-space:nowrap}"
    "th:first-child,td:first-child,td[data-k=label],#levels th:nth-child(2){text-align:left}"
    "thead th{border-bottom:1px solid var(--grid)}"
    "tr.knee td{font-weight:600}tr.cap td[data-k=label]::after{content:' \\25C6'}\n"
    ".missed{color:var(--bad)}\n"
    "svg.chart{width:100%;height:auto;display:block;font-size:11px}"
    "svg.chart text{fill:var(--mute)}svg .grid line{stroke:var(--grid)}"
    "svg .axis path{stroke:var(--mute);fill:none}svg .label{fill:var(--fg)}\n"
    "svg .line{fill:none;stroke-width:2}svg .dash{stroke-dasharray:5 4}\n"
    ".s0{--c:var(--c0)}.s1{--c:var(--c1)}.s2{--c:var(--c2)}.s3{--c:var(--c3)}"
    ".s4{--c:var(--c4)}.s5{--c:var(--c5)}.s6{--c:var(--c6)}.s7{--c:var(--c7)}\n"
    "svg .series .line,svg .legend .line{stroke:var(--c)}svg circle{fill:var(--c)}"
    "svg rect.bar{fill:var(--c)}\n"
    "svg .limit line{stroke:var(--bad);stroke-dasharray:3 3}svg .limit text{fill:var(--bad)}\n"
    "svg .mark circle{fill:none;stroke:var(--fg);stroke-width:2}svg .mark text{fill:var(--fg)}"
    "svg .mark.cap circle{stroke:var(--bad)}svg .mark.cap text{fill:var(--bad)}\n"
    "svg .tl .wait{fill:var(--c1)}svg .tl .decode{fill:var(--c0)}svg .tl .err{fill:var(--bad)}"
    "svg .tl .off{opacity:.35}svg .win line{stroke:var(--fg);stroke-dasharray:2 3}"
    "svg .win text{fill:var(--fg)}\n"
    /* a phone: the charts scale down whole, as little margin as will do */
    "@media (max-width:600px){body{padding:12px 8px}.panel{padding:10px 6px}}\n";

/* ---- figures ------------------------------------------------------------- */

static const char *axis_name(enum load_key k)
{
	switch (k) {
	case LOAD_KEY_CONCURRENCY:
		return "concurrency (users)";
	case LOAD_KEY_RATE:
		return "request rate (requests/s)";
	case LOAD_KEY_PROMPT_TOKENS:
		return "prompt tokens";
	default:
		return "level";
	}
}

/* A level in a legend or under a bar: its load, short ("16 users"). */
static void short_label(const struct load_level *lv, char *buf, size_t len)
{
	char v[32];

	load_svg_num(v, sizeof v, lv->value);
	switch (lv->key) {
	case LOAD_KEY_CONCURRENCY:
		snprintf(buf, len, "%s users", v);
		break;
	case LOAD_KEY_RATE:
		snprintf(buf, len, "%s/s", v);
		break;
	case LOAD_KEY_PROMPT_TOKENS:
		snprintf(buf, len, "%s tokens", v);
		break;
	default:
		snprintf(buf, len, "%s", lv->label);
	}
}

/* ---- the groups, the longest level ----------------------------------------- */

static int by_value(const void *a, const void *b, void *arg)
{
	const struct load_result *r = arg;
	double x = r->levels[*(const int *)a].value, y = r->levels[*(const int *)b].value;

	return x < y ? -1 : x > y ? 1 : *(const int *)a - *(const int *)b;
}

static int page_init(struct load_page *pg, FILE *f, const struct load_result *r)
{
	static const enum load_key keys[] = {LOAD_KEY_CONCURRENCY, LOAD_KEY_RATE,
		LOAD_KEY_PROMPT_TOKENS};
	double best = -1;

	memset(pg, 0, sizeof(*pg));
	pg->f = f;
	pg->r = r;
	pg->longest = -1;
	for (size_t i = 0; i < r->nlevels; i++) {
		/* the longest window; of equal ones the last (a sweep's highest load) */
		double w = r->levels[i].sum.window_s;
		if (isfinite(w) && w >= best) {
			best = w;
			pg->longest = (int)i;
		}
	}
	for (size_t k = 0; k < UTIL_ARRAY_LEN(keys) && r->kind != LOAD_KIND_RUN; k++) {
		struct load_group *g = &pg->g[pg->ng];
		g->lv = malloc((r->nlevels + 1) * sizeof(int));
		if (g->lv == NULL)
			return -1;
		g->key = keys[k];
		for (size_t i = 0; i < r->nlevels; i++)
			if (r->levels[i].key == keys[k] && isfinite(r->levels[i].value))
				g->lv[g->n++] = (int)i;
		if (g->n == 0) {
			free(g->lv);
			g->lv = NULL;
			continue;
		}
		qsort_r(g->lv, g->n, sizeof(int), by_value, (void *)r);
		pg->ng++;
	}
	return 0;
}

static void page_free(struct load_page *pg)
{
	for (size_t i = 0; i < pg->ng; i++)
		free(pg->g[i].lv);
}

/* ---- the head: what was run (the verdict: load_html_verdict.c) -------------- */

static const char *kind_name(enum load_kind k)
{
	return k == LOAD_KIND_SWEEP ? "sweep" : k == LOAD_KIND_CAPACITY ? "capacity search" :
	    "run";
}

/* How synthetic prompts were sized, and the target's count of what was
 * sent over every level (load_psize.h). */
static void prompt_sizing(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	const struct load_psize *p = &r->psize;
	struct load_psize_check k;
	char buf[200];
	int n;

	memset(&k, 0, sizeof(k));
	for (size_t i = 0; i < r->nlevels; i++)
		load_psize_check_add(&k, &r->levels[i].sum.prompt);
	load_psize_format(p, buf, sizeof buf);
	n = (int)strlen(buf);
	n += snprintf(buf + n, sizeof buf - (size_t)n, ", %s",
	    p->rule == LOAD_PSIZE_RULE_CALIBRATED ? "calibrated on the target" :
	    p->rule == LOAD_PSIZE_RULE_GIVEN ? "as given" : "an estimate");
	if (k.requests > 0 && (size_t)n < sizeof buf)
		snprintf(buf + n, sizeof buf - (size_t)n, "; %.1f tokens asked, %.1f "
		    "reported by the target (x%.3f)", k.asked_mean, k.reported_mean,
		    k.ratio_mean);
	else if (p->estimate && (size_t)n < sizeof buf)
		snprintf(buf + n, sizeof buf - (size_t)n, "; the target reported no prompt "
		    "token counts");
	fputs("<p class=\"sub\" id=\"prompt-sizing\">prompts sized at ", pg->f);
	text(pg, buf);
	fputs("</p>\n", pg->f);
}

static void head(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	FILE *f = pg->f;
	char ts[32];

	fputs("<header><h1>tokentap-load: ", f);
	text(pg, kind_name(r->kind));
	fputs(" of ", f);
	text(pg, r->conf->url);
	fputs("</h1>\n<p class=\"sub\" id=\"meta\">model <span data-k=\"model\">", f);
	text(pg, r->conf->model);
	fputs("</span> · dialect ", f);
	text(pg, dialect_names[load_conf_dialect(r->conf)]);
	if (r->wall_start_ms > 0) {
		util_rfc3339_ms(r->wall_start_ms, ts);
		fputs(" · started ", f);
		text(pg, ts);
	}
	fputs(" · run ", f);
	text(pg, r->run_id);
	fprintf(f, " · %zu level%s</p>\n<p class=\"sub\">command <code id=\"command\">",
	    r->nlevels, r->nlevels == 1 ? "" : "s");
	for (int i = 0; i < r->argc; i++) {
		if (i > 0)
			fputc(' ', f);
		text(pg, r->argv[i]);
	}
	fputs("</code></p>\n", f);
	prompt_sizing(pg);
	fputs("</header>\n", f);
}

/* ---- the levels table ----------------------------------------------------- */

static void cell(struct load_page *pg, const char *k, double v, int dec, int cls_missed)
{
	if (!isfinite(v)) {
		fprintf(pg->f, "<td data-k=\"%s\">-</td>", k);
		return;
	}
	fprintf(pg->f, "<td data-k=\"%s\" data-value=\"%.9g\"%s>%.*f</td>", k, v,
	    cls_missed ? " class=\"missed\"" : "", dec, v);
}

static void levels_table(struct load_page *pg)
{
	static const struct { const char *k, *head; int dec; } cols[] = {
		{"requests_per_s", "req/s", 2}, {"output_tokens_per_s", "out tok/s", 1},
		{"ttft_p50", "TTFT p50", 2}, {"ttft_p95", "TTFT p95", 2},
		{"tpot_p50", "TPOT p50", 2}, {"tpot_p95", "TPOT p95", 2},
		{"itl_p50", "ITL p50", 2}, {"itl_p95", "ITL p95", 2},
		{"e2e_p50", "E2E p50", 1}, {"e2e_p95", "E2E p95", 1},
	};
	const struct load_result *r = pg->r;
	FILE *f = pg->f;

	section(pg, "levels", "Levels", 1, "Latencies in ms over the measured ok requests; "
	    "throughput inside each level's window.");
	fputs("<div class=\"scroll\"><table id=\"levels\"><thead><tr><th>#</th><th>level</th>"
	    "<th>requests</th>", f);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(cols); i++)
		fprintf(f, "<th>%s</th>", cols[i].head);
	fprintf(f, "<th>errors</th>%s</tr></thead><tbody>\n", r->slo.n ? "<th>SLO</th>" : "");
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		int cap = 0;
		for (size_t k = 0; k < r->ncapacity; k++)
			cap |= r->capacity[k].ran && r->capacity[k].found &&
			    lv->search == r->capacity[k].key && lv->value == r->capacity[k].lo;
		fprintf(f, "<tr data-level=\"%zu\" data-key=\"%s\" data-value=\"%.9g\"%s>"
		    "<td>%zu</td><td data-k=\"label\">", i, load_key_name(lv->key), lv->value,
		    (int)i == r->knee ? " class=\"knee\"" : cap ? " class=\"cap\"" : "", i);
		text(pg, lv->label);
		fprintf(f, "</td><td data-k=\"requests\" data-value=\"%" PRIu64 "\">%" PRIu64
		    "</td>", lv->sum.requests, lv->sum.requests);
		for (size_t k = 0; k < UTIL_ARRAY_LEN(cols); k++)
			cell(pg, cols[k].k, fig(pg, lv, cols[k].k), cols[k].dec, 0);
		fprintf(f, "<td data-k=\"error_rate\" data-value=\"%.9g\"%s>%.2f %%</td>",
		    lv->sum.error_rate, lv->sum.errors ? " class=\"missed\"" : "",
		    100 * lv->sum.error_rate);
		if (r->slo.n)
			fprintf(f, "<td data-k=\"slo\" data-value=\"%d\"%s>%s</td>",
			    lv->has_slo && lv->slo.met, lv->has_slo && lv->slo.met ? "" :
			    " class=\"missed\"", !lv->has_slo ? "-" : lv->slo.met ? "met" : "missed");
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
	end_section(pg);
}

/* A single run's distributions in full. */
/* One row of the distributions table: metric key, its name, d. */
static void dist_tr(struct load_page *pg, const char *key, const char *name,
    const struct load_dist *d)
{
	const struct load_pcts *p = &pg->r->pcts;
	char k[48], pn[32];

	fprintf(pg->f, "<tr data-metric=\"%s\"><td>%s</td><td data-k=\"count\" "
	    "data-value=\"%zu\">%zu</td>", key, name, d->count, d->count);
	for (size_t q = 0; q < p->n; q++) {
		load_pcts_name(p->p[q], pn, sizeof pn);
		snprintf(k, sizeof k, "%s_%s", key, pn);
		cell(pg, k, d->q[q], 2, 0);
	}
	snprintf(k, sizeof k, "%s_mean", key);
	cell(pg, k, d->mean, 2, 0);
	snprintf(k, sizeof k, "%s_std", key);
	cell(pg, k, d->std, 2, 0);
	snprintf(k, sizeof k, "%s_max", key);
	cell(pg, k, d->max, 2, 0);
	fputs("</tr>\n", pg->f);
}

static void dists_table(struct load_page *pg, const struct load_level *lv)
{
	static const struct { const char *k, *name; } rows[] = {
		{"ttft", "TTFT ms"}, {"ttfo", "TTFO ms"}, {"tpot", "TPOT ms"},
		{"itl", "ITL ms"}, {"e2e", "E2E latency ms"},
	};
	const struct load_pcts *p = &pg->r->pcts;
	FILE *f = pg->f;
	char pn[32];

	section(pg, "dists", "Distributions", 1, "Exact, from every measured ok request "
	    "(numpy's percentile rule).");
	fputs("<div class=\"scroll\"><table id=\"dists\"><thead><tr><th></th><th>count</th>", f);
	for (size_t i = 0; i < p->n; i++) {
		load_pcts_name(p->p[i], pn, sizeof pn);
		fprintf(f, "<th>%s</th>", pn);
	}
	fputs("<th>mean</th><th>std</th><th>max</th></tr></thead><tbody>\n", f);
	for (size_t i = 0; i < UTIL_ARRAY_LEN(rows); i++) {
		dist_tr(pg, rows[i].k, rows[i].name, dist_of(&lv->sum, rows[i].k));
		/* --prefixes: TTFT at each prefix's first use, and repeating one */
		if (i == 0 && lv->conf.prefixes > 0) {
			struct load_prefix_use u;
			(void)load_prefix_use_of(lv, p, &u);
			dist_tr(pg, "ttft_prefix_first", "TTFT, a prefix's first use", &u.ttft[0]);
			dist_tr(pg, "ttft_prefix_repeat", "TTFT, a prefix repeated", &u.ttft[1]);
			load_prefix_use_free(&u);
		}
	}
	fputs("</tbody></table></div>\n", f);
	end_section(pg);
}

/* One level's rows of the turns table. */
static void turns_rows(struct load_page *pg, size_t i, const struct load_turns *t)
{
	const struct load_pcts *p = &pg->r->pcts;

	for (size_t j = 0; j < t->n; j++) {
		const struct load_turns_row *w = &t->v[j];
		double t95 = NAN, p95 = NAN;
		/* the first 8 and the last 2 of a long conversation */
		if (t->n > 10 && j >= 8 && j < t->n - 2)
			continue;
		for (size_t q = 0; q < p->n; q++)
			if (p->p[q] == 95) {
				t95 = w->ttft.q[q];
				p95 = w->tpot.q[q];
			}
		fprintf(pg->f, "<tr data-level=\"%zu\" data-turn=\"%u\"><td>%zu</td><td>%u</td>"
		    "<td data-k=\"requests\" data-value=\"%" PRIu64 "\">%" PRIu64 "</td>"
		    "<td data-k=\"ok\" data-value=\"%" PRIu64 "\">%" PRIu64 "</td>", i, w->turn,
		    i, w->turn, w->requests, w->requests, w->ok, w->ok);
		cell(pg, "prompt_tokens_mean", w->prompt_tokens, 1, 0);
		cell(pg, "ttft_p50", w->ttft.median, 2, 0);
		cell(pg, "ttft_p95", t95, 2, 0);
		cell(pg, "tpot_p50", w->tpot.median, 2, 0);
		cell(pg, "tpot_p95", p95, 2, 0);
		fputs("</tr>\n", pg->f);
	}
}

/* Conversations: each level's figures per turn, turn 1 beside turn K. */
static void turns_table(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	struct load_turns t;
	int any = 0;

	for (size_t i = 0; i < r->nlevels; i++) {
		if (load_turns_of(&r->levels[i], &r->pcts, &t) < 0 || t.n == 0) {
			load_turns_free(&t);
			continue;
		}
		if (!any) {
			section(pg, "turns", "Turns", 1, "Conversations: each turn index's "
			    "measured requests; the prompt asked for (the history and the new "
			    "message), TTFT and TPOT in ms over its ok requests.");
			fputs("<div class=\"scroll\"><table id=\"turns\"><thead><tr><th>#</th>"
			    "<th>turn</th><th>requests</th><th>ok</th><th>prompt tok</th>"
			    "<th>TTFT p50</th><th>TTFT p95</th><th>TPOT p50</th><th>TPOT p95</th>"
			    "</tr></thead><tbody>\n", pg->f);
			any = 1;
		}
		turns_rows(pg, i, &t);
		load_turns_free(&t);
	}
	if (any) {
		fputs("</tbody></table></div>\n", pg->f);
		end_section(pg);
	}
}

/* ---- charts against load --------------------------------------------------- */

/* SLO limits of metric (its targets "metric_..."), as lines on a chart. */
static void slo_lines(struct load_page *pg, struct load_plot *p, const char *metric)
{
	const struct load_slo *slo = &pg->r->slo;
	size_t n = strlen(metric);

	for (size_t i = 0; i < slo->n; i++) {
		char label[64], attrs[96], lim[32];
		if (strncmp(slo->v[i].name, metric, n) != 0 || slo->v[i].name[n] != '_' ||
		    slo->v[i].metric == LOAD_SLO_ERROR_RATE)
			continue;
		load_svg_num(lim, sizeof lim, slo->v[i].limit);
		snprintf(label, sizeof label, "%s <= %s ms", slo->v[i].name, lim);
		snprintf(attrs, sizeof attrs, "data-target=\"%s\" data-limit=\"%.9g\"",
		    slo->v[i].name, slo->v[i].limit);
		load_plot_hline(p, slo->v[i].limit, label, attrs);
	}
}

static double slo_top(const struct load_page *pg, const char *metric)
{
	const struct load_slo *slo = &pg->r->slo;
	size_t n = strlen(metric);
	double top = 0;

	for (size_t i = 0; i < slo->n; i++)
		if (strncmp(slo->v[i].name, metric, n) == 0 && slo->v[i].name[n] == '_' &&
		    slo->v[i].metric != LOAD_SLO_ERROR_RATE && slo->v[i].limit > top)
			top = slo->v[i].limit;
	return top;
}

/* Load that doubles reads best on a log scale. */
static int wants_log(const struct load_group *g, const double *x)
{
	return g->key != LOAD_KEY_PROMPT_TOKENS && x[0] > 0 && x[g->n - 1] / x[0] >= 8;
}

/* One chart of figures against a group's load; slo: the metric whose
 * limits to draw (NULL: none). */
static void load_chart(struct load_page *pg, const struct load_group *g, const char *id,
    const char *title, const char *ylabel, const struct spec *s, size_t ns,
    const char *slo)
{
	const struct load_result *r = pg->r;
	double *x, *y;
	const char *names[8];
	int cls[8], dash[8];
	double top = slo ? slo_top(pg, slo) : 0;
	struct load_plot p;
	char cid[48];

	if (xy_alloc(&x, g->n, &y, g->n * ns) < 0)
		return;
	for (size_t i = 0; i < g->n; i++) {
		x[i] = r->levels[g->lv[i]].value;
		for (size_t k = 0; k < ns; k++) {
			y[k * g->n + i] = fig(pg, &r->levels[g->lv[i]], s[k].name);
			if (y[k * g->n + i] > top)
				top = y[k * g->n + i];
		}
	}
	snprintf(cid, sizeof cid, "%s-%s", id, load_key_name(g->key));
	load_plot_init(&p, pg->f, x[0], x[g->n - 1], wants_log(g, x), 0, top);
	load_plot_open(&p, cid, title, axis_name(g->key), ylabel);
	for (size_t k = 0; k < ns && k < 8; k++) {
		names[k] = s[k].label;
		cls[k] = s[k].cls;
		dash[k] = s[k].style & LOAD_SVG_DASH;
		load_plot_series(&p, s[k].name, s[k].label, s[k].cls, s[k].style, x,
		    y + k * g->n, g->n, g->lv);
	}
	if (slo != NULL)
		slo_lines(pg, &p, slo);
	load_plot_legend(&p, names, cls, dash, ns < 8 ? ns : 8);
	load_plot_close(&p);
	free(x);
	free(y);
}

static void panel_latency(struct load_page *pg)
{
	static const struct spec ttft[] = {
		{"ttft_p50", "TTFT p50", 0, 0}, {"ttft_p95", "TTFT p95", 0, LOAD_SVG_DASH},
	};
	static const struct spec e2e[] = {
		{"e2e_p50", "E2E p50", 1, 0}, {"e2e_p95", "E2E p95", 1, LOAD_SVG_DASH},
	};

	section(pg, "latency", "TTFT and end-to-end latency against load", 0,
	    "P50 solid, P95 dashed; SLO limits in red.");
	for (size_t i = 0; i < pg->ng; i++) {
		load_chart(pg, &pg->g[i], "ttft", "TTFT against load", "TTFT (ms)", ttft, 2,
		    "ttft");
		load_chart(pg, &pg->g[i], "e2e", "End-to-end latency against load",
		    "end-to-end latency (ms)", e2e, 2, "e2e");
	}
	end_section(pg);
}

static void panel_tpot(struct load_page *pg)
{
	static const struct spec s[] = {
		{"tpot_p50", "TPOT p50", 2, 0}, {"tpot_p95", "TPOT p95", 2, LOAD_SVG_DASH},
		{"itl_p50", "ITL p50", 3, 0}, {"itl_p95", "ITL p95", 3, LOAD_SVG_DASH},
	};

	section(pg, "tpot", "TPOT and ITL against load", 0,
	    "Time per output token (over the tokens after the first chunk) and the gaps "
	    "between token chunks.");
	for (size_t i = 0; i < pg->ng; i++) {
		load_chart(pg, &pg->g[i], "tpot", "TPOT against load", "ms", s, 2, "tpot");
		load_chart(pg, &pg->g[i], "itl", "ITL against load", "ms", s + 2, 2, "itl");
	}
	end_section(pg);
}

static void panel_throughput(struct load_page *pg)
{
	static const struct spec s[] = {
		{"output_tokens_per_s", "output tokens/s", 0, 0},
	};

	section(pg, "throughput", "Output tokens/s against load", 0,
	    "Tokens emitted inside each level's window, divided by its length.");
	for (size_t i = 0; i < pg->ng; i++)
		load_chart(pg, &pg->g[i], "throughput", "Output tokens/s against load",
		    "output tokens/s", s, 1, NULL);
	end_section(pg);
}

/* ---- errors ----------------------------------------------------------------- */

static int any_error(const struct load_result *r)
{
	for (size_t i = 0; i < r->nlevels; i++)
		if (r->levels[i].sum.errors > 0)
			return 1;
	return 0;
}

static void panel_errors(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	double top = 0;
	struct load_plot p;
	const char *names[OUTCOME_COUNT];
	int cls[OUTCOME_COUNT], seen[OUTCOME_COUNT] = {0}, one_key = 1;
	size_t nn = 0;

	for (size_t i = 0; i < r->nlevels; i++) {
		top = fmax(top, isfinite(r->levels[i].sum.error_rate) ?
		    100 * r->levels[i].sum.error_rate : 0);
		for (int o = 1; o < OUTCOME_COUNT; o++)
			seen[o] |= r->levels[i].sum.outcomes[o] > 0;
	}
	if (!any_error(r)) {
		/* an empty chart reads as a broken one */
		section(pg, "errors", "Errors by cause", 2, NULL);
		empty(pg, r->nlevels == 1 ? "No errors: every measured request was ok." :
		    "No errors: every measured request of every level was ok.");
		end_section(pg);
		return;
	}
	section(pg, "errors", "Errors by cause", 0, "Share of each level's measured "
	    "requests, by outcome (docs/contract.md §4's one rule).");
	load_plot_init(&p, pg->f, -0.5, (double)r->nlevels - 0.5, 0, 0, top > 0 ? top : 1);
	p.nxt = 0;                   /* the levels label their bars */
	for (size_t i = 1; i < r->nlevels; i++)
		one_key &= r->levels[i].key == r->levels[0].key;
	load_plot_open(&p, "errors-chart", "Error rate by cause per level",
	    one_key && r->nlevels && r->nlevels <= 10 ? axis_name(r->levels[0].key) :
	    "level (#, as in the table)", "error rate (%)");
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		double x = load_plot_x(&p, (double)i), w = fmin(40, 0.7 * (p.w - p.ml - p.mr) /
		    (double)(r->nlevels ? r->nlevels : 1)), acc = 0;
		char v[32];
		for (int o = 1; o < OUTCOME_COUNT; o++) {
			double share = lv->sum.requests ? 100.0 * (double)lv->sum.outcomes[o] /
			    (double)lv->sum.requests : 0;
			if (lv->sum.outcomes[o] == 0)
				continue;
			fprintf(pg->f, "<rect class=\"bar s%d\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			    "height=\"%.1f\" data-level=\"%zu\" data-outcome=\"%s\" data-count=\"%"
			    PRIu64 "\" data-value=\"%.9g\"><title>", o % 8, x - w / 2,
			    load_plot_y(&p, acc + share), w,
			    load_plot_y(&p, acc) - load_plot_y(&p, acc + share), i,
			    meter_outcome_name((enum meter_outcome)o), lv->sum.outcomes[o],
			    share / 100);
			text(pg, lv->label);
			fprintf(pg->f, ": %" PRIu64 " %s (%.2f %%)</title></rect>",
			    lv->sum.outcomes[o], meter_outcome_name((enum meter_outcome)o), share);
			acc += share;
		}
		/* the load under its bar while they fit, else the level's index */
		if (lv->key != LOAD_KEY_NONE && one_key && r->nlevels <= 10)
			load_svg_num(v, sizeof v, lv->value);
		else
			snprintf(v, sizeof v, "%zu", i);
		fprintf(pg->f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
		    "data-level=\"%zu\" data-error-rate=\"%.9g\">%s</text>\n", x, p.h - p.mb + 16,
		    i, lv->sum.error_rate, v);
	}
	for (int o = 1; o < OUTCOME_COUNT; o++)
		if (seen[o]) {
			names[nn] = meter_outcome_name((enum meter_outcome)o);
			cls[nn++] = o % 8;
		}
	if (nn > 0)
		load_plot_legend(&p, names, cls, NULL, nn);
	load_plot_close(&p);
	/* the errors that had an answer, by HTTP status: 429 and 500 are
	 * both upstream_error above */
	for (size_t i = 0; i < r->nlevels; i++) {
		struct load_status_count st[LOAD_REPORT_STATUSES];
		size_t n = load_report_error_statuses(&r->levels[i], st);
		if (n == 0)
			continue;
		fprintf(pg->f, "<p class=\"note\" data-level=\"%zu\">", i);
		text(pg, r->levels[i].label);
		fputs(": errors by HTTP status", pg->f);
		for (size_t k = 0; k < n; k++)
			fprintf(pg->f, "%s <span data-status=\"%u\" data-count=\"%" PRIu64
			    "\">%u &#215; %" PRIu64 "</span>", k ? "," : "", st[k].status, st[k].n,
			    st[k].status, st[k].n);
		fputs("</p>\n", pg->f);
	}
	end_section(pg);
}

/* ---- the ITL's CDF ------------------------------------------------------------ */

static void panel_itl_cdf(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	int with[LOAD_HTML_CDF_LEVELS], *have = malloc((r->nlevels + 1) * sizeof(int));
	size_t n = 0, nh = 0;
	double lo = INFINITY, hi = 0, y[LOAD_CDF_POINTS];
	struct load_plot p;
	const char *names[LOAD_HTML_CDF_LEVELS];
	char shortl[LOAD_HTML_CDF_LEVELS][96];
	int cls[LOAD_HTML_CDF_LEVELS];

	for (size_t i = 0; have != NULL && i < r->nlevels; i++)
		if (isfinite(r->levels[i].sum.itl_cdf[50]))
			have[nh++] = (int)i;
	/* evenly spread over the levels that have gaps, the first and last in */
	for (size_t k = 0; k < nh && k < LOAD_HTML_CDF_LEVELS; k++) {
		size_t at = nh <= LOAD_HTML_CDF_LEVELS ? k :
		    (k * (nh - 1) + (LOAD_HTML_CDF_LEVELS - 1) / 2) / (LOAD_HTML_CDF_LEVELS - 1);
		const double *c = r->levels[have[at]].sum.itl_cdf;
		with[n++] = have[at];
		lo = fmin(lo, c[0]);
		hi = fmax(hi, c[99]);
	}
	free(have);
	section(pg, "itl_cdf", "ITL distribution (CDF)", 0, "The gaps between token chunks, "
	    "every gap of the measured ok requests; the x axis ends past the largest p99.");
	if (n == 0) {
		empty(pg, "No level had a gap between token chunks.");
		end_section(pg);
		return;
	}
	for (size_t i = 0; i < LOAD_CDF_POINTS; i++)
		y[i] = (double)i / (LOAD_CDF_POINTS - 1);
	for (size_t i = 0; i < n; i++) {
		short_label(&r->levels[with[i]], shortl[i], sizeof shortl[i]);
		names[i] = shortl[i];
		cls[i] = (int)i;
	}
	load_plot_init(&p, pg->f, lo, hi * 1.15, 0, 0, 1);
	p.mt += 14 * (double)(load_plot_legend_rows(&p, names, n) - 1);
	load_plot_open(&p, "itl-cdf", "ITL CDF per level", "ITL (ms)",
	    "share of gaps at or below");
	for (size_t i = 0; i < n; i++) {
		const struct load_level *lv = &r->levels[with[i]];
		char name[48];
		snprintf(name, sizeof name, "itl_cdf_%d", with[i]);
		fprintf(pg->f, "<g data-level=\"%d\" data-q50=\"%.9g\" data-q90=\"%.9g\" "
		    "data-q99=\"%.9g\">", with[i], lv->sum.itl_cdf[50], lv->sum.itl_cdf[90],
		    lv->sum.itl_cdf[99]);
		load_plot_series(&p, name, lv->label, (int)i, LOAD_SVG_NOPTS, lv->sum.itl_cdf,
		    y, LOAD_CDF_POINTS, NULL);
		fputs("</g>\n", pg->f);
	}
	load_plot_legend(&p, names, cls, NULL, n);
	load_plot_close(&p);
	end_section(pg);
}

/* ---- TTFT against input length -------------------------------------------------- */

static double input_of(const struct load_sample *s)
{
	return s->input_tokens >= 0 ? (double)s->input_tokens : (double)s->prompt_tokens;
}

/* The levels whose TTFT is the prompt's and not a queue's, in in[]: a
 * run's one level; a prompt-size sweep's every level; a sweep's up to its
 * knee (every level when it never saturated); a search's that met the
 * SLO; else the lowest load alone. Returns what they are, for the note. */
static const char *unqueued(const struct load_page *pg, unsigned char *in)
{
	const struct load_result *r = pg->r;
	size_t n = 0, low = 0;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		if (r->kind == LOAD_KIND_RUN || r->sweep_key == LOAD_KEY_PROMPT_TOKENS)
			in[i] = 1;
		else if (r->kind == LOAD_KIND_SWEEP && r->knee >= 0 &&
		    (size_t)r->knee < r->nlevels)
			in[i] = lv->key == r->levels[r->knee].key &&
			    lv->value <= r->levels[r->knee].value;
		else if (r->kind == LOAD_KIND_SWEEP)
			in[i] = r->saturated_at < 0 || (int)i < r->saturated_at;
		else
			in[i] = lv->has_slo && lv->slo.met;
		n += in[i];
		if (lv->value < r->levels[low].value)
			low = i;
	}
	if (r->kind == LOAD_KIND_RUN)
		return "the run";
	if (r->kind == LOAD_KIND_SWEEP && r->sweep_key == LOAD_KEY_PROMPT_TOKENS)
		return "every level";
	if (n > 0 && r->kind == LOAD_KIND_SWEEP)
		return r->knee >= 0 ? "the levels up to the knee" :
		    "every level (the sweep did not saturate)";
	if (n > 0)
		return "the levels that met the SLO";
	if (r->nlevels > 0)
		in[low] = 1;
	return "the lowest load (no level below the knee or within the SLO)";
}

/* The ok measured requests of the levels in[] with a TTFT: how many, and
 * the range of their input. */
static size_t input_range(const struct load_page *pg, const unsigned char *in, double *lo,
    double *hi)
{
	size_t n = 0;

	*lo = INFINITY;
	*hi = -INFINITY;
	for (size_t i = 0; i < pg->r->nlevels; i++)
		for (size_t j = 0; in[i] && j < pg->r->levels[i].st.n; j++) {
			const struct load_sample *s = &pg->r->levels[i].st.v[j];
			if (!loadstats_counted(s) || s->outcome != OUTCOME_OK || s->ttft_us < 0)
				continue;
			*lo = fmin(*lo, input_of(s));
			*hi = fmax(*hi, input_of(s));
			n++;
		}
	return n;
}

/* The fit over every such request; a document without its samples has
 * the sweep's own (prompt sizes), or its largest such level's. */
static void input_fit(const struct load_page *pg, const unsigned char *in, size_t total,
    struct load_fit *fit)
{
	const struct load_result *r = pg->r;
	double *x, *y;
	size_t n = 0;
	int top = -1;

	if (total == 0) {
		for (size_t i = 0; i < r->nlevels; i++)
			if (in[i] && (top < 0 || r->levels[i].value >= r->levels[top].value))
				top = (int)i;
		*fit = r->kind == LOAD_KIND_SWEEP && r->sweep_key == LOAD_KEY_PROMPT_TOKENS ?
		    r->input_fit : top >= 0 ? r->levels[top].sum.input_fit :
		    (struct load_fit){0, NAN, NAN, NAN};
		return;
	}
	*fit = (struct load_fit){0, NAN, NAN, NAN};
	x = calloc(total, sizeof(double));
	y = calloc(total, sizeof(double));
	for (size_t i = 0; x != NULL && y != NULL && i < r->nlevels; i++)
		for (size_t j = 0; in[i] && j < r->levels[i].st.n && n < total; j++) {
			const struct load_sample *s = &r->levels[i].st.v[j];
			if (!loadstats_counted(s) || s->outcome != OUTCOME_OK || s->ttft_us < 0)
				continue;
			x[n] = input_of(s) / 1e3;
			y[n++] = (double)s->ttft_us / 1e3;
		}
	if (x != NULL && y != NULL)
		load_fit_of(x, y, n, fit);
	free(x);
	free(y);
}

static void panel_input(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	unsigned char *in = calloc(r->nlevels + 1, 1);
	const char *which = in != NULL ? unqueued(pg, in) : NULL;
	struct load_fit f;
	size_t total = 0, n = 0, step, k = 0;
	double *x, *y, xmax = 0, ymax = 0, fx[2], fy[2], lo, hi;
	int have;
	struct load_plot p;
	char note[400], a[32], b[32], c[32];

	if (in == NULL)
		return;
	total = input_range(pg, in, &lo, &hi);
	input_fit(pg, in, total, &f);
	have = isfinite(f.slope);
	if (total > 0 && lo == hi) {
		load_svg_num(a, sizeof a, lo);
		snprintf(note, sizeof note, "Every input was %s tokens (%s): no fit; vary "
		    "--prompt-tokens to see TTFT against the input's length.", a, which);
		section(pg, "input", "TTFT against input length", 2, note);
		fprintf(pg->f, "<p class=\"note\" data-constant=\"%.9g\" data-requests=\"%zu\">"
		    "The inputs are constant.</p>\n", lo, total);
		free(in);
		end_section(pg);
		return;
	}
	if (have) {
		load_svg_num(a, sizeof a, f.intercept);
		load_svg_num(b, sizeof b, f.slope);
		load_svg_num(c, sizeof c, f.r2);
		snprintf(note, sizeof note, "TTFT = %s ms + %s ms per 1k input tokens "
		    "(R² %s, %zu requests), over %s: past the knee a queue's wait is no "
		    "prompt's.", a, b, c, f.n, which);
	} else {
		snprintf(note, sizeof note, "No fit over %s: the input length did not vary, "
		    "or too few requests.", which);
	}
	section(pg, "input", "TTFT against input length", 0, note);
	step = total > LOAD_HTML_SCATTER ? (total + LOAD_HTML_SCATTER - 1) / LOAD_HTML_SCATTER : 1;
	x = calloc(total + 1, sizeof(double));
	y = calloc(total + 1, sizeof(double));
	if (x == NULL || y == NULL) {
		free(x);
		free(y);
		free(in);
		end_section(pg);
		return;
	}
	for (size_t i = 0; i < r->nlevels; i++)
		for (size_t j = 0; in[i] && j < r->levels[i].st.n; j++) {
			const struct load_sample *s = &r->levels[i].st.v[j];
			if (!loadstats_counted(s) || s->outcome != OUTCOME_OK || s->ttft_us < 0)
				continue;
			if (k++ % step == 0) {
				x[n] = input_of(s);
				y[n] = (double)s->ttft_us / 1e3;
				xmax = fmax(xmax, x[n]);
				ymax = fmax(ymax, y[n]);
				n++;
			}
		}
	fx[0] = 0;
	fx[1] = xmax > 0 ? xmax : 1000;
	if (have) {
		fy[0] = f.intercept;
		fy[1] = f.intercept + f.slope * fx[1] / 1e3;
		ymax = fmax(ymax, fmax(fy[0], fy[1]));
	}
	if (total == 0)
		empty(pg, "No samples of ok requests (a document written with --no-samples "
		    "keeps the fit only).");
	load_plot_init(&p, pg->f, 0, fx[1], 0, 0, ymax > 0 ? ymax : 1);
	load_plot_open(&p, "input-chart", "TTFT against input tokens", "input tokens",
	    "TTFT (ms)");
	if (step > 1)
		fprintf(pg->f, "<text class=\"thin\" x=\"%.1f\" y=\"%.1f\">every %zu-th of %zu "
		    "requests</text>", p.ml + 6, p.mt + 12, step, total);
	fprintf(pg->f, "<g class=\"scatter\" data-points=\"%zu\" data-total=\"%zu\">", n, total);
	load_plot_series(&p, "input_ttft", "TTFT", 0, LOAD_SVG_NOLINE, x, y, n, NULL);
	fputs("</g>", pg->f);
	if (have) {
		fprintf(pg->f, "<g class=\"fit\" data-slope=\"%.9g\" data-intercept=\"%.9g\" "
		    "data-r2=\"%.9g\" data-n=\"%zu\">", f.slope, f.intercept, f.r2, f.n);
		load_plot_series(&p, "input_fit", "fit", 1, LOAD_SVG_NOPTS, fx, fy, 2, NULL);
		fputs("</g>\n", pg->f);
	}
	load_plot_close(&p);
	free(x);
	free(y);
	free(in);
	end_section(pg);
}

/* ---- the longest level over time ------------------------------------------------- */

/* The dotted line where each run after the first begins (a repeated
 * level's replications, one after the other on its timeline). */
static void run_seams(struct load_page *pg, struct load_plot *p, const struct load_summary *s,
    unsigned runs)
{
	if (runs < 2)
		return;
	fputs("<g class=\"win\">", pg->f);
	for (size_t i = 1; i < s->nslices; i++) {
		double x;
		if (s->slices[i].run == s->slices[i - 1].run)
			continue;
		x = load_plot_x(p, s->slices[i].start_s);
		fprintf(pg->f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
		    "data-run=\"%u\" data-t=\"%.6f\"/><text x=\"%.1f\" y=\"%.1f\">run %u</text>",
		    x, x, p->mt, p->h - p->mb, s->slices[i].run, s->slices[i].start_s, x + 3,
		    p->mt + 12, s->slices[i].run + 1);
	}
	fputs("</g>\n", pg->f);
}

/* The drift in words: a slope of a few seconds' noise is no trend, and
 * per minute reads as more than a short level saw. */
static void drift_note(char *buf, size_t len, const struct load_summary *s, unsigned runs)
{
	double span = 0;

	for (size_t i = 0; i < s->nslices; i++)
		span += s->slices[i].end_s - s->slices[i].start_s;
	if (s->drift.n < 2 || !isfinite(s->drift.slope))
		snprintf(buf, len, "no TTFT drift to fit.");
	else if (s->drift.r2 < LOAD_REPORT_TREND_R2)
		snprintf(buf, len, "no TTFT trend%s (a slope of %+.3g ms per minute fitted "
		    "over %.3g s, R² %.2f).", runs > 1 ? " within the runs" : "", s->drift.slope,
		    span, s->drift.r2);
	else if (span < 60)
		snprintf(buf, len, "TTFT drift %+.3g ms per minute%s (R² %.2f): %+.3g ms over "
		    "its %.3g s.", s->drift.slope, runs > 1 ? " within the runs" : "",
		    s->drift.r2, s->drift.slope * span / 60, span);
	else
		snprintf(buf, len, "TTFT drift %+.3g ms per minute%s (R² %.2f).", s->drift.slope,
		    runs > 1 ? " within the runs" : "", s->drift.r2);
}

static void panel_slices(struct load_page *pg)
{
	static const char *const lat[] = {"TTFT p50", "TTFT p95", "TPOT p50", "TPOT p95"};
	static const int lcls[] = {0, 0, 2, 2}, ldash[] = {0, 1, 0, 1};
	const struct load_level *lv = &pg->r->levels[pg->longest];
	const struct load_summary *s = &lv->sum;
	unsigned runs = s->nslices > 0 ? s->slices[s->nslices - 1].run + 1 : 0;
	/* the slices, and a NaN between two runs: a line breaks at the seam */
	size_t n = s->nslices + (runs > 1 ? runs - 1 : 0), m = 0;
	double *t = calloc(n + 1, sizeof(double)), *v = calloc(5 * (n + 1), sizeof(double));
	double top = 0, ttop = 0;
	struct load_plot p;
	char note[320], title[160];

	snprintf(title, sizeof title, "Time slices: %s", lv->label);
	if (runs > 1)
		snprintf(note, sizeof note, "The longest level in slices of %.3g s by the "
		    "requests' intended send time, each of its %u runs (independent "
		    "replications) in its own; ", s->slice_s, runs);
	else
		snprintf(note, sizeof note, "The longest level in slices of %.3g s by the "
		    "requests' intended send time; ", s->slice_s);
	drift_note(note + strlen(note), sizeof note - strlen(note), s, runs);
	section(pg, "slices", title, 0, note);
	if (s->nslices == 0 || t == NULL || v == NULL) {
		empty(pg, "No slices.");
		free(t);
		free(v);
		end_section(pg);
		return;
	}
	for (size_t i = 0; i < s->nslices; i++, m++) {
		const struct load_slice *x = &s->slices[i];
		double q[4] = {x->ttft_p50, x->ttft_p95, x->tpot_p50, x->tpot_p95};
		if (i > 0 && x->run != s->slices[i - 1].run) {
			t[m] = NAN;
			for (int k = 0; k < 5; k++)
				v[k * n + m] = NAN;
			m++;
		}
		t[m] = (x->start_s + x->end_s) / 2;
		for (int k = 0; k < 4; k++) {
			v[k * n + m] = q[k];
			top = fmax(top, isfinite(q[k]) ? q[k] : 0);
		}
		v[4 * n + m] = x->output_tokens_per_s;
		ttop = fmax(ttop, isfinite(x->output_tokens_per_s) ? x->output_tokens_per_s : 0);
	}
	load_plot_init(&p, pg->f, s->slices[0].start_s, s->slices[s->nslices - 1].end_s, 0, 0,
	    top);
	load_plot_open(&p, "slices-latency", "Latency per slice", "time in the level (s)", "ms");
	for (int k = 0; k < 4; k++) {
		static const char *const names[] = {"slice_ttft_p50", "slice_ttft_p95",
			"slice_tpot_p50", "slice_tpot_p95"};
		load_plot_series(&p, names[k], lat[k], lcls[k], LOAD_SVG_GAPS |
		    (ldash[k] ? LOAD_SVG_DASH : 0), t, v + (size_t)k * n, m, NULL);
	}
	run_seams(pg, &p, s, runs);
	load_plot_legend(&p, lat, lcls, ldash, 4);
	load_plot_close(&p);
	load_plot_init(&p, pg->f, s->slices[0].start_s, s->slices[s->nslices - 1].end_s, 0, 0,
	    ttop);
	load_plot_open(&p, "slices-throughput", "Output tokens/s and errors per slice",
	    "time in the level (s)", "output tokens/s");
	load_plot_series(&p, "slice_output_tokens_per_s", "output tokens/s", 1, LOAD_SVG_GAPS,
	    t, v + 4 * n, m, NULL);
	run_seams(pg, &p, s, runs);
	for (size_t i = 0; i < s->nslices; i++)
		if (s->slices[i].errors > 0) {
			const struct load_slice *x = &s->slices[i];
			fprintf(pg->f, "<text class=\"missed\" x=\"%.1f\" y=\"%.1f\" "
			    "text-anchor=\"middle\" data-slice=\"%zu\" data-errors=\"%" PRIu64 "\">"
			    "&#215;%" PRIu64 "</text>", load_plot_x(&p, (x->start_s + x->end_s) / 2),
			    p.mt + 10, i, x->errors, x->errors);
		}
	load_plot_close(&p);
	free(t);
	free(v);
	end_section(pg);
}

static int by_start(const void *a, const void *b)
{
	const struct load_sample *x = *(const struct load_sample *const *)a;
	const struct load_sample *y = *(const struct load_sample *const *)b;

	return x->start_us < y->start_us ? -1 : x->start_us > y->start_us ? 1 :
	    x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void panel_timeline(struct load_page *pg)
{
	const struct load_level *lv = &pg->r->levels[pg->longest];
	const struct loadstats *st = &lv->st;
	const struct load_sample **v;
	size_t n = 0, step = 1;
	double end = 0, rowh;
	struct load_plot p;
	char title[160];

	snprintf(title, sizeof title, "Request timeline: %s", lv->label);
	section(pg, "timeline", title, 1, "Each request a bar from its intended send: "
	    "waiting for the first token (orange), then its tokens (blue); errors red, "
	    "warm-up and cool-down faded; the dotted lines bound the measurement window.");
	v = st->n ? malloc(st->n * sizeof(*v)) : NULL;
	if (v == NULL) {
		empty(pg, "No samples (a document written with --no-samples).");
		end_section(pg);
		return;
	}
	for (size_t i = 0; i < st->n; i++)
		v[i] = &st->v[i];
	qsort(v, st->n, sizeof(*v), by_start);
	if (st->n > LOAD_HTML_TIMELINE)
		step = (st->n + LOAD_HTML_TIMELINE - 1) / LOAD_HTML_TIMELINE;
	for (size_t i = 0; i < st->n; i++) {
		double e = (double)v[i]->start_us / 1e6 + (v[i]->duration_us > 0 ?
		    (double)v[i]->duration_us / 1e6 : 0);
		end = fmax(end, e);
	}
	n = (st->n + step - 1) / step;
	load_plot_init(&p, pg->f, 0, fmax(end, (double)lv->info.window_end_us / 1e6), 0, 0,
	    (double)n);
	p.w = 1100;
	p.h = fmin(900, fmax(240, 3.0 * (double)n + p.mt + p.mb));
	p.nyt = 0;                   /* rows, not a scale */
	p.y0 = 0;
	p.y1 = (double)n;
	rowh = fmax(1, (p.h - p.mt - p.mb) / (double)n);
	load_plot_open(&p, "timeline-chart", "Requests over time", "time in the level (s)",
	    step > 1 ? "requests (a sample of them)" : "requests");
	fprintf(pg->f, "<g class=\"tl\" data-requests=\"%zu\" data-shown=\"%zu\" "
	    "data-step=\"%zu\">\n", st->n, n, step);
	for (size_t i = 0, row = 0; i < st->n; i += step, row++) {
		const struct load_sample *s = v[i];
		double x0 = load_plot_x(&p, (double)s->start_us / 1e6);
		double x2 = load_plot_x(&p, ((double)s->start_us + (double)(s->duration_us > 0 ?
		    s->duration_us : 0)) / 1e6);
		double x1 = s->ttft_us >= 0 ? load_plot_x(&p, ((double)s->start_us +
		    (double)s->ttft_us) / 1e6) : x2;
		double y = load_plot_y(&p, (double)(n - row));
		int off = !loadstats_counted(s), ok = s->outcome == OUTCOME_OK;

		fprintf(pg->f, "<g%s data-seq=\"%" PRIu64 "\" data-start=\"%.3f\" data-ttft=\"",
		    off ? " class=\"off\"" : "", s->seq, (double)s->start_us / 1e3);
		if (s->ttft_us >= 0)
			fprintf(pg->f, "%.3f", (double)s->ttft_us / 1e3);
		fprintf(pg->f, "\" data-e2e=\"%.3f\" data-outcome=\"%s\"><title>#%" PRIu64
		    " %s: sent %.3f s, ", s->duration_us >= 0 ? (double)s->duration_us / 1e3 : -1,
		    meter_outcome_name(s->outcome), s->seq, meter_outcome_name(s->outcome),
		    (double)s->start_us / 1e6);
		if (s->ttft_us >= 0)
			fprintf(pg->f, "TTFT %.1f ms, ", (double)s->ttft_us / 1e3);
		fprintf(pg->f, "end to end %.1f ms%s</title>",
		    s->duration_us >= 0 ? (double)s->duration_us / 1e3 : 0.0,
		    s->warmup ? " (warm-up)" : s->cooldown ? " (cool-down)" : "");
		if (ok) {
			fprintf(pg->f, "<rect class=\"wait\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			    "height=\"%.1f\"/>", x0, y, fmax(0.5, x1 - x0), rowh * 0.8);
			fprintf(pg->f, "<rect class=\"decode\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			    "height=\"%.1f\"/>", x1, y, fmax(0.5, x2 - x1), rowh * 0.8);
		} else {
			fprintf(pg->f, "<rect class=\"err\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
			    "height=\"%.1f\"/>", x0, y, fmax(0.5, x2 - x0), rowh * 0.8);
		}
		fputs("</g>\n", pg->f);
	}
	fputs("</g>\n<g class=\"win\">", pg->f);
	for (int k = 0; k < 2; k++) {
		double t = (double)(k ? lv->info.window_end_us : lv->info.window_start_us) / 1e6;
		double x = load_plot_x(&p, t);
		fprintf(pg->f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" "
		    "data-window=\"%s\" data-t=\"%.6f\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>", x,
		    x, p.mt, p.h - p.mb, k ? "end" : "start", t, x + 3, p.mt - 4,
		    k ? "window end" : "window start");
	}
	fputs("</g>\n", pg->f);
	load_plot_close(&p);
	free(v);
	end_section(pg);
}

/* ---- tokentap beside the client --------------------------------------------------- */

static void panel_tokentap(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	FILE *f = pg->f;

	section(pg, "tokentap", "The client beside tokentap", 1, "ms; diff = client - "
	    "tokentap: what the network and the proxy add between them.");
	fputs("<div class=\"scroll\"><table id=\"tokentap\"><thead><tr><th>level</th>"
	    "<th>TTFT p50</th><th>tokentap</th><th>diff</th><th>TTFT p95</th><th>tokentap</th>"
	    "<th>diff</th><th>TPOT p50</th><th>tokentap</th><th>diff</th></tr></thead>"
	    "<tbody>\n", f);
	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		const struct load_tt *t = &lv->tt;
		double c50 = fig(pg, lv, "ttft_p50"), c95 = fig(pg, lv, "ttft_p95");
		double p50 = fig(pg, lv, "tpot_p50");

		fprintf(f, "<tr data-level=\"%zu\"><td>", i);
		text(pg, lv->label);
		fputs("</td>", f);
		if (!t->ok) {
			fputs("<td colspan=\"9\" class=\"missed\">tokentap: ", f);
			text(pg, t->error);
			fputs("</td></tr>\n", f);
			continue;
		}
		cell(pg, "ttft_p50", c50, 3, 0);
		cell(pg, "tt_ttft_p50", t->ttft[LOAD_TT_P50], 3, 0);
		cell(pg, "diff_ttft_p50", c50 - t->ttft[LOAD_TT_P50], 3, 0);
		cell(pg, "ttft_p95", c95, 3, 0);
		cell(pg, "tt_ttft_p95", t->ttft[LOAD_TT_P95], 3, 0);
		cell(pg, "diff_ttft_p95", c95 - t->ttft[LOAD_TT_P95], 3, 0);
		cell(pg, "tpot_p50", p50, 3, 0);
		cell(pg, "tt_tpot_p50", t->tpot[LOAD_TT_P50], 3, 0);
		cell(pg, "diff_tpot_p50", p50 - t->tpot[LOAD_TT_P50], 3, 0);
		fputs("</tr>\n", f);
	}
	fputs("</tbody></table></div>\n", f);
	end_section(pg);
}

/* ---- the page ------------------------------------------------------------------ */

void load_html_write(FILE *f, const struct load_result *r)
{
	struct load_page pg;

	if (page_init(&pg, f, r) < 0) {
		page_free(&pg);
		return;
	}
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	    "style-src 'unsafe-inline'\">\n"
	    "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
	    "<meta name=\"generator\" content=\"tokentap-load " TOKENTAP_VERSION "\">\n<title>",
	    f);
	text(&pg, "tokentap-load report: ");
	text(&pg, r->conf->url);
	fprintf(f, "</title>\n<style>\n%s</style></head>\n<body data-kind=\"%s\">\n", css,
	    r->kind == LOAD_KIND_SWEEP ? "sweep" : r->kind == LOAD_KIND_CAPACITY ?
	    "capacity" : "run");
	head(&pg);
	fputs("<main class=\"panels\">\n", f);
	load_html_verdict(&pg);
	levels_table(&pg);
	if (r->kind == LOAD_KIND_RUN && r->nlevels > 0)
		dists_table(&pg, &r->levels[0]);
	turns_table(&pg);
	if (pg.ng > 0) {
		panel_latency(&pg);
		panel_tpot(&pg);
		panel_throughput(&pg);
		load_html_knee(&pg);
	}
	panel_errors(&pg);
	panel_itl_cdf(&pg);
	panel_input(&pg);
	if (pg.longest >= 0) {
		panel_slices(&pg);
		panel_timeline(&pg);
	}
	if (r->nlevels > 0 && r->levels[0].tt.asked)
		panel_tokentap(&pg);
	fputs("</main>\n</body></html>\n", f);
	page_free(&pg);
}
