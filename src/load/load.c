/* SPDX-License-Identifier: Apache-2.0 */
/* tokentap-load: a load generator and capacity-planning benchmark that
 * measures TTFT, TPOT, ITL and output speed on the client side with the
 * definitions of docs/contract.md §4, exactly from every request, so its
 * figures can be set beside tokentap's. Options, the three commands (a run, a
 * sweep, a capacity search) and scenario files live here; the options'
 * checks in load_checks.c, the levels in load_levels.c, one run in
 * load_run.c. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "jsonw.h"
#include "load_calib.h"
#include "load_checks.h"
#include "load_conf.h"
#include "load_html.h"
#include "load_json.h"
#include "load_levels.h"
#include "load_prefix.h"
#include "load_prompts.h"
#include "load_report.h"
#include "load_run.h"
#include "load_saved.h"
#include "load_scen.h"
#include "load_shard.h"
#include "load_tls.h"
#include "load_body.h"
#include "load_session.h"
#include "load_trace.h"
#include "load_tt.h"
#include "log.h"
#include "net.h"
#include "util.h"

#define EXIT_MISSED 1
#define EXIT_TARGET 3
#define EXIT_INTERRUPTED 130

enum {
	OPT_ARRIVALS = 256, OPT_TIMEOUT, OPT_DIALECT, OPT_MODEL, OPT_PROMPT,
	OPT_MAX, OPT_JSON, OPT_SAMPLES, OPT_SCENARIOS, OPT_ONLY, OPT_SEED,
	OPT_RAMP, OPT_LAG, OPT_BURSTINESS, OPT_WARMUP, OPT_WARMUP_REQUESTS,
	OPT_PERCENTILES, OPT_PROMPTS, OPT_TRACE, OPT_REPLAY, OPT_REPLAY_ROUTE,
	OPT_TRACE_SPEED, OPT_SLICE, OPT_CSV, OPT_NO_SAMPLES, OPT_ITL_SAMPLES,
	OPT_CONTINUOUS, OPT_INSECURE, OPT_CACERT, OPT_SNI, OPT_TOKENTAP,
	OPT_TT_WINDOW, OPT_TT_ROUTE, OPT_SLO, OPT_OVER, OPT_LEVELS, OPT_SATURATION,
	OPT_NO_STOP, OPT_STOP_ERRORS, OPT_FROM, OPT_MAX_CONC, OPT_MAX_RATE,
	OPT_RESOLUTION, OPT_REPEATS, OPT_MAX_LEVELS, OPT_CONFIDENCE, OPT_COOLDOWN, OPT_REPORT,
	OPT_NO_PREFLIGHT, OPT_TT_LOG, OPT_PREFIXES, OPT_PREFIX_TOKENS, OPT_PREFIX_DIST,
	OPT_CALIBRATE, OPT_BPT, OPT_SHARD, OPT_TURNS, OPT_THINK, OPT_SESSIONS,
	OPT_SHAREGPT
};

static const struct option long_opts[] = {
	{"concurrency", required_argument, NULL, 'c'},
	{"rate", required_argument, NULL, 'r'},
	{"arrivals", required_argument, NULL, OPT_ARRIVALS},
	{"burstiness", required_argument, NULL, OPT_BURSTINESS},
	{"prefixes", required_argument, NULL, OPT_PREFIXES},
	{"prefix-tokens", required_argument, NULL, OPT_PREFIX_TOKENS},
	{"prefix-dist", required_argument, NULL, OPT_PREFIX_DIST},
	{"duration", required_argument, NULL, 'd'},
	{"requests", required_argument, NULL, 'n'},
	{"warmup", required_argument, NULL, OPT_WARMUP},
	{"warmup-requests", required_argument, NULL, OPT_WARMUP_REQUESTS},
	{"cooldown", required_argument, NULL, OPT_COOLDOWN},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"dialect", required_argument, NULL, OPT_DIALECT},
	{"model", required_argument, NULL, OPT_MODEL},
	{"prompt-tokens", required_argument, NULL, OPT_PROMPT},
	{"max-tokens", required_argument, NULL, OPT_MAX},
	{"prompts", required_argument, NULL, OPT_PROMPTS},
	{"calibrate", required_argument, NULL, OPT_CALIBRATE},
	{"bytes-per-token", required_argument, NULL, OPT_BPT},
	{"continuous-usage", no_argument, NULL, OPT_CONTINUOUS},
	{"trace", required_argument, NULL, OPT_TRACE},
	{"replay-log", required_argument, NULL, OPT_REPLAY},
	{"replay-route", required_argument, NULL, OPT_REPLAY_ROUTE},
	{"trace-speed", required_argument, NULL, OPT_TRACE_SPEED},
	{"turns", required_argument, NULL, OPT_TURNS},
	{"think-time", required_argument, NULL, OPT_THINK},
	{"sessions", required_argument, NULL, OPT_SESSIONS},
	{"sharegpt", required_argument, NULL, OPT_SHAREGPT},
	{"header", required_argument, NULL, 'H'},
	{"insecure", no_argument, NULL, OPT_INSECURE},
	{"cacert", required_argument, NULL, OPT_CACERT},
	{"sni", required_argument, NULL, OPT_SNI},
	{"json", required_argument, NULL, OPT_JSON},
	{"csv", required_argument, NULL, OPT_CSV},
	{"report", required_argument, NULL, OPT_REPORT},
	{"samples", no_argument, NULL, OPT_SAMPLES},
	{"no-samples", no_argument, NULL, OPT_NO_SAMPLES},
	{"itl-samples", no_argument, NULL, OPT_ITL_SAMPLES},
	{"percentiles", required_argument, NULL, OPT_PERCENTILES},
	{"slice", required_argument, NULL, OPT_SLICE},
	{"slo", required_argument, NULL, OPT_SLO},
	{"tokentap", required_argument, NULL, OPT_TOKENTAP},
	{"tokentap-window", required_argument, NULL, OPT_TT_WINDOW},
	{"tokentap-route", required_argument, NULL, OPT_TT_ROUTE},
	{"tokentap-log", required_argument, NULL, OPT_TT_LOG},
	{"over", required_argument, NULL, OPT_OVER},
	{"levels", required_argument, NULL, OPT_LEVELS},
	{"saturation", required_argument, NULL, OPT_SATURATION},
	{"no-stop", no_argument, NULL, OPT_NO_STOP},
	{"stop-error-rate", required_argument, NULL, OPT_STOP_ERRORS},
	{"no-preflight", no_argument, NULL, OPT_NO_PREFLIGHT},
	{"from", required_argument, NULL, OPT_FROM},
	{"max-concurrency", required_argument, NULL, OPT_MAX_CONC},
	{"max-rate", required_argument, NULL, OPT_MAX_RATE},
	{"resolution", required_argument, NULL, OPT_RESOLUTION},
	{"repeats", required_argument, NULL, OPT_REPEATS},
	{"confidence", required_argument, NULL, OPT_CONFIDENCE},
	{"max-levels", required_argument, NULL, OPT_MAX_LEVELS},
	{"scenarios", required_argument, NULL, OPT_SCENARIOS},
	{"only", required_argument, NULL, OPT_ONLY},
	{"seed", required_argument, NULL, OPT_SEED},
	{"shard", required_argument, NULL, OPT_SHARD},
	{"ramp", required_argument, NULL, OPT_RAMP},
	{"lag", no_argument, NULL, OPT_LAG},
	{"check", no_argument, NULL, 't'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fputs("usage: tokentap-load [options] http[s]://HOST[:PORT]/PATH\n"
	    "       tokentap-load sweep --over KEY --levels LEVELS [options] URL\n"
	    "       tokentap-load capacity --slo TARGETS [--over KEY[,KEY]] [options] URL\n"
	    "       tokentap-load --scenarios FILE [--only NAME] [options] [URL]\n"
	    "       tokentap-load report RUN.json [--html FILE] [--csv FILE]\n"
	    "       tokentap-load compare [--fail-on RULES] A.json B.json\n"
	    "       tokentap-load merge [-o OUT.json] SHARD.json ...\n"
	    "Sends streaming LLM requests and measures TTFT, TTFO (the first token\n"
	    "that is not reasoning), TPOT, ITL, end-to-end latency and throughput on\n"
	    "the client side (the definitions tokentap uses), exactly from every request.\n"
	    "A sweep runs a level per load and stops at saturation; a capacity search\n"
	    "finds the largest concurrency and request rate that meet an SLO.\n"
	    "\n"
	    "Load:\n"
	    "  -c, --concurrency N     virtual users, each sending its next request when\n"
	    "                          the last one ended (default 10); open loop: the\n"
	    "                          most connections open at once (default 1024)\n"
	    "  -r, --rate RATE         open loop: RATE requests/s, each timed from its\n"
	    "                          intended send time\n"
	    "      --arrivals KIND     poisson (default), constant (or uniform), gamma\n"
	    "      --burstiness F      gamma's shape: 1 Poisson, < 1 burstier, > 1 more\n"
	    "                          regular (the gaps' CV is 1/sqrt(F); as vLLM, AIPerf)\n"
	    "  -d, --duration DUR      measure for DUR after the warm-up (default 10s;\n"
	    "                          none with -n or a trace)\n"
	    "  -n, --requests COUNT    measure COUNT requests after the warm-up\n"
	    "      --warmup DUR        first send requests for DUR, in no figure (sweep\n"
	    "                          and capacity: default 2s, else 0)\n"
	    "      --warmup-requests N or the first N requests\n"
	    "      --cooldown on|off   after the window, keep the load on until its last\n"
	    "                          counted request ended, so it ends under the level's\n"
	    "                          load (those in no figure; sweep and capacity: on,\n"
	    "                          but off with --tokentap; else off)\n"
	    "      --ramp DUR          closed loop: start the users evenly over DUR\n"
	    "      --timeout DUR       per request, from its intended send (default 60s)\n"
	    "      --no-preflight      do not stop at once when the target refuses, fails\n"
	    "                          TLS or answers other than 2xx before any success\n"
	    "      --trace FILE        open loop at a JSONL trace's offsets and token counts\n"
	    "                          (offset_ms, prompt_tokens, output_tokens, headers)\n"
	    "      --replay-log FILE   replay tokentap's access log: each request at\n"
	    "                          ts - duration_ms with its input/output tokens\n"
	    "      --replay-route NAME only that route's lines\n"
	    "      --trace-speed F     replay F times faster (default 1; --sessions: its\n"
	    "                          starts and think times)\n"
	    "      --turns K           each user holds conversations of K turns (or\n"
	    "                          MIN-MAX, uniform:MIN-MAX), each request carrying\n"
	    "                          the history so far, answers as received (chat APIs)\n"
	    "      --think-time DIST   from an answer to the next turn: DUR,\n"
	    "                          uniform:MIN-MAX or exp:MEAN (default 0)\n"
	    "      --sessions FILE     the users replay a JSONL session trace (session_id,\n"
	    "                          turn, delay_ms, prompt, max_tokens), turn by turn\n"
	    "      --sharegpt FILE     the users replay ShareGPT conversations, each\n"
	    "                          human message a turn\n"
	    "\n"
	    "Requests:\n"
	    "      --dialect NAME      openai | openai-responses | anthropic | dify |\n"
	    "                          gemini | tgi | ollama | raw (default: from the path)\n"
	    "      --model NAME        the request's \"model\" (default tokentap-load)\n"
	    "      --prompt-tokens N   synthetic prompt size, or MIN-MAX per request (100)\n"
	    "      --max-tokens N      output limit, or MIN-MAX (default 100)\n"
	    "      --prompts FILE      prompts of a JSONL file (texts or chat messages)\n"
	    "      --calibrate N       first send N requests (one output token each) and\n"
	    "                          size synthetic prompts in the target's own tokens:\n"
	    "                          the bytes sent / the prompt tokens it reported\n"
	    "                          (default off: 4 bytes a token, an estimate)\n"
	    "      --bytes-per-token R size synthetic prompts at a known R bytes a token\n"
	    "      --prefixes P        each prompt opens with one of P shared prefixes\n"
	    "                          (a system message in chat APIs); the report\n"
	    "                          splits TTFT by a prefix's first use and repeats\n"
	    "      --prefix-tokens L   the prefixes' size in tokens (default 512)\n"
	    "      --prefix-dist DIST  uniform | zipf:S, the prefix each request draws\n"
	    "                          (default uniform)\n"
	    "      --continuous-usage  ask for a usage on every chunk (vLLM's\n"
	    "                          continuous_usage_stats): tokens per chunk\n"
	    "  -H, --header 'N: V'     add a request header (repeatable)\n"
	    "      --seed N            seed of token counts, prompts and arrivals (default 1)\n"
	    "      --shard I/N         send the plan's requests I, I+N, I+2N, ... of N\n"
	    "                          machines (from 0); `merge` joins their --json\n"
	    "      --insecure          https: do not check the certificate\n"
	    "      --cacert FILE       https: verify against this CA file (default: the\n"
	    "                          system store)\n"
	    "      --sni NAME          https: the name to send and check (default: the host)\n"
	    "\n"
	    "Figures:\n"
	    "      --percentiles LIST  reported percentiles (default 50,90,95,99)\n"
	    "      --slice DUR         time slices of each level (default 10s)\n"
	    "      --slo TARGETS       'ttft_p95<=1s tpot_p95<=50ms error_rate<=1%': goodput,\n"
	    "                          attainment and a verdict per level\n"
	    "      --lag               time each event stamped by tokentap-mock --stamp\n"
	    "                          from its send to its read (same host)\n"
	    "      --tokentap URL      tokentap's admin address: each request paired by\n"
	    "                          X-Request-Id with its line in the access log it\n"
	    "                          names, when readable here; else its /stats after\n"
	    "                          each level, a window waited out between levels\n"
	    "      --tokentap-window W the /stats window to read (default tokentap's first)\n"
	    "      --tokentap-route R  the route to read (default the busiest)\n"
	    "      --tokentap-log FILE tokentap's access log (or a copy), over the one it\n"
	    "                          names: each request paired with its line by\n"
	    "                          X-Request-Id, client - tokentap per request\n"
	    "                          (no /stats window to wait for between levels)\n"
	    "\n"
	    "Sweeps (tokentap-load sweep):\n"
	    "      --over KEY          concurrency, rate or prompt-tokens\n"
	    "      --levels LEVELS     1,2,4,8 | 1..256 (doubling) | 1..256x1.5 | 1.. (until\n"
	    "                          it stops)\n"
	    "      --saturation PCT    stop where throughput grew less than PCT of the\n"
	    "                          load's growth while latency rose more (default 10%)\n"
	    "      --no-stop           run every level\n"
	    "      --stop-error-rate F stop past this error rate, and exit 3 (default 10%;\n"
	    "                          a run too)\n"
	    "\n"
	    "Capacity (tokentap-load capacity --slo TARGETS):\n"
	    "      --over KEYS         concurrency, rate, or both (default concurrency,rate)\n"
	    "      --from V            the first level, or concurrency=V,rate=V (default:\n"
	    "                          concurrency 1; rate from the concurrency found by\n"
	    "                          Little's law, else 1/s)\n"
	    "      --max-concurrency N, --max-rate R  the largest levels tried\n"
	    "      --resolution PCT    rate: stop when the bracket is within PCT (5%)\n"
	    "      --confidence PCT    of each figure's interval and each level's\n"
	    "                          decision (default 95%)\n"
	    "      --repeats N         runs more of an undecided level, each with a seed\n"
	    "                          of its own, samples pooled (default 3)\n"
	    "      A level is decided when each target's interval lies on one side of\n"
	    "      its limit; a p95's needs 72 requests to have an upper bound at all,\n"
	    "      and hundreds to thousands near its limit: at an open loop's few\n"
	    "      requests/s, minutes a level, not seconds (-d). The search says how\n"
	    "      long it will take before it starts.\n"
	    "      --max-levels N      levels per search at most (default 24)\n"
	    "\n"
	    "Output:\n"
	    "      --json FILE         the figures as JSON (docs/load-schema.md; \"-\":\n"
	    "                          stdout, the table then goes to stderr)\n"
	    "      --no-samples        without every request's figures\n"
	    "      --itl-samples       with each request's gaps too\n"
	    "      --samples           (the default)\n"
	    "      --csv FILE          one line per level\n"
	    "      --report FILE.html  one self-contained HTML page: charts of every level\n"
	    "                          (latency, TPOT, throughput against load, the knee,\n"
	    "                          errors, ITL CDF, input length, slices, a timeline)\n"
	    "      --scenarios FILE    run the YAML scenarios of FILE and check their\n"
	    "                          targets; the URL, if given, replaces their target\n"
	    "      --only NAME         only that scenario (and its baseline)\n"
	    "  -t, --check             with --scenarios: check the file and exit\n"
	    "  -h, --help              this text\n"
	    "  -V, --version           print the version\n"
	    "\n"
	    "\n"
	    "Saved documents (--json FILE; `tokentap-load report --help`, `compare --help`):\n"
	    "  report RUN.json         its table, and --html FILE its HTML page, --csv FILE\n"
	    "  compare A.json B.json   each level and figure of B beside A's, the change and\n"
	    "                          its 95 % bootstrap interval; --fail-on 'tpot_p50>+10%'\n"
	    "                          exits 1 when B regressed beyond it\n"
	    "  merge SHARD.json ...    the documents of --shard I/N as the one plan's: every\n"
	    "                          figure from all their samples (`merge --help`)\n"
	    "\n"
	    "Durations take us, ms, s, m, h. On a terminal, progress goes to stderr.\n"
	    "Exit status: 0 done (scenarios: all passed); 1 a target missed: a scenario's,\n"
	    "or a capacity search met no level (compare: a --fail-on rule failed; 4 the\n"
	    "workloads differ, without --allow-different); 2 usage or input error; 3 the\n"
	    "target failed: the pre-flight (a refused connection, a TLS failure or a\n"
	    "non-2xx answer before any success), an error rate past --stop-error-rate\n"
	    "(a run, a sweep), or no request ok; 130 interrupted (the levels done are\n"
	    "written).\n", f);
}

static void parse_duration(const char *opt, const char *s, uint64_t *out)
{
	if (util_parse_duration_us(s, out) < 0 || *out == 0)
		load_bad_value(opt, "expected a duration above 0 (e.g. 500ms, 20s, 2m)");
}

/* A share: "10%" or "0.1", in [0, 1]. */
static void parse_share(const char *opt, const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (end != s && *end == '%') {
		*out /= 100;
		end++;
	}
	if (end == s || *end != '\0' || errno != 0 || !(*out >= 0 && *out <= 1))
		load_bad_value(opt, "expected a share, 10% or 0.1");
}

