/* SPDX-License-Identifier: Apache-2.0 */
#include "load_tls.h"

#include <arpa/inet.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "log.h"

static const unsigned char alpn_http11[] = "\x08http/1.1";

int load_tls_init(struct load_tls *t, const struct load_conf *c)
{
	char buf[256];

	memset(t, 0, sizeof(*t));
	if (!c->tls)
		return 0;
	t->name = c->sni != NULL ? c->sni : c->host;
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (t->ctx == NULL) {
		log_error("TLS: cannot create a context");
		return -1;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_alpn_protos(t->ctx, alpn_http11, sizeof alpn_http11 - 1);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	if (!c->tls_verify) {
		SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL);
		log_warn("--insecure: the target's certificate is not checked");
		return 0;
	}
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (c->ca_file != NULL ? SSL_CTX_load_verify_locations(t->ctx, c->ca_file,
	    NULL) != 1 : SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
		log_error("%s: %s", c->ca_file ? c->ca_file : "the system certificate store",
		    buf);
		ERR_clear_error();
		load_tls_free(t);
		return -1;
	}
	return 0;
}

void load_tls_free(struct load_tls *t)
{
	if (t->session != NULL)
		SSL_SESSION_free(t->session);
	if (t->ctx != NULL)
		SSL_CTX_free(t->ctx);
	memset(t, 0, sizeof(*t));
}

static int is_ip_literal(const char *host)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

SSL *load_tls_ssl(struct load_tls *t)
{
	SSL *ssl = SSL_new(t->ctx);
	int ok;

	if (ssl == NULL) {
		ERR_clear_error();
		return NULL;
	}
	if (is_ip_literal(t->name))
		ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), t->name) == 1;
	else
		ok = SSL_set_tlsext_host_name(ssl, t->name) == 1 &&
		    SSL_set1_host(ssl, t->name) == 1;
	if (!ok) {
		SSL_free(ssl);
		ERR_clear_error();
		return NULL;
	}
	if (t->session != NULL)
		SSL_set_session(ssl, t->session);
	return ssl;
}

void load_tls_connected(struct load_tls *t, SSL *ssl)
{
	SSL_SESSION *s = SSL_get1_session(ssl);

	if (s == NULL)
		return;
	if (t->session != NULL)
		SSL_SESSION_free(t->session);
	t->session = s;
}

void load_tls_failed(struct load_tls *t, SSL *ssl, unsigned long err)
{
	long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	char buf[256];

	ERR_clear_error();
	if (t->reported)
		return;
	t->reported = 1;
	if (v != X509_V_OK) {
		log_error("TLS to %s: certificate verification failed: %s (--cacert FILE, "
		    "or --insecure)", t->name, X509_verify_cert_error_string(v));
	} else if (err != 0) {
		ERR_error_string_n(err, buf, sizeof buf);
		log_error("TLS to %s: handshake failed: %s", t->name, buf);
	} else {
		log_error("TLS to %s: the connection closed during the handshake", t->name);
	}
}
