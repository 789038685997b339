/* SPDX-License-Identifier: Apache-2.0 */
#include "decode.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include "util.h"

/* What one call decodes into, before it is handed on. */
#define DECODE_CHUNK 16384

struct decoder {
	z_stream z;
	BrotliDecoderState *br;
	ZSTD_DCtx *zstd;
	size_t br_memory;       /* what the brotli decoder holds */
	enum decode_kind kind;
	int ready;              /* inflate set up (deflate: once its format is known) */
	int failed;
	int ended;              /* br: the stream ended; more bytes are an error */
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
	if (util_ieq(ce, len, "br"))
		return DECODE_BR;
	if (util_ieq(ce, len, "zstd"))
		return DECODE_ZSTD;
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

/* The brotli decoder's allocations, counted against DECODE_BR_MEMORY: past
 * it one fails, and so does the stream. */
struct counted {
	size_t size;
	max_align_t align[];
};

static void *br_alloc(void *opaque, size_t size)
{
	struct decoder *d = opaque;
	struct counted *c;

	if (size > DECODE_BR_MEMORY - d->br_memory ||
	    (c = malloc(sizeof *c + size)) == NULL)
		return NULL;
	c->size = size;
	d->br_memory += size;
	return c->align;
}

static void br_free(void *opaque, void *p)
{
	struct decoder *d = opaque;
	struct counted *c;

	if (p == NULL)
		return;
	c = (struct counted *)((char *)p - offsetof(struct counted, align));
	d->br_memory -= c->size;
	free(c);
}

struct decoder *decode_new(enum decode_kind k)
{
	struct decoder *d;

	if (k != DECODE_GZIP && k != DECODE_DEFLATE && k != DECODE_BR && k != DECODE_ZSTD)
		return NULL;
	d = calloc(1, sizeof *d);
	if (d == NULL)
		return NULL;
	d->kind = k;
	switch (k) {
	case DECODE_GZIP:
		if (start(d, 0) < 0)
			goto fail;
		break;
	case DECODE_BR:
		if ((d->br = BrotliDecoderCreateInstance(br_alloc, br_free, d)) == NULL)
			goto fail;
		break;
	case DECODE_ZSTD:
		if ((d->zstd = ZSTD_createDCtx()) == NULL ||
		    ZSTD_isError(ZSTD_DCtx_setParameter(d->zstd, ZSTD_d_windowLogMax,
		    DECODE_ZSTD_WINDOW_LOG)))
			goto fail;
		break;
	default:
		break;
	}
	return d;
fail:
	decode_free(d);
	return NULL;
}

/* Decodes all of p (br); 0, or -1 when the bytes are not brotli (or need
 * more than the bound). */
static int brotli_all(struct decoder *d, const unsigned char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg)
{
	unsigned char buf[DECODE_CHUNK];

	if (d->ended)
		return len > 0 ? -1 : 0;
	for (;;) {
		unsigned char *next_out = buf;
		size_t avail_out = sizeof buf;
		BrotliDecoderResult r = BrotliDecoderDecompressStream(d->br, &len, &p,
		    &avail_out, &next_out, NULL);

		if (avail_out < sizeof buf)
			out(arg, (const char *)buf, sizeof buf - avail_out);
		switch (r) {
		case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT:
			continue;
		case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT:
			return 0;
		case BROTLI_DECODER_RESULT_SUCCESS:
			d->ended = 1;
			return len > 0 ? -1 : 0;
		default:
			return -1;
		}
	}
}

/* Decodes all of p (zstd: one frame after another); 0 or -1. */
static int zstd_all(struct decoder *d, const unsigned char *p, size_t len,
    void (*out)(void *arg, const char *p, size_t n), void *arg)
{
	unsigned char buf[DECODE_CHUNK];
	ZSTD_inBuffer in = { p, len, 0 };

	for (;;) {
		ZSTD_outBuffer o = { buf, sizeof buf, 0 };
		size_t r = ZSTD_decompressStream(d->zstd, &o, &in);

		if (ZSTD_isError(r))
			return -1;
		if (o.pos > 0)
			out(arg, (const char *)buf, o.pos);
		/* all taken, and nothing more to give out of what was */
		if (in.pos == in.size && o.pos < o.size)
			return 0;
	}
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
	if (d->br != NULL || d->zstd != NULL) {
		if ((d->br != NULL ? brotli_all : zstd_all)(d, u, len, out, arg) < 0) {
			d->failed = 1;
			return -1;
		}
		return 0;
	}
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
	if (d->br != NULL)
		BrotliDecoderDestroyInstance(d->br);
	ZSTD_freeDCtx(d->zstd);
	free(d);
}