static void parse_number(const char *opt, const char *s, double lo, double hi,
    double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !(*out >= lo && *out <= hi)) {
		char msg[96];
		snprintf(msg, sizeof msg, "expected a number from %g to %g", lo, hi);
		load_bad_value(opt, msg);
	}
}

/* Options of the run itself; 0, or -1 for one that is not. */
static int parse_run(struct load_opts *o, int ch)
{
	struct load_conf *c = &o->conf;
	const char *err = NULL;
	uint64_t u;

	switch (ch) {
	case 'c':
		if (load_conf_parse_uint(optarg, 100000, &u, &err) < 0)
			load_bad_value("--concurrency", err);
		c->concurrency = (unsigned)u;
		c->concurrency_set = 1;
		break;
	case 'r':
		if (load_conf_parse_rate(optarg, &c->rate, &err) < 0)
			load_bad_value("--rate", err);
		break;
	case OPT_ARRIVALS:
		if (load_conf_set_arrivals(c, optarg, &err) < 0)
			load_bad_value("--arrivals", err);
		break;
	case OPT_BURSTINESS:
		if (load_conf_set_burstiness(c, optarg, &err) < 0)
			load_bad_value("--burstiness", err);
		c->arrivals = LOAD_ARR_GAMMA;
		break;
	case 'd':
		parse_duration("--duration", optarg, &c->duration_us);
		o->duration_given = 1;
		break;
	case 'n':
		if (load_conf_parse_uint(optarg, UINT64_MAX / 10, &c->count, &err) < 0)
			load_bad_value("--requests", err);
		o->count_given = 1;
		break;
	case OPT_WARMUP:
		if (util_parse_duration_us(optarg, &c->warmup_us) < 0)
			load_bad_value("--warmup", "expected a duration (e.g. 2s, 0)");
		o->warmup_given = 1;
		break;
	case OPT_COOLDOWN:
		if (strcmp(optarg, "on") == 0)
			c->cooldown = 1;
		else if (strcmp(optarg, "off") == 0)
			c->cooldown = 0;
		else
			load_bad_value("--cooldown", "on or off");
		o->cooldown_given = 1;
		break;
	case OPT_WARMUP_REQUESTS:
		if (load_conf_parse_uint(optarg, UINT64_MAX / 10, &c->warmup_count, &err) < 0)
			load_bad_value("--warmup-requests", err);
		o->warmup_given = 1;
		break;
	case OPT_TIMEOUT:
		parse_duration("--timeout", optarg, &c->timeout_us);
		break;
	case OPT_DIALECT:
		if (load_conf_set_dialect(c, optarg, &err) < 0)
			load_bad_value("--dialect", err);
		break;
	case OPT_MODEL:
		if (load_conf_set_model(c, optarg, &err) < 0)
			load_bad_value("--model", err);
		break;
	case OPT_PROMPT:
		if (load_conf_parse_range(optarg, &c->prompt_tokens, &err) < 0)
			load_bad_value("--prompt-tokens", err);
		break;
	case OPT_MAX:
		if (load_conf_parse_range(optarg, &c->max_tokens, &err) < 0)
			load_bad_value("--max-tokens", err);
		break;
	case 'H':
		if (load_conf_add_header_line(c, optarg, &err) < 0)
			load_bad_value("--header", err);
		break;
	case OPT_PREFIXES: {
		uint64_t v;
		if (load_conf_parse_uint(optarg, LOAD_PREFIX_MAX, &v, &err) < 0)
			load_bad_value("--prefixes", err);
		c->prefixes = (uint32_t)v;
		break;
	}
	case OPT_PREFIX_TOKENS: {
		uint64_t v;
		if (load_conf_parse_uint(optarg, LOAD_CONF_MAX_TOKENS, &v, &err) < 0)
			load_bad_value("--prefix-tokens", err);
		c->prefix_tokens = (uint32_t)v;
		o->prefix_opt_given = 1;
		break;
	}
	case OPT_PREFIX_DIST:
		if (load_prefix_parse_dist(optarg, &c->prefix_zipf, &err) < 0)
			load_bad_value("--prefix-dist", err);
		o->prefix_opt_given = 1;
		break;
	case OPT_SEED:
		if (load_conf_parse_uint(optarg, UINT64_MAX / 10, &c->seed, &err) < 0)
			load_bad_value("--seed", err);
		break;
	case OPT_RAMP:
		parse_duration("--ramp", optarg, &c->ramp_us);
		break;
	case OPT_SHARD:
		if (load_shard_parse(optarg, &c->shard, &c->shards, &err) < 0)
			load_bad_value("--shard", err);
		break;
	case OPT_LAG:
		c->lag = 1;
		break;
	case OPT_CONTINUOUS:
		c->continuous_usage = 1;
		break;
	case OPT_INSECURE:
		c->tls_verify = 0;
		o->tls_opt_given = 1;
		break;
	case OPT_CACERT:
		if (load_conf_set_ca_file(c, optarg, &err) < 0)
			load_bad_value("--cacert", err);
		o->tls_opt_given = 1;
		break;
	case OPT_SNI:
		if (load_conf_set_sni(c, optarg, &err) < 0)
			load_bad_value("--sni", err);
		o->tls_opt_given = 1;
		break;
	case OPT_TRACE_SPEED:
		parse_number("--trace-speed", optarg, 0.001, 1000, &c->trace_speed);
		break;
	case OPT_CALIBRATE:
		if (load_conf_parse_uint(optarg, 10000, &u, &err) < 0)
			load_bad_value("--calibrate", err);
		o->calibrate = (uint32_t)u;
		break;
	case OPT_BPT:
		parse_number("--bytes-per-token", optarg, LOAD_PSIZE_MIN, LOAD_PSIZE_MAX,
		    &c->bytes_per_token);
		o->bpt_given = 1;
		break;
	case OPT_TURNS:
		if (load_session_parse_turns(optarg, &c->turns, &err) < 0)
			load_bad_value("--turns", err);
		break;
	case OPT_THINK:
		if (load_think_parse(optarg, &c->think, &err) < 0)
			load_bad_value("--think-time", err);
		o->think_given = 1;
		break;
	default:
		return -1;
	}
	return 0;
}

