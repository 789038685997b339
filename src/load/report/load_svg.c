/* SPDX-License-Identifier: Apache-2.0 */
#include "load_svg.h"

#include <math.h>
#include <string.h>

#include "jsonw.h"

/* ---- text -------------------------------------------------------------- */

void load_svg_escn(FILE *f, const char *s, size_t n)
{
	size_t i = 0;

	if (s == NULL)
		return;
	while (i < n && s[i] != '\0') {
		int valid;
		size_t k = jsonw_utf8_seq(s + i, n - i, &valid);
		unsigned char c = (unsigned char)s[i];

		if (!valid) {
			fputs(JSONW_REPLACEMENT, f);
		} else if (k > 1) {
			fwrite(s + i, 1, k, f);
		} else {
			switch (c) {
			case '&':
				fputs("&amp;", f);
				break;
			case '<':
				fputs("&lt;", f);
				break;
			case '>':
				fputs("&gt;", f);
				break;
			case '"':
				fputs("&quot;", f);
				break;
			case '\'':
				fputs("&#39;", f);
				break;
			default:
				fputc(c < 0x20 || c == 0x7f ? '?' : c, f);
			}
		}
		i += k;
	}
}

void load_svg_esc(FILE *f, const char *s)
{
	if (s != NULL)
		load_svg_escn(f, s, strlen(s));
}

void load_svg_num(char *buf, size_t len, double v)
{
	double a = fabs(v);

	if (!isfinite(v))
		snprintf(buf, len, "-");
	else if (a >= 1e9 || (a > 0 && a < 1e-4))
		snprintf(buf, len, "%.3g", v);
	else if (a >= 1000)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.4g", v);
}

/* ---- scales -------------------------------------------------------------- */

/* 1, 2 or 5 times a power of ten, near raw. */
static double nice_step(double raw)
{
	double p = pow(10, floor(log10(raw))), m = raw / p;

	return p * (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10);
}

