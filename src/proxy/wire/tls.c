/* SPDX-License-Identifier: Apache-2.0 */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "log.h"
#include "rxtime.h"
#include "util.h"

/* What tokentap keeps per SSL connection, in the SSL's ex data. */
struct tls_conn {
	uint64_t hs_start;
	tls_session_fn *kept;      /* a client's new sessions go there */
	void *arg;
};

static int ex_index = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static BIO_METHOD *stamped_method;
static int stamped_type;

static void conn_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx,
    long argl, void *argp)
{
	struct tls_conn *tc = ptr;
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	free(tc);
}

/* ---- the stamped socket BIO --------------------------------------------- */

/* What the BIO keeps: its descriptor and the receive times of its reads. */
struct stamped {
	int fd;
	int stamps;               /* ask for them (timestamps: kernel) */
	int64_t first, last;      /* CLOCK_REALTIME ns; 0: none */
	int fresh;                /* it read bytes since tls_rx_take / tls_read */
	int held;                 /* tls_read: no read of the socket (EAGAIN) */
	/* the doubt's floor (meter.h): the monotonic µs before the last
	 * read that found the socket drained, and what that was before the
	 * first read since tls_rx_take / tls_read (its bytes came after) */
	uint64_t drained, floor;
};

static int retry_errno(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
	    errno == EINPROGRESS || errno == ENOTCONN;
}

/* As OpenSSL's socket BIO reads and writes, and answers its controls
 * (bss_sock.c): EOF, retries, the descriptor. */
static int stamped_read(BIO *b, char *out, int len)
{
	struct stamped *d = BIO_get_data(b);
	int64_t t = 0;
	uint64_t before;
	ssize_t n;

	if (out == NULL || d == NULL)
		return 0;
	BIO_clear_retry_flags(b);
	if (d->held) {
		BIO_set_retry_read(b);
		return -1;
	}
	before = util_now_us();
	n = rxtime_recv(d->fd, out, (size_t)len, 0, d->stamps ? &t : NULL);
	if (n > 0) {
		if (!d->fresh)
			d->floor = d->drained;
		if (n < len)
			d->drained = before;
		d->fresh = 1;
		if (t != 0) {
			d->last = t;
			if (d->first == 0)
				d->first = t;
		}
		return (int)n;
	}
	if (n < 0 && retry_errno()) {
		d->drained = before;
		BIO_set_retry_read(b);
	} else if (n == 0)
		BIO_set_flags(b, BIO_FLAGS_IN_EOF);
	return (int)n;
}

static int stamped_write(BIO *b, const char *in, int len)
{
	struct stamped *d = BIO_get_data(b);
	ssize_t n;

	if (d == NULL)
		return -1;
	n = send(d->fd, in, (size_t)len, MSG_NOSIGNAL);
	BIO_clear_retry_flags(b);
	if (n <= 0 && retry_errno())
		BIO_set_retry_write(b);
	return (int)n;
}

static int stamped_puts(BIO *b, const char *str)
{
	return stamped_write(b, str, (int)strlen(str));
}

static long stamped_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct stamped *d = BIO_get_data(b);

	switch (cmd) {
	case BIO_C_GET_FD:
		if (d == NULL)
			return -1;
		if (ptr != NULL)
			*(int *)ptr = d->fd;
		return d->fd;
	case BIO_CTRL_GET_CLOSE:
		return BIO_get_shutdown(b);
	case BIO_CTRL_SET_CLOSE:
		BIO_set_shutdown(b, (int)num);
		return 1;
	case BIO_CTRL_DUP:
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_EOF:
		return BIO_test_flags(b, BIO_FLAGS_IN_EOF) != 0;
	default:
		return 0;
	}
}

static int stamped_destroy(BIO *b)
{
	struct stamped *d = BIO_get_data(b);

	if (d != NULL && BIO_get_shutdown(b) && d->fd >= 0)
		close(d->fd);
	free(d);
	BIO_set_data(b, NULL);
	return 1;
}

static void init_once(void)
{
	ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_free);
	stamped_type = BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR;
	stamped_method = BIO_meth_new(stamped_type, "tokentap stamped socket");
	if (stamped_method != NULL &&
	    (!BIO_meth_set_read(stamped_method, stamped_read) ||
	    !BIO_meth_set_write(stamped_method, stamped_write) ||
	    !BIO_meth_set_puts(stamped_method, stamped_puts) ||
	    !BIO_meth_set_ctrl(stamped_method, stamped_ctrl) ||
	    !BIO_meth_set_destroy(stamped_method, stamped_destroy))) {
		BIO_meth_free(stamped_method);
		stamped_method = NULL;
	}
}

