/* SPDX-License-Identifier: Apache-2.0 */
#include "alert_rules.h"

#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "alert_format.h"
#include "meter.h"
#include "metrics.h"
#include "util.h"

/* A rule over one route's figures, or over one (route, tenant)'s. */
enum level { LEVEL_ROUTE, LEVEL_TENANT, LEVEL_COUNT };

static const char *const level_prefix[LEVEL_COUNT] = {
	"instance_route", "instance_route_tenant"
};
static const char *const level_by[LEVEL_COUNT] = { "route", "route, tenant" };

/* The threshold metrics, in the order alert.c lists them. */
static const enum alert_metric metrics[] = {
	ALERT_TTFT, ALERT_TPOT, ALERT_ERROR_RATE, ALERT_TTFO, ALERT_STALLED,
	ALERT_HEALTHY
};

struct ctx {
	FILE *f;
	const struct conf *c;
	char range[32];        /* alerts.window as a PromQL range */
	char q[16];            /* the quantile in record names: "p95", "p99_9" */
};

void alert_rules_range(uint64_t us, char *buf, size_t len)
{
	/* PromQL has no unit below ms */
	util_duration_text((us + 999) / 1000 * 1000, buf, len);
}

/* A recording rule named name: the caller writes between head and tail
 * an expression by instance, job and by (lines indented 14 spaces); the
 * record is by instance (tokentap's name, from tokentap_alert_instance_info)
 * and by, without job.
 *
 * A gauge read as an instant vector (the instance's name, an SLO's
 * objective, a replica's state) vanishes at the first failed scrape:
 * Prometheus marks a down target's series stale at once. Every rule that
 * stood on one then had no value, and every alert resolved, to fire again
 * a scrape after a restart of two seconds: a second page for a problem
 * that never went away. So such a gauge is "the series, or, while the
 * target has none, its last value within GAP" (range vectors skip the
 * staleness markers); the counters' rates span the gap on their own. */
#define GAP "2m"

/* gauge, or its last value over GAP where no series of the target is left */
static void held(FILE *f, const char *gauge, const char *on)
{
	fprintf(f, "(%s or on (%s) last_over_time(%s[" GAP "]))", gauge, on, gauge);
}

static void record_head(FILE *f, const char *name, const char *by)
{
	fprintf(f,
	    "      - record: %s\n"
	    "        expr: |-\n"
	    "          max by (instance, %s) (label_replace(\n"
	    "            (\n", name, by);
}

static void record_tail(FILE *f)
{
	fprintf(f,
	    "            )\n"
	    "            * on (instance, job) group_left (alert_instance)\n"
	    "              ");
	held(f, "tokentap_alert_instance_info", "instance, job");
	fprintf(f, ",\n"
	    "            \"instance\", \"$1\", \"alert_instance\", \"(.*)\"))\n");
}

/* The rule (m, s)'s threshold under t as alert.c keeps it (µs for a
 * time, a fraction, a count of streams or replicas); < 0: no such rule. */
static double threshold(const struct conf_thresholds *t, enum alert_metric m,
    enum alert_severity s)
{
	int crit = s == ALERT_CRITICAL;
	uint64_t us;

	switch (m) {
	case ALERT_TTFT:
		us = crit ? t->ttft_critical_us : t->ttft_warning_us;
		break;
	case ALERT_TPOT:
		us = crit ? t->tpot_critical_us : t->tpot_warning_us;
		break;
	case ALERT_TTFO:
		us = crit ? t->ttfo_critical_us : t->ttfo_warning_us;
		break;
	case ALERT_ERROR_RATE:
		return crit ? t->error_rate_critical : t->error_rate_warning;
	case ALERT_STALLED:          /* a warning, while stall detection is on */
		return !crit && t->stall_us && t->min_stalled ? (double)t->min_stalled : -1;
	case ALERT_HEALTHY:          /* critical only */
		return crit && t->min_healthy ? (double)t->min_healthy : -1;
	default:
		return -1;
	}
	return us ? (double)us : -1;
}

