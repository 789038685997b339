/* SPDX-License-Identifier: Apache-2.0 */
/* The HTML report's pieces, written by hand: text escaped for HTML, and
 * charts as inline SVG (a plot's box and scales, nice ticks, axes and
 * grid, lines, points, bars, marks), each figure drawn carrying its value
 * in data attributes so that a reader (a test, a script) finds the
 * numbers on the page. Pure: writes to a stdio stream. */
#ifndef TOKENTAP_LOAD_SVG_H
#define TOKENTAP_LOAD_SVG_H

#include <stddef.h>
#include <stdio.h>

/* Text and attribute values: & < > " ' as entities; ill-formed UTF-8 as
 * U+FFFD; control bytes and DEL as '?'. Whatever a server, a file or the
 * command line held, the page stays well-formed HTML with no markup of
 * theirs. NULL writes nothing. */
void load_svg_esc(FILE *f, const char *s);
/* At most n bytes of s, the same way. */
void load_svg_escn(FILE *f, const char *s, size_t n);

/* A number for people: up to 4 significant digits, no exponent below
 * 1e9 ("1250", "0.0125", "20.5"); "-" when not finite. */
void load_svg_num(char *buf, size_t len, double v);

/* Ticks at 1, 2 or 5 times a power of ten covering [lo, hi], about want
 * of them: the first at or below lo, the last at or above hi. Returns how
 * many were written (at most max). */
size_t load_svg_ticks(double lo, double hi, size_t want, double *out, size_t max);

struct load_plot {
	FILE *f;
	double w, h;                 /* the SVG's size in px */
	double ml, mr, mt, mb;       /* margins: the plotting box inside them */
	double x0, x1, y0, y1;       /* the data's range on each axis */
	int xlog;                    /* x on a log2 scale (load that doubles) */
	double xt[16], yt[16];       /* the ticks */
	size_t nxt, nyt;
	char id[32];                 /* the SVG's id (its clip path's too) */
};

/* A plot of the data's ranges: y from 0 (or lo) to the data's top with
 * nice ticks; x as given, on a log scale when xlog. Then open writes the
 * <svg> with its title for screen readers (escaped), the grid, ticks and
 * axis labels (escaped); close ends it. */
void load_plot_init(struct load_plot *p, FILE *f, double xlo, double xhi, int xlog,
    double ylo, double yhi);
void load_plot_open(struct load_plot *p, const char *id, const char *title,
    const char *xlabel, const char *ylabel);
void load_plot_close(struct load_plot *p);

/* Data to the SVG's px. */
double load_plot_x(const struct load_plot *p, double x);
double load_plot_y(const struct load_plot *p, double y);

/* How a series is drawn. */
#define LOAD_SVG_DASH 1              /* a dashed line (the second of a pair) */
#define LOAD_SVG_NOPTS 2             /* the line only, no points */
#define LOAD_SVG_NOLINE 4            /* the points only (a scatter) */
#define LOAD_SVG_GAPS 8              /* a NaN x breaks the line (runs apart) */

/* A series as a line through its finite points, and a point each with
 * data-level (levels[i], or i without), data-x and data-y (%.9g) and a
 * tooltip "label: y at x"; the group has data-series. cls picks the
 * colour (s0..s7). Drawn inside the plot's box (clipped). */
void load_plot_series(struct load_plot *p, const char *name, const char *label,
    int cls, int style, const double *x, const double *y, size_t n,
    const int *levels);
/* A horizontal line at y (an SLO limit) with its label. */
void load_plot_hline(struct load_plot *p, double y, const char *label,
    const char *attrs);
/* A legend of n names in the colours cls[] (dashed where dashed[i]),
 * along the plot's top, in as many rows as it takes (legend_rows: how
 * many; a caller with more than one makes the top margin 14 px a row
 * taller before it opens the plot). */
size_t load_plot_legend_rows(const struct load_plot *p, const char *const *names,
    size_t n);
/* The legend itself. */
void load_plot_legend(struct load_plot *p, const char *const *names, const int *cls,
    const int *dashed, size_t n);

#endif
