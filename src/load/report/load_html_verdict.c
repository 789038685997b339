/* SPDX-License-Identifier: Apache-2.0 */
/* The HTML report's verdict box and knee chart (load_html_verdict.h). */
#include "load_html_verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_report.h"
#include "load_svg.h"
#include "util.h"

/* ---- the verdict ------------------------------------------------------------ */

/* Runs of a search set aside because the generator itself ran late
 * (load_disturb.h), once: how many, and the levels left undecided. */
static void disturbed_line(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	unsigned runs = 0, kept = 0;
	double worst = NAN;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		runs += lv->disturbed_runs;
		kept += lv->disturbed;
		if (lv->disturbed_runs > 0 && !(lv->disturbed_late_ms <= worst))
			worst = lv->disturbed_late_ms;
	}
	if (runs == 0 && kept == 0)
		return;
	fprintf(pg->f, "<li class=\"missed\" data-warning=\"disturbed\" "
	    "data-disturbed-runs=\"%u\">the generator ran late (%.1f ms at p95 at "
	    "worst): %u run%s set aside and run again", runs, worst, runs,
	    runs == 1 ? "" : "s");
	if (kept > 0)
		fprintf(pg->f, ", %u level%s left undecided", kept, kept > 1 ? "s" : "");
	fputs("; give it a CPU of its own</li>\n", pg->f);
}

/* One line for every level the generator bounded the same way (which:
 * "cpu" or "conn"): the warning once, the levels named. */
static void gen_warning(struct load_page *pg, const char *which, const char *what)
{
	const struct load_result *r = pg->r;
	size_t n = 0;

	for (size_t i = 0; i < r->nlevels; i++) {
		const struct load_gen *g = &r->levels[i].sum.gen;
		if (!(which[1] == 'p' ? g->cpu_bound : g->conn_bound))
			continue;
		if (n++ == 0) {
			fprintf(pg->f, "<li class=\"missed\" data-warning=\"%s\">", which);
			text(pg, what);
			fputs(r->nlevels > 1 ? " (" : "", pg->f);
		} else
			fputs(", ", pg->f);
		if (r->nlevels > 1)
			text(pg, r->levels[i].label);
	}
	if (n > 0)
		fprintf(pg->f, "%s</li>\n", r->nlevels > 1 ? ")" : "");
}

/* Dispatch lag: once, its worst level, against what it is a share of. */
static void lag_line(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	const struct load_level *w = load_report_lag_worst(r);
	double p99, lim;
	int t;

	if (w == NULL)
		return;
	p99 = load_report_lag_p99(r, w);
	lim = load_report_lag_limit(r, w, &t);
	fprintf(pg->f, "<li class=\"missed\" data-warning=\"lag\" data-lag-p99=\"%.6g\" "
	    "data-limit=\"%.6g\">requests left late: dispatch lag %.2f ms at p99 (", p99, lim,
	    p99);
	text(pg, r->nlevels > 1 ? w->label : "the run");
	if (t >= 0) {
		fprintf(pg->f, "), %.0f %% of the target ", 100 * p99 / r->slo.v[t].limit);
		text(pg, r->slo.v[t].name);
	} else
		fprintf(pg->f, "), %.0f %% of its TTFT p50", 100 * p99 / w->sum.ttft.median);
	fputs(": the generator fell behind; its latencies include it</li>\n", pg->f);
}

/* A sweep's SLO capacity: the last level met before the first missed. */
static void sweep_capacity(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	int cap = load_report_sweep_capacity(r);

	if (r->slo.n == 0)
		return;
	fprintf(pg->f, "<li id=\"sweep-capacity\" data-level=\"%d\">", cap);
	if (cap < 0) {
		fputs("SLO capacity: <b class=\"missed\">none</b>, the first level missed "
		    "the SLO</li>\n", pg->f);
		return;
	}
	fputs("SLO capacity: <b>", pg->f);
	text(pg, r->levels[cap].label);
	fprintf(pg->f, "</b>, the last level met before the first missed%s</li>\n",
	    r->levels[cap].slo.noisy ? " (undecided: by its figures)" : "");
}