/* --from V (every search) or --from concurrency=V,rate=V. */
static void parse_from(struct load_plan *p, const char *s)
{
	char buf[128], *save = NULL, *eq;
	double x;

	if (strchr(s, '=') == NULL) {
		parse_number("--from", s, 0.01, 1e6, &x);
		p->cap_from[0] = p->cap_from[1] = x;
		return;
	}
	snprintf(buf, sizeof buf, "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		eq = strchr(t, '=');
		if (eq == NULL)
			load_bad_value("--from", "expected V, or concurrency=V,rate=V");
		*eq = '\0';
		parse_number("--from", eq + 1, 0.01, 1e6, &x);
		if (strcmp(t, "concurrency") == 0)
			p->cap_from[0] = x;
		else if (strcmp(t, "rate") == 0)
			p->cap_from[1] = x;
		else
			load_bad_value("--from", "expected concurrency=V or rate=V");
	}
}

/* Options of what to run and what to write. */
static int parse_other(struct load_opts *o, int ch)
{
	struct load_plan *p = &o->plan;
	const char *err = NULL;
	uint64_t u;
	double x;

	switch (ch) {
	case OPT_JSON:
		o->json_path = optarg;
		break;
	case OPT_CSV:
		o->csv_path = optarg;
		break;
	case OPT_REPORT:
		o->html_path = optarg;
		break;
	case OPT_SAMPLES:
		o->no_samples = 0;
		break;
	case OPT_NO_SAMPLES:
		o->no_samples = 1;
		break;
	case OPT_ITL_SAMPLES:
		o->itl_samples = 1;
		break;
	case OPT_PERCENTILES:
		if (load_pcts_parse(optarg, &o->pcts, &err) < 0)
			load_bad_value("--percentiles", err);
		break;
	case OPT_SLICE:
		parse_duration("--slice", optarg, &o->slice_us);
		break;
	case OPT_SLO:
		o->slo_text = optarg;
		break;
	case OPT_PROMPTS:
		o->prompts_path = optarg;
		break;
	case OPT_TRACE:
		o->trace_path = optarg;
		break;
	case OPT_SESSIONS:
		o->sessions_path = optarg;
		break;
	case OPT_SHAREGPT:
		o->sharegpt_path = optarg;
		break;
	case OPT_REPLAY:
		o->replay_path = optarg;
		break;
	case OPT_REPLAY_ROUTE:
		o->replay_route = optarg;
		break;
	case OPT_TT_LOG:
		o->tt_log = optarg;
		break;
	case OPT_TOKENTAP:
		o->tt_url = optarg;
		break;
	case OPT_TT_WINDOW:
		if (util_parse_duration_us(optarg, &u) < 0 || u == 0)
			load_bad_value("--tokentap-window", "expected one of tokentap's stats.windows "
			    "(e.g. 1m)");
		o->tt_window = optarg;
		break;
	case OPT_TT_ROUTE:
		o->tt_route = optarg;
		break;
	case OPT_OVER:
		o->over = optarg;
		break;
	case OPT_LEVELS:
		o->levels = optarg;
		break;
	case OPT_SATURATION:
		parse_share("--saturation", optarg, &p->saturation);
		break;
	case OPT_NO_STOP:
		p->stop_on_saturation = 0;
		p->stop_error_rate = INFINITY;
		break;
	case OPT_STOP_ERRORS:
		parse_share("--stop-error-rate", optarg, &p->stop_error_rate);
		break;
	case OPT_NO_PREFLIGHT:
		o->no_preflight = 1;
		break;
	case OPT_FROM:
		parse_from(p, optarg);
		break;
	case OPT_MAX_CONC:
		parse_number("--max-concurrency", optarg, 1, 100000, &p->cap_max[0]);
		break;
	case OPT_MAX_RATE:
		parse_number("--max-rate", optarg, 0.01, 1e6, &p->cap_max[1]);
		break;
	case OPT_RESOLUTION:
		parse_share("--resolution", optarg, &p->resolution);
		if (p->resolution <= 0)
			load_bad_value("--resolution", "above 0");
		break;
	case OPT_REPEATS:
		parse_number("--repeats", optarg, 0, 10, &x);
		p->repeats = (unsigned)x;
		break;
	case OPT_CONFIDENCE:
		parse_share("--confidence", optarg, &o->confidence);
		if (!(o->confidence >= 0.5 && o->confidence < 1))
			load_bad_value("--confidence", "from 50% to below 100%");
		break;
	case OPT_MAX_LEVELS:
		parse_number("--max-levels", optarg, 1, LOAD_MAX_LEVELS, &x);
		p->max_levels = (size_t)x;
		break;
	case OPT_SCENARIOS:
		o->scen_path = optarg;
		break;
	case OPT_ONLY:
		o->only = optarg;
		break;
	case 't':
		o->check = 1;
		break;
	case 'h':
		usage(stdout);
		exit(0);
	case 'V':
		printf("tokentap-load %s\n", TOKENTAP_VERSION);
		exit(0);
	default:
		usage(stderr);
		exit(EXIT_USAGE);
	}
	return 0;
}

