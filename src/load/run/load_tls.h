/* SPDX-License-Identifier: Apache-2.0 */
/* https targets: the OpenSSL client context of a run, with the semantics
 * of tokentap's https upstreams (src/proxy/tls.c): TLS 1.2 or later, the
 * certificate verified against the system store or --cacert's file (or
 * not at all with --insecure, with a warning), the name checked and sent
 * as SNI (--sni, else the URL's host; an IP literal is checked against the
 * certificate's IP entries and sends no SNI, RFC 6066 §3), ALPN http/1.1,
 * and the last session resumed by the next connection. */
#ifndef TOKENTAP_LOAD_TLS_H
#define TOKENTAP_LOAD_TLS_H

#include <openssl/ssl.h>

#include "load_conf.h"

struct load_tls {
	SSL_CTX *ctx;
	const char *name;           /* checked and sent (SNI) */
	SSL_SESSION *session;       /* to resume */
	int reported;               /* a handshake failure was logged */
};

/* Prepares t for c's target (nothing for http). Returns 0, or -1 after
 * logging why (a CA file that does not load). */
int load_tls_init(struct load_tls *t, const struct load_conf *c);
void load_tls_free(struct load_tls *t);
/* A client SSL for one connection, NULL when OpenSSL fails. */
SSL *load_tls_ssl(struct load_tls *t);
/* A connection's handshake succeeded: its session is the one to resume. */
void load_tls_connected(struct load_tls *t, SSL *ssl);
/* A connection failed: logs why once per run (a certificate that does not
 * verify fails every request the same way). err: the bufferevent's
 * OpenSSL error, 0 if none. */
void load_tls_failed(struct load_tls *t, SSL *ssl, unsigned long err);

#endif
