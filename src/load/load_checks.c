/* SPDX-License-Identifier: Apache-2.0 */
/* The checks of tokentap-load's options once all are read (load_checks.h):
 * kept apart from their parsing in load.c, which reads one option at a
 * time and cannot see what goes with what. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load_body.h"
#include "load_checks.h"
#include "log.h"

void load_bad_value(const char *opt, const char *err)
{
	log_error("%s: %s", opt, err);
	exit(EXIT_USAGE);
}

void load_fail_usage(const char *msg)
{
	log_error("%s", msg);
	exit(EXIT_USAGE);
}

/* --over: the sweep's key, or the capacity's keys. */
static void parse_over(struct load_opts *o)
{
	struct load_plan *p = &o->plan;
	const char *hint;
	char buf[64], *save = NULL;

	if (o->kind == LOAD_KIND_SWEEP) {
		if (o->over == NULL || o->levels == NULL)
			load_fail_usage("sweep: --over KEY and --levels LEVELS, e.g. --over "
			    "concurrency --levels 1..64");
		p->key = load_plan_key(o->over, &hint);
		if (p->key == LOAD_KEY_NONE) {
			log_error("--over: unknown sweep key '%s' (concurrency, rate, "
			    "prompt-tokens)%s%s%s", o->over, hint ? "; did you mean '" : "",
			    hint ? hint : "", hint ? "'?" : "");
			exit(EXIT_USAGE);
		}
		return;
	}
	snprintf(buf, sizeof buf, "%s", o->over ? o->over : "concurrency,rate");
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		enum load_key k = load_plan_key(t, &hint);
		if (k != LOAD_KEY_CONCURRENCY && k != LOAD_KEY_RATE) {
			log_error("--over: unknown capacity key '%s' (concurrency, rate)%s%s%s", t,
			    hint ? "; did you mean '" : "", hint ? hint : "", hint ? "'?" : "");
			exit(EXIT_USAGE);
		}
		if (p->nsearch == 2 || (p->nsearch == 1 && p->search[0] == k))
			load_fail_usage("--over: concurrency, rate, or both once");
		p->search[p->nsearch++] = k;
	}
}

/* --shard: what can be split exactly (load_shard.h), and a document for
 * `merge` to join. */
static void check_shard(const struct load_opts *o)
{
	const struct load_conf *c = &o->conf;
	const struct load_plan *p = &o->plan;
	int open = c->rate > 0 || o->trace_path != NULL || o->replay_path != NULL;
	int closed = !open;
	double least = c->concurrency;

	if (c->shards == 0)
		return;
	if (o->kind == LOAD_KIND_CAPACITY)
		load_fail_usage("--shard: a capacity search picks each level from the figures "
		    "of the last, and a shard sees only its share of them: the shards "
		    "would search apart. Shard `sweep --no-stop` over the levels, merge, "
		    "and read the capacity off the merged levels; or search from one "
		    "machine");
	if (o->scen_path != NULL)
		load_fail_usage("--shard goes with a run or a sweep, not with --scenarios");
	if (o->calibrate > 0)
		load_fail_usage("--shard: --calibrate measures each shard's own ratio, and "
		    "the shards' prompts would differ: calibrate once, then give every "
		    "shard that ratio with --bytes-per-token R");
	if (o->json_path == NULL || o->no_samples)
		load_fail_usage("--shard: --json FILE with its samples, for `tokentap-load merge`");
	if (o->kind == LOAD_KIND_SWEEP && (p->stop_on_saturation ||
	    isfinite(p->stop_error_rate) || (p->geometric && isinf(p->to))))
		load_fail_usage("--shard: a sweep that stops on its figures (saturation, "
		    "--stop-error-rate) would stop each shard on its share of them, "
		    "apart: --no-stop and levels with an end (1..64)");
	if (o->kind == LOAD_KIND_SWEEP && p->key != LOAD_KEY_PROMPT_TOKENS)
		closed = p->key == LOAD_KEY_CONCURRENCY;
	if (o->kind == LOAD_KIND_SWEEP && p->key == LOAD_KEY_CONCURRENCY)
		least = p->geometric ? p->from : p->levels[0];
	if ((closed || c->concurrency_set) && least < c->shards)
		load_fail_usage("--shard I/N: each shard needs a user (or a connection): "
		    "-c (and a concurrency sweep's levels) at least N");
	if (c->count > 0 && c->count < c->shards)
		load_fail_usage("--shard I/N: each shard needs a request: -n at least N");
}