/* A search's knee among the levels it tried (load_result.h). */
static void knee_item(FILE *f, const struct load_capacity *c)
{
	char a[32], b[32];
	const char *unit = c->key == LOAD_KEY_RATE ? " requests/s" : " users";

	load_svg_num(a, sizeof a, c->knee);
	load_svg_num(b, sizeof b, c->knee_past);
	fprintf(f, "<li class=\"knee\" data-key=\"%s\" data-knee=\"%.9g\" "
	    "data-past=\"%.9g\">knee by %s: ", load_key_name(c->key), c->knee,
	    c->knee_past, load_key_name(c->key));
	if (isnan(c->knee_past))
		fputs("none among the levels tried (none saturated)", f);
	else if (isnan(c->knee))
		fprintf(f, "none, the lowest level tried (%s%s) was saturated", b, unit);
	else
		fprintf(f, "<b>%s%s</b>, the last level tried %s; %s%s, the next tried, "
		    "was not", a, unit, c->key == LOAD_KEY_RATE ?
		    "that carried its offered rate" :
		    "before throughput stopped growing while latency rose", b, unit);
	fputs("</li>\n", f);
}

void load_html_verdict(struct load_page *pg)
{
	const struct load_result *r = pg->r;
	FILE *f = pg->f;
	char a[32], b[32];

	section(pg, "verdict", "Verdict", 1, NULL);
	fputs("<ul class=\"verdict\">\n", f);
	if (r->slo.n > 0) {
		fputs("<li id=\"slo\">SLO:", f);
		for (size_t i = 0; i < r->slo.n; i++) {
			const struct load_slo_target *t = &r->slo.v[i];
			int frac = t->metric == LOAD_SLO_ERROR_RATE;
			load_svg_num(a, sizeof a, frac ? 100 * t->limit : t->limit);
			fprintf(f, " <span data-target=\"");
			text(pg, t->name);
			fprintf(f, "\" data-limit=\"%.9g\">", t->limit);
			text(pg, t->name);
			fprintf(f, " &le; %s %s</span>", a, frac ? "%" : "ms");
		}
		fputs("</li>\n", f);
	}
	if (r->kind == LOAD_KIND_SWEEP) {
		fprintf(f, "<li id=\"sweep\" data-knee=\"%d\" data-saturated=\"%d\" "
		    "data-stop=\"", r->knee, r->saturated_at);
		text(pg, r->stop_reason);
		fputs("\">sweep over ", f);
		text(pg, load_key_name(r->sweep_key));
		fputs(", stopped: ", f);
		text(pg, r->stop_reason ? r->stop_reason : "-");
		if (r->knee >= 0 && (size_t)r->knee < r->nlevels) {
			fputs("; the knee is <b>", f);
			text(pg, r->levels[r->knee].label);
			fputs(r->sweep_key == LOAD_KEY_RATE ? "</b>: the last carried at its "
			    "offered rate" : "</b>: past it throughput stopped growing while "
			    "latency rose", f);
		} else if (r->saturated_at == 0)
			fputs("; <b>no knee</b>: the first level was saturated", f);
		else if (r->nlevels > 1 && r->saturated_at < 0 && load_report_sweep_all_ran(r))
			fputs("; <b>no knee</b>: throughput grew up to the last level", f);
		fputs("</li>\n", f);
		sweep_capacity(pg);
	}
	if (r->kind == LOAD_KIND_RUN && r->nlevels > 0 && r->levels[0].has_slo)
		fprintf(f, "<li id=\"slo-met\" data-met=\"%d\"%s>the SLO was <b>%s</b> at "
		    "this load%s</li>\n", r->levels[0].slo.met, r->levels[0].slo.met ? "" :
		    " class=\"missed\"", r->levels[0].slo.met ? "met" : "missed",
		    r->levels[0].slo.noisy ? " (undecided: by its figures)" : "");
	for (size_t i = 0; i < r->ncapacity; i++) {
		const struct load_capacity *c = &r->capacity[i];
		if (!c->ran)
			continue;
		load_svg_num(a, sizeof a, c->lo);
		load_svg_num(b, sizeof b, c->hi);
		fprintf(f, "<li class=\"capacity\" data-key=\"%s\" data-found=\"%d\" "
		    "data-value=\"%.9g\" data-lo=\"%.9g\" data-hi=\"%.9g\" data-binding=\"",
		    load_key_name(c->key), c->found, c->capacity, c->lo, c->hi);
		if (c->binding >= 0)
			text(pg, r->slo.v[c->binding].name);
		fprintf(f, "\">capacity by %s: ", load_key_name(c->key));
		if (c->found && c->key == LOAD_KEY_RATE && isfinite(c->estimate)) {
			char e[32], l[32], h[32];
			load_svg_num(e, sizeof e, c->estimate);
			load_svg_num(l, sizeof l, c->ci_lo);
			load_svg_num(h, sizeof h, c->ci_hi);
			fprintf(f, "<b>%s requests/s</b>, %.0f %% confidence interval [%s, %s]; "
			    "bisection bracket [%s, %s]", e, 100 * (c->confidence > 0 ?
			    c->confidence : 0.95), isfinite(c->ci_lo) ? l : "?",
			    isfinite(c->ci_hi) ? h : "?", a, b);
		} else if (c->found) {
			fprintf(f, "<b>%s%s</b>, bisection bracket [%s, %s]", a,
			    c->key == LOAD_KEY_RATE ? " requests/s" : " users", a, b);
		} else
			fprintf(f, "<b class=\"missed\">no level met the SLO</b> (lowest tried %s)", b);
		if (c->binding >= 0) {
			fputs("; binding: ", f);
			text(pg, r->slo.v[c->binding].name);
		}
		fprintf(f, "; %zu levels, stopped: ", c->levels);
		text(pg, c->stopped);
		fputs("</li>\n", f);
		knee_item(f, c);
	}
	if (r->interrupted)
		fputs("<li class=\"missed\">interrupted: the levels shown are those that "
		    "ran</li>\n", f);
	gen_warning(pg, "cpu", "the generator used 90 % of a CPU or more: it was the "
	    "bottleneck, not the target");
	gen_warning(pg, "conn", "requests waited for a connection: their latency "
	    "includes the wait (raise -c)");
	lag_line(pg);
	/* reading late: once, its worst level */
	{
		const struct load_level *w = NULL;
		for (size_t i = 0; i < r->nlevels; i++)
			if (load_report_read_late(r, &r->levels[i]) && (w == NULL ||
			    r->levels[i].info.read_late_p99_ms > w->info.read_late_p99_ms))
				w = &r->levels[i];
		if (w != NULL) {
			fprintf(f, "<li class=\"missed\" data-read-late-p99=\"%.3f\">the "
			    "generator read late: %.2f ms at p99 (", w->info.read_late_p99_ms,
			    w->info.read_late_p99_ms);
			text(pg, w->label);
			fprintf(f, ", %s): its figures include it</li>\n", w->info.read_late_stamps ?
			    "tokentap-mock's stamps" : "its own loop's timer");
		}
	}
	disturbed_line(pg);
	/* --tokentap alone could not pair by id: the figures are windows' */
	if (r->tt_pairing_reason != NULL) {
		fputs("<li class=\"missed\" data-warning=\"tokentap_pairing\">tokentap's "
		    "figures from /stats windows, not paired by request id: ", f);
		text(pg, r->tt_pairing_reason);
		fputs("</li>\n", f);
	}
	fputs("</ul>\n", f);
	end_section(pg);
}