/* Does any route have rule m (either severity)? */
static int used(const struct conf *c, enum alert_metric m)
{
	for (size_t i = 0; i < c->n_routes; i++)
		for (int s = 0; s < ALERT_SEVERITY_COUNT; s++)
			if (threshold(&c->routes[i].thresholds, m, (enum alert_severity)s) >= 0)
				return 1;
	return 0;
}

/* The histogram the rule of m reads, exported under either metrics.names:
 * TTFT and TTFO are the server side's, as tokentap judges them (from the
 * request's last byte), TPOT is per request (OpenTelemetry's client
 * metrics have a per-chunk gap, not TPOT). */
static const char *family(const struct conf *c, enum alert_metric m)
{
	(void)c;
	if (m == ALERT_TTFT)
		return "tokentap_time_to_first_token_server_seconds";
	if (m == ALERT_TPOT)
		return "tokentap_time_per_output_token_seconds";
	return "tokentap_time_to_first_output_token_server_seconds";
}

/* A route name as a literal in a PromQL regex string: RE2's metacharacters
 * escaped, then the string's own (backslash, quote, control bytes). */
static void route_literal(FILE *f, const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if (strchr("\\.+*?()|[]{}^$", *p) != NULL)
			fputs(*p == '\\' ? "\\\\\\\\" : "\\\\", f);
		if (*p == '"')
			fputs("\\\"", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else if (*p != '\\')
			fputc(*p, f);
	}
}

/* The routes whose rule (m, s) has threshold v, as a regex. */
static void routes_regex(FILE *f, const struct conf *c, enum alert_metric m,
    enum alert_severity s, double v)
{
	int first = 1;

	for (size_t i = 0; i < c->n_routes; i++) {
		if (threshold(&c->routes[i].thresholds, m, s) != v)
			continue;
		if (!first)
			fputc('|', f);
		first = 0;
		route_literal(f, c->routes[i].name);
	}
}

/* A YAML double-quoted scalar. */
static void yaml_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* ---- recording rules ----------------------------------------------------- */

static void record_name(const struct ctx *x, char *buf, size_t len, enum level l,
    const char *metric, const char *what)
{
	snprintf(buf, len, "%s:%s:%s%s", level_prefix[l], metric, what, x->range);
}

/* The quantile and the samples of m's histogram over the window. Native
 * histograms when Prometheus has them (--enable-feature=native-histograms
 * stores only those), the classic buckets otherwise. */
static void record_histogram(const struct ctx *x, enum alert_metric m, enum level l)
{
	const char *fam = family(x->c, m), *by = level_by[l], *w = x->range;
	char name[256], what[32];
	double q = x->c->alerts_quantile;

	snprintf(what, sizeof what, "%s_rate", x->q);
	record_name(x, name, sizeof name, l, fam, what);
	record_head(x->f, name, by);
	fprintf(x->f,
	    "              histogram_quantile(%.15g, sum by (instance, job, %s) "
	    "(rate(%s{route!=\"-\"}[%s])))\n"
	    "              or histogram_quantile(%.15g, sum by (instance, job, %s, le) "
	    "(rate(%s_bucket{route!=\"-\"}[%s])))\n",
	    q, by, fam, w, q, by, fam, w);
	record_tail(x->f);
	record_name(x, name, sizeof name, l, fam, "count_increase");
	record_head(x->f, name, by);
	fprintf(x->f,
	    "              sum by (instance, job, %s) "
	    "(histogram_count(increase(%s{route!=\"-\"}[%s])))\n"
	    "              or sum by (instance, job, %s) (increase(%s_count{route!=\"-\"}[%s]))\n",
	    by, fam, w, by, fam, w);
	record_tail(x->f);
}

/* The outcomes the client caused (meter_outcome_client: it left, or it
 * was too slow), as a PromQL alternation: "client_abort|client_timeout". */
static void client_outcomes(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int o = 0; o < OUTCOME_COUNT; o++)
		if (meter_outcome_client((enum meter_outcome)o))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s",
			    n ? "|" : "", meter_outcome_name((enum meter_outcome)o));
}