static void parse_options(int argc, char **argv, struct load_opts *o)
{
	const char *err = NULL;
	int ch;

	while ((ch = getopt_long(argc, argv, "c:r:d:n:H:thV", long_opts, NULL)) != -1)
		if (parse_run(o, ch) < 0)
			parse_other(o, ch);
	if (optind < argc) {
		if (argc - optind > 1) {
			log_error("one target URL expected, got %d arguments", argc - optind);
			usage(stderr);
			exit(EXIT_USAGE);
		}
		if (load_conf_set_url(&o->conf, argv[optind], &err) < 0)
			load_bad_value(argv[optind], err);
		o->url_given = 1;
	}
	load_check_options(o);
}

/* Inputs read before anything runs: a problem there is a usage error. */
struct inputs {
	struct load_prompts prompts;
	struct load_trace trace;
	struct load_sessions sessions;
	struct load_tls tls;
	struct load_tt_conf tt;
	int have_tt;
	int tt_busy;                 /* the window held requests already */
	char tt_log[4096];           /* --tokentap alone: tokentap's access log */
	char tt_why[4800];           /* or why it cannot be read here */
};

/* --tokentap alone: tokentap's access log, when its admin says where it
 * is and the file can be read here, pairs the requests by id as
 * --tokentap-log does, so no level waits for a /stats window; else the
 * windows, and why, once. */