/* ---- the knee: latency against throughput ----------------------------------- */

/* Labels placed on a chart without overlap: each tries a few spots
 * around its point, inside the plotting box, and is left out when none
 * is free (a crowd of saturated levels shares one throughput). */
#define LABELS_MAX 64
struct labels {
	double box[LABELS_MAX][4];   /* x0, y0, x1, y1 of each placed */
	size_t n;
};

/* Where text of len chars goes near (x, y): 1 and *tx, *ty (its start
 * and baseline), or 0. The box is an 11 px font's with room to spare:
 * Chromium's digits are 7 px wide, its text 10 px above the baseline
 * and 3 below. */
static int place(struct labels *l, const struct load_plot *p, double x, double y,
    size_t len, double *tx, double *ty)
{
	static const double at[][2] = {{8, -8}, {8, 14}, {-8, -8}, {-8, 14}, {10, 4},
		{-10, 4}, {0, -14}, {0, 22}};
	double w = 7.4 * (double)len + 2, h = 15;

	if (l->n == LABELS_MAX)
		return 0;
	for (size_t k = 0; k < UTIL_ARRAY_LEN(at); k++) {
		double x0 = at[k][0] < 0 ? x + at[k][0] - w : x + at[k][0] - (at[k][0] == 0) * w / 2;
		double y1 = y + at[k][1] + 4, y0 = y1 - h;
		size_t i;
		if (x0 < p->ml || x0 + w > p->w - p->mr || y0 < p->mt || y1 > p->h - p->mb)
			continue;
		for (i = 0; i < l->n; i++)
			if (x0 < l->box[i][2] && l->box[i][0] < x0 + w && y0 < l->box[i][3] &&
			    l->box[i][1] < y1)
				break;
		if (i < l->n)
			continue;
		l->box[l->n][0] = x0;
		l->box[l->n][1] = y0;
		l->box[l->n][2] = x0 + w;
		l->box[l->n++][3] = y1;
		*tx = x0;
		*ty = y1 - 4;
		return 1;
	}
	return 0;
}

