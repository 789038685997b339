/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t util_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t util_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The civil date of day z since 1970-01-01 (proleptic Gregorian, UTC):
 * H. Hinnant's civil_from_days, in whole numbers. */
static void civil_from_days(uint64_t z, unsigned *y, unsigned *m, unsigned *d)
{
	uint64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = z / 146097;
	doe = z - era * 146097;                        /* [0, 146096] */
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);  /* [0, 365] */
	mp = (5 * doy + 2) / 153;                       /* March = 0 */
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = (unsigned)(yoe + era * 400 + (*m <= 2));
}

static char *digits(char *p, unsigned v, int n)
{
	for (int i = n - 1; i >= 0; i--, v /= 10)
		p[i] = (char)('0' + v % 10);
	return p + n;
}

/* Whole numbers, not gmtime_r and snprintf: it is in every access-log
 * line, where those two were a fifth of the line's cost. */
void util_rfc3339_ms(uint64_t wall_ms, char out[32])
{
	uint64_t secs = wall_ms / 1000, sod = secs % 86400;
	unsigned y, mo, d;
	char *p = out;

	civil_from_days(secs / 86400, &y, &mo, &d);
	p = digits(p, y % 10000u, 4);
	*p++ = '-';
	p = digits(p, mo, 2);
	*p++ = '-';
	p = digits(p, d, 2);
	*p++ = 'T';
	p = digits(p, (unsigned)(sod / 3600), 2);
	*p++ = ':';
	p = digits(p, (unsigned)(sod / 60 % 60), 2);
	*p++ = ':';
	p = digits(p, (unsigned)(sod % 60), 2);
	*p++ = '.';
	p = digits(p, (unsigned)(wall_ms % 1000), 3);
	*p++ = 'Z';
	*p = '\0';
}

/* Parses a non-negative decimal with an optional fraction; returns the end. */
static const char *parse_number(const char *s, double *out)
{
	char *end;
	if (!isdigit((unsigned char)*s) && *s != '.')
		return NULL;
	*out = strtod(s, &end);
	if (end == s || *out < 0)
		return NULL;
	return end;
}

int util_parse_duration_us(const char *s, uint64_t *out_us)
{
	double v;
	const char *unit = parse_number(s, &v);
	double mult;
	if (unit == NULL)
		return -1;
	if (strcmp(unit, "us") == 0)
		mult = 1;
	else if (strcmp(unit, "ms") == 0)
		mult = 1e3;
	else if (strcmp(unit, "s") == 0 || *unit == '\0')
		mult = 1e6;
	else if (strcmp(unit, "m") == 0)
		mult = 60e6;
	else if (strcmp(unit, "h") == 0)
		mult = 3600e6;
	else if (strcmp(unit, "d") == 0)     /* an SLO's period: 28d */
		mult = 86400e6;
	else
		return -1;
	v *= mult;
	if (v > 1e16)
		return -1;
	*out_us = (uint64_t)(v + 0.5);
	return 0;
}

void util_duration_text(uint64_t us, char *buf, size_t len)
{
	static const struct { uint64_t us; const char *unit; } units[] = {
		{ 86400000000ull, "d" }, { 3600000000ull, "h" }, { 60000000ull, "m" },
		{ 1000000ull, "s" },
		{ 1000ull, "ms" }, { 1ull, "us" },
	};
	size_t i = 0;

	if (us == 0) {
		snprintf(buf, len, "0s");
		return;
	}
	while (us % units[i].us != 0)
		i++;
	snprintf(buf, len, "%llu%s", (unsigned long long)(us / units[i].us),
	    units[i].unit);
}

int util_parse_size(const char *s, uint64_t *out)
{
	double v;
	const char *unit = parse_number(s, &v);
	double mult;
	if (unit == NULL)
		return -1;
	if (*unit == '\0' || strcmp(unit, "b") == 0)
		mult = 1;
	else if (strcmp(unit, "k") == 0 || strcmp(unit, "K") == 0)
		mult = 1024;
	else if (strcmp(unit, "m") == 0 || strcmp(unit, "M") == 0)
		mult = 1024 * 1024;
	else if (strcmp(unit, "g") == 0 || strcmp(unit, "G") == 0)
		mult = 1024.0 * 1024 * 1024;
	else
		return -1;
	v *= mult;
	if (v > 1e15)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

size_t util_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[64];
	if (la >= 64 || lb >= 64)
		return 64;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = tolower((unsigned char)a[i - 1]) !=
			    tolower((unsigned char)b[j - 1]);
			size_t best = diag + cost;
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

int util_split_hostport(const char *s, char *host, size_t hostlen, unsigned *port)
{
	const char *colon;
	size_t n;
	char *end;
	unsigned long p;

	if (*s == '[') {
		const char *close = strchr(s, ']');
		if (close == NULL || close[1] != ':')
			return -1;
		n = (size_t)(close - s - 1);
		if (n == 0 || n >= hostlen)
			return -1;
		memcpy(host, s + 1, n);
		host[n] = '\0';
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL)
			return -1;
		n = (size_t)(colon - s);
		if (n >= hostlen || memchr(s, ':', n) != NULL)
			return -1;
		memcpy(host, s, n);
		host[n] = '\0';
	}
	if (colon[1] == '\0')
		return -1;
	p = strtoul(colon + 1, &end, 10);
	if (*end != '\0' || p == 0 || p > 65535)
		return -1;
	*port = (unsigned)p;
	return 0;
}

int util_ct_equal(const void *a, size_t alen, const void *b, size_t blen)
{
	const unsigned char *x = a, *y = b;
	unsigned char diff = 0;
	if (alen != blen)
		return 0;
	for (size_t i = 0; i < alen; i++)
		diff |= x[i] ^ y[i];
	return diff == 0;
}

void *util_array_open(void *a, uint32_t *n, uint32_t *cap, size_t size,
    uint32_t at, uint32_t min_cap)
{
	char *p = a;

	if (*n == *cap) {
		uint32_t c = *cap ? *cap * 2 : min_cap;
		if ((p = realloc(a, (size_t)c * size)) == NULL)
			return NULL;
		*cap = c;
	}
	memmove(p + (size_t)(at + 1) * size, p + (size_t)at * size,
	    (size_t)(*n - at) * size);
	(*n)++;
	return p;
}
