/* SPDX-License-Identifier: Apache-2.0 */
#include "alert_format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "jsonw.h"
#include "util.h"

/* "p95", "p99.9" */
static void quantile_name(double q, char *buf, size_t len)
{
	snprintf(buf, len, "p%g", q * 100);
}

void alert_format_value(enum alert_metric m, double v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "none");
	else if (m == ALERT_STALLED)
		snprintf(buf, len, "%.0f", v);
	else if (m == ALERT_ERROR_RATE || m == ALERT_UNCERTAIN)
		snprintf(buf, len, "%.3g", v);
	else if (m == ALERT_HEALTHY)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, v >= 100 ? "%.0fms" : v >= 10 ? "%.1fms" : "%.2fms", v);
}

static void figure_texts(const struct alert_transition *t, char *name,
    char *value, char *threshold, char *window)
{
	if (!alert_metric_is_time(t->metric))
		snprintf(name, 16, "%s", alert_metric_name(t->metric));
	else
		quantile_name(t->quantile, name, 16);
	alert_format_value(t->metric, t->value, value, 32);
	alert_format_value(t->metric, t->threshold, threshold, 32);
	util_duration_text(t->window_us, window, 32);
}

/* An Alertmanager alert from its instance label on: the annotations, the
 * times and the link back. */
static void am_rest(struct evbuffer *out, const char *instance, const char *summary,
    const char *desc, uint64_t starts_at_ms, uint64_t ends_at_ms, const char *generator_url)
{
	evbuffer_add(out, ",\"instance\":", 12);
	jsonw_str(out, instance);
	evbuffer_add(out, "},\"annotations\":{\"summary\":", 27);
	jsonw_str(out, summary);
	evbuffer_add(out, ",\"description\":", 15);
	jsonw_str(out, desc);
	evbuffer_add(out, "},\"startsAt\":", 13);
	jsonw_time(out, starts_at_ms);
	evbuffer_add(out, ",\"endsAt\":", 10);
	jsonw_time(out, ends_at_ms);
	evbuffer_add(out, ",\"generatorURL\":", 16);
	jsonw_str(out, generator_url);
	evbuffer_add(out, "}", 1);
}

/* A webhook body from the value of "starts_at" on. */
static void webhook_rest(struct evbuffer *out, const struct alert_transition *t,
    const char *instance)
{
	jsonw_time(out, t->starts_at_ms);
	evbuffer_add(out, ",\"ends_at\":", 11);
	jsonw_time(out, t->ends_at_ms);
	evbuffer_add(out, ",\"instance\":", 12);
	jsonw_str(out, instance);
	evbuffer_add(out, "}", 1);
}

/* ---- SLOBurnRate -------------------------------------------------------- */

/* A burn rate as people read it: "14.4", "0.52"; "none". */
static void burn_text(double v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%.3g", v);
}

struct burn_texts {
	char lv[32], sv[32], rate[32], lw[32], sw[32];
};

static void burn_texts(const struct alert_transition *t, struct burn_texts *x)
{
	burn_text(t->value, x->lv, sizeof x->lv);
	burn_text(t->short_value, x->sv, sizeof x->sv);
	burn_text(t->threshold, x->rate, sizeof x->rate);
	util_duration_text(t->window_us, x->lw, sizeof x->lw);
	util_duration_text(t->short_window_us, x->sw, sizeof x->sw);
}

/* "alert firing: SLOBurnRate severity=critical slo=chat burn 15.2 (1h) and
 * 20.1 (5m) > 14.4 (n=57/12, objective 0.99)" */
static void burn_log(const struct alert_transition *t, char *buf, size_t len)
{
	struct burn_texts x;

	burn_texts(t, &x);
	snprintf(buf, len, "alert %s: SLOBurnRate severity=%s slo=%s burn %s (%s) and %s (%s)"
	    " %s %s (n=%llu/%llu, objective %g)", t->firing ? "firing" : "resolved",
	    alert_severity_name(t->severity), t->slo, x.lv, x.lw, x.sv, x.sw,
	    t->firing ? ">" : "rate", x.rate, (unsigned long long)t->samples,
	    (unsigned long long)t->short_samples, t->objective);
}

