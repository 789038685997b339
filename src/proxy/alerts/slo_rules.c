#include "slo_rules.h"

#include <string.h>

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
 * budget 1 - objective), summed over the instances by slo. */
static void recording(FILE *f, uint64_t w_us)
{
	char w[32];

	util_duration_text(w_us, w, sizeof w);
	fprintf(f,
	    "      - record: slo:tokentap_slo_requests:increase%s\n"
	    "        expr: sum by (slo) (increase(tokentap_slo_requests_total[%s]))\n"
	    "      - record: slo:tokentap_slo_burn_rate:ratio_rate%s\n"
	    "        expr: >-\n"
	    "          (sum by (slo) (rate(tokentap_slo_requests_total{result=\"bad\"}[%s]))\n"
	    "          / sum by (slo) (rate(tokentap_slo_requests_total[%s])))\n"
	    "          / (1 - max by (slo) (tokentap_slo_objective))\n", w, w, w, w, w);
}

static void alerting(FILE *f, const struct conf *c, const struct conf_burn *b)
{
	char lw[32], sw[32];
	const char *sev = b->critical ? "critical" : "warning";

	util_duration_text(b->long_us, lw, sizeof lw);
	util_duration_text(b->short_us, sw, sizeof sw);
	fprintf(f,
	    "      - alert: SLOBurnRate\n"
	    "        expr: >-\n"
	    "          slo:tokentap_slo_burn_rate:ratio_rate%s > %.15g\n"
	    "          and slo:tokentap_slo_burn_rate:ratio_rate%s > %.15g\n"
	    "          and slo:tokentap_slo_requests:increase%s >= %llu\n"
	    "          and slo:tokentap_slo_requests:increase%s >= %llu\n"
	    "        labels: {severity: %s, long_window: \"%s\", short_window: \"%s\"}\n"
	    "        annotations:\n"
	    "          summary: \"SLO {{ $labels.slo }} burns its error budget faster than %.15gx\"\n"
	    "          description: \"SLO {{ $labels.slo }} burned its error budget "
	    "{{ $value | printf \\\"%%.3g\\\" }}x over the last %s, and faster than %.15gx "
	    "over the last %s too; the %s rate is %.15gx.\"\n",
	    lw, b->rate, sw, b->rate, lw, (unsigned long long)c->burn_min_requests, sw,
	    (unsigned long long)c->burn_min_requests, sev, lw, sw, b->rate, lw, b->rate, sw,
	    sev, b->rate);
}

int slo_rules_write(FILE *f, const struct conf *c)
{
	uint64_t w[MAX_WINDOWS];
	size_t n = windows_of(c, w);

	fprintf(f, "# Written by tokentap --prometheus-rules -c %s: the SLOBurnRate alerts of\n"
	    "# alerts.burn_rates over every instance's tokentap_slo_requests_total, as\n"
	    "# each tokentap evaluates them itself (pairs: both windows burn faster than\n"
	    "# the rate, each with at least alerts.burn_min_requests requests).\n"
	    "# One group: its rules run in order, each alert on this evaluation's records.\n"
	    "groups:\n"
	    "  - name: tokentap-slo\n"
	    "    rules:\n", c->path ? c->path : "-");
	for (size_t i = 0; i < n; i++)
		recording(f, w[i]);
	for (size_t i = 0; i < c->n_burn_rates; i++)
		alerting(f, c, &c->burn_rates[i]);
	if (c->n_burn_rates == 0)
		fprintf(f, "      []\n");
	return ferror(f) ? -1 : 0;
}
