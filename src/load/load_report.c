#include "load_report.h"

#include <inttypes.h>
#include <string.h>

#include "jsonw.h"

static double per_s(uint64_t n, uint64_t us)
{
	return us > 0 ? (double)n * 1e6 / (double)us : 0;
}

static void table_mode(FILE *f, const struct load_conf *c)
{
	if (c->rate > 0)
		fprintf(f, "load         open loop, %.3g req/s %s arrivals", c->rate,
		    c->uniform ? "uniform" : "Poisson");
	else
		fprintf(f, "load         closed loop, %u users", c->concurrency);
	if (c->duration_us > 0)
		fprintf(f, ", %.3g s", (double)c->duration_us / 1e6);
	if (c->count > 0)
		fprintf(f, ", at most %" PRIu64 " requests", c->count);
	fprintf(f, ", prompt %u-%u tokens, max %u-%u tokens\n",
	    c->prompt_tokens.min, c->prompt_tokens.max, c->max_tokens.min,
	    c->max_tokens.max);
}

static void table_row(FILE *f, const char *label, const struct hist *h)
{
	struct load_quant q;

	loadstats_quant(h, &q);
	if (q.count == 0) {
		fprintf(f, "%-14s %8" PRIu64 "        -        -        -        -"
		    "        -        -\n", label, q.count);
		return;
	}
	fprintf(f, "%-14s %8" PRIu64 " %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n",
	    label, q.count, q.p50, q.p90, q.p95, q.p99, q.mean, q.max);
}

/* Event lag is tens of µs: the ms columns would round it away. */
static void table_lag(FILE *f, const struct hist *h)
{
	struct load_quant q;

	loadstats_quant(h, &q);
	fprintf(f, "%-14s %8" PRIu64 " %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f\n",
	    "event lag us", q.count, q.p50 * 1000, q.p90 * 1000, q.p95 * 1000,
	    q.p99 * 1000, q.mean * 1000, q.max * 1000);
}

/* "ttft <= 500 ms, tpot <= 30 ms" */
static void goodput_targets_text(const struct goodput_targets *t, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < GOODPUT_TARGETS && n < len; i++)
		if (t->us[i] > 0)
			n += (size_t)snprintf(buf + n, len - n, "%s%s <= %.6g ms", n ? ", " : "",
			    goodput_target_name((enum goodput_target)i), (double)t->us[i] / 1e3);
}

void load_report_goodput_line(FILE *f, const struct load_report *rp)
{
	const struct loadstats *st = rp->st;
	char targets[128];

	if (!goodput_any(&st->goodput))
		return;
	goodput_targets_text(&st->goodput, targets, sizeof targets);
	fprintf(f, "  %-18s %8.2f req/s  attainment %.2f %% (%" PRIu64 " of %" PRIu64
	    " ok within %s)\n", "goodput", per_s(st->good, rp->info->elapsed_us),
	    st->judged ? 100.0 * (double)st->good / (double)st->judged : 0.0, st->good,
	    st->judged, targets);
}

void load_report_goodput_json(FILE *f, const struct load_report *rp, int indent)
{
	const struct loadstats *st = rp->st;
	int first = 1;

	fprintf(f, ",\n%*s\"goodput\": ", indent, "");
	if (!goodput_any(&st->goodput)) {
		fputs("null", f);
		return;
	}
	fputs("{\"targets\": {", f);
	for (int i = 0; i < GOODPUT_TARGETS; i++)
		if (st->goodput.us[i] > 0) {
			fprintf(f, "%s\"%s_ms\": %.6g", first ? "" : ", ",
			    goodput_target_name((enum goodput_target)i),
			    (double)st->goodput.us[i] / 1e3);
			first = 0;
		}
	fprintf(f, "}, \"good\": %" PRIu64 ", \"judged\": %" PRIu64 ", \"attainment\": ",
	    st->good, st->judged);
	if (st->judged)
		fprintf(f, "%.6f", (double)st->good / (double)st->judged);
	else
		fputs("null", f);
	fprintf(f, ", \"per_s\": %.6f}", per_s(st->good, rp->info->elapsed_us));
}