/* The error rate as alertd evaluates it: requests not ok over all, both
 * without the ones the client caused (client_outcomes), and how many. */
static void record_errors(const struct ctx *x, enum level l)
{
	const char *by = level_by[l], *w = x->range;
	const char *ok = meter_outcome_name(OUTCOME_OK);
	char client[128], name[256];

	client_outcomes(client, sizeof client);
	record_name(x, name, sizeof name, l, "tokentap_requests", "error_ratio_rate");
	record_head(x->f, name, by);
	fprintf(x->f,
	    "              sum by (instance, job, %s) "
	    "(rate(tokentap_requests_total{route!=\"-\",outcome!~\"%s|%s\"}[%s]))\n"
	    "              / sum by (instance, job, %s) "
	    "(rate(tokentap_requests_total{route!=\"-\",outcome!~\"%s\"}[%s]))\n",
	    by, ok, client, w, by, client, w);
	record_tail(x->f);
	record_name(x, name, sizeof name, l, "tokentap_requests", "counted_increase");
	record_head(x->f, name, by);
	fprintf(x->f,
	    "              sum by (instance, job, %s) "
	    "(increase(tokentap_requests_total{route!=\"-\",outcome!~\"%s\"}[%s]))\n",
	    by, client, w);
	record_tail(x->f);
}

static void records(const struct ctx *x)
{
	for (int l = 0; l < (x->c->alerts_per_tenant ? LEVEL_COUNT : 1); l++)
		for (size_t i = 0; i < UTIL_ARRAY_LEN(metrics); i++) {
			enum alert_metric m = metrics[i];
			if (!used(x->c, m))
				continue;
			if (m == ALERT_ERROR_RATE)
				record_errors(x, (enum level)l);
			else if (alert_metric_is_time(m))
				record_histogram(x, m, (enum level)l);
		}
	if (used(x->c, ALERT_STALLED)) {
		record_head(x->f, "instance_route:tokentap_stalled_streams:sum", "route");
		fprintf(x->f, "              sum by (instance, job, route) "
		    "(tokentap_stalled_streams{route!=\"-\"})\n");
		record_tail(x->f);
	}
	if (used(x->c, ALERT_HEALTHY)) {
		record_head(x->f, "instance_route:tokentap_upstream_up:sum", "route");
		fprintf(x->f, "              sum by (instance, job, route) ");
		held(x->f, "tokentap_upstream_up", "instance, job");
		fputc('\n', x->f);
		record_tail(x->f);
	}
}

/* ---- alerting rules ------------------------------------------------------ */

/* Is route i the first of its group: the routes whose rule (m, s) has
 * the same threshold, which share one branch of the rule? */
static int group_first(const struct conf *c, enum alert_metric m, enum alert_severity s,
    size_t i)
{
	double v = threshold(&c->routes[i].thresholds, m, s);

	if (v < 0)
		return 0;
	for (size_t j = 0; j < i; j++)
		if (threshold(&c->routes[j].thresholds, m, s) == v)
			return 0;
	return 1;
}

static size_t groups(const struct conf *c, enum alert_metric m, enum alert_severity s)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n_routes; i++)
		n += group_first(c, m, s, i);
	return n;
}

/* Has (m) rules per (route, tenant) too? A stall count and a pool are the
 * route's, not a tenant's. */
static int per_tenant(const struct conf *c, enum alert_metric m)
{
	return c->alerts_per_tenant && m != ALERT_STALLED && m != ALERT_HEALTHY;
}

/* A quantile or error-rate branch for the routes whose threshold is v:
 * over it with min_samples; or (keep), while the rule fires, not yet
 * below threshold x (1 - hysteresis) and with a sample (a NaN compares
 * false), the state being Prometheus' own ALERTS series of the rule. */
static void branch_window(const struct ctx *x, enum alert_metric m, enum alert_severity s,
    enum level l, double v, int keep, int first)
{
	FILE *f = x->f;
	int time = alert_metric_is_time(m);
	const char *metric = time ? family(x->c, m) : "tokentap_requests";
	const char *on = l == LEVEL_TENANT ? "instance, route, tenant" : "instance, route";
	double thr = time ? v / 1e6 : v;
	char value[256], count[256], what[32];

