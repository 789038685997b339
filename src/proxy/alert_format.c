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

/* A value as people read it: "2310ms", "45.3ms", "0.31"; "none". */
static void value_text(const struct alert_transition *t, double v, char *buf,
    size_t len)
{
	if (v < 0)
		snprintf(buf, len, "none");
	else if (t->metric == ALERT_ERROR_RATE)
		snprintf(buf, len, "%.3g", v);
	else if (t->metric == ALERT_HEALTHY)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, v >= 100 ? "%.0fms" : v >= 10 ? "%.1fms" : "%.2fms", v);
}

static void figure_texts(const struct alert_transition *t, char *name,
    char *value, char *threshold, char *window)
{
	if (t->metric == ALERT_ERROR_RATE || t->metric == ALERT_HEALTHY)
		snprintf(name, 16, "%s", alert_metric_name(t->metric));
	else
		quantile_name(t->quantile, name, 16);
	value_text(t, t->value, value, 32);
	value_text(t, t->threshold, threshold, 32);
	util_duration_text(t->window_us, window, 32);
}

void alert_format_log(const struct alert_transition *t, char *buf, size_t len)
{
	char name[16], value[32], thr[32], window[32], tenant[160] = "";

	figure_texts(t, name, value, thr, window);
	if (t->tenant != NULL)
		snprintf(tenant, sizeof tenant, " tenant=%s", t->tenant);
	if (t->firing)
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
	/* no quantile and no ms: a rate, a count */
	int rate = t->metric == ALERT_ERROR_RATE || t->metric == ALERT_HEALTHY;

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
	jsonw_time(out, t->starts_at_ms);
	evbuffer_add(out, ",\"ends_at\":", 11);
	jsonw_time(out, t->ends_at_ms);
	evbuffer_add(out, ",\"instance\":", 12);
	jsonw_str(out, instance);
	evbuffer_add(out, "}", 1);
}

/* Alertmanager's annotations: a summary line and a sentence with the figures. */
static void am_texts(const struct alert_transition *t, char *summary, char *desc,
    size_t len)
{
	char name[16], value[32], thr[32], window[32];
	int rate = t->metric == ALERT_ERROR_RATE;
	const char *metric = t->metric == ALERT_TTFT ? "TTFT" :
	    t->metric == ALERT_TPOT ? "TPOT" : "Error rate";

	figure_texts(t, name, value, thr, window);
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

	am_texts(t, summary, desc, sizeof summary);
	evbuffer_add_printf(out, "{\"labels\":{\"alertname\":\"%s\",\"severity\":\"%s\","
	    "\"route\":", alert_name(t->metric), alert_severity_name(t->severity));
	jsonw_str(out, t->route);
	if (t->tenant != NULL) {
		evbuffer_add(out, ",\"tenant\":", 10);
		jsonw_str(out, t->tenant);
	}
	evbuffer_add(out, ",\"instance\":", 12);
	jsonw_str(out, instance);
	evbuffer_add(out, "},\"annotations\":{\"summary\":", 27);
	jsonw_str(out, summary);
	evbuffer_add(out, ",\"description\":", 15);
	jsonw_str(out, desc);
	evbuffer_add(out, "},\"startsAt\":", 13);
	jsonw_time(out, t->starts_at_ms);
	evbuffer_add(out, ",\"endsAt\":", 10);
	jsonw_time(out, ends_at_ms);
	evbuffer_add(out, ",\"generatorURL\":", 16);
	jsonw_str(out, generator_url);
	evbuffer_add(out, "}", 1);
}
