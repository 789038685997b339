/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load's options as the command line gave them, and the checks
 * run once they are all read: what goes together and what does not, and
 * the defaults that follow from the command (a sweep's warm-up). A check
 * that fails is a usage error: it is logged and the program exits 2. */
#ifndef TOKENTAP_LOAD_CHECKS_H
#define TOKENTAP_LOAD_CHECKS_H

#include <stdint.h>

#include "load_conf.h"
#include "load_levels.h"
#include "load_result.h"
#include "load_slo.h"
#include "load_summary.h"

#define EXIT_USAGE 2

struct load_opts {
	enum load_kind kind;
	struct load_conf conf;
	int url_given;
	int duration_given, count_given, warmup_given, cooldown_given;
	const char *json_path, *csv_path, *html_path;
	int no_samples, itl_samples;
	const char *scen_path;
	const char *only;
	int check;
	struct load_pcts pcts;
	uint64_t slice_us;
	const char *slo_text;
	double confidence;           /* --confidence; 0: the default */
	struct load_slo slo;
	const char *prompts_path, *trace_path, *replay_path, *replay_route;
	const char *tt_url, *tt_window, *tt_route, *tt_log;
	const char *over, *levels;
	struct load_plan plan;
	int tls_opt_given;
	int no_preflight;
	int prefix_opt_given;        /* --prefix-tokens or --prefix-dist */
	uint32_t calibrate;          /* --calibrate N; 0: off */
	int bpt_given;               /* --bytes-per-token */
	const char *sessions_path, *sharegpt_path;
	int think_given;
};
/* Logs "OPT: ERR" (or MSG) and exits with EXIT_USAGE. */
void load_bad_value(const char *opt, const char *err);
void load_fail_usage(const char *msg);
/* Checks the options read into o and sets the defaults that follow from
 * them; returns only when they hold. */
void load_check_options(struct load_opts *o);

#endif