static void burn_webhook(struct evbuffer *out, const struct alert_transition *t,
    const char *instance)
{
	evbuffer_add_printf(out, "{\"status\":\"%s\",\"alertname\":\"SLOBurnRate\","
	    "\"severity\":\"%s\",\"slo\":", t->firing ? "firing" : "resolved",
	    alert_severity_name(t->severity));
	jsonw_str(out, t->slo);
	evbuffer_add_printf(out, ",\"route\":null,\"tenant\":null,\"metric\":\"burn_rate\","
	    "\"quantile\":null,\"value\":");
	alert_json_value(out, t->value, t->metric);
	evbuffer_add(out, ",\"short_value\":", 15);
	alert_json_value(out, t->short_value, t->metric);
	evbuffer_add(out, ",\"threshold\":", 13);
	alert_json_value(out, t->threshold, t->metric);
	evbuffer_add_printf(out, ",\"objective\":%g,\"samples\":%llu,\"short_samples\":%llu,"
	    "\"window_s\":%g,\"short_window_s\":%g,\"starts_at\":", t->objective,
	    (unsigned long long)t->samples, (unsigned long long)t->short_samples,
	    (double)t->window_us / 1e6, (double)t->short_window_us / 1e6);
	webhook_rest(out, t, instance);
}

static void burn_alertmanager(struct evbuffer *out, const struct alert_transition *t,
    const char *instance, const char *generator_url, uint64_t ends_at_ms)
{
	struct burn_texts x;
	char summary[512], desc[512];

	burn_texts(t, &x);
	alert_format_summary(t, summary, sizeof summary);
	snprintf(desc, sizeof desc, "SLO %s (objective %g) burned its error budget %sx over "
	    "the last %s (%llu requests) and %sx over the last %s (%llu requests); the %s "
	    "rate is %sx.", t->slo, t->objective, x.lv, x.lw, (unsigned long long)t->samples,
	    x.sv, x.sw, (unsigned long long)t->short_samples,
	    alert_severity_name(t->severity), x.rate);
	evbuffer_add_printf(out, "{\"labels\":{\"alertname\":\"SLOBurnRate\","
	    "\"severity\":\"%s\",\"slo\":", alert_severity_name(t->severity));
	jsonw_str(out, t->slo);
	evbuffer_add_printf(out, ",\"long_window\":\"%s\",\"short_window\":\"%s\"", x.lw,
	    x.sw);
	am_rest(out, instance, summary, desc, t->starts_at_ms, ends_at_ms, generator_url);
}

/* ---- threshold alerts ---------------------------------------------------- */

void alert_format_log(const struct alert_transition *t, char *buf, size_t len)
{
	char name[16], value[32], thr[32], window[32], tenant[160] = "";

	if (t->metric == ALERT_BURN_RATE) {
		burn_log(t, buf, len);
		return;
	}
	figure_texts(t, name, value, thr, window);
	if (t->tenant != NULL)
		snprintf(tenant, sizeof tenant, " tenant=%s", t->tenant);
	if (t->metric == ALERT_UNCERTAIN)   /* what it means, said */
		snprintf(buf, len, "alert %s: TTFTUncertain severity=%s route=%s "
		    "ttft_uncertain_share=%s, threshold %s (n=%llu, window %s)%s",
		    t->firing ? "firing" : "resolved", alert_severity_name(t->severity),
		    t->route, value, thr, (unsigned long long)t->samples, window,
		    t->firing ? ": numbers approximate: worker saturated (first tokens "
		    "read merged with later ones)" : "");
	else if (t->metric == ALERT_STALLED)     /* a count now, not a window's */
		snprintf(buf, len, "alert %s: StreamStalled severity=%s route=%s "
		    "stalled=%s, threshold %s (streams stalled now)",
		    t->firing ? "firing" : "resolved", alert_severity_name(t->severity),
		    t->route, value, thr);
	else if (t->firing)
		snprintf(buf, len, "alert firing: %s severity=%s route=%s%s %s=%s %s %s "
		    "(n=%llu, window %s)", alert_name(t->metric),
		    alert_severity_name(t->severity), t->route, tenant, name, value,
		    t->metric == ALERT_HEALTHY ? "<" : ">", thr,
		    (unsigned long long)t->samples, window);
	else
		snprintf(buf, len, "alert resolved: %s severity=%s route=%s%s %s=%s, "
		    "threshold %s (n=%llu, window %s)", alert_name(t->metric),
		    alert_severity_name(t->severity), t->route, tenant, name, value, thr,
		    (unsigned long long)t->samples, window);
}