/* A ring around a level's point, and what it is (the label where it
 * fits). */
static void mark(struct load_page *pg, struct load_plot *p, struct labels *l, double x,
    double y, const char *cls, const char *attrs, const char *label)
{
	double px, py, tx, ty;

	if (!isfinite(x) || !isfinite(y))
		return;
	px = load_plot_x(p, x);
	py = load_plot_y(p, y);
	fprintf(pg->f, "<g class=\"mark %s\" %s><circle cx=\"%.1f\" cy=\"%.1f\" r=\"8\"/>",
	    cls, attrs, px, py);
	if (place(l, p, px, py, strlen(label), &tx, &ty)) {
		fprintf(pg->f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\">", tx, ty);
		text(pg, label);
		fputs("</text>", pg->f);
	}
	fputs("</g>\n", pg->f);
}

/* The level's SLO capacity on this chart: a search's (its bracket's
 * lower end), or a sweep's (the last met before the first missed). */
static int is_capacity(const struct load_page *pg, const struct load_group *g, int i, double *v)
{
	const struct load_result *r = pg->r;
	const struct load_level *lv = &r->levels[i];

	if (r->kind == LOAD_KIND_SWEEP && r->slo.n > 0 && load_report_sweep_capacity(r) == i) {
		*v = lv->value;
		return 1;
	}
	for (size_t k = 0; k < r->ncapacity; k++) {
		const struct load_capacity *c = &r->capacity[k];
		if (c->ran && c->found && c->key == g->key && lv->value == c->lo) {
			*v = c->lo;
			return 1;
		}
	}
	return 0;
}

/* The knee and the capacity first, then each point's load: the lowest
 * and the highest, then the rest from the low end; clear of every point
 * of both series (y: E2E p50, then TTFT p95). */