static void find_tt_log(struct load_opts *o, struct inputs *in)
{
	if (load_tt_find_log(&in->tt, in->tt_log, sizeof in->tt_log, in->tt_why,
	    sizeof in->tt_why, 5000) == 0) {
		o->tt_log = in->tt_log;
		return;
	}
	log_warn("--tokentap: not pairing by request id (a /stats window a level, "
	    "waited out between levels): %s", in->tt_why);
}

static int read_inputs(struct load_opts *o, struct inputs *in)
{
	struct load_conf *c = &o->conf;
	const char *err;

	if (o->prompts_path != NULL) {
		if (load_prompts_read(&in->prompts, o->prompts_path, stderr) < 0)
			return -1;
		c->prompts = &in->prompts;
	}
	if (o->trace_path != NULL) {
		if (load_trace_read(&in->trace, o->trace_path, stderr) < 0)
			return -1;
		c->trace = &in->trace;
	}
	if (o->replay_path != NULL) {
		if (load_trace_read_access_log(&in->trace, o->replay_path, o->replay_route,
		    stderr) < 0)
			return -1;
		c->trace = &in->trace;
	}
	if (o->sessions_path != NULL) {
		if (load_sessions_read(&in->sessions, o->sessions_path, stderr) < 0)
			return -1;
		c->sessions = &in->sessions;
	}
	if (o->sharegpt_path != NULL) {
		if (load_sessions_read_sharegpt(&in->sessions, o->sharegpt_path, stderr) < 0)
			return -1;
		c->sessions = &in->sessions;
	}
	if (c->trace != NULL && load_trace_check_speed(c->trace, c->trace_speed, stderr) < 0)
		return -1;
	if (load_tls_init(&in->tls, c) < 0)
		return -1;
	if (o->tt_log != NULL && access(o->tt_log, R_OK) < 0) {
		log_error("--tokentap-log %s: %s", o->tt_log, strerror(errno));
		return -1;
	}
	if (o->tt_url != NULL) {
		struct load_tt probe;
		if (load_tt_conf_init(&in->tt, o->tt_url, o->tt_window, o->tt_route, &err) < 0) {
			log_error("--tokentap %s: %s", o->tt_url, err);
			return -1;
		}
		in->have_tt = 1;
		/* learn the window now, and fail early on a wrong address */
		load_tt_read(&in->tt, &probe, 5000);
		if (!probe.ok && (strncmp(probe.error, "no route", 8) != 0)) {
			log_error("--tokentap %s: %s", o->tt_url, probe.error);
			return -1;
		}
		if (in->tt.window_us == 0) {
			log_error("--tokentap %s: /stats told no window", o->tt_url);
			return -1;
		}
		in->tt_busy = probe.ok && probe.requests > 0;
		/* scenarios read no tokentap figures: nothing to pair */
		if (o->tt_log == NULL && o->scen_path == NULL)
			find_tt_log(o, in);
	}
	return 0;
}

static void free_inputs(struct inputs *in)
{
	load_prompts_free(&in->prompts);
	load_trace_free(&in->trace);
	load_sessions_free(&in->sessions);
	load_tls_free(&in->tls);
	if (in->have_tt)
		load_tt_conf_free(&in->tt);
}

struct env {
	struct event_base *base;
	struct evdns_base *dns;
	int progress;
};

/* A target that failed its pre-flight stopped the levels as a signal
 * would: they say so as "failed", not "interrupted". */
static void target_failed_fixup(struct load_result *r)
{
	r->interrupted = 0;
	for (size_t i = 0; i < r->nlevels; i++)
		r->levels[i].info.interrupted = 0;
	if (r->kind == LOAD_KIND_SWEEP)
		r->stop_reason = "failed";
	for (size_t i = 0; i < r->ncapacity; i++)
		if (r->capacity[i].ran && r->capacity[i].stopped != NULL &&
		    strcmp(r->capacity[i].stopped, "interrupted") == 0)
			r->capacity[i].stopped = "failed";
}

/* The exit status of levels that ran (docs/load-testing.md, "Exit status"), with
 * its reason on stderr: 3 when the target failed (its pre-flight, an
 * error rate past --stop-error-rate, no request ok), 1 when a capacity
 * search met no level. */
