/* Statistics per (route, tenant, model): recorded by each worker without
 * locks, merged when read. */
#ifndef TOKENTAP_STATS_H
#define TOKENTAP_STATS_H

struct worker;
struct accesslog_entry;

/* Records one finished request in the worker's own statistics. */
void stats_record(struct worker *w, const struct accesslog_entry *e);

#endif
