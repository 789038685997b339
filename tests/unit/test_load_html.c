/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of load_html.c: whatever the command line, the target, the
 * server (tokentap's error text, a route) or a saved document's labels
 * held, the page has only the report's own markup, every such text
 * escaped, and is valid UTF-8; every panel of a sweep is there, a single
 * run's page leaves out the charts against load. */
#include <math.h>
#include <regex.h>

#include "jsonw.h"
#include "load_html.h"
#include "load_summary.h"

#include "unit.h"

#define HOSTILE "</title><script>alert(1)</script>\"><img src=x onerror=alert(2)>"

static const char *const tags[] = {
	"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p",
	"span", "code", "main", "section", "ul", "li", "b", "div", "table", "thead",
	"tbody", "tr", "th", "td", "svg", "clipPath", "g", "line", "path", "text",
	"circle", "rect",
};

static void fill_level(struct load_result *r, struct load_level *lv, double k)
{
	struct load_pcts p;
	struct load_sum_in in;

	load_pcts_default(&p);
	for (uint64_t i = 0; i < 40; i++) {
		struct load_sample s;
		uint32_t gaps[4] = {5000, 5200, 5100, 9000};
		memset(&s, 0, sizeof(s));
		s.seq = i;
		s.start_us = i * 50000;
		s.outcome = i == 7 ? OUTCOME_TIMEOUT : OUTCOME_OK;
		s.ttft_us = s.ttfo_us = (int64_t)(20000 * k + (double)i * 100);
		s.tpot_us = 5000 * k;
		s.duration_us = s.ttft_us + 20000;
		s.first_token_us = (int64_t)s.start_us + s.ttft_us;
		s.last_token_us = (int64_t)s.start_us + s.duration_us;
		s.output_tokens = 5;
		s.input_tokens = 100 + (int64_t)i * 10;
		s.first_chunk_tokens = -1;
		s.output_speed = 200;
		s.events = 7;
		s.token_chunks = 5;
		s.warmup = i < 2;
		assert_int_equal(loadstats_record(&lv->st, &s, gaps, 4), 0);
	}
	lv->info.window_start_us = 100000;
	lv->info.window_end_us = 2000000;
	memset(&in, 0, sizeof(in));
	in.st = &lv->st;
	in.pcts = &p;
	in.window_start_us = lv->info.window_start_us;
	in.window_end_us = lv->info.window_end_us;
	in.slice_us = 500000;
	assert_int_equal(load_summary(&in, &lv->sum), 0);
	(void)r;
}

/* The page of a result whose every outside text is hostile. */
static char *page(enum load_kind kind, size_t nlevels)
{
	static char arg1[] = "--model", arg2[] = HOSTILE "\xff\xfe", arg0[] = "tokentap-load";
	static char *argv[] = {arg0, arg1, arg2};
	struct load_conf c;
	struct load_result r;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(load_conf_init(&c), 0);
	free(c.model);
	c.model = strdup(HOSTILE);
	c.url = strdup("http://x/" HOSTILE);
	load_result_init(&r, kind, &c, 3, argv);
	r.sweep_key = LOAD_KEY_CONCURRENCY;
	r.stop_reason = HOSTILE;
	for (size_t i = 0; i < nlevels; i++) {
		struct load_level *lv = load_result_add(&r, kind == LOAD_KIND_RUN ?
		    LOAD_KEY_NONE : LOAD_KEY_CONCURRENCY, (double)(1 << i), &c);
		assert_non_null(lv);
		snprintf(lv->label, sizeof lv->label, "%s\xc3", HOSTILE);
		fill_level(&r, lv, 1 + (double)i);
		lv->tt.asked = 1;
		lv->tt.ok = i % 2;
		snprintf(lv->tt.error, sizeof lv->tt.error, "%s", HOSTILE);
		for (int k = 0; k < 6; k++)
			lv->tt.ttft[k] = lv->tt.tpot[k] = 1;
	}
	r.knee = nlevels > 1 ? 1 : -1;
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	load_html_write(f, &r);
	fclose(f);
	load_result_free(&r);
	load_conf_free(&c);
	return buf;
}

static void only_our_markup(const char *html)
{
	regex_t re;
	regmatch_t g[3];
	const char *at = html;
	size_t n = strlen(html), i = 0;

	/* every tag is one of the report's */
	assert_int_equal(regcomp(&re, "<(/?)([A-Za-z!][A-Za-z0-9]*)", REG_EXTENDED), 0);
	while (regexec(&re, at, 3, g, 0) == 0) {
		size_t len = (size_t)(g[2].rm_eo - g[2].rm_so);
		const char *t = at + g[2].rm_so;
		int ok = len == 8 && strncmp(t, "!DOCTYPE", 8) == 0;
		for (size_t k = 0; k < sizeof tags / sizeof tags[0] && !ok; k++)
			ok = strlen(tags[k]) == len && strncmp(tags[k], t, len) == 0;
		if (!ok)
			fail_msg("a tag not the report's: %.40s", at + g[0].rm_so);
		at += g[0].rm_eo;
	}
	regfree(&re);
	assert_null(strstr(html, "<script"));
	assert_null(strstr(html, "<img"));
	assert_null(strstr(html, HOSTILE));
	assert_non_null(strstr(html, "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;"
	    "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
	/* no external resource: no URL but the SVG namespace */
	for (const char *u = strstr(html, "://"); u != NULL; u = strstr(u + 3, "://"))
		assert_true(strncmp(u - 4, "http://www.w3.org/2000/svg", 26) == 0 ||
		    strncmp(u - 4, "http://x/", 9) == 0);
	assert_null(strstr(html, "src=\""));
	assert_null(strstr(html, "href=\""));
	for (const char *u = strstr(html, "url("); u != NULL; u = strstr(u + 4, "url("))
		assert_true(u[4] == '#');          /* clip paths of the page's own */
	/* valid UTF-8 throughout */
	while (i < n) {
		int valid;
		i += jsonw_utf8_seq(html + i, n - i, &valid);
		assert_true(valid);
	}
}

static void sweep_page(void **state)
{
	static const char *const panels[] = {"verdict", "levels", "latency", "tpot",
		"throughput", "knee", "errors", "itl_cdf", "input", "slices", "timeline",
		"tokentap"};
	char *html = page(LOAD_KIND_SWEEP, 3), want[64];

	(void)state;
	only_our_markup(html);
	for (size_t i = 0; i < sizeof panels / sizeof panels[0]; i++) {
		snprintf(want, sizeof want, "data-panel=\"%s\"", panels[i]);
		if (strstr(html, want) == NULL)
			fail_msg("no panel %s", panels[i]);
	}
	assert_non_null(strstr(html, "data-mark=\"knee\" data-level=\"1\""));
	/* the timeout is a bar of its cause */
	assert_non_null(strstr(html, "data-outcome=\"timeout\" data-count=\"1\""));
	free(html);
}

static void run_page(void **state)
{
	char *html = page(LOAD_KIND_RUN, 1);

	(void)state;
	only_our_markup(html);
	assert_non_null(strstr(html, "data-panel=\"dists\""));
	assert_non_null(strstr(html, "data-panel=\"timeline\""));
	assert_null(strstr(html, "data-panel=\"latency\""));
	assert_null(strstr(html, "data-panel=\"knee\""));
	free(html);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sweep_page),
		cmocka_unit_test(run_page),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
