#include "slo_rules.h"

#include <string.h>

#include "alert.h"
#include "alert_format.h"
#include "alert_rules.h"
#include "util.h"

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
static void recording(FILE *f, uint64_t w_us)
{
	char w[32], name[128];

	util_duration_text(w_us, w, sizeof w);
	snprintf(name, sizeof name, "instance_slo:tokentap_slo_requests:increase%s", w);
	alert_rules_range(w_us, w, sizeof w);
	alert_rules_record_head(f, name, "slo");
	fprintf(f, "              sum by (instance, job, slo) "
	    "(increase(tokentap_slo_requests_total[%s]))\n", w);
	alert_rules_record_tail(f);
	util_duration_text(w_us, w, sizeof w);
	snprintf(name, sizeof name, "instance_slo:tokentap_slo_burn_rate:ratio_rate%s", w);
	alert_rules_range(w_us, w, sizeof w);
	alert_rules_record_head(f, name, "slo");
	fprintf(f,
	    "              sum by (instance, job, slo) (rate(tokentap_slo_requests_total{result=\"bad\"}[%s]))\n"
	    "              / sum by (instance, job, slo) (rate(tokentap_slo_requests_total[%s]))\n"
	    "              / (1 - max by (instance, job, slo) (tokentap_slo_objective))\n", w, w);
	alert_rules_record_tail(f);
}

static void alerting(FILE *f, const struct conf *c, const struct conf_burn *b)
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

void slo_rules_records(FILE *f, const struct conf *c)
{
	uint64_t w[MAX_WINDOWS];
	size_t n = windows_of(c, w);

	for (size_t i = 0; i < n; i++)
		recording(f, w[i]);
}

void slo_rules_alerts(FILE *f, const struct conf *c)
{
	for (size_t i = 0; i < c->n_burn_rates; i++)
		alerting(f, c, &c->burn_rates[i]);
}