static struct stamped *stamped_of(const SSL *ssl)
{
	BIO *b = SSL_get_rbio(ssl);
	return b != NULL && stamped_method != NULL && BIO_method_type(b) == stamped_type ?
	    BIO_get_data(b) : NULL;
}

int tls_stamp_reads(SSL *ssl, int fd, int stamps)
{
	struct stamped *d;
	BIO *b;

	pthread_once(&once, init_once);
	if (stamped_method == NULL || (d = calloc(1, sizeof *d)) == NULL)
		return -1;
	if ((b = BIO_new(stamped_method)) == NULL) {
		free(d);
		ERR_clear_error();
		return -1;
	}
	d->fd = fd;
	d->stamps = stamps;
	BIO_set_data(b, d);
	BIO_set_shutdown(b, BIO_NOCLOSE);
	BIO_set_init(b, 1);
	SSL_set_bio(ssl, b, b);
	return 0;
}

int64_t tls_rx_take(SSL *ssl)
{
	struct stamped *d = stamped_of(ssl);
	int64_t t;

	if (d == NULL)
		return 0;
	t = d->last;
	d->last = 0;
	d->fresh = 0;
	return t;
}

uint64_t tls_rx_floor(const SSL *ssl)
{
	struct stamped *d = stamped_of(ssl);
	return d != NULL ? d->floor : 0;
}

int64_t tls_rx_first(const SSL *ssl)
{
	struct stamped *d = stamped_of(ssl);
	return d != NULL ? d->first : 0;
}

void tls_rx_mark(SSL *ssl)
{
	struct stamped *d = stamped_of(ssl);
	if (d != NULL)
		d->first = 0;
}

int tls_read_ahead(SSL *ssl, int on)
{
	struct stamped *d = stamped_of(ssl);

	if (d == NULL)
		return -1;
	SSL_set_read_ahead(ssl, on);
	/* what was read until now was the bufferevent's, and timed there */
	d->fresh = 0;
	d->last = 0;
	return 0;
}

/* Why SSL_read gave no bytes, told without SSL_get_error: that one reads
 * the thread's error queue first, where a TLS client's failed SSL_write
 * may have left an error the bufferevent has not taken yet (tls_write_now
 * does not clear it), and a read that only waits would be taken for a
 * broken connection. OpenSSL's own state says it: waiting for the socket
 * (SSL_want_read / SSL_want_write, with the BIO's retry), the peer's
 * close_notify, the socket's EOF without one (allowed: a dirty shutdown,
 * as the bufferevent's allow_dirty_shutdown), else an error. */
static void read_end(SSL *ssl, struct tls_read *r)
{
	int sys = errno;
	BIO *b = SSL_get_rbio(ssl);

	if (SSL_want_read(ssl) && BIO_should_read(b)) {
		r->end = TLS_READ_WAIT;
		return;
	}
	if (SSL_want_write(ssl) && BIO_should_write(SSL_get_wbio(ssl))) {
		r->end = TLS_READ_WRITABLE;
		return;
	}
	if ((SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN) ||
	    BIO_test_flags(b, BIO_FLAGS_IN_EOF)) {
		r->end = TLS_READ_EOF;
	} else {
		r->end = TLS_READ_ERROR;
		r->err = ERR_peek_last_error();
		r->sys = sys;
	}
	/* (OpenSSL 3 queues an EOF without close_notify as an error too) */
	ERR_clear_error();
}

void tls_read(SSL *ssl, char *buf, size_t len, struct tls_read *r)
{
	struct stamped *d = stamped_of(ssl);
	int k = SSL_read(ssl, buf, (int)len);

	r->n = 0;
	r->err = 0;
	r->sys = 0;
	r->whole = 0;
	r->fresh = d->fresh;
	r->real = d->last;
	r->floor = d->floor;
	d->fresh = 0;
	d->last = 0;
	/* the rest is what OpenSSL holds: the records of the same read */
	d->held = 1;
	while (k > 0) {
		r->n += (size_t)k;
		if (r->n == len) {
			r->end = TLS_READ_FULL;
			break;
		}
		if (!SSL_has_pending(ssl)) {
			/* (with read-ahead, unprocessed bytes count as pending) */
			r->whole = r->fresh;
			r->end = TLS_READ_WAIT;
			break;
		}
		k = SSL_read(ssl, buf + r->n, (int)(len - r->n));
	}
	if (k <= 0)
		read_end(ssl, r);
	d->held = 0;
	/* a read that gave nothing yet (half a record; a write first) keeps
	 * its time for the bytes it brought: a later read may give them */
	if (r->n == 0) {
		d->fresh = r->fresh;
		d->last = r->real;
	}
}

