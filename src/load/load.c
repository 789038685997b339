/* tokentap-load: a load generator that measures TTFT, TPOT, ITL and output
 * speed on the client side with the definitions of SPEC §4, so its figures
 * can be set beside tokentap's own. Options, single runs and scenario
 * files live here; the run itself in load_run.c. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "load_conf.h"
#include "load_report.h"
#include "load_run.h"
#include "load_scen.h"
#include "loadstats.h"
#include "jsonw.h"
#include "log.h"
#include "net.h"
#include "util.h"

#define EXIT_MISSED 1
#define EXIT_USAGE 2

struct opts {
	struct load_conf conf;
	int url_given;
	int duration_given, count_given;
	const char *json_path;
	int samples;
	const char *scen_path;
	const char *only;
	int check;
};

enum {
	OPT_ARRIVALS = 256, OPT_TIMEOUT, OPT_DIALECT, OPT_MODEL, OPT_PROMPT,
	OPT_MAX, OPT_JSON, OPT_SAMPLES, OPT_SCENARIOS, OPT_ONLY, OPT_SEED,
	OPT_RAMP, OPT_LAG
};

static const struct option long_opts[] = {
	{"concurrency", required_argument, NULL, 'c'},
	{"rate", required_argument, NULL, 'r'},
	{"arrivals", required_argument, NULL, OPT_ARRIVALS},
	{"duration", required_argument, NULL, 'd'},
	{"requests", required_argument, NULL, 'n'},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"dialect", required_argument, NULL, OPT_DIALECT},
	{"model", required_argument, NULL, OPT_MODEL},
	{"prompt-tokens", required_argument, NULL, OPT_PROMPT},
	{"max-tokens", required_argument, NULL, OPT_MAX},
	{"header", required_argument, NULL, 'H'},
	{"json", required_argument, NULL, OPT_JSON},
	{"samples", no_argument, NULL, OPT_SAMPLES},
	{"scenarios", required_argument, NULL, OPT_SCENARIOS},
	{"only", required_argument, NULL, OPT_ONLY},
	{"seed", required_argument, NULL, OPT_SEED},
	{"ramp", required_argument, NULL, OPT_RAMP},
	{"lag", no_argument, NULL, OPT_LAG},
	{"check", no_argument, NULL, 't'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fputs("usage: tokentap-load [options] http://HOST[:PORT]/PATH\n"
	    "       tokentap-load --scenarios FILE [--only NAME] [options] [URL]\n"
	    "Sends streaming LLM requests and measures TTFT, TTFO (the first token\n"
	    "that is not reasoning), TPOT, ITL and output speed on the client side\n"
	    "(the definitions tokentap uses).\n"
	    "\n"
	    "  -c, --concurrency N     virtual users, each sending its next request when\n"
	    "                          the last one ended (default 10); with -r: the\n"
	    "                          most connections open at once (default 1024)\n"
	    "  -r, --rate RATE         open loop: RATE requests/s, each timed from its\n"
	    "                          scheduled start\n"
	    "      --arrivals KIND     poisson (default) or uniform\n"
	    "  -d, --duration DUR      stop issuing after DUR (default 10s, none with -n)\n"
	    "  -n, --requests COUNT    stop issuing after COUNT requests\n"
	    "      --timeout DUR       per request, from its start (default 60s)\n"
	    "      --dialect NAME      openai | openai-responses | anthropic | dify |\n"
	    "                          gemini | tgi | ollama | raw (default: from the path)\n"
	    "      --model NAME        the request's \"model\" (default tokentap-load)\n"
	    "      --prompt-tokens N   prompt size, or MIN-MAX drawn per request (default 100)\n"
	    "      --max-tokens N      output limit, or MIN-MAX (default 100)\n"
	    "  -H, --header 'N: V'     add a request header (repeatable)\n"
	    "      --json FILE         also write the figures as JSON (\"-\": stdout,\n"
	    "                          the table then goes to stderr)\n"
	    "      --samples           with --json: every request's measurements\n"
	    "      --seed N            seed of token counts, prompts and arrivals (default 1)\n"
	    "      --ramp DUR          closed loop: start the users evenly over DUR\n"
	    "      --lag               time each event stamped by tokentap-mock --stamp\n"
	    "                          from its send to its read (same host): p50/p99/max\n"
	    "      --scenarios FILE    run the YAML scenarios of FILE and check their\n"
	    "                          targets; the URL, if given, replaces their target\n"
	    "      --only NAME         only that scenario (and its baseline)\n"
	    "  -t, --check             with --scenarios: check the file and exit\n"
	    "  -h, --help              this text\n"
	    "  -V, --version           print the version\n"
	    "\n"
	    "Durations take us, ms, s, m, h. Exit status: 0 done (scenarios: all\n"
	    "passed), 1 a scenario missed a target, 2 usage or configuration error.\n", f);
}

static void bad_value(const char *opt, const char *err)
{
	log_error("%s: %s", opt, err);
	exit(EXIT_USAGE);
}

static void parse_duration(const char *opt, const char *s, uint64_t *out)
{
	if (util_parse_duration_us(s, out) < 0 || *out == 0)
		bad_value(opt, "expected a duration above 0 (e.g. 500ms, 20s, 2m)");
}

/* One option; exits on a bad value. */
static void parse_one(struct opts *o, int ch)
{
	struct load_conf *c = &o->conf;
	const char *err = NULL;
	uint64_t u;

	switch (ch) {
	case 'c':
		if (load_conf_parse_uint(optarg, 100000, &u, &err) < 0)
			bad_value("--concurrency", err);
		c->concurrency = (unsigned)u;
		c->concurrency_set = 1;
		break;
	case 'r':
		if (load_conf_parse_rate(optarg, &c->rate, &err) < 0)
			bad_value("--rate", err);
		break;
	case OPT_ARRIVALS:
		if (load_conf_set_arrivals(c, optarg, &err) < 0)
			bad_value("--arrivals", err);
		break;
	case 'd':
		parse_duration("--duration", optarg, &c->duration_us);
		o->duration_given = 1;
		break;
	case 'n':
		if (load_conf_parse_uint(optarg, UINT64_MAX / 10, &c->count, &err) < 0)
			bad_value("--requests", err);
		o->count_given = 1;
		break;
	case OPT_TIMEOUT:
		parse_duration("--timeout", optarg, &c->timeout_us);
		break;
	case OPT_DIALECT:
		if (load_conf_set_dialect(c, optarg, &err) < 0)
			bad_value("--dialect", err);
		break;
	case OPT_MODEL:
		if (load_conf_set_model(c, optarg, &err) < 0)
			bad_value("--model", err);
		break;
	case OPT_PROMPT:
		if (load_conf_parse_range(optarg, &c->prompt_tokens, &err) < 0)
			bad_value("--prompt-tokens", err);
		break;
	case OPT_MAX:
		if (load_conf_parse_range(optarg, &c->max_tokens, &err) < 0)
			bad_value("--max-tokens", err);
		break;
	case 'H':
		if (load_conf_add_header_line(c, optarg, &err) < 0)
			bad_value("--header", err);
		break;
	case OPT_SEED:
		if (load_conf_parse_uint(optarg, UINT64_MAX / 10, &c->seed, &err) < 0)
			bad_value("--seed", err);
		break;
	case OPT_RAMP:
		parse_duration("--ramp", optarg, &c->ramp_us);
		break;
	case OPT_LAG:
		c->lag = 1;
		break;
	case OPT_JSON:
		o->json_path = optarg;
		break;
	case OPT_SAMPLES:
		o->samples = 1;
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
}

static void parse_options(int argc, char **argv, struct opts *o)
{
	const char *err = NULL;
	int ch;

	while ((ch = getopt_long(argc, argv, "c:r:d:n:H:thV", long_opts, NULL)) != -1)
		parse_one(o, ch);
	if (optind < argc) {
		if (argc - optind > 1) {
			log_error("one target URL expected, got %d arguments", argc - optind);
			usage(stderr);
			exit(EXIT_USAGE);
		}
		if (load_conf_set_url(&o->conf, argv[optind], &err) < 0)
			bad_value(argv[optind], err);
		o->url_given = 1;
	}
	if (o->count_given && !o->duration_given)
		o->conf.duration_us = 0;
	if (o->scen_path == NULL && (o->only != NULL || o->check)) {
		log_error("--only and --check go with --scenarios");
		exit(EXIT_USAGE);
	}
	if (o->scen_path == NULL && !o->url_given) {
		log_error("no target URL");
		usage(stderr);
		exit(EXIT_USAGE);
	}
	if (o->conf.ramp_us > 0 && o->conf.rate > 0) {
		log_error("--ramp is for the closed loop, not with --rate");
		exit(EXIT_USAGE);
	}
	if (o->samples && o->json_path == NULL) {
		log_error("--samples goes with --json");
		exit(EXIT_USAGE);
	}
}

/* The JSON destination: stdout for "-". NULL (reported) on failure. */
static FILE *json_open(const char *path)
{
	FILE *f;

	if (strcmp(path, "-") == 0)
		return stdout;
	f = fopen(path, "w");
	if (f == NULL)
		log_error("--json %s: %s", path, strerror(errno));
	return f;
}

static int json_close(FILE *f, const char *path)
{
	int rc = ferror(f) ? -1 : 0;

	if (f == stdout) {
		if (fflush(f) != 0)
			rc = -1;
	} else if (fclose(f) != 0) {
		rc = -1;
	}
	if (rc < 0)
		log_error("--json %s: write failed", path);
	return rc;
}

struct env {
	struct event_base *base;
	struct evdns_base *dns;
	int progress;
};

static int run_single(struct env *e, struct opts *o)
{
	struct loadstats st;
	struct load_run_info info;
	struct load_report rp = {&o->conf, &st, &info};
	FILE *table = stdout, *json = NULL;
	int rc = 0;

	if (o->json_path != NULL) {
		json = json_open(o->json_path);
		if (json == NULL)
			return EXIT_USAGE;
		if (json == stdout)
			table = stderr;
	}
	loadstats_init(&st, o->samples);
	if (load_run(e->base, e->dns, &o->conf, &st, e->progress, &info) < 0 &&
	    st.requests == 0) {
		rc = EXIT_USAGE;
		goto done;
	}
	load_report_table(table, &rp);
	if (json != NULL) {
		fprintf(json, "{\n  \"tool\": \"tokentap-load\", \"version\": \"%s\",\n",
		    TOKENTAP_VERSION);
		load_report_json_members(json, &rp, o->samples, 2);
		fputs("\n}\n", json);
	}
done:
	if (json != NULL && json_close(json, o->json_path) < 0 && rc == 0)
		rc = 1;
	loadstats_free(&st);
	return rc;
}

/* ---- scenarios --------------------------------------------------------- */

struct scen_result {
	int selected;        /* asked for (all, or --only) */
	int ran;
	int passed;
	struct loadstats st;
	struct load_run_info info;
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
		int have = load_scen_value(t, &res->st, base ? &base->st : NULL, &v) == 0;
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
		int have = load_scen_value(t, &res->st, base ? &base->st : NULL, &v) == 0;

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

static void json_scenario(FILE *f, const struct load_scen_file *sf, size_t i,
    const struct scen_result *res, int first)
{
	const struct load_scenario *sc = &sf->v[i];
	const struct scen_result *base = sc->baseline >= 0 ? &res[sc->baseline] : NULL;
	struct load_report rp = {&sc->conf, &res[i].st, &res[i].info};

	fprintf(f, "%s\n    {\n      \"name\": ", first ? "" : ",");
	jsonw_file_str(f, sc->name);
	fprintf(f, ",\n      \"selected\": %s, \"passed\": %s, \"baseline\": ",
	    res[i].selected ? "true" : "false", res[i].passed ? "true" : "false");
	if (base != NULL)
		jsonw_file_str(f, sf->v[sc->baseline].name);
	else
		fputs("null", f);
	json_targets(f, sc, &res[i], base);
	load_report_goodput_json(f, &rp, 6);
	fputs(",\n", f);
	load_report_json_members(f, &rp, 0, 6);
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

/* Runs each scenario marked, in file order; returns the exit status. */
static int run_marked(struct env *e, const struct load_scen_file *sf,
    struct scen_result *res, int samples)
{
	int status = 0;

	for (size_t i = 0; i < sf->n; i++) {
		const struct load_scenario *sc = &sf->v[i];
		const struct scen_result *base = sc->baseline >= 0 ?
		    &res[sc->baseline] : NULL;
		struct load_report rp = {&sc->conf, &res[i].st, &res[i].info};
		struct goodput_targets goodput;

		if (!res[i].ran)
			continue;
		res[i].ran = 0;
		printf("== scenario %s%s\n", sc->name, res[i].selected ? "" :
		    " (baseline)");
		fflush(stdout);
		loadstats_init(&res[i].st, samples);
		load_scen_goodput(sc, &goodput);
		loadstats_goodput(&res[i].st, &goodput);
		if (load_run(e->base, e->dns, &sc->conf, &res[i].st, e->progress,
		    &res[i].info) < 0 && res[i].st.requests == 0)
			return EXIT_USAGE;
		res[i].ran = 1;
		load_report_table(stdout, &rp);
		putchar('\n');
		res[i].passed = check_targets(stdout, sc, &res[i], base);
		load_report_goodput_line(stdout, &rp);
		printf("scenario %s: %s\n\n", sc->name, res[i].passed ? "PASS" : "FAIL");
		fflush(stdout);
		if (res[i].selected && !res[i].passed)
			status = EXIT_MISSED;
		if (res[i].info.interrupted)
			return EXIT_MISSED;
	}
	return status;
}

static int run_scenarios(struct env *e, struct opts *o)
{
	struct load_scen_file sf;
	struct scen_result *res = NULL;
	FILE *json = NULL;
	int status, first = 1, all = 1;

	if (load_scen_read(o->scen_path, &o->conf, o->url_given, &sf, stderr) < 0)
		return EXIT_USAGE;
	res = calloc(sf.n, sizeof(*res));
	if (res == NULL || select_scenarios(&sf, o->only, res) < 0) {
		status = EXIT_USAGE;
		goto done;
	}
	if (o->check) {
		printf("scenarios OK (%zu)\n", sf.n);
		status = 0;
		goto done;
	}
	if (o->json_path != NULL && (json = json_open(o->json_path)) == NULL) {
		status = EXIT_USAGE;
		goto done;
	}
	status = run_marked(e, &sf, res, 0);
	for (size_t i = 0; i < sf.n; i++) {
		if (!res[i].selected)
			continue;
		printf("%-24s %s\n", sf.v[i].name, !res[i].ran ? "not run" :
		    res[i].passed ? "PASS" : "FAIL");
		all &= res[i].ran && res[i].passed;
	}
	if (json != NULL) {
		fprintf(json, "{\n  \"tool\": \"tokentap-load\", \"version\": \"%s\",\n"
		    "  \"scenarios\": [", TOKENTAP_VERSION);
		for (size_t i = 0; i < sf.n; i++) {
			if (!res[i].ran)
				continue;
			json_scenario(json, &sf, i, res, first);
			first = 0;
		}
		fprintf(json, "\n  ],\n  \"passed\": %s\n}\n", all ? "true" : "false");
		if (json_close(json, o->json_path) < 0 && status == 0)
			status = EXIT_MISSED;
	}
done:
	for (size_t i = 0; res != NULL && i < sf.n; i++)
		loadstats_free(&res[i].st);
	free(res);
	load_scen_free(&sf);
	return status;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct env e = {NULL, NULL, 0};
	int status;

	memset(&o, 0, sizeof(o));
	if (load_conf_init(&o.conf) < 0) {
		log_error("out of memory");
		return 1;
	}
	parse_options(argc, argv, &o);
	if (o.scen_path != NULL && o.samples) {
		log_error("--samples is for single runs");
		return EXIT_USAGE;
	}
	signal(SIGPIPE, SIG_IGN);
	net_raise_nofile();          /* many users need many descriptors */
	e.progress = isatty(STDERR_FILENO);
	/* open-loop arrivals are timed from their schedule, so the timer must
	 * not add epoll's millisecond rounding: PRECISE_TIMER uses a timerfd */
	e.base = net_base_new(EVENT_BASE_FLAG_PRECISE_TIMER);
	if (e.base == NULL) {
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
		status = run_scenarios(&e, &o);
	else
		status = run_single(&e, &o);
	evdns_base_free(e.dns, 0);
	event_base_free(e.base);
	load_conf_free(&o.conf);
	return status;
}