	snprintf(what, sizeof what, "%s_rate", x->q);
	record_name(x, value, sizeof value, l, metric, time ? what : "error_ratio_rate");
	record_name(x, count, sizeof count, l, metric, time ? "count_increase" : "counted_increase");
	fprintf(f, "          %s%s{route=~\"", first ? "" : "or ", value);
	routes_regex(f, x->c, m, s, v);
	if (!keep)
		fprintf(f, "\"} > %.15g\n            and on (%s) %s >= %llu\n", thr, on, count,
		    (unsigned long long)x->c->alerts_min_samples);
	else
		fprintf(f, "\"} >= %.15g\n            and on (%s) ALERTS{alertname=\"%s\", "
		    "severity=\"%s\", alertstate=\"firing\", tenant%s\"\"}\n",
		    thr * (1.0 - x->c->alerts_hysteresis), on, alert_name(m),
		    alert_severity_name(s), l == LEVEL_TENANT ? "!=" : "=");
}

/* StreamStalled fires at min_stalled streams and resolves at none (keep:
 * while it fires, any); PoolUnhealthy fires below min_healthy replicas
 * and resolves at it. */
static void branch_count(const struct ctx *x, enum alert_metric m, enum alert_severity s,
    double v, int keep, int first)
{
	FILE *f = x->f;
	const char *rec = m == ALERT_STALLED ? "instance_route:tokentap_stalled_streams:sum" :
	    "instance_route:tokentap_upstream_up:sum";

	fprintf(f, "          %s%s{route=~\"", first ? "" : "or ", rec);
	routes_regex(f, x->c, m, s, v);
	if (!keep)
		fprintf(f, "\"} %s %.15g\n", m == ALERT_STALLED ? ">=" : "<", v);
	else
		fprintf(f, "\"} > 0\n            and on (instance, route) ALERTS{alertname=\"%s\", "
		    "severity=\"%s\", alertstate=\"firing\"}\n", alert_name(m),
		    alert_severity_name(s));
}

/* Rule (m, s)'s expression: a branch per group of routes (and per level),
 * then their keep branches. */
static void expression(const struct ctx *x, enum alert_metric m, enum alert_severity s)
{
	const struct conf *c = x->c;
	int first = 1;

	for (int keep = 0; keep < 2; keep++)
		for (int l = 0; l < (per_tenant(c, m) ? LEVEL_COUNT : 1); l++)
			for (size_t i = 0; i < c->n_routes; i++) {
				double v = threshold(&c->routes[i].thresholds, m, s);
				if (!group_first(c, m, s, i))
					continue;
				if (m == ALERT_STALLED || m == ALERT_HEALTHY) {
					if (keep && (m == ALERT_HEALTHY || v <= 1))
						continue;   /* nothing between fire and resolve */
					branch_count(x, m, s, v, keep, first);
				} else {
					branch_window(x, m, s, (enum level)l, v, keep, first);
				}
				first = 0;
			}
}

/* The notifiers' summary of the group with threshold v, word for word,
 * and what the value was. */
