/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_svg.c: HTML escaping (markup characters as entities,
 * ill-formed UTF-8 as U+FFFD, control bytes as '?', well-formed UTF-8
 * kept, a count honoured), numbers for people, and nice ticks that cover
 * the data at 1, 2 or 5 times a power of ten. */
#include <math.h>

#include "load_svg.h"

#include "unit.h"

/* What fn wrote, as a string the caller frees. */
static char *esc(const char *s, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	if (n == (size_t)-1)
		load_svg_esc(f, s);
	else
		load_svg_escn(f, s, n);
	fclose(f);
	return buf;
}

static void check(const char *in, size_t n, const char *want)
{
	char *got = esc(in, n);

	if (strcmp(got, want) != 0)
		fail_msg("escaped %s: got \"%s\", want \"%s\"", in ? in : "NULL", got, want);
	free(got);
}

static void escaping(void **state)
{
	(void)state;
	check("plain text 1.5 ms", (size_t)-1, "plain text 1.5 ms");
	check("<script>alert(\"x\")</script>", (size_t)-1,
	    "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
	check("a&b 'c' &amp;", (size_t)-1, "a&amp;b &#39;c&#39; &amp;amp;");
	check("\"><img src=x onerror=alert(1)>", (size_t)-1,
	    "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;");
	/* control bytes and DEL: no line break, no escape of the page's own */
	check("a\nb\tc\rd\x7f" "e\x1b[31m", (size_t)-1, "a?b?c?d?e?[31m");
	/* well-formed UTF-8 as it is, ill-formed as U+FFFD */
	check("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", (size_t)-1,
	    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	check("x\xffy\xc3(z", (size_t)-1, "x\xef\xbf\xbdy\xef\xbf\xbd(z");
	check("\xed\xa0\x80", (size_t)-1, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	/* a sequence cut by the count is ill-formed there, not read past it */
	check("ab\xc3\xa9", 3, "ab\xef\xbf\xbd");
	check("<<", 1, "&lt;");
	check(NULL, (size_t)-1, "");
	check("a\0b", 3, "a");
}

static void numbers(void **state)
{
	char b[32];

	(void)state;
	load_svg_num(b, sizeof b, 20.456);
	assert_string_equal(b, "20.46");
	load_svg_num(b, sizeof b, 1250.4);
	assert_string_equal(b, "1250");
	load_svg_num(b, sizeof b, 0.0125);
	assert_string_equal(b, "0.0125");
	load_svg_num(b, sizeof b, 0);
	assert_string_equal(b, "0");
	load_svg_num(b, sizeof b, NAN);
	assert_string_equal(b, "-");
	load_svg_num(b, sizeof b, -3.5);
	assert_string_equal(b, "-3.5");
}

static void ticks_cover(double lo, double hi, size_t want, const double *expect, size_t n)
{
	double t[16];
	size_t got = load_svg_ticks(lo, hi, want, t, 16);

	if (expect != NULL) {
		assert_int_equal(got, n);
		for (size_t i = 0; i < n; i++)
			if (fabs(t[i] - expect[i]) > 1e-9 * fmax(1, fabs(expect[i])))
				fail_msg("tick %zu: %g, want %g", i, t[i], expect[i]);
	}
	assert_true(got >= 2 && got <= 16);
	assert_true(t[0] <= lo && t[got - 1] >= hi);
	for (size_t i = 1; i < got; i++) {
		double step = t[i] - t[i - 1], p = pow(10, floor(log10(step) + 1e-9));
		double m = step / p;
		assert_true(fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6);
	}
}

static void ticks(void **state)
{
	static const double a[] = {0, 20, 40, 60, 80, 100};
	static const double b[] = {0.01, 0.02, 0.03, 0.04, 0.05};
	static const double c[] = {0, 200, 400, 600, 800, 1000, 1200};

	(void)state;
	ticks_cover(0, 97, 6, a, 6);
	ticks_cover(0.013, 0.047, 5, b, 5);
	ticks_cover(0, 1150, 6, c, 7);
	ticks_cover(19.71, 20.17, 6, NULL, 0);
	ticks_cover(-3, 7, 6, NULL, 0);
	ticks_cover(1e6, 3.3e7, 6, NULL, 0);
	{
		double t[4];
		assert_int_equal(load_svg_ticks(5, 5, 6, t, 4), 0);   /* no range */
		assert_int_equal(load_svg_ticks(0, 1e9, 6, t, 4), 4);  /* capped */
	}
}

/* A plot maps its range onto its box, log2 where asked. */
static void plot_scales(void **state)
{
	struct load_plot p;

	(void)state;
	load_plot_init(&p, stdout, 1, 256, 1, 0, 97);
	assert_true(p.xlog && p.x0 == 1 && p.x1 == 256);
	assert_true(fabs(load_plot_x(&p, 1) - p.ml) < 1e-9);
	assert_true(fabs(load_plot_x(&p, 256) - (p.w - p.mr)) < 1e-9);
	assert_true(fabs(load_plot_x(&p, 16) - (p.ml + (p.w - p.ml - p.mr) / 2)) < 1e-9);
	assert_true(p.y0 == 0 && p.y1 >= 97);
	assert_true(fabs(load_plot_y(&p, 0) - (p.h - p.mb)) < 1e-9);
	assert_true(load_plot_y(&p, 97) >= p.mt && load_plot_y(&p, 97) < p.h - p.mb);
	/* one point: a range around it */
	load_plot_init(&p, stdout, 8, 8, 0, 0, 0);
	assert_true(p.x0 < 8 && p.x1 > 8 && p.y1 > p.y0);
}

/* A range no tick can mark (a saved document's span of +-1e308, whose
 * width overflows; a denormal one, whose step underflows) made no tick,
 * and the plot read its ticks[-1] (load_svg.c:145, UBSan): such a plot
 * falls back to [0, 1], every position finite. */
static void plot_of_any_range(void **state)
{
	static const double r[][2] = {{-1e308, 1e308}, {-1.7e308, 1.7e308}, {0, 1e308},
		{1e-320, 1e-320}, {0, 4.9e-324}, {-1e300, -1e300}};
	struct load_plot p;

	(void)state;
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
		for (int xlog = 0; xlog < 2; xlog++) {
			load_plot_init(&p, stdout, r[i][0], r[i][1], xlog, r[i][0], r[i][1]);
			assert_true(p.nxt >= 2 && p.nyt >= 2);
			assert_true(p.x1 > p.x0 && p.y1 > p.y0);
			assert_true(isfinite(load_plot_x(&p, p.x0)) &&
			    isfinite(load_plot_x(&p, p.x1)));
			assert_true(isfinite(load_plot_y(&p, p.y0)) &&
			    isfinite(load_plot_y(&p, p.y1)));
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escaping),
		cmocka_unit_test(numbers),
		cmocka_unit_test(ticks),
		cmocka_unit_test(plot_scales),
		cmocka_unit_test(plot_of_any_range),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