static void knee_labels(struct load_page *pg, struct load_plot *p, const struct load_group *g,
    const double *x, const double *y)
{
	const struct load_result *r = pg->r;
	struct labels l = { .n = 0 };
	char attrs[128], label[96], v[32];
	double cv, tx, ty;

	for (size_t i = 0; i < 2 * g->n && l.n < LABELS_MAX / 2; i++) {
		double px = load_plot_x(p, x[i % g->n]), py = load_plot_y(p, y[i]);
		if (!isfinite(px) || !isfinite(py))
			continue;
		l.box[l.n][0] = px - 4;
		l.box[l.n][1] = py - 4;
		l.box[l.n][2] = px + 4;
		l.box[l.n++][3] = py + 4;
	}

	for (size_t i = 0; i < g->n; i++) {
		const struct load_level *lv = &r->levels[g->lv[i]];
		if (g->lv[i] == r->knee) {
			snprintf(attrs, sizeof attrs, "data-mark=\"knee\" data-level=\"%d\" "
			    "data-value=\"%.9g\"", g->lv[i], lv->value);
			mark(pg, p, &l, x[i], y[i], "knee", attrs, "knee");
		}
		if (is_capacity(pg, g, g->lv[i], &cv)) {
			load_svg_num(v, sizeof v, cv);
			snprintf(attrs, sizeof attrs, "data-mark=\"capacity\" data-level=\"%d\" "
			    "data-value=\"%.9g\"", g->lv[i], cv);
			snprintf(label, sizeof label, "SLO capacity %s", v);
			mark(pg, p, &l, x[i], y[i], "cap", attrs, label);
		}
	}
	for (size_t k = 0; k < g->n; k++) {
		size_t i = k == 0 ? 0 : k == 1 ? g->n - 1 : k - 1;
		double px, py;
		if (g->n == 1 && k > 0)
			break;
		if (!isfinite(x[i]) || !isfinite(y[i]))
			continue;
		load_svg_num(v, sizeof v, r->levels[g->lv[i]].value);
		px = load_plot_x(p, x[i]);
		py = load_plot_y(p, y[i]);
		if (place(&l, p, px, py, strlen(v), &tx, &ty))
			fprintf(pg->f, "<text class=\"load\" data-level=\"%d\" x=\"%.1f\" "
			    "y=\"%.1f\">%s</text>", g->lv[i], tx, ty, v);
	}
	fputc('\n', pg->f);
}

static void knee_chart(struct load_page *pg, const struct load_group *g)
{
	const struct load_result *r = pg->r;
	double *x, *y, xmax = 0, ymax = 0;
	static const char *const names[] = {"E2E p50", "TTFT p95"};
	static const int cls[] = {1, 0}, dash[] = {0, 1};
	struct load_plot p;
	char cid[48];

	if (xy_alloc(&x, g->n, &y, 2 * g->n) < 0)
		return;
	for (size_t i = 0; i < g->n; i++) {
		const struct load_level *lv = &r->levels[g->lv[i]];
		x[i] = lv->sum.output_tokens_per_s;
		y[i] = fig(pg, lv, "e2e_p50");
		y[g->n + i] = fig(pg, lv, "ttft_p95");
		xmax = fmax(xmax, isfinite(x[i]) ? x[i] : 0);
		ymax = fmax(ymax, fmax(isfinite(y[i]) ? y[i] : 0,
		    isfinite(y[g->n + i]) ? y[g->n + i] : 0));
	}
	snprintf(cid, sizeof cid, "knee-%s", load_key_name(g->key));
	/* headroom above the highest point for its label */
	load_plot_init(&p, pg->f, 0, xmax * 1.05, 0, 0, ymax * 1.12);
	load_plot_open(&p, cid, "Latency against throughput", "output tokens/s", "ms");
	load_plot_series(&p, "knee_e2e_p50", "E2E p50", 1, 0, x, y, g->n, g->lv);
	load_plot_series(&p, "knee_ttft_p95", "TTFT p95", 0, LOAD_SVG_DASH, x, y + g->n,
	    g->n, g->lv);
	knee_labels(pg, &p, g, x, y);
	load_plot_legend(&p, names, cls, dash, 2);
	load_plot_close(&p);
	free(x);
	free(y);
}

void load_html_knee(struct load_page *pg)
{
	size_t n = 0;

	for (size_t i = 0; i < pg->ng; i++)
		n += pg->g[i].key != LOAD_KEY_PROMPT_TOKENS;
	section(pg, "knee", "The knee: latency against throughput", 0,
	    "Each point a level (its load beside it), in the order of load: where more "
	    "load buys latency and no throughput is the knee; the ring in red is the "
	    "largest load that met the SLO.");
	for (size_t i = 0; i < pg->ng; i++)
		if (pg->g[i].key != LOAD_KEY_PROMPT_TOKENS)
			knee_chart(pg, &pg->g[i]);
	if (n == 0)
		empty(pg, "A prompt-size sweep adds no load: see the input-length panel.");
	end_section(pg);
}
