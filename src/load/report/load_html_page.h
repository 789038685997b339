/* SPDX-License-Identifier: Apache-2.0 */
/* The HTML report's page as it is written (load_html.h), shared by the
 * files that write its panels: the levels grouped by load axis, a level's
 * figure by name, escaped text, and the sections that hold the panels.
 * Private to load_html.c and load_html_verdict.c. */
#ifndef TOKENTAP_LOAD_HTML_PAGE_H
#define TOKENTAP_LOAD_HTML_PAGE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_result.h"
#include "load_svg.h"

/* Levels of one load axis (a sweep's key, or one capacity search's), in
 * the order of their value. */
struct load_group {
	enum load_key key;
	int *lv;
	size_t n;
};

struct load_page {
	FILE *f;
	const struct load_result *r;
	int longest;                 /* the level of the slices and timeline; -1 */
	struct load_group g[3];
	size_t ng;
};
static inline const struct load_dist *dist_of(const struct load_summary *s, const char *m)
{
	if (strcmp(m, "ttft") == 0)
		return &s->ttft;
	if (strcmp(m, "ttfo") == 0)
		return &s->ttfo;
	if (strcmp(m, "tpot") == 0)
		return &s->tpot;
	if (strcmp(m, "itl") == 0)
		return &s->itl;
	return strcmp(m, "e2e") == 0 ? &s->e2e : NULL;
}

/* A level's figure by name; the median stands in for p50 when the
 * percentile list lacks it. NaN where undefined. */
static inline double fig(const struct load_page *pg, const struct load_level *lv, const char *name)
{
	double v = NAN;
	const char *us = strchr(name, '_');

	if (load_summary_value(&lv->sum, &pg->r->pcts, name, &v) == 0 && !isnan(v))
		return v;
	if (us != NULL && strcmp(us, "_p50") == 0) {
		char m[8];
		const struct load_dist *d;
		snprintf(m, sizeof m, "%.*s", (int)(us - name), name);
		if ((d = dist_of(&lv->sum, m)) != NULL)
			return d->median;
	}
	return NAN;
}
static inline void text(struct load_page *pg, const char *s)
{
	load_svg_esc(pg->f, s);
}

static inline void section(struct load_page *pg, const char *id, const char *title, int wide,
    const char *note)
{
	fprintf(pg->f, "<section class=\"panel%s\" id=\"p-%s\" data-panel=\"%s\"><h2>",
	    wide == 1 ? " wide" : wide == 2 ? " short" : "", id, id);
	text(pg, title);
	fputs("</h2>\n", pg->f);
	if (note != NULL) {
		fputs("<p class=\"note\">", pg->f);
		text(pg, note);
		fputs("</p>\n", pg->f);
	}
}

static inline void end_section(struct load_page *pg)
{
	fputs("</section>\n", pg->f);
}

static inline void empty(struct load_page *pg, const char *why)
{
	fputs("<p class=\"note empty\">", pg->f);
	text(pg, why);
	fputs("</p>\n", pg->f);
}
/* A chart's x and y: na and nb doubles, zeroed; 0, or -1 with neither
 * (out of memory: the chart is left out). */
static inline int xy_alloc(double **x, size_t na, double **y, size_t nb)
{
	*x = calloc(na, sizeof(double));
	*y = calloc(nb, sizeof(double));
	if (*x != NULL && *y != NULL)
		return 0;
	free(*x);
	free(*y);
	return -1;
}

#endif
