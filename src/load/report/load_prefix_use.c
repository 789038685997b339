/* SPDX-License-Identifier: Apache-2.0 */
#include "load_prefix_use.h"

#include <stdlib.h>
#include <string.h>

#include "load_prefix.h"

int load_prefix_use_of(const struct load_level *lv, const struct load_pcts *p,
    struct load_prefix_use *u)
{
	const struct loadstats *st = &lv->st;
	struct load_prefix_dist d;
	uint64_t *first_seq = NULL;
	double *v[2] = {NULL, NULL};
	size_t nv[2] = {0, 0};
	int rc = -1;

	memset(u, 0, sizeof *u);
	load_dist_of(NULL, 0, p, &u->ttft[0]);
	load_dist_of(NULL, 0, p, &u->ttft[1]);
	if (lv->conf.prefixes == 0 || st->n == 0)
		return 0;
	if (load_prefix_dist_init(&d, &lv->conf) < 0)
		return -1;
	u->prefix = malloc(st->n * sizeof *u->prefix);
	u->first = calloc(st->n, 1);
	first_seq = malloc(d.n * sizeof *first_seq);
	v[0] = malloc(st->n * sizeof *v[0]);
	v[1] = malloc(st->n * sizeof *v[1]);
	if (u->prefix == NULL || u->first == NULL || first_seq == NULL ||
	    v[0] == NULL || v[1] == NULL)
		goto done;
	u->n = st->n;
	for (uint32_t k = 0; k < d.n; k++)
		first_seq[k] = UINT64_MAX;
	for (size_t i = 0; i < st->n; i++) {
		uint32_t k = load_prefix_pick(&d, st->v[i].seq);
		u->prefix[i] = k;
		if (first_seq[k] == UINT64_MAX)
			u->used++;
		if (st->v[i].seq < first_seq[k])
			first_seq[k] = st->v[i].seq;
	}
	for (size_t i = 0; i < st->n; i++) {
		const struct load_sample *s = &st->v[i];
		int rep;
		u->first[i] = s->seq == first_seq[u->prefix[i]];
		rep = !u->first[i];
		if (loadstats_counted(s) && s->ttft_us >= 0)
			v[rep][nv[rep]++] = (double)s->ttft_us / 1e3;
	}
	load_dist_of(v[0], nv[0], p, &u->ttft[0]);
	load_dist_of(v[1], nv[1], p, &u->ttft[1]);
	rc = 0;
done:
	if (rc < 0)
		load_prefix_use_free(u);
	free(first_seq);
	free(v[0]);
	free(v[1]);
	load_prefix_dist_free(&d);
	return rc;
}

void load_prefix_use_free(struct load_prefix_use *u)
{
	free(u->prefix);
	free(u->first);
	u->prefix = NULL;
	u->first = NULL;
	u->n = 0;
}