/* Conversations: a closed loop of chat requests, drawn or from one file. */
static void check_talk(struct load_opts *o)
{
	struct load_conf *c = &o->conf;
	int n = (c->turns.min > 0) + (o->sessions_path != NULL) + (o->sharegpt_path != NULL);

	if (n > 1)
		load_fail_usage("--turns, --sessions and --sharegpt: one of them");
	if (n == 0) {
		if (o->think_given)
			load_fail_usage("--think-time goes with --turns, --sessions or --sharegpt");
		return;
	}
	if (c->rate > 0 || o->trace_path || o->replay_path)
		load_fail_usage("conversations are held by -c users: no --rate or trace");
	if (o->prompts_path || c->prefixes > 0)
		load_fail_usage("conversations write their own messages: no --prompts or "
		    "--prefixes");
	if (o->kind == LOAD_KIND_CAPACITY)
		load_fail_usage("capacity: no conversations (a sweep over concurrency can)");
	if (c->shards > 0)
		load_fail_usage("--shard: conversations are not split yet (a user's turns "
		    "follow its own answers, so the plan's request numbers depend on "
		    "timing); run them from one machine");
	if (o->url_given && !load_body_chat(c))
		load_fail_usage("conversations need a chat API's messages: OpenAI "
		    "/v1/chat/completions, Anthropic /v1/messages or Ollama /api/chat");
}