static void texts(const struct ctx *x, enum alert_metric m, enum alert_severity s,
    double v, char *summary, char *desc, size_t len)
{
	struct alert_transition t;
	char thr[32], w[32], q[16];
	int time = alert_metric_is_time(m);

	memset(&t, 0, sizeof t);
	t.firing = 1;
	t.metric = m;
	t.severity = s;
	t.route = per_tenant(x->c, m) ?
	    "{{ $labels.route }}{{ with $labels.tenant }}, tenant {{ . }}{{ end }}" :
	    "{{ $labels.route }}";
	t.value = -1;
	t.threshold = time ? v / 1000.0 : v;
	t.quantile = x->c->alerts_quantile;
	t.window_us = x->c->alerts_window_us;
	alert_format_summary(&t, summary, len);
	alert_format_value(m, t.threshold, thr, sizeof thr);
	util_duration_text(x->c->alerts_window_us, w, sizeof w);
	snprintf(q, sizeof q, "p%g", x->c->alerts_quantile * 100);
	if (m == ALERT_STALLED)
		snprintf(desc, len, "{{ $value }} streams of route {{ $labels.route }} "
		    "had no token for longer than the stall threshold (at least %s at once "
		    "fire this alert).", thr);
	else if (m == ALERT_HEALTHY)
		snprintf(desc, len, "{{ $value }} of the replicas of route "
		    "{{ $labels.route }} serve; min_healthy is %s.", thr);
	else if (m == ALERT_ERROR_RATE)
		snprintf(desc, len, "Error rate was {{ $value | printf \"%%.3g\" }} over "
		    "the last %s; the %s threshold is %s.", w, alert_severity_name(s), thr);
	else
		snprintf(desc, len, "%s %s was {{ $value | humanizeDuration }} over the "
		    "last %s; the %s threshold is %s.", m == ALERT_TTFT ? "TTFT" :
		    m == ALERT_TPOT ? "TPOT" : "TTFO", q, w, alert_severity_name(s), thr);
}

/* A string literal of Go's templates. */
static void go_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	fputc('"', f);
}

/* An annotation (the summary, or the description): one text per group
 * of routes, chosen by route in a template where there are several. */
static void annotation(const struct ctx *x, enum alert_metric m, enum alert_severity s,
    const char *key, int description)
{
	const struct conf *c = x->c;
	size_t n = groups(c, m, s), k = 0, len = 0;
	char *buf = NULL, summary[512], desc[512], one[512] = "";
	FILE *b = open_memstream(&buf, &len);

	if (b == NULL) {             /* out of memory: an empty text, valid YAML */
		fprintf(x->f, "          %s: \"\"\n", key);
		return;
	}
	/* groups whose texts read the same need no template */
	for (size_t i = 0; i < c->n_routes && n > 1; i++) {
		if (!group_first(c, m, s, i))
			continue;
		texts(x, m, s, threshold(&c->routes[i].thresholds, m, s), summary, desc,
		    sizeof summary);
		if (one[0] == '\0')
			snprintf(one, sizeof one, "%s", description ? desc : summary);
		else if (strcmp(one, description ? desc : summary) != 0)
			break;
		if (++k == n)
			n = 1;
	}
	k = 0;
	for (size_t i = 0; i < c->n_routes; i++) {
		double v = threshold(&c->routes[i].thresholds, m, s);
		if (!group_first(c, m, s, i))
			continue;
		texts(x, m, s, v, summary, desc, sizeof summary);
		if (n > 1 && k + 1 < n) {
			fprintf(b, "{{ %s eq $labels.route", k ? "else if" : "if");
			for (size_t j = i; j < c->n_routes; j++)
				if (threshold(&c->routes[j].thresholds, m, s) == v) {
					fputc(' ', b);
					go_quoted(b, c->routes[j].name);
				}
			fprintf(b, " }}");
		} else if (n > 1) {
			fprintf(b, "{{ else }}");
		}
		fputs(description ? desc : summary, b);
		if (++k == n && n == 1)
			break;
	}
	if (n > 1)
		fprintf(b, "{{ end }}");
	fclose(b);
	fprintf(x->f, "          %s: ", key);
	yaml_quoted(x->f, buf ? buf : "");
	fputc('\n', x->f);
	free(buf);
}

/* One rule per alertname and severity (what Alertmanager and promtool
 * tell rules apart by), every route's threshold in it. */
static void alert_rule(const struct ctx *x, enum alert_metric m, enum alert_severity s)
{
	char w[32];

	if (groups(x->c, m, s) == 0)
		return;
	fprintf(x->f, "      - alert: %s\n        expr: |-\n", alert_name(m));
	expression(x, m, s);
	if (x->c->alerts_for_us > 0) {
		alert_rules_range(x->c->alerts_for_us, w, sizeof w);
		fprintf(x->f, "        for: %s\n", w);
	}
	fprintf(x->f, "        labels: {severity: %s}\n        annotations:\n",
	    alert_severity_name(s));
	annotation(x, m, s, "summary", 0);
	annotation(x, m, s, "description", 1);
}