static int verdict(const struct load_opts *o, const struct load_result *r)
{
	const char *why = load_run_target_failed();
	uint64_t requests = 0, ok = 0;

	if (why != NULL) {
		log_error("the target failed the pre-flight: %s", why);
		return EXIT_TARGET;
	}
	for (size_t i = 0; i < r->nlevels; i++) {
		requests += r->levels[i].sum.requests;
		ok += r->levels[i].sum.ok;
	}
	if (requests > 0 && ok == 0) {
		log_error("no request succeeded (%llu sent): the target failed",
		    (unsigned long long)requests);
		return EXIT_TARGET;
	}
	if (r->kind == LOAD_KIND_RUN && r->nlevels == 1 &&
	    r->levels[0].sum.requests > 0 &&
	    r->levels[0].sum.error_rate > o->plan.stop_error_rate) {
		log_error("error rate %.2f %% over --stop-error-rate %.2f %%",
		    100 * r->levels[0].sum.error_rate, 100 * o->plan.stop_error_rate);
		return EXIT_TARGET;
	}
	if (r->kind == LOAD_KIND_SWEEP && r->stop_reason != NULL &&
	    strcmp(r->stop_reason, "error_rate") == 0) {
		const struct load_level *lv = &r->levels[r->nlevels - 1];
		log_error("the sweep stopped at %s: error rate %.2f %% over "
		    "--stop-error-rate %.2f %%", lv->label, 100 * lv->sum.error_rate,
		    100 * o->plan.stop_error_rate);
		return EXIT_TARGET;
	}
	if (r->kind == LOAD_KIND_CAPACITY) {
		int ran = 0, found = 0;
		for (size_t i = 0; i < r->ncapacity; i++) {
			ran += r->capacity[i].ran;
			found += r->capacity[i].ran && r->capacity[i].found;
		}
		if (ran > 0 && found == 0) {
			log_error("capacity: no level met the SLO");
			return EXIT_MISSED;
		}
	}
	return 0;
}

/* A prompt-tokens sweep calibrates over its levels' sizes; the others
 * over their own (NULL). */
static const struct load_range *calib_sizes(const struct load_opts *o, struct load_range *r)
{
	const struct load_plan *p = &o->plan;
	double lo, hi;

	if (o->kind != LOAD_KIND_SWEEP || p->key != LOAD_KEY_PROMPT_TOKENS)
		return NULL;
	lo = p->geometric ? p->from : p->levels[0];
	hi = p->geometric ? (isfinite(p->to) ? p->to : p->from) : p->levels[p->n - 1];
	r->min = lo < LOAD_CONF_MAX_TOKENS ? (uint32_t)lo : LOAD_CONF_MAX_TOKENS;
	r->max = hi < LOAD_CONF_MAX_TOKENS ? (uint32_t)hi : LOAD_CONF_MAX_TOKENS;
	return r;
}

/* --bytes-per-token: the ratio given, not an estimate. */
static void psize_given(const struct load_opts *o, struct load_psize *p)
{
	if (!o->bpt_given)
		return;
	p->rule = LOAD_PSIZE_RULE_GIVEN;
	p->bytes_per_token = o->conf.bytes_per_token;
	p->estimate = 0;
}

/* How synthetic prompts are sized (load_psize.h): a ratio given, one
 * calibrated on the target (its requests before the first level; with
 * --tokentap, that level waits them out of tokentap's window), or 4
 * bytes a token. */
static void prompt_sizes(struct load_env *le, struct load_opts *o, struct inputs *in,
    struct load_result *r)
{
	struct load_range sizes;

	psize_given(o, &r->psize);
	if (o->calibrate == 0)
		return;
	(void)load_calib(le, &o->conf, o->calibrate, calib_sizes(o, &sizes), &r->psize);
	if (le->tt != NULL)
		le->tt_ready_at = util_now_us() + load_tt_settle_us(&in->tt);
}

/* A log that holds none of the run's requests is not the log of the
 * tokentap they went through (another host's path, say): said. */
static void tt_none_paired(const struct load_result *r, const char *path)
{
	uint64_t paired = 0, missing = 0;
	char shown[4096];

	for (size_t i = 0; i < r->nlevels; i++) {
		paired += r->levels[i].pairs.paired;
		missing += r->levels[i].pairs.missing;
	}
	if (paired == 0 && missing > 0) {
		snprintf(shown, sizeof shown, "%s", path);
		jsonw_sanitize(shown, '?');     /* tokentap's admin may have named it */
		log_warn("no request of this run is in %s: is it the access log of "
		    "the tokentap they went through?", shown);
	}
}

/* A run, a sweep or a capacity search, and its reports. */
static int run_levels(struct env *e, struct load_opts *o, struct inputs *in, int argc,
    char **argv)
{
	struct load_result r;
	struct load_env le;
	struct load_json_opts jo = { !o->no_samples, o->itl_samples };
	FILE *table = stdout, *json = NULL, *csv = NULL, *html = NULL;
	struct stat st;
	off_t tt_from = 0;
	int rc = 0;

	load_result_init(&r, o->kind, &o->conf, argc, argv);
	if (o->tt_log != NULL || in->have_tt)
		r.tt_pairing = o->tt_log != NULL ? "access_log" : "stats_window";
	if (o->tt_log == NULL && in->have_tt)
		r.tt_pairing_reason = in->tt_why;
	r.pcts = o->pcts;
	r.slo = o->slo;
	r.slice_us = o->slice_us;
	if (o->json_path != NULL && (json = load_out_open("--json", o->json_path)) == NULL)
		return EXIT_USAGE;
	if ((o->csv_path != NULL && (csv = load_out_open("--csv", o->csv_path)) == NULL) ||
	    (o->html_path != NULL && (html = load_out_open("--report", o->html_path)) == NULL)) {
		if (json != NULL && json != stdout)
			fclose(json);
		if (csv != NULL && csv != stdout)
			fclose(csv);
		return EXIT_USAGE;
	}
	if (json == stdout || csv == stdout || html == stdout)
		table = stderr;
	memset(&le, 0, sizeof(le));
	le.base = e->base;
	le.dns = e->dns;
	le.tls = o->conf.tls ? &in->tls : NULL;
	le.progress = e->progress;
	/* --tokentap-log pairs each request by id: no level waits for a
	 * /stats window to clear, so none is read (it would hold the level
	 * before) */
	le.tt = in->have_tt && o->tt_log == NULL ? &in->tt : NULL;
	/* requests of before in the window: the first level waits them out */
	if (in->tt_busy && le.tt != NULL)
		le.tt_ready_at = util_now_us() + load_tt_settle_us(&in->tt);
	/* the run's lines come after the log's end now */
	if (o->tt_log != NULL && stat(o->tt_log, &st) == 0)
		tt_from = st.st_size;
	load_run_preflight(!o->no_preflight);
	prompt_sizes(&le, o, in, &r);
	if (o->kind == LOAD_KIND_SWEEP)
		load_levels_sweep(&le, &o->plan, &r);
	else if (o->kind == LOAD_KIND_CAPACITY)
		load_levels_capacity(&le, &o->plan, &r);
	else
		load_levels_single(&le, &r);
	if (load_run_target_failed() != NULL && load_run_interrupted() == 1)
		target_failed_fixup(&r);
	if (o->tt_log != NULL && r.nlevels > 0) {
		char err[300];
		if (load_tt_pair(o->tt_log, tt_from, &r, 2000, err, sizeof err) < 0) {
			jsonw_sanitize(err, '?');
			log_error("--tokentap-log %s", err);
		}
		else
			tt_none_paired(&r, o->tt_log);
	}
	if (r.nlevels == 0 || (r.nlevels == 1 && r.levels[0].st.n == 0 && r.failed)) {
		rc = EXIT_USAGE;
		goto done;
	}
	load_report_table(table, &r);
	if (json != NULL)
		load_json_write(json, &r, &jo);
	if (csv != NULL)
		load_csv_write(csv, &r);
	if (html != NULL)
		load_html_write(html, &r);
	if (r.interrupted && o->kind != LOAD_KIND_RUN)
		rc = EXIT_INTERRUPTED;
	else if ((rc = verdict(o, &r)) != 0)
		;
	else if (r.failed)
		rc = EXIT_MISSED;
done:
	if (json != NULL && load_out_close(json, "--json", o->json_path) < 0 && rc == 0)
		rc = EXIT_MISSED;
	if (csv != NULL && load_out_close(csv, "--csv", o->csv_path) < 0 && rc == 0)
		rc = EXIT_MISSED;
	if (html != NULL && load_out_close(html, "--report", o->html_path) < 0 && rc == 0)
		rc = EXIT_MISSED;
	load_result_free(&r);
	return rc;
}

