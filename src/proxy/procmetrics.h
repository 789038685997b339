/* The process metrics every Prometheus exporter has (client_golang's
 * process collector): CPU seconds, resident and virtual memory, open and
 * allowed descriptors, start time; read from /proc at each scrape. */
#ifndef TOKENTAP_PROCMETRICS_H
#define TOKENTAP_PROCMETRICS_H

struct promout;

void procmetrics_write(struct promout *o);

#endif