static void alerts(const struct ctx *x)
{
	for (size_t i = 0; i < UTIL_ARRAY_LEN(metrics); i++)
		for (int s = 0; s < ALERT_SEVERITY_COUNT; s++)
			alert_rule(x, metrics[i], (enum alert_severity)s);
}

/* ---- SLOBurnRate: per instance, as each tokentap evaluates its own SLOs -- */

#define MAX_WINDOWS 64

/* The windows the pairs name, each once, in order of first use. */
static size_t windows_of(const struct conf *c, uint64_t *w)
{
	size_t n = 0;

	for (size_t i = 0; i < c->n_burn_rates; i++) {
		uint64_t pair[2] = { c->burn_rates[i].long_us, c->burn_rates[i].short_us };
		for (int k = 0; k < 2; k++) {
			size_t j = 0;
			while (j < n && w[j] != pair[k])
				j++;
			if (j == n && n < MAX_WINDOWS)
				w[n++] = pair[k];
		}
	}
	return n;
}

/* Per window: the requests, and the burn rate (bad over all, against the
 * budget 1 - objective), of each instance's SLOs. */
static void slo_record(FILE *f, uint64_t w_us)
{
	char w[32], name[128];

	util_duration_text(w_us, w, sizeof w);
	snprintf(name, sizeof name, "instance_slo:tokentap_slo_requests:increase%s", w);
	alert_rules_range(w_us, w, sizeof w);
	record_head(f, name, "slo");
	fprintf(f, "              sum by (instance, job, slo) "
	    "(increase(tokentap_slo_requests_total[%s]))\n", w);
	record_tail(f);
	util_duration_text(w_us, w, sizeof w);
	snprintf(name, sizeof name, "instance_slo:tokentap_slo_burn_rate:ratio_rate%s", w);
	alert_rules_range(w_us, w, sizeof w);
	record_head(f, name, "slo");
	fprintf(f,
	    "              sum by (instance, job, slo) "
	    "(rate(tokentap_slo_requests_total{result=\"bad\"}[%s]))\n"
	    "              / sum by (instance, job, slo) (rate(tokentap_slo_requests_total[%s]))\n"
	    "              / (1 - max by (instance, job, slo) ", w, w);
	held(f, "tokentap_slo_objective", "instance, job");
	fprintf(f, ")\n");
	record_tail(f);
}

static void slo_alert(FILE *f, const struct conf *c, const struct conf_burn *b)
{
	char lw[32], sw[32], summary[512];
	const char *sev = b->critical ? "critical" : "warning";
	struct alert_transition t;

	util_duration_text(b->long_us, lw, sizeof lw);
	util_duration_text(b->short_us, sw, sizeof sw);
	memset(&t, 0, sizeof t);
	t.metric = ALERT_BURN_RATE;
	t.slo = "{{ $labels.slo }}";
	t.threshold = b->rate;
	alert_format_summary(&t, summary, sizeof summary);
	fprintf(f,
	    "      - alert: SLOBurnRate\n"
	    "        expr: |-\n"
	    "          instance_slo:tokentap_slo_burn_rate:ratio_rate%s > %.15g\n"
	    "          and instance_slo:tokentap_slo_burn_rate:ratio_rate%s > %.15g\n"
	    "          and instance_slo:tokentap_slo_requests:increase%s >= %llu\n"
	    "          and instance_slo:tokentap_slo_requests:increase%s >= %llu\n"
	    "        labels: {severity: %s, long_window: \"%s\", short_window: \"%s\"}\n"
	    "        annotations:\n"
	    "          summary: \"%s\"\n"
	    "          description: \"SLO {{ $labels.slo }} burned its error budget "
	    "{{ $value | printf \\\"%%.3g\\\" }}x over the last %s, and faster than %.15gx "
	    "over the last %s too; the %s rate is %.15gx.\"\n",
	    lw, b->rate, sw, b->rate, lw, (unsigned long long)c->burn_min_requests, sw,
	    (unsigned long long)c->burn_min_requests, sev, lw, sw, summary, lw, b->rate, sw,
	    sev, b->rate);
}