/* What goes together and what does not. */
void load_check_options(struct load_opts *o)
{
	struct load_conf *c = &o->conf;
	const char *err;

	if (o->count_given && !o->duration_given)
		c->duration_us = 0;
	if ((o->trace_path || o->replay_path || o->sessions_path || o->sharegpt_path) &&
	    !o->duration_given)
		c->duration_us = 0;
	check_talk(o);
	if (o->scen_path == NULL && (o->only != NULL || o->check))
		load_fail_usage("--only and --check go with --scenarios");
	if (o->scen_path != NULL && o->kind != LOAD_KIND_RUN)
		load_fail_usage("--scenarios runs on its own, not with sweep or capacity");
	if (o->scen_path != NULL && o->html_path != NULL)
		load_fail_usage("--report goes with a run, a sweep or a capacity search, not "
		    "with --scenarios");
	if (o->html_path != NULL && strcmp(o->html_path, "-") == 0 &&
	    ((o->json_path && strcmp(o->json_path, "-") == 0) ||
	    (o->csv_path && strcmp(o->csv_path, "-") == 0)))
		load_fail_usage("--report -, --json - and --csv -: one of them on stdout");
	if (o->scen_path == NULL && !o->url_given)
		load_fail_usage("no target URL");
	if (c->ramp_us > 0 && c->rate > 0)
		load_fail_usage("--ramp is for the closed loop, not with --rate");
	if (c->warmup_us > 0 && c->warmup_count > 0)
		load_fail_usage("--warmup and --warmup-requests: one or the other");
	if (o->trace_path && o->replay_path)
		load_fail_usage("--trace and --replay-log: one or the other");
	if ((o->trace_path || o->replay_path) && c->rate > 0)
		load_fail_usage("a trace sets its own arrivals: no --rate with it");
	if (o->prefix_opt_given && c->prefixes == 0)
		load_fail_usage("--prefix-tokens and --prefix-dist go with --prefixes");
	if (o->calibrate > 0 && o->bpt_given)
		load_fail_usage("--calibrate and --bytes-per-token: one or the other");
	if (o->calibrate > 0 && o->scen_path != NULL)
		load_fail_usage("--calibrate goes with a run, a sweep or a capacity search, not "
		    "with --scenarios (give --bytes-per-token)");
	if (o->replay_route && !o->replay_path)
		load_fail_usage("--replay-route goes with --replay-log");
	if (c->trace_speed != 1 && !o->trace_path && !o->replay_path && !o->sessions_path)
		load_fail_usage("--trace-speed goes with --trace, --replay-log or --sessions");
	if (c->arrivals != LOAD_ARR_POISSON && c->rate <= 0 && o->kind != LOAD_KIND_SWEEP &&
	    o->kind != LOAD_KIND_CAPACITY)
		load_fail_usage("--arrivals and --burstiness go with --rate");
	if (o->tls_opt_given && o->url_given && !c->tls)
		load_fail_usage("--insecure, --cacert and --sni go with an https:// target");
	if ((o->tt_window || o->tt_route) && !o->tt_url)
		load_fail_usage("--tokentap-window and --tokentap-route go with --tokentap");
	if (o->kind == LOAD_KIND_RUN && (o->over || o->levels))
		load_fail_usage("--over and --levels are for `tokentap-load sweep` (or capacity)");
	if (o->kind != LOAD_KIND_RUN)
		parse_over(o);
	if (o->kind == LOAD_KIND_SWEEP) {
		if (load_plan_levels(&o->plan, o->levels, &err) < 0)
			load_bad_value("--levels", err);
		if (o->plan.key == LOAD_KEY_CONCURRENCY && (c->rate > 0 || o->trace_path ||
		    o->replay_path))
			load_fail_usage("a concurrency sweep is a closed loop: no --rate or trace");
		if (o->plan.key == LOAD_KEY_RATE && (o->trace_path || o->replay_path))
			load_fail_usage("a rate sweep sets the arrivals: no trace");
		if (o->plan.key == LOAD_KEY_PROMPT_TOKENS && o->prompts_path)
			load_fail_usage("a prompt-tokens sweep writes its own prompts: no --prompts");
		if (o->plan.key == LOAD_KEY_CONCURRENCY && o->plan.levels[0] > 100000)
			load_fail_usage("--levels: concurrency up to 100000");
	}
	if (o->kind == LOAD_KIND_CAPACITY) {
		if (o->slo_text == NULL)
			load_fail_usage("capacity: --slo TARGETS, e.g. --slo 'ttft_p95<=1s "
			    "tpot_p95<=50ms error_rate<=1%'");
		if (o->trace_path || o->replay_path)
			load_fail_usage("capacity sets the load: no trace");
	}
	if (o->slo_text != NULL) {
		char why[200];
		if (load_slo_parse(&o->slo, o->slo_text, why, sizeof why) < 0)
			load_bad_value("--slo", why);
		if (o->confidence > 0)
			o->slo.confidence = o->confidence;
	}
	if (o->json_path && o->csv_path && strcmp(o->json_path, "-") == 0 &&
	    strcmp(o->csv_path, "-") == 0)
		load_fail_usage("--json - and --csv -: one of them on stdout");
	/* a sweep's level first settles: connections, caches, batches */
	if ((o->kind == LOAD_KIND_SWEEP || o->kind == LOAD_KIND_CAPACITY) &&
	    !o->warmup_given)
		c->warmup_us = 2000000;
	/* and its last requests end under its load; but tokentap's window
	 * would count the cool-down's requests with the level's */
	if ((o->kind == LOAD_KIND_SWEEP || o->kind == LOAD_KIND_CAPACITY) &&
	    !o->cooldown_given && o->tt_url == NULL)
		c->cooldown = 1;
	check_shard(o);
	/* a merge computes ITL from every gap */
	if (c->shards > 0)
		o->itl_samples = 1;
}