size_t tls_write_now(SSL *ssl, const void *buf, size_t n)
{
	if (ssl == NULL || n == 0 || n > TLS_WRITE_NOW_MAX || !SSL_is_init_finished(ssl))
		return 0;
	/* No ERR_clear_error first (800 instructions, as much as the rest of
	 * an event's forwarding): this needs no SSL_get_error, and a write
	 * that must be retried adds nothing to the error queue; one that
	 * failed did, and the bufferevent's retry meets the same error. */
	/* no SSL_MODE_ENABLE_PARTIAL_WRITE: all of it, or nothing yet */
	return SSL_write(ssl, buf, (int)n) == (int)n ? n : 0;
}

void tls_queue(struct evbuffer *out, const void *buf, size_t n)
{
	struct evbuffer *one = evbuffer_new();

	/* a new buffer takes it in one chain, and an empty out takes that
	 * chain whole; no memory for it: as it comes */
	if (one == NULL || evbuffer_add(one, buf, n) < 0) {
		evbuffer_add(out, buf, n);
	} else {
		evbuffer_add_buffer(out, one);
	}
	if (one != NULL)
		evbuffer_free(one);
}

static struct tls_conn *conn_of(const SSL *ssl)
{
	return SSL_get_ex_data(ssl, ex_index);
}

static void info_cb(const SSL *ssl, int where, int ret)
{
	struct tls_conn *tc = conn_of(ssl);
	(void)ret;
	if ((where & SSL_CB_HANDSHAKE_START) && tc != NULL && tc->hs_start == 0)
		tc->hs_start = util_now_us();
	/* a request's first byte is read after the handshake */
	if (where & SSL_CB_HANDSHAKE_DONE)
		tls_rx_mark((SSL *)ssl);
}

/* TLS 1.3 sends tickets after the handshake: each goes where the
 * connection's maker keeps them, at once (not when the connection closes:
 * a pooled one may live for minutes, and every connection opened
 * meanwhile would make a full handshake, its certificate verified). */
static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
	struct tls_conn *tc = conn_of(ssl);
	if (tc == NULL || tc->kept == NULL)
		return 0;
	tc->kept(tc->arg, sess);
	return 1;      /* the reference is kept's */
}

static const unsigned char alpn_http11[] = "\x08http/1.1";

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
    const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, alpn_http11,
	    sizeof alpn_http11 - 1, in, inlen) == OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_OK;
	return SSL_TLSEXT_ERR_NOACK;    /* HTTP/1.1 all the same */
}

/* FILE:LINE:COL: where: what: OpenSSL's reason (no position when the
 * key is not in the file, e.g. a route with no tls map). */
static void ssl_errors(FILE *errs, const char *file, struct conf_pos at,
    const char *where, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();
	ERR_error_string_n(e, buf, sizeof buf);
	if (at.line > 0)
		fprintf(errs, "%s:%zu:%zu: ", file, at.line, at.col);
	else
		fprintf(errs, "%s: ", file);
	fprintf(errs, "%s: %s: %s\n", where, what, e ? buf : "failed");
	ERR_clear_error();
}

/* What every client context has: TLS 1.2 or later. */
static SSL_CTX *client_ctx_new(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx != NULL)
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	return ctx;
}

SSL_CTX *tls_client_ctx_new(void)
{
	SSL_CTX *ctx = client_ctx_new();

	if (ctx == NULL)
		return NULL;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return NULL;
	}
	return ctx;
}

/* A route's (who: "route NAME") or the OTLP exporter's ("otel") client
 * context from its tls map t. */
