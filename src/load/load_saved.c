/* SPDX-License-Identifier: Apache-2.0 */
#include "load_saved.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_compare.h"
#include "load_html.h"
#include "load_json.h"
#include "load_levels.h"
#include "load_merge.h"
#include "load_read.h"
#include "load_report.h"
#include "log.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_DIFFERENT 4

FILE *load_out_open(const char *opt, const char *path)
{
	FILE *f;

	if (strcmp(path, "-") == 0)
		return stdout;
	f = fopen(path, "w");
	if (f == NULL)
		log_error("%s %s: %s", opt, path, strerror(errno));
	return f;
}

int load_out_close(FILE *f, const char *opt, const char *path)
{
	int rc = ferror(f) ? -1 : 0;

	if (f == stdout) {
		if (fflush(f) != 0)
			rc = -1;
	} else if (fclose(f) != 0) {
		rc = -1;
	}
	if (rc < 0)
		log_error("%s %s: write failed", opt, path);
	return rc;
}

/* ---- report --------------------------------------------------------------- */

static void report_usage(FILE *f)
{
	fputs("usage: tokentap-load report RUN.json [--html FILE] [--csv FILE]\n"
	    "Reads a document tokentap-load --json wrote (docs/load-schema.md) and prints\n"
	    "its table, as the run did; --html writes its HTML report (the page --report\n"
	    "writes), --csv its levels. \"-\" is stdout (the table then goes to stderr).\n"
	    "Exit status: 0 done, 1 a file could not be written, 2 usage or a bad document\n"
	    "(FILE:LINE:COL: what).\n", f);
}

int load_saved_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{"html", required_argument, NULL, 'o'},
		{"csv", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *html_path = NULL, *csv_path = NULL;
	FILE *table = stdout, *html = NULL, *csv = NULL;
	struct load_doc d;
	int ch, rc = 0;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (ch == 'o')
			html_path = optarg;
		else if (ch == 'c')
			csv_path = optarg;
		else if (ch == 'h') {
			report_usage(stdout);
			return 0;
		} else {
			report_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		log_error("report: one document expected (tokentap-load report RUN.json)");
		return EXIT_USAGE;
	}
	if (html_path && csv_path && strcmp(html_path, "-") == 0 && strcmp(csv_path, "-") == 0) {
		log_error("report: --html - and --csv -: one of them on stdout");
		return EXIT_USAGE;
	}
	if (load_read(&d, argv[optind], stderr) < 0)
		return EXIT_USAGE;
	if ((html_path && (html = load_out_open("--html", html_path)) == NULL) ||
	    (csv_path && (csv = load_out_open("--csv", csv_path)) == NULL)) {
		if (html != NULL && html != stdout)
			fclose(html);
		load_doc_free(&d);
		return EXIT_USAGE;
	}
	if (html == stdout || csv == stdout)
		table = stderr;
	load_report_table(table, &d.r);
	if (!d.has_samples)
		fprintf(table, "note: %s has no samples (--no-samples): the timeline and the "
		    "input-length scatter are empty\n", d.path);
	if (html != NULL) {
		load_html_write(html, &d.r);
		if (load_out_close(html, "--html", html_path) < 0)
			rc = EXIT_FAILED;
	}
	if (csv != NULL) {
		load_csv_write(csv, &d.r);
		if (load_out_close(csv, "--csv", csv_path) < 0)
			rc = EXIT_FAILED;
	}
	load_doc_free(&d);
	return rc;
}

/* ---- compare ----------------------------------------------------------------- */

static void compare_usage(FILE *f)
{
	fputs("usage: tokentap-load compare [options] A.json B.json\n"
	    "Sets B (the candidate) beside A (the base), level by level: the levels are\n"
	    "matched by what they set (concurrency 16 with concurrency 16, a run with a\n"
	    "run); one in a single document is listed, not compared. Per figure: A, B,\n"
	    "the change (B / A - 1; error_rate: B - A in points) and its bootstrap\n"
	    "interval over each level's measured requests (warm-up and cool-down ones\n"
	    "left out); * marks a significant change (the interval excludes 0).\n"
	    "\n"
	    "  --fail-on RULES     exit 1 when a change is beyond a rule and significant,\n"
	    "                      at any level (repeatable; blanks or commas between):\n"
	    "                      tpot_p50>+10%      B more than 10 % above A\n"
	    "                      output_tokens_per_s<-5%   more than 5 % below\n"
	    "                      ttft_p95>+20ms     more than 20 ms above (us, ms, s)\n"
	    "                      error_rate>+1%     more than 1 point above\n"
	    "  --metrics LIST      the figures shown (default ttft_p50,ttft_p95,tpot_p50,\n"
	    "                      tpot_p95,itl_p50,itl_p95,e2e_p50,e2e_p95,\n"
	    "                      output_tokens_per_s,requests_per_s,error_rate); any of\n"
	    "                      ttft, ttfo, tpot, itl, e2e with _pNN or _mean,\n"
	    "                      error_rate, output_tokens_per_s, requests_per_s,\n"
	    "                      total_tokens_per_s, goodput_per_s\n"
	    "  --alpha A           1 - the interval's confidence (default 0.05: 95 %)\n"
	    "  --resamples N       bootstrap resamples (default 2000)\n"
	    "  --seed N            the resampling's seed (default 1)\n"
	    "  --allow-different   compare levels whose workloads differ (mode,\n"
	    "                      concurrency or rate, arrivals, seed, prompt and output\n"
	    "                      lengths, target, dialect, model): each difference is\n"
	    "                      printed, and without this refuses the comparison\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "A level that ran more than once (capacity: within noise) is compared by its\n"
	    "first run: repeats of one seed are not independent draws.\n"
	    "\n"
	    "Exit status: 0 no rule failed, 1 a rule failed, 2 usage, a bad document or\n"
	    "no level in common, 4 the workloads differ (without --allow-different).\n", f);
}