size_t load_svg_ticks(double lo, double hi, size_t want, double *out, size_t max)
{
	double step, a, b;
	size_t n = 0;

	if (!(hi > lo) || want < 2 || max == 0)
		return 0;
	step = nice_step((hi - lo) / (double)(want - 1));
	if (!(step > 0) || !isfinite(step))
		return 0;
	a = floor(lo / step + 1e-9) * step;
	b = ceil(hi / step - 1e-9) * step;
	for (double v = a; v <= b + step / 2 && n < max; v += step)
		out[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
}

/* Powers of two from lo to hi, every k-th where there are many. */
static size_t log_ticks(double lo, double hi, double *out, size_t max)
{
	int a = (int)floor(log2(lo) + 1e-9), b = (int)ceil(log2(hi) - 1e-9), k;
	size_t n = 0;

	if (b <= a)
		b = a + 1;
	k = (b - a + 9) / 10;
	for (int e = a; e <= b && n < max; e += k)
		out[n++] = ldexp(1, e);
	if (out[n - 1] < hi && n < max)
		out[n++] = ldexp(1, a + ((b - a + k - 1) / k) * k);
	return n;
}

void load_plot_init(struct load_plot *p, FILE *f, double xlo, double xhi, int xlog,
    double ylo, double yhi)
{
	memset(p, 0, sizeof(*p));
	p->f = f;
	p->w = 560;
	p->h = 300;
	p->ml = 62;
	p->mr = 18;
	p->mt = 30;
	p->mb = 44;
	if (!isfinite(ylo))
		ylo = 0;
	if (!isfinite(yhi) || yhi <= ylo)
		yhi = ylo + 1;
	p->nyt = load_svg_ticks(ylo, ylo + (yhi - ylo) * 1.04, 6, p->yt, 16);
	/* a range no tick can mark (a saved document's 1e-320 or 1e300) */
	if (p->nyt < 2)
		p->nyt = load_svg_ticks(0, 1, 6, p->yt, 16);
	p->y0 = p->yt[0];
	p->y1 = p->yt[p->nyt - 1];
	p->xlog = xlog && xlo > 0;
	if (!isfinite(xlo) || !isfinite(xhi)) {
		xlo = 0;
		xhi = 1;
	}
	if (p->xlog) {
		p->nxt = log_ticks(xlo, xhi, p->xt, 16);
	} else {
		if (xhi <= xlo) {
			double d = xlo != 0 ? fabs(xlo) / 2 : 1;
			xlo -= d;
			xhi += d;
		}
		p->nxt = load_svg_ticks(xlo, xhi, 7, p->xt, 16);
	}
	if (p->nxt < 2) {
		p->xlog = 0;
		p->nxt = load_svg_ticks(0, 1, 7, p->xt, 16);
	}
	p->x0 = p->xt[0];
	p->x1 = p->xt[p->nxt - 1];
}

double load_plot_x(const struct load_plot *p, double x)
{
	double span = p->w - p->ml - p->mr, f;

	if (p->xlog)
		f = x > 0 ? (log2(x) - log2(p->x0)) / (log2(p->x1) - log2(p->x0)) : 0;
	else
		f = (x - p->x0) / (p->x1 - p->x0);
	return p->ml + f * span;
}

double load_plot_y(const struct load_plot *p, double y)
{
	return p->h - p->mb - (y - p->y0) / (p->y1 - p->y0) * (p->h - p->mt - p->mb);
}

void load_plot_open(struct load_plot *p, const char *id, const char *title,
    const char *xlabel, const char *ylabel)
{
	FILE *f = p->f;
	double l = p->ml, r = p->w - p->mr, t = p->mt, b = p->h - p->mb;
	char num[32];

	snprintf(p->id, sizeof p->id, "%s", id);
	fprintf(f, "<svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %.0f %.0f\" "
	    "role=\"img\" aria-labelledby=\"%s-t\" xmlns=\"http://www.w3.org/2000/svg\">"
	    "<title id=\"%s-t\">", p->id, p->w, p->h, p->id, p->id);
	load_svg_esc(f, title);
	fprintf(f, "</title>\n<clipPath id=\"%s-c\"><rect x=\"%.1f\" y=\"%.1f\" "
	    "width=\"%.1f\" height=\"%.1f\"/></clipPath>\n<g class=\"grid\">", p->id,
	    l - 4, t - 4, r - l + 8, b - t + 8);
	for (size_t i = 0; i < p->nyt; i++)
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", l, r,
		    load_plot_y(p, p->yt[i]), load_plot_y(p, p->yt[i]));
	for (size_t i = 0; i < p->nxt; i++)
		fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
		    load_plot_x(p, p->xt[i]), load_plot_x(p, p->xt[i]), t, b);
	fprintf(f, "</g>\n<g class=\"axis\"><path d=\"M%.1f %.1fV%.1fH%.1f\"/>", l, t, b, r);
	for (size_t i = 0; i < p->nyt; i++) {
		load_svg_num(num, sizeof num, p->yt[i]);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", l - 6,
		    load_plot_y(p, p->yt[i]) + 4, num);
	}
	for (size_t i = 0; i < p->nxt; i++) {
		load_svg_num(num, sizeof num, p->xt[i]);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
		    load_plot_x(p, p->xt[i]), b + 16, num);
	}
	fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
	    (l + r) / 2, p->h - 8);
	load_svg_esc(f, xlabel);
	fprintf(f, "</text><text class=\"label\" x=\"14\" y=\"%.1f\" text-anchor=\"middle\" "
	    "transform=\"rotate(-90 14 %.1f)\">", (t + b) / 2, (t + b) / 2);
	load_svg_esc(f, ylabel);
	fputs("</text></g>\n", f);
}

void load_plot_close(struct load_plot *p)
{
	fputs("</svg>\n", p->f);
}

