/* SPDX-License-Identifier: Apache-2.0 */
#include "tracectx.h"

#include <string.h>

/* A lower-case hex digit's value, or -1: upper case is not the format
 * (§3.2.2.3: "lowercase hex"), and a vendor that repaired it would pass on
 * an id nobody sent. */
static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* n bytes from 2n hex digits at p; 0, or -1 on a bad digit. */
static int unhex(const char *p, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int all_zero(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

int tracectx_parse(const char *v, size_t len, struct tracectx *t)
{
	uint8_t version;

	if (len < TRACECTX_LEN || unhex(v, &version, 1) < 0 || version == 0xff)
		return -1;
	/* version 00 is exactly 55 bytes; a later version may add fields
	 * after a '-', which a version 00 reader leaves alone */
	if (version == 0 ? len != TRACECTX_LEN :
	    len > TRACECTX_LEN && v[TRACECTX_LEN] != '-')
		return -1;
	if (v[2] != '-' || v[35] != '-' || v[52] != '-')
		return -1;
	if (unhex(v + 3, t->trace_id, 16) < 0 || unhex(v + 36, t->span_id, 8) < 0 ||
	    unhex(v + 53, &t->flags, 1) < 0)
		return -1;
	if (all_zero(t->trace_id, 16) || all_zero(t->span_id, 8))
		return -1;
	return 0;
}

void tracectx_hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

void tracectx_format(const uint8_t trace_id[16], const uint8_t span_id[8],
    uint8_t flags, char out[TRACECTX_LEN + 1])
{
	memcpy(out, "00-", 3);
	tracectx_hex(trace_id, 16, out + 3);
	out[35] = '-';
	tracectx_hex(span_id, 8, out + 36);
	out[52] = '-';
	tracectx_hex(&flags, 1, out + 53);
}

void tracectx_random(uint8_t *b, size_t n, uint64_t (*next)(uint64_t *), uint64_t *state)
{
	do {
		for (size_t i = 0; i < n; i += 8) {
			uint64_t r = next(state);
			for (size_t k = 0; k < 8 && i + k < n; k++)
				b[i + k] = (uint8_t)(r >> (8 * k));
		}
	} while (all_zero(b, n));
}
