#include "decode.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "util.h"

struct decoder {
	z_stream z;
	enum decode_kind kind;
	int ready;              /* inflate set up (deflate: once its format is known) */
	int failed;
	unsigned char lead[2];  /* deflate: its first bytes, until they tell */
	size_t n_lead;
};

enum decode_kind decode_kind(const char *ce, size_t len)
{
	if (ce == NULL)
		return DECODE_IDENTITY;
	while (len > 0 && (*ce == ' ' || *ce == '\t')) {
		ce++;
		len--;
	}
	while (len > 0 && (ce[len - 1] == ' ' || ce[len - 1] == '\t'))
		len--;
	if (len == 0 || util_ieq(ce, len, "identity"))
		return DECODE_IDENTITY;
	if (util_ieq(ce, len, "gzip") || util_ieq(ce, len, "x-gzip"))
		return DECODE_GZIP;
	if (util_ieq(ce, len, "deflate"))
		return DECODE_DEFLATE;
	return DECODE_UNSUPPORTED;
}

/* gzip: 16 + MAX_WBITS; deflate: the zlib format (RFC 9110 §8.4.1.2), or
 * the raw format some servers send, told apart by the zlib header's check
 * bits in the first two bytes. */
static int start(struct decoder *d, int raw)
{
	int bits = d->kind == DECODE_GZIP ? 16 + MAX_WBITS : raw ? -MAX_WBITS : MAX_WBITS;
	memset(&d->z, 0, sizeof d->z);
	if (inflateInit2(&d->z, bits) != Z_OK)
		return -1;
	d->ready = 1;
	return 0;
}

static int zlib_header(const unsigned char *b)
{
	return (b[0] & 0x0f) == Z_DEFLATED && ((b[0] << 8) | b[1]) % 31 == 0;
}

struct decoder *decode_new(enum decode_kind k)
{
	struct decoder *d;

	if (k != DECODE_GZIP && k != DECODE_DEFLATE)
		return NULL;
	d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->kind = k;
	if (k == DECODE_GZIP && start(d, 0) < 0) {
		free(d);
		return NULL;
	}
	return d;
}

/* Inflates all of p; 0, or -1 when the bytes are not of the coding. */
static int inflate_all(struct decoder *d, const unsigned char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg)
{
	unsigned char buf[16384];
	size_t made;
	int r;

	d->z.next_in = (unsigned char *)(uintptr_t)p;
	d->z.avail_in = (uInt)len;
	for (;;) {
		d->z.next_out = buf;
		d->z.avail_out = sizeof buf;
		r = inflate(&d->z, Z_SYNC_FLUSH);
		made = sizeof buf - d->z.avail_out;
		if (made > 0)
			out(arg, (const char *)buf, made);
		if (r == Z_STREAM_END) {
			/* a gzip body may hold several members */
			if (d->kind == DECODE_GZIP && d->z.avail_in > 0 &&
			    inflateReset(&d->z) == Z_OK)
				continue;
			return 0;
		}
		if (r == Z_BUF_ERROR && d->z.avail_in == 0)
			return 0;           /* all taken; more input will come */
		if (r != Z_OK && r != Z_BUF_ERROR)
			return -1;
		if (d->z.avail_in == 0 && d->z.avail_out != 0)
			return 0;
	}
}

int decode_feed(struct decoder *d, const char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg)
{
	const unsigned char *u = (const unsigned char *)p;

	if (d->failed)
		return -1;
	while (!d->ready && len > 0) {
		d->lead[d->n_lead++] = *u++;
		len--;
		if (d->n_lead == 2 && (start(d, !zlib_header(d->lead)) < 0 ||
		    inflate_all(d, d->lead, 2, out, arg) < 0)) {
			d->failed = 1;
			return -1;
		}
	}
	if (len > 0 && inflate_all(d, u, len, out, arg) < 0) {
		d->failed = 1;
		return -1;
	}
	return 0;
}

void decode_free(struct decoder *d)
{
	if (d == NULL)
		return;
	if (d->ready)
		inflateEnd(&d->z);
	free(d);
}
