/* The SLOBurnRate rules of `tokentap --prometheus-rules` (alert_rules.c
 * writes the file): per instance, as each tokentap evaluates alerts.burn_rates
 * over its own SLO counts, from tokentap_slo_requests_total and
 * tokentap_slo_objective, with the labels tokentap's notifiers send. */
#ifndef TOKENTAP_SLO_RULES_H
#define TOKENTAP_SLO_RULES_H

#include <stdio.h>

#include "config.h"

/* The recording rules: per window of the pairs, the requests and the burn
 * rate of each (instance, slo). */
void slo_rules_records(FILE *f, const struct conf *c);
/* The alerting rules: one SLOBurnRate per pair. */
void slo_rules_alerts(FILE *f, const struct conf *c);

#endif