static void slo_records(FILE *f, const struct conf *c)
{
	uint64_t w[MAX_WINDOWS];
	size_t n = windows_of(c, w);

	for (size_t i = 0; i < n; i++)
		slo_record(f, w[i]);
}

static void slo_alerts(FILE *f, const struct conf *c)
{
	for (size_t i = 0; i < c->n_burn_rates; i++)
		slo_alert(f, c, &c->burn_rates[i]);
}

/* ---- the file ------------------------------------------------------------ */

static void header(const struct ctx *x)
{
	const struct conf *c = x->c;
	char w[32], forw[32];

	util_duration_text(c->alerts_window_us, w, sizeof w);
	util_duration_text(c->alerts_for_us, forw, sizeof forw);
	fprintf(x->f,
	    "# Written by tokentap --prometheus-rules -c %s: every alert\n"
	    "# tokentap raises itself, as Prometheus rules over the /metrics of each\n"
	    "# instance, with this config's thresholds per route%s, quantile (p%g),\n"
	    "# window (%s), min_samples (%llu), for (%s) and hysteresis (%g); SLOBurnRate\n"
	    "# for each pair of alerts.burn_rates where slos are set.\n"
	    "#\n"
	    "# The alerts carry the labels tokentap's own notifiers send: alertname,\n"
	    "# severity, route (and tenant) or slo and its windows, and instance as\n"
	    "# tokentap names itself (host name/first listen address), which\n"
	    "# tokentap_alert_instance_info gives for each scraped target; job is\n"
	    "# summed away. With both paths on, Alertmanager sees one alert per\n"
	    "# condition. Prometheus' external_labels would make them differ: drop\n"
	    "# them from these alerts (alerting: alert_relabel_configs, labeldrop).\n"
	    "#\n"
	    "# A firing alert stays while its value is at or over threshold x (1 -\n"
	    "# hysteresis) and its window holds a sample, as tokentap's does (read\n"
	    "# from Prometheus' ALERTS series). Where the two may still differ for a\n"
	    "# moment: quantiles come from the histogram buckets (every threshold is\n"
	    "# a classic bucket bound, so \"over it\" is exact there; native buckets\n"
	    "# are 1.1 %% wide), counts from increase() (extrapolated to the window),\n"
	    "# stalls and replicas are seen at each scrape (tokentap looks every\n"
	    "# 500 ms), and a restarted Prometheus forgets what was firing.\n"
	    "#\n"
	    "# A restart of tokentap or a missed scrape does not resolve an alert\n"
	    "# that is still true: the gauges the rules join on keep their last value\n"
	    "# for " GAP " while the target has no series, and the rates span the gap.\n"
	    "#\n"
	    "#   promtool check rules FILE\n"
	    "groups:\n"
	    "  - name: tokentap\n"
	    "    rules:\n", c->path ? c->path : "-",
	    c->alerts_per_tenant ? " and tenant" : "", c->alerts_quantile * 100, w,
	    (unsigned long long)c->alerts_min_samples, forw, c->alerts_hysteresis);
}

int alert_rules_write(FILE *f, const struct conf *c)
{
	struct ctx x = { .f = f, .c = c };
	int any = c->n_slos > 0 && c->n_burn_rates > 0;

	alert_rules_range(c->alerts_window_us, x.range, sizeof x.range);
	snprintf(x.q, sizeof x.q, "p%g", c->alerts_quantile * 100);
	for (char *p = x.q; *p; p++)
		if (*p == '.')
			*p = '_';
	for (size_t i = 0; i < UTIL_ARRAY_LEN(metrics); i++)
		any |= used(c, metrics[i]);
	header(&x);
	/* the records first: the group runs in order, and each alert reads
	 * this evaluation's */
	records(&x);
	if (c->n_slos > 0)
		slo_records(f, c);
	alerts(&x);
	if (c->n_slos > 0)
		slo_alerts(f, c);
	if (!any)
		fprintf(f, "      []\n");
	return ferror(f) ? -1 : 0;
}