void load_report_table(FILE *f, const struct load_report *rp)
{
	const struct loadstats *st = rp->st;
	const struct load_conf *c = rp->conf;
	uint64_t el = rp->info->elapsed_us;
	int sep = 0;

	fprintf(f, "target       %s (%s, model %s)\n", c->url,
	    dialect_names[load_conf_dialect(c)], c->model);
	table_mode(f, c);
	fprintf(f, "requests     %" PRIu64 " in %.2f s: %" PRIu64 " ok, %" PRIu64
	    " errors, error rate %.2f %%%s\n", st->requests, (double)el / 1e6,
	    st->outcomes[OUTCOME_OK], loadstats_errors(st),
	    100.0 * loadstats_error_rate(st),
	    rp->info->interrupted ? " (interrupted)" : "");
	for (int o = OUTCOME_OK + 1; o < OUTCOME_COUNT; o++) {
		if (st->outcomes[o] == 0)
			continue;
		fprintf(f, "%s%s %" PRIu64, sep ? "," : "errors      ",
		    meter_outcome_name(o), st->outcomes[o]);
		sep = 1;
	}
	if (sep)
		fputc('\n', f);
	fprintf(f, "throughput   %.2f req/s, %.1f output tokens/s "
	    "(%" PRIu64 " connections, at most %" PRIu64 " in flight)\n\n",
	    per_s(st->requests, el), per_s(st->output_tokens, el),
	    rp->info->connections, rp->info->max_in_flight);
	fprintf(f, "%-14s %8s %8s %8s %8s %8s %8s %8s\n", "", "count", "p50",
	    "p90", "p95", "p99", "mean", "max");
	table_row(f, "TTFT ms", &st->ttft);
	table_row(f, "TTFO ms", &st->ttfo);
	table_row(f, "TPOT ms", &st->tpot);
	table_row(f, "ITL ms", &st->itl);
	table_row(f, "speed tok/s", &st->speed);
	table_row(f, "duration ms", &st->duration);
	if (c->lag)
		table_lag(f, &st->lag);
}

static void json_quant(FILE *f, const char *name, const struct hist *h,
    const char *pad)
{
	struct load_quant q;

	loadstats_quant(h, &q);
	if (q.count == 0) {
		fprintf(f, ",\n%s\"%s\": {\"count\": 0, \"mean\": null, \"p50\": null, "
		    "\"p90\": null, \"p95\": null, \"p99\": null, \"max\": null}",
		    pad, name);
		return;
	}
	fprintf(f, ",\n%s\"%s\": {\"count\": %" PRIu64 ", \"mean\": %.3f, "
	    "\"p50\": %.3f, \"p90\": %.3f, \"p95\": %.3f, \"p99\": %.3f, "
	    "\"max\": %.3f}", pad, name, q.count, q.mean, q.p50, q.p90, q.p95,
	    q.p99, q.max);
}

/* A duration in µs as ms, or null. */
static void json_ms(FILE *f, const char *name, int64_t us)
{
	if (us < 0)
		fprintf(f, ", \"%s\": null", name);
	else
		fprintf(f, ", \"%s\": %.3f", name, (double)us / 1000.0);
}

static void json_sample(FILE *f, const struct load_sample *s)
{
	fprintf(f, "{\"start_ms\": %.3f, \"outcome\": \"%s\", \"status\": ",
	    (double)s->start_us / 1000.0, meter_outcome_name(s->outcome));
	if (s->status != 0)
		fprintf(f, "%u", s->status);
	else
		fputs("null", f);
	json_ms(f, "ttft_ms", s->ttft_us);
	json_ms(f, "ttfo_ms", s->ttfo_us);
	json_ms(f, "tpot_ms", s->tpot_us);
	json_ms(f, "itl_max_ms", s->itl_max_us);
	json_ms(f, "duration_ms", s->duration_us);
	if (s->output_tokens >= 0)
		fprintf(f, ", \"output_tokens\": %" PRId64 ", \"token_source\": \"%s\"",
		    s->output_tokens, s->tokens_from_usage ? "usage" : "events");
	else
		fputs(", \"output_tokens\": null, \"token_source\": null", f);
	if (s->input_tokens >= 0)
		fprintf(f, ", \"input_tokens\": %" PRId64, s->input_tokens);
	else
		fputs(", \"input_tokens\": null", f);
	if (s->reasoning_tokens >= 0)
		fprintf(f, ", \"reasoning_tokens\": %" PRId64, s->reasoning_tokens);
	else
		fputs(", \"reasoning_tokens\": null", f);
	if (s->output_speed >= 0)
		fprintf(f, ", \"output_speed\": %.3f", s->output_speed);
	else
		fputs(", \"output_speed\": null", f);
	fprintf(f, ", \"prompt_tokens\": %u, \"max_tokens\": %u}",
	    s->prompt_tokens, s->max_tokens);
}

