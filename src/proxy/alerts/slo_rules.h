/* `tokentap --prometheus-rules -c FILE`: Prometheus recording and alerting
 * rules that compute the burn-rate alerts of alerts.burn_rates over the
 * tokentap_slo_requests_total of many instances, as tokentap evaluates
 * them itself (SLOBurnRate, the same labels). Pure: writes YAML to f. */
#ifndef TOKENTAP_SLO_RULES_H
#define TOKENTAP_SLO_RULES_H

#include <stdio.h>

#include "config.h"

/* Returns 0, or -1 when f could not be written. */
int slo_rules_write(FILE *f, const struct conf *c);

#endif