int load_saved_compare(int argc, char **argv)
{
	static const struct option opts[] = {
		{"fail-on", required_argument, NULL, 'f'},
		{"metrics", required_argument, NULL, 'm'},
		{"alpha", required_argument, NULL, 'a'},
		{"resamples", required_argument, NULL, 'r'},
		{"seed", required_argument, NULL, 's'},
		{"allow-different", no_argument, NULL, 'A'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct load_cmp_opts o;
	struct load_doc a, b;
	char err[200], *end;
	double x;
	int ch, rc;

	load_cmp_opts_init(&o);
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (ch) {
		case 'f':
			if (load_cmp_parse_rules(&o, optarg, err, sizeof err) < 0) {
				log_error("--fail-on: %s", err);
				return EXIT_USAGE;
			}
			break;
		case 'm':
			if (load_cmp_parse_metrics(&o, optarg, err, sizeof err) < 0) {
				log_error("--metrics: %s", err);
				return EXIT_USAGE;
			}
			break;
		case 'a':
		case 'r':
		case 's':
			errno = 0;
			x = strtod(optarg, &end);
			if (end == optarg || *end != '\0' || errno != 0 || !isfinite(x) ||
			    (ch == 'a' && !(x > 0 && x < 1)) ||
			    (ch == 'r' && !(x >= 100 && x <= 1e6 && x == floor(x))) ||
			    (ch == 's' && !(x >= 0 && x <= 1e18 && x == floor(x)))) {
				log_error("%s: %s", ch == 'a' ? "--alpha" : ch == 'r' ? "--resamples" :
				    "--seed", ch == 'a' ? "a number between 0 and 1 (0.05)" :
				    ch == 'r' ? "a whole number from 100 to 1000000" : "a whole number");
				return EXIT_USAGE;
			}
			if (ch == 'a')
				o.alpha = x;
			else if (ch == 'r')
				o.resamples = (size_t)x;
			else
				o.seed = (uint64_t)x;
			break;
		case 'A':
			o.allow_different = 1;
			break;
		case 'h':
			compare_usage(stdout);
			return 0;
		default:
			compare_usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (argc - optind != 2) {
		log_error("compare: two documents expected (tokentap-load compare A.json B.json)");
		return EXIT_USAGE;
	}
	if (load_read(&a, argv[optind], stderr) < 0)
		return EXIT_USAGE;
	if (load_read(&b, argv[optind + 1], stderr) < 0) {
		load_doc_free(&a);
		return EXIT_USAGE;
	}
	if (!a.has_samples || !b.has_samples)
		fprintf(stdout, "note: %s has no samples (--no-samples): its changes have no "
		    "interval, and a rule judges them by its limit alone\n",
		    !a.has_samples ? a.path : b.path);
	rc = load_compare(stdout, &a.r, a.path, &b.r, b.path, &o);
	if (rc == LOAD_CMP_DIFFERENT)
		rc = EXIT_DIFFERENT;
	if (fflush(stdout) != 0 && rc == 0)
		rc = EXIT_FAILED;
	load_doc_free(&a);
	load_doc_free(&b);
	return rc < 0 ? EXIT_USAGE : rc;
}

/* ---- merge ------------------------------------------------------------------- */

static void merge_usage(FILE *f)
{
	fputs("usage: tokentap-load merge [-o OUT.json] [--html FILE] [--csv FILE] "
	    "SHARD.json ...\n"
	    "Joins the documents of one plan's shards (tokentap-load --shard I/N --json\n"
	    "FILE on N machines) into the document of the plan, as if one machine had\n"
	    "run it, and prints its table: every figure computed again from all the\n"
	    "shards' samples (percentiles exactly, from every request), throughput the\n"
	    "work of all of them inside their common window (the latest start to the\n"
	    "earliest end, by each machine's clock). Refused: a shard missing or given\n"
	    "twice, another shard count, plans that differ (kind, levels, target,\n"
	    "dialect, model, any parameter of a level, prompts, trace, headers), a\n"
	    "document without samples, windows that do not overlap.\n"
	    "\n"
	    "  -o, --json FILE     the merged document (docs/load-schema.md)\n"
	    "      --html FILE     its HTML report\n"
	    "      --csv FILE      its levels\n"
	    "  -h, --help          this text\n"
	    "\n"
	    "\"-\" is stdout (the table then goes to stderr).\n"
	    "Exit status: 0 done, 1 a file could not be written, 2 usage or a bad\n"
	    "document (FILE:LINE:COL: what), 4 not the shards of one plan.\n", f);
}

/* A merged sweep's knee, by the rules of its levels (load_levels.h). */
static void merged_knee(struct load_result *r)
{
	for (size_t i = 0; r->kind == LOAD_KIND_SWEEP && i < r->nlevels; i++) {
		const struct load_level *lv = &r->levels[i];
		int sat;
		if (r->sweep_key == LOAD_KEY_RATE)
			sat = load_levels_open_saturated(&lv->sum, LOAD_CARRIED_SHARE);
		else
			sat = r->sweep_key == LOAD_KEY_CONCURRENCY && i > 0 &&
			    load_levels_saturated(&r->levels[i - 1].sum, r->levels[i - 1].value,
			    &lv->sum, lv->value, 0.10);
		if (sat) {
			r->saturated_at = (int)i;
			r->knee = (int)i - 1;
			return;
		}
	}
}

static int merge_write(const struct load_merged *m, const char *json_path,
    const char *html_path, const char *csv_path, int itl)
{
	struct load_json_opts jo = { 1, itl };
	const char *path[3] = { json_path, html_path, csv_path };
	const char *opt[3] = { "--json", "--html", "--csv" };
	FILE *f[3] = { NULL, NULL, NULL }, *table = stdout;
	int rc = 0;

	for (int i = 0; i < 3; i++)
		if (path[i] != NULL && (f[i] = load_out_open(opt[i], path[i])) == NULL) {
			for (int k = 0; k < i; k++)
				if (f[k] != NULL && f[k] != stdout)
					fclose(f[k]);
			return EXIT_USAGE;
		}
	for (int i = 0; i < 3; i++)
		if (f[i] == stdout)
			table = stderr;
	load_report_table(table, &m->r);
	if (f[0] != NULL)
		load_json_write(f[0], &m->r, &jo);
	if (f[1] != NULL)
		load_html_write(f[1], &m->r);
	if (f[2] != NULL)
		load_csv_write(f[2], &m->r);
	for (int i = 0; i < 3; i++)
		if (f[i] != NULL && load_out_close(f[i], opt[i], path[i]) < 0)
			rc = EXIT_FAILED;
	return rc;
}

int load_saved_merge(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", required_argument, NULL, 'o'},
		{"html", required_argument, NULL, 'H'},
		{"csv", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *json_path = NULL, *html_path = NULL, *csv_path = NULL;
	struct load_doc *docs;
	struct load_merged m;
	size_t n = 0;
	int ch, rc = EXIT_USAGE, itl = 1, stdouts;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		if (ch == 'o')
			json_path = optarg;
		else if (ch == 'H')
			html_path = optarg;
		else if (ch == 'c')
			csv_path = optarg;
		else if (ch == 'h') {
			merge_usage(stdout);
			return 0;
		} else {
			merge_usage(stderr);
			return EXIT_USAGE;
		}
	}
	stdouts = (json_path && strcmp(json_path, "-") == 0) +
	    (html_path && strcmp(html_path, "-") == 0) + (csv_path && strcmp(csv_path, "-") == 0);
	if (stdouts > 1) {
		log_error("merge: one of --json, --html and --csv on stdout");
		return EXIT_USAGE;
	}
	if (argc - optind < 1) {
		log_error("merge: the shards' documents expected (tokentap-load merge "
		    "-o OUT.json SHARD0.json SHARD1.json ...)");
		return EXIT_USAGE;
	}
	docs = calloc((size_t)(argc - optind), sizeof(*docs));
	if (docs == NULL) {
		log_error("merge: out of memory");
		return EXIT_USAGE;
	}
	for (; optind + (int)n < argc; n++) {
		if (load_read(&docs[n], argv[optind + (int)n], stderr) < 0)
			goto done;
		itl &= docs[n].has_itl;
	}
	if (load_merge(&m, docs, n, argc, argv, stderr) < 0) {
		rc = EXIT_DIFFERENT;
		goto done;
	}
	merged_knee(&m.r);
	rc = merge_write(&m, json_path, html_path, csv_path, itl);
	load_merged_free(&m);
done:
	for (size_t i = 0; i < n; i++)
		load_doc_free(&docs[i]);
	free(docs);
	return rc;
}