static SSL_CTX *client_ctx(const struct conf_tls *t, const char *who, const char *file,
    FILE *errs)
{
	SSL_CTX *ctx = client_ctx_new();
	char where[300];
	int ok = 1;

	snprintf(where, sizeof where, "%s: tls", who);
	if (ctx == NULL) {
		ssl_errors(errs, file, t->at, where, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof alpn_http11 - 1);
	SSL_CTX_set_info_callback(ctx, info_cb);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
	if (t->verify) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		if (t->ca_file != NULL) {
			if (SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL) != 1) {
				ssl_errors(errs, file, t->ca_file_at, where, t->ca_file);
				ok = 0;
			}
		} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
			ssl_errors(errs, file, t->at, where, "the system certificate store");
			ok = 0;
		}
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		log_warn("%s: tls.verify is false: the peer's certificate is not checked",
		    who);
	}
	if (t->client_cert != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, t->client_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, t->client_key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1)) {
		ssl_errors(errs, file, t->client_cert_at, where, "client_cert / client_key");
		ok = 0;
	}
	if (!ok) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static SSL_CTX *server_ctx(const struct conf_listen *l, const char *file, FILE *errs)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	char where[300];

	snprintf(where, sizeof where, "listen %s: tls", l->address);
	if (ctx == NULL) {
		ssl_errors(errs, file, l->tls_cert_at, where, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	SSL_CTX_set_info_callback(ctx, info_cb);
	if (SSL_CTX_use_certificate_chain_file(ctx, l->tls_cert) != 1) {
		ssl_errors(errs, file, l->tls_cert_at, where, l->tls_cert);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, l->tls_key, SSL_FILETYPE_PEM) != 1) {
		ssl_errors(errs, file, l->tls_key_at, where, l->tls_key);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ssl_errors(errs, file, l->tls_key_at, where, "the key does not match the certificate");
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

int tls_prepare(struct conf *c, FILE *errs)
{
	const char *file = c->path ? c->path : "config";
	char who[300];
	int bad = 0;

	pthread_once(&once, init_once);
	for (size_t i = 0; i < c->n_routes; i++) {
		struct conf_route *r = &c->routes[i];
		if (!r->upstream_tls || r->tls_ctx != NULL)
			continue;
		snprintf(who, sizeof who, "route %s", r->name);
		r->tls_ctx = client_ctx(&r->tls, who, file, errs);
		bad |= r->tls_ctx == NULL;
	}
	if (c->otel.tls_ctx == NULL && ((c->otel.traces > 0 && c->otel.traces_url != NULL &&
	    strncasecmp(c->otel.traces_url, "https:", 6) == 0) ||
	    (c->otel.metrics > 0 && c->otel.metrics_url != NULL &&
	    strncasecmp(c->otel.metrics_url, "https:", 6) == 0))) {
		c->otel.tls_ctx = client_ctx(&c->otel.tls, "otel", file, errs);
		bad |= c->otel.tls_ctx == NULL;
	}
	for (size_t i = 0; i < c->n_listen; i++) {
		struct conf_listen *l = &c->listen[i];
		if (l->tls_cert == NULL || l->tls_ctx != NULL)
			continue;
		l->tls_ctx = server_ctx(l, file, errs);
		bad |= l->tls_ctx == NULL;
	}
	return bad ? -1 : 0;
}

static int is_ip_literal(const char *host)
{
	unsigned char buf[16];
	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

/* RFC 6066 §3: SNI carries host names only, so an IP literal is checked
 * against the certificate's IP entries and sends none. */
static int set_peer_name(SSL *ssl, const char *name)
{
	if (is_ip_literal(name))
		return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ?
		    0 : -1;
	return SSL_set_tlsext_host_name(ssl, name) == 1 &&
	    SSL_set1_host(ssl, name) == 1 ? 0 : -1;
}

SSL *tls_client_ssl(SSL_CTX *ctx, const char *host)
{
	SSL *ssl = SSL_new(ctx);

	if (ssl != NULL && set_peer_name(ssl, host) < 0) {
		SSL_free(ssl);
		ssl = NULL;
	}
	if (ssl == NULL)
		ERR_clear_error();
	return ssl;
}

SSL *tls_client_new(const struct conf_route *r, const char *name, SSL_SESSION *resume,
    tls_session_fn *kept, void *arg)
{
	SSL *ssl = tls_client_ssl(r->tls_ctx, name);
	struct tls_conn *tc = calloc(1, sizeof *tc);

	if (ssl == NULL || tc == NULL)
		goto fail;
	tc->kept = kept;
	tc->arg = arg;
	SSL_set_ex_data(ssl, ex_index, tc);
	tc = NULL;
	if (resume != NULL)
		SSL_set_session(ssl, resume);
	return ssl;
fail:
	free(tc);
	SSL_free(ssl);
	ERR_clear_error();
	return NULL;
}

uint64_t tls_handshake_start(const SSL *ssl)
{
	struct tls_conn *tc = conn_of(ssl);
	return tc ? tc->hs_start : 0;
}

int tls_error_is_eof(unsigned long err)
{
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
	return ERR_GET_LIB(err) == ERR_LIB_SSL &&
	    ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
#else
	(void)err;
	return 0;
#endif
}

void tls_error_text(SSL *ssl, unsigned long err, char *buf, size_t len)
{
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	char e[200];

	if (v != X509_V_OK) {
		snprintf(buf, len, "certificate verification failed: %s",
		    X509_verify_cert_error_string(v));
		return;
	}
	if (err != 0) {
		ERR_error_string_n(err, e, sizeof e);
		snprintf(buf, len, "TLS handshake failed: %s", e);
		return;
	}
	snprintf(buf, len, "TLS handshake failed");
}