void load_plot_series(struct load_plot *p, const char *name, const char *label,
    int cls, int style, const double *x, const double *y, size_t n,
    const int *levels)
{
	FILE *f = p->f;
	char xs[32], ys[32];
	int first = 1;

	fprintf(f, "<g class=\"series s%d\" clip-path=\"url(#%s-c)\" data-series=\"",
	    cls % 8, p->id);
	load_svg_esc(f, name);
	fputs("\">", f);
	if (!(style & LOAD_SVG_NOLINE)) {
		fprintf(f, "<path class=\"line%s\" d=\"", style & LOAD_SVG_DASH ? " dash" : "");
		for (size_t i = 0; i < n; i++) {
			if (isnan(x[i]) && (style & LOAD_SVG_GAPS))
				first = 1;
			if (!isfinite(x[i]) || !isfinite(y[i]))
				continue;
			fprintf(f, "%s%.1f %.1f", first ? "M" : "L", load_plot_x(p, x[i]),
			    load_plot_y(p, y[i]));
			first = 0;
		}
		fputs("\"/>", f);
	}
	for (size_t i = 0; i < n && !(style & LOAD_SVG_NOPTS); i++) {
		if (!isfinite(x[i]) || !isfinite(y[i]) || x[i] < p->x0 || x[i] > p->x1 ||
		    y[i] < p->y0 || y[i] > p->y1)
			continue;
		load_svg_num(xs, sizeof xs, x[i]);
		load_svg_num(ys, sizeof ys, y[i]);
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" data-level=\"%d\" "
		    "data-x=\"%.9g\" data-y=\"%.9g\"><title>", load_plot_x(p, x[i]),
		    load_plot_y(p, y[i]), levels ? levels[i] : (int)i, x[i], y[i]);
		load_svg_esc(f, label);
		fprintf(f, ": %s at %s</title></circle>", ys, xs);
	}
	fputs("</g>\n", f);
}

void load_plot_hline(struct load_plot *p, double y, const char *label,
    const char *attrs)
{
	double py = load_plot_y(p, y);

	if (!isfinite(y) || y < p->y0 || y > p->y1)
		return;
	fprintf(p->f, "<g class=\"limit\" %s><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
	    "y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", attrs ? attrs : "",
	    p->ml, p->w - p->mr, py, py, p->w - p->mr - 4, py - 4);
	load_svg_esc(p->f, label);
	fputs("</text></g>\n", p->f);
}

/* The width of a legend's entry, and where the next one goes. */
static double entry_w(const char *name)
{
	return 30 + 6.2 * (double)strlen(name);
}

size_t load_plot_legend_rows(const struct load_plot *p, const char *const *names,
    size_t n)
{
	double x = p->ml;
	size_t rows = n > 0;

	for (size_t i = 0; i < n; i++) {
		if (x > p->ml && x + entry_w(names[i]) > p->w - p->mr) {
			x = p->ml;
			rows++;
		}
		x += entry_w(names[i]);
	}
	return rows;
}

void load_plot_legend(struct load_plot *p, const char *const *names, const int *cls,
    const int *dashed, size_t n)
{
	double x = p->ml, y = 14;

	fputs("<g class=\"legend\">", p->f);
	for (size_t i = 0; i < n; i++) {
		if (x > p->ml && x + entry_w(names[i]) > p->w - p->mr) {
			x = p->ml;
			y += 14;
		}
		fprintf(p->f, "<g class=\"s%d\"><line class=\"line%s\" x1=\"%.1f\" x2=\"%.1f\" "
		    "y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">", cls[i] % 8,
		    dashed && dashed[i] ? " dash" : "", x, x + 18, y, y, x + 22, y + 4);
		load_svg_esc(p->f, names[i]);
		fputs("</text></g>", p->f);
		x += entry_w(names[i]);
	}
	fputs("</g>\n", p->f);
}
