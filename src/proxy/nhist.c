#include "nhist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PER_OCTAVE (1 << NHIST_SCHEMA)

/* bounds[j] = 2^(j / 2^schema) / 2: the fraction frexp gives is compared
 * with them, so values that are powers of two land exactly on an upper
 * bound (as client_golang places them). */
static double bounds[PER_OCTAVE];
static int bounds_ready;

static void bounds_init(void)
{
	for (int j = 0; j < PER_OCTAVE; j++)
		bounds[j] = exp2((double)j / PER_OCTAVE) / 2;
	bounds_ready = 1;
}

int32_t nhist_index(double v)
{
	int e, lo = 0, hi = PER_OCTAVE;
	double frac = frexp(v, &e);          /* v = frac * 2^e, frac in [0.5, 1) */

	if (!bounds_ready)
		bounds_init();
	while (lo < hi) {                    /* the first bound >= frac */
		int mid = (lo + hi) / 2;
		if (bounds[mid] < frac)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int32_t)lo + (int32_t)(e - 1) * PER_OCTAVE;
}

double nhist_upper(int32_t idx)
{
	return exp2((double)idx / PER_OCTAVE);
}

int nhist_record(struct nhist *h, double v)
{
	return nhist_record_n(h, v, 1);
}

int nhist_record_n(struct nhist *h, double v, uint64_t n)
{
	int32_t idx;
	uint32_t lo = 0, hi;

	if (!(v > 0)) {
		h->zero_count += n;
		return 0;
	}
	idx = nhist_index(v);
	hi = h->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (h->b[mid].idx < idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->n && h->b[lo].idx == idx) {
		h->b[lo].count += n;
		return 0;
	}
	if (h->n == h->cap) {
		uint32_t cap = h->cap ? h->cap * 2 : 8;
		struct nhist_bucket *nb = realloc(h->b, cap * sizeof *nb);
		if (nb == NULL)
			return -1;
		h->b = nb;
		h->cap = cap;
	}
	memmove(&h->b[lo + 1], &h->b[lo], (h->n - lo) * sizeof *h->b);
	h->b[lo].idx = idx;
	h->b[lo].count = n;
	h->n++;
	return 0;
}

void nhist_free(struct nhist *h)
{
	free(h->b);
	memset(h, 0, sizeof *h);
}