static void json_conf(FILE *f, const struct load_conf *c, const char *pad)
{
	fprintf(f, "%s\"target\": ", pad);
	jsonw_file_str(f, c->url);
	fprintf(f, ",\n%s\"dialect\": \"%s\",\n%s\"model\": ", pad,
	    dialect_names[load_conf_dialect(c)], pad);
	jsonw_file_str(f, c->model);
	fprintf(f, ",\n%s\"mode\": \"%s\",\n%s\"concurrency\": %u", pad,
	    c->rate > 0 ? "open" : "closed", pad, c->concurrency);
	if (c->rate > 0)
		fprintf(f, ",\n%s\"rate\": %.6g, \"arrivals\": \"%s\"", pad, c->rate,
		    c->uniform ? "uniform" : "poisson");
	else
		fprintf(f, ",\n%s\"rate\": null, \"arrivals\": null", pad);
	if (c->duration_us > 0)
		fprintf(f, ",\n%s\"duration_s\": %.3f", pad, (double)c->duration_us / 1e6);
	else
		fprintf(f, ",\n%s\"duration_s\": null", pad);
	if (c->count > 0)
		fprintf(f, ", \"count\": %" PRIu64, c->count);
	else
		fputs(", \"count\": null", f);
	fprintf(f, ",\n%s\"prompt_tokens\": [%u, %u], \"max_tokens\": [%u, %u]", pad,
	    c->prompt_tokens.min, c->prompt_tokens.max, c->max_tokens.min,
	    c->max_tokens.max);
}

void load_report_json_members(FILE *f, const struct load_report *rp,
    int samples, int indent)
{
	const struct loadstats *st = rp->st;
	uint64_t el = rp->info->elapsed_us;
	char pad[32];

	if (indent < 0 || indent >= (int)sizeof(pad))
		indent = 0;
	memset(pad, ' ', (size_t)indent);
	pad[indent] = '\0';
	json_conf(f, rp->conf, pad);
	fprintf(f, ",\n%s\"elapsed_s\": %.3f, \"interrupted\": %s", pad,
	    (double)el / 1e6, rp->info->interrupted ? "true" : "false");
	fprintf(f, ",\n%s\"requests\": %" PRIu64 ", \"ok\": %" PRIu64
	    ", \"errors\": %" PRIu64 ", \"error_rate\": %.6f", pad, st->requests,
	    st->outcomes[OUTCOME_OK], loadstats_errors(st), loadstats_error_rate(st));
	fprintf(f, ",\n%s\"outcomes\": {", pad);
	for (int o = 0; o < OUTCOME_COUNT; o++)
		fprintf(f, "%s\"%s\": %" PRIu64, o ? ", " : "",
		    meter_outcome_name(o), st->outcomes[o]);
	fprintf(f, "},\n%s\"requests_per_s\": %.3f, \"output_tokens_per_s\": %.3f",
	    pad, per_s(st->requests, el), per_s(st->output_tokens, el));
	fprintf(f, ",\n%s\"output_tokens\": %" PRIu64 ", \"input_tokens\": %" PRIu64,
	    pad, st->output_tokens, st->input_tokens);
	fprintf(f, ",\n%s\"connections\": %" PRIu64 ", \"max_in_flight\": %" PRIu64,
	    pad, rp->info->connections, rp->info->max_in_flight);
	json_quant(f, "ttft_ms", &st->ttft, pad);
	json_quant(f, "ttfo_ms", &st->ttfo, pad);
	json_quant(f, "tpot_ms", &st->tpot, pad);
	json_quant(f, "itl_ms", &st->itl, pad);
	json_quant(f, "output_speed", &st->speed, pad);
	json_quant(f, "duration_ms", &st->duration, pad);
	if (rp->conf->lag)
		json_quant(f, "lag_ms", &st->lag, pad);
	if (!samples)
		return;
	fprintf(f, ",\n%s\"samples\": [", pad);
	for (size_t i = 0; i < st->nsamples; i++) {
		fprintf(f, "%s\n%s  ", i ? "," : "", pad);
		json_sample(f, &st->samples[i]);
	}
	if (st->nsamples)
		fprintf(f, "\n%s", pad);
	fputc(']', f);
}