/* ---- scenarios --------------------------------------------------------- */

struct scen_result {
	int selected;        /* asked for (all, or --only) */
	int ran;
	int passed;
	struct load_level *level;
};

/* Checks sc's targets, prints one line each; returns 1 when all are met. */
static int check_targets(FILE *out, const struct load_scenario *sc,
    const struct scen_result *res, const struct scen_result *base)
{
	int all = 1;

	for (size_t i = 0; i < sc->ntargets; i++) {
		const struct load_target *t = &sc->targets[i];
		char lim[32], val[32];
		double v;
		int have = load_scen_value(t, &res->level->st, base ? &base->level->st : NULL,
		    &v) == 0;
		int ok = have && load_scen_met(t, v);

		load_scen_format(t, t->limit, lim, sizeof(lim));
		if (have)
			load_scen_format(t, v, val, sizeof(val));
		else
			snprintf(val, sizeof(val), "no value");
		fprintf(out, "  %-18s %12s  target <= %-12s %s\n", t->name, val, lim,
		    ok ? "pass" : "FAIL");
		all &= ok;
	}
	return all;
}

static void json_targets(FILE *f, const struct load_scenario *sc,
    const struct scen_result *res, const struct scen_result *base)
{
	fputs(",\n      \"targets\": [", f);
	for (size_t i = 0; i < sc->ntargets; i++) {
		const struct load_target *t = &sc->targets[i];
		int frac = t->stat == LOAD_S_RATE || t->stat == LOAD_S_DEGRADATION;
		double div = frac ? 1 : 1000, v;
		int have = load_scen_value(t, &res->level->st,
		    base ? &base->level->st : NULL, &v) == 0;

		fprintf(f, "%s\n        {\"name\": \"%s\", \"unit\": \"%s\", "
		    "\"limit\": %.6g, \"value\": ", i ? "," : "", t->name,
		    frac ? "fraction" : "ms", t->limit / div);
		if (have)
			fprintf(f, "%.6g", v / div);
		else
			fputs("null", f);
		fprintf(f, ", \"passed\": %s}", have && load_scen_met(t, v) ?
		    "true" : "false");
	}
	fputs(sc->ntargets ? "\n      ]" : "]", f);
}

static void json_scenario(FILE *f, const struct load_result *r,
    const struct load_scen_file *sf, size_t i, const struct scen_result *res,
    int first)
{
	const struct load_scenario *sc = &sf->v[i];
	const struct scen_result *base = sc->baseline >= 0 ? &res[sc->baseline] : NULL;
	struct load_json_opts jo = { 0, 0 };

	fprintf(f, "%s\n    {\n      \"name\": ", first ? "" : ",");
	jsonw_file_str(f, sc->name);
	fprintf(f, ",\n      \"selected\": %s, \"passed\": %s, \"baseline\": ",
	    res[i].selected ? "true" : "false", res[i].passed ? "true" : "false");
	if (base != NULL)
		jsonw_file_str(f, sf->v[sc->baseline].name);
	else
		fputs("null", f);
	json_targets(f, sc, &res[i], base);
	load_json_level_members(f, r, res[i].level, &jo, 6);
	fputs("\n    }", f);
}

/* Marks the scenarios to run: all, or --only's and its baselines. */
static int select_scenarios(const struct load_scen_file *sf, const char *only,
    struct scen_result *res)
{
	int i;

	if (only == NULL) {
		for (size_t k = 0; k < sf->n; k++)
			res[k].selected = res[k].ran = 1;
		return 0;
	}
	i = load_scen_find(sf, only);
	if (i < 0) {
		const char *best = NULL;
		size_t best_d = 4;
		for (size_t k = 0; k < sf->n; k++) {
			size_t d = util_edit_distance(only, sf->v[k].name);
			if (strncmp(sf->v[k].name, only, strlen(only)) == 0)
				d = 0;     /* a prefix is as good a hint */
			if (d < best_d) {
				best_d = d;
				best = sf->v[k].name;
			}
		}
		log_error("--only: no scenario \"%s\"%s%s%s", only,
		    best ? " (did you mean \"" : "", best ? best : "", best ? "\"?)" : "");
		return -1;
	}
	res[i].selected = 1;
	for (; i >= 0; i = sf->v[i].baseline)
		res[i].ran = 1;    /* "ran" means "to run" until the run */
	return 0;
}

/* Runs one scenario as a level of r. Returns 0 or -1. */
static int run_scenario(struct env *e, struct load_result *r, struct inputs *in,
    const struct load_scenario *sc, struct scen_result *res)
{
	struct load_env le;
	struct load_result one;
	struct load_level *lv;

	memset(&le, 0, sizeof(le));
	le.base = e->base;
	le.dns = e->dns;
	le.progress = e->progress;
	if (sc->conf.tls) {
		load_tls_free(&in->tls);
		if (load_tls_init(&in->tls, &sc->conf) < 0)
			return -1;
		le.tls = &in->tls;
	}
	/* the level runs alone, then joins r: one result for the JSON */
	one = *r;
	one.levels = NULL;
	one.nlevels = one.cap = 0;
	one.conf = &sc->conf;
	if (load_levels_single(&le, &one) < 0 || one.nlevels == 0) {
		load_result_free(&one);
		return -1;
	}
	lv = load_result_add(r, LOAD_KEY_NONE, 0, &sc->conf);
	if (lv == NULL) {
		load_result_free(&one);
		return -1;
	}
	load_conf_free(&lv->conf);
	*lv = one.levels[0];
	lv->index = r->nlevels - 1;
	snprintf(lv->label, sizeof lv->label, "%s", sc->name);
	free(one.levels);
	res->level = lv;
	return 0;
}