void alert_format_webhook(struct evbuffer *out, const struct alert_transition *t,
    const char *instance)
{
	int rate = !alert_metric_is_time(t->metric);

	if (t->metric == ALERT_BURN_RATE) {
		burn_webhook(out, t, instance);
		return;
	}
	evbuffer_add_printf(out, "{\"status\":\"%s\",\"alertname\":\"%s\","
	    "\"severity\":\"%s\",\"route\":", t->firing ? "firing" : "resolved",
	    alert_name(t->metric), alert_severity_name(t->severity));
	jsonw_str(out, t->route);
	evbuffer_add_printf(out, ",\"tenant\":");
	jsonw_str(out, t->tenant);
	evbuffer_add_printf(out, ",\"metric\":\"%s\",\"quantile\":",
	    alert_metric_name(t->metric));
	if (rate)
		evbuffer_add(out, "null", 4);
	else
		evbuffer_add_printf(out, "%g", t->quantile);
	evbuffer_add_printf(out, ",\"%s\":", rate ? "value" : "value_ms");
	alert_json_value(out, t->value, t->metric);
	evbuffer_add_printf(out, ",\"%s\":", rate ? "threshold" : "threshold_ms");
	alert_json_value(out, t->threshold, t->metric);
	evbuffer_add_printf(out, ",\"samples\":%llu,\"window_s\":%g,\"starts_at\":",
	    (unsigned long long)t->samples, (double)t->window_us / 1e6);
	webhook_rest(out, t, instance);
}

/* Alertmanager's annotations: a summary line and a sentence with the figures. */
static void am_texts(const struct alert_transition *t, char *summary, char *desc,
    size_t len)
{
	char name[16], value[32], thr[32], window[32];
	static const char *const metrics[ALERT_METRIC_COUNT] = {
		"TTFT", "TPOT", "Error rate", "TTFO", "Stalled streams", "Healthy replicas",
		"Uncertain TTFTs"
	};
	int rate = !alert_metric_is_time(t->metric);
	const char *metric = metrics[t->metric];

	figure_texts(t, name, value, thr, window);
	if (t->metric == ALERT_STALLED) {
		snprintf(summary, len, "Streams of route %s stalled", t->route);
		snprintf(desc, len, "%s streams of route %s had no token for longer "
		    "than the stall threshold (at least %s at once fire this alert).",
		    value, t->route, thr);
		return;
	}
	if (t->metric == ALERT_UNCERTAIN) {
		snprintf(summary, len, "Route %s: numbers approximate: worker saturated",
		    t->route);
		snprintf(desc, len, "A share of %s of the TTFTs of route %s over the last "
		    "%s (%llu samples) were read merged with later tokens (doubt above "
		    "1 ms; the threshold is %s): the worker is behind, its times are "
		    "upper bounds.", value, t->route, window,
		    (unsigned long long)t->samples, thr);
		return;
	}
	if (t->metric == ALERT_HEALTHY) {
		snprintf(summary, len, "Route %s has fewer than %s healthy upstreams",
		    t->route, thr);
		snprintf(desc, len, "%s of the replicas of route %s serve; min_healthy is %s.",
		    value, t->route, thr);
		return;
	}
	snprintf(summary, len, "%s%s%s of route %s%s%s over %s", metric, rate ? "" : " ",
	    rate ? "" : name, t->route, t->tenant ? ", tenant " : "",
	    t->tenant ? t->tenant : "", thr);
	snprintf(desc, len, "%s%s%s was %s over the last %s (%llu samples); "
	    "the %s threshold is %s.", metric, rate ? "" : " ", rate ? "" : name, value,
	    window, (unsigned long long)t->samples, alert_severity_name(t->severity), thr);
}

void alert_format_alertmanager(struct evbuffer *out,
    const struct alert_transition *t, const char *instance,
    const char *generator_url, uint64_t ends_at_ms)
{
	char summary[512], desc[512];

	if (t->metric == ALERT_BURN_RATE) {
		burn_alertmanager(out, t, instance, generator_url, ends_at_ms);
		return;
	}
	am_texts(t, summary, desc, sizeof summary);
	evbuffer_add_printf(out, "{\"labels\":{\"alertname\":\"%s\",\"severity\":\"%s\","
	    "\"route\":", alert_name(t->metric), alert_severity_name(t->severity));
	jsonw_str(out, t->route);
	if (t->tenant != NULL) {
		evbuffer_add(out, ",\"tenant\":", 10);
		jsonw_str(out, t->tenant);
	}
	am_rest(out, instance, summary, desc, t->starts_at_ms, ends_at_ms, generator_url);
}

void alert_format_summary(const struct alert_transition *t, char *buf, size_t len)
{
	char summary[512], desc[512];

	if (t->metric == ALERT_BURN_RATE) {
		struct burn_texts x;
		burn_texts(t, &x);
		snprintf(buf, len, "SLO %s burns its error budget faster than %sx", t->slo, x.rate);
		return;
	}
	am_texts(t, summary, desc, sizeof summary);
	snprintf(buf, len, "%s", summary);
}
