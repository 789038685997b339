#include "stats.h"

#include "accesslog.h"
#include "worker.h"

/* The aggregation (groups, windows, /stats, /metrics) lands with the
 * statistics work; until then requests are counted in the access log only. */
void stats_record(struct worker *w, const struct accesslog_entry *e)
{
	(void)w;
	(void)e;
}