/* Runs each scenario marked, in file order; returns the exit status. */
static int run_marked(struct env *e, struct load_result *r, struct inputs *in,
    const struct load_scen_file *sf, struct scen_result *res)
{
	int status = 0;

	for (size_t i = 0; i < sf->n; i++) {
		const struct load_scenario *sc = &sf->v[i];
		const struct scen_result *base = sc->baseline >= 0 ?
		    &res[sc->baseline] : NULL;
		struct goodput_targets goodput;
		struct load_sum_in sin;

		if (!res[i].ran)
			continue;
		res[i].ran = 0;
		printf("== scenario %s%s\n", sc->name, res[i].selected ? "" :
		    " (baseline)");
		fflush(stdout);
		if (run_scenario(e, r, in, sc, &res[i]) < 0)
			return EXIT_USAGE;
		/* goodput by the scenario's own targets */
		load_scen_goodput(sc, &goodput);
		memset(&sin, 0, sizeof(sin));
		sin.st = &res[i].level->st;
		sin.pcts = &r->pcts;
		sin.goodput = &goodput;
		sin.window_start_us = res[i].level->info.window_start_us;
		sin.window_end_us = res[i].level->info.window_end_us;
		sin.slice_us = r->slice_us;
		sin.cpu_s = res[i].level->info.cpu_s;
		sin.wall_s = (double)res[i].level->info.elapsed_us / 1e6;
		sin.queued = res[i].level->info.queued;
		load_summary_free(&res[i].level->sum);
		if (load_summary(&sin, &res[i].level->sum) < 0)
			return EXIT_USAGE;
		res[i].ran = 1;
		load_report_level(stdout, r, res[i].level);
		putchar('\n');
		res[i].passed = check_targets(stdout, sc, &res[i], base);
		load_report_goodput_line(stdout, res[i].level);
		printf("scenario %s: %s\n\n", sc->name, res[i].passed ? "PASS" : "FAIL");
		fflush(stdout);
		if (res[i].selected && !res[i].passed)
			status = EXIT_MISSED;
		if (res[i].level->info.interrupted)
			return EXIT_MISSED;
	}
	return status;
}

static int run_scenarios(struct env *e, struct load_opts *o, struct inputs *in, int argc,
    char **argv)
{
	struct load_scen_file sf;
	struct scen_result *res = NULL;
	struct load_result r;
	FILE *json = NULL;
	int status, first = 1, all = 1;

	if (load_scen_read(o->scen_path, &o->conf, o->url_given, &sf, stderr) < 0)
		return EXIT_USAGE;
	load_result_init(&r, LOAD_KIND_RUN, &o->conf, argc, argv);
	r.pcts = o->pcts;
	r.slice_us = o->slice_us;
	psize_given(o, &r.psize);
	res = calloc(sf.n, sizeof(*res));
	/* the levels must not move: res points into them */
	r.levels = calloc(sf.n + 1, sizeof(*r.levels));
	r.cap = sf.n + 1;
	if (res == NULL || r.levels == NULL || select_scenarios(&sf, o->only, res) < 0) {
		status = EXIT_USAGE;
		goto done;
	}
	if (o->check) {
		printf("scenarios OK (%zu)\n", sf.n);
		status = 0;
		goto done;
	}
	if (o->json_path != NULL && (json = load_out_open("--json", o->json_path)) == NULL) {
		status = EXIT_USAGE;
		goto done;
	}
	status = run_marked(e, &r, in, &sf, res);
	for (size_t i = 0; i < sf.n; i++) {
		if (!res[i].selected)
			continue;
		printf("%-24s %s\n", sf.v[i].name, !res[i].ran ? "not run" :
		    res[i].passed ? "PASS" : "FAIL");
		all &= res[i].ran && res[i].passed;
	}
	if (json != NULL) {
		fprintf(json, "{\n  \"schema_version\": %d, \"tool\": \"tokentap-load\", "
		    "\"version\": \"%s\", \"kind\": \"scenarios\",\n  \"scenarios\": [",
		    LOAD_SCHEMA_VERSION, TOKENTAP_VERSION);
		for (size_t i = 0; i < sf.n; i++) {
			if (!res[i].ran)
				continue;
			json_scenario(json, &r, &sf, i, res, first);
			first = 0;
		}
		fprintf(json, "\n  ],\n  \"passed\": %s\n}\n", all ? "true" : "false");
		if (load_out_close(json, "--json", o->json_path) < 0 && status == 0)
			status = EXIT_MISSED;
	}
done:
	free(res);
	load_result_free(&r);
	load_scen_free(&sf);
	return status;
}

int main(int argc, char **argv)
{
	struct load_opts o;
	struct inputs in;
	struct env e = {NULL, NULL, 0};
	int status, shift = 0;

	memset(&o, 0, sizeof(o));
	memset(&in, 0, sizeof(in));
	if (load_conf_init(&o.conf) < 0) {
		log_error("out of memory");
		return 1;
	}
	load_pcts_default(&o.pcts);
	load_plan_init(&o.plan);
	o.slice_us = 10000000;
	/* the commands on saved documents read no target */
	if (argc > 1 && strcmp(argv[1], "report") == 0) {
		load_conf_free(&o.conf);
		return load_saved_report(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "compare") == 0) {
		load_conf_free(&o.conf);
		return load_saved_compare(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "merge") == 0) {
		load_conf_free(&o.conf);
		return load_saved_merge(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "sweep") == 0) {
		o.kind = LOAD_KIND_SWEEP;
		shift = 1;
	} else if (argc > 1 && strcmp(argv[1], "capacity") == 0) {
		o.kind = LOAD_KIND_CAPACITY;
		shift = 1;
	}
	parse_options(argc - shift, argv + shift, &o);
	signal(SIGPIPE, SIG_IGN);
	net_raise_nofile();          /* many users need many descriptors */
	if (read_inputs(&o, &in) < 0) {
		free_inputs(&in);
		load_conf_free(&o.conf);
		return EXIT_USAGE;
	}
	e.progress = isatty(STDERR_FILENO);
	/* open-loop arrivals are timed from their schedule, so the timer must
	 * not add epoll's millisecond rounding: PRECISE_TIMER uses a timerfd */
	e.base = net_base_new(EVENT_BASE_FLAG_PRECISE_TIMER);
	if (e.base == NULL || load_run_signals(e.base) < 0) {
		log_error("cannot create an event loop");
		return 1;
	}
	/* resolv.conf may be missing in a container: names then fail, IPs work */
	e.dns = evdns_base_new(e.base, EVDNS_BASE_INITIALIZE_NAMESERVERS);
	if (e.dns == NULL)
		e.dns = evdns_base_new(e.base, 0);
	if (e.dns == NULL) {
		log_error("cannot create a DNS resolver");
		event_base_free(e.base);
		return 1;
	}
	if (o.scen_path != NULL)
		status = run_scenarios(&e, &o, &in, argc, argv);
	else
		status = run_levels(&e, &o, &in, argc, argv);
	evdns_base_free(e.dns, 0);
	load_run_signals_free();
	event_base_free(e.base);
	free_inputs(&in);
	load_conf_free(&o.conf);
	return status;
}
