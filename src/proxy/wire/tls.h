/* SPDX-License-Identifier: Apache-2.0 */
/* TLS with OpenSSL: contexts for https upstreams and TLS listeners, made
 * once per loaded config on the main thread, and the per-connection setup
 * (SNI, host-name verification, ALPN, session resumption). */
#ifndef TOKENTAP_TLS_H
#define TOKENTAP_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <event2/buffer.h>
#include <openssl/ssl.h>

#include "config.h"

/* Builds the SSL_CTX of every https route and TLS listener of c. Problems
 * (unreadable certificate, key not matching) are written to errs as
 * "FILE: where: message". Returns 0, or -1 when there was any. */
int tls_prepare(struct conf *c, FILE *errs);

/* A client SSL on ctx for a connection to host: SNI and the name to
 * verify (an IP literal is checked against the certificate's IP entries
 * and sends no SNI). NULL when OpenSSL fails. */
SSL *tls_client_ssl(SSL_CTX *ctx, const char *host);
/* Takes each resumable session a connection receives (TLS 1.3: the
 * tickets just after the handshake), a reference it owns. */
typedef void tls_session_fn(void *arg, SSL_SESSION *s);
/* tls_client_ssl on route r's context for a connection to a replica (the
 * name: route tls.sni, default the replica's host), with the session to
 * resume, if any; its sessions go to kept(arg) as they come, so that the
 * connections opened while it is still open resume too. */
SSL *tls_client_new(const struct conf_route *r, const char *name, SSL_SESSION *resume,
    tls_session_fn *kept, void *arg);
/* A client context that verifies peers against the system store (the
 * notifiers'), TLS 1.2 or later like the routes'. NULL when OpenSSL fails. */
SSL_CTX *tls_client_ctx_new(void);

/* The time (CLOCK_MONOTONIC µs) the handshake of ssl started, 0 if never. */
uint64_t tls_handshake_start(const SSL *ssl);

/* Kernel receive times under TLS (rxtime.h): the records' bytes arrive in
 * reads of a socket BIO of tokentap's own, which reads with recvmsg(2)
 * and keeps the kernel's receive time of its reads. OpenSSL reads a
 * record's 5-byte header and then its body, so the first read of a
 * request's first record is stamped with the segment that brought its
 * start. tls_stamp_reads puts it on ssl for fd (before a listener's
 * bufferevent is made, or on an upstream once connected, in place of
 * libevent's socket BIO; the descriptor stays the bufferevent's to close);
 * stamps: ask the kernel for them (0: a plain recv(2), timestamps: loop).
 * 0, or -1 when OpenSSL fails. */
int tls_stamp_reads(SSL *ssl, int fd, int stamps);
/* The receive time (CLOCK_REALTIME ns) of the newest bytes ssl read since
 * the last call (and forgotten), 0: no new read or no stamp. */
int64_t tls_rx_take(SSL *ssl);
/* The doubt's floor (meter.h) of the bytes since the last tls_rx_take:
 * the monotonic µs before the last read that had found the socket
 * drained before them (took less than it asked, or nothing); 0: none.
 * Asked before tls_rx_take. */
uint64_t tls_rx_floor(const SSL *ssl);
/* The receive time of the first read since tls_rx_mark (or since the
 * handshake ended), 0: none. */
int64_t tls_rx_first(const SSL *ssl);
void tls_rx_mark(SSL *ssl);

/* A TLS upstream's streaming body read by tokentap itself, as a plain
 * one's is (rxtime.h's one recvmsg(2) per readiness): tls_read_ahead(ssl,
 * 1) lets OpenSSL take all the socket has, up to its buffer, in one read
 * (else two reads a record: its header, then the rest), and tls_read
 * decrypts the records of that one read into one buffer. Off again (0)
 * when the connection goes back to its bufferevent, which reads only what
 * OpenSSL says is pending of the current record. -1: ssl does not read
 * through the stamped BIO (tls_stamp_reads). */
int tls_read_ahead(SSL *ssl, int on);
/* How a tls_read ended, after its bytes. */
enum tls_read_end {
	TLS_READ_WAIT,            /* for the socket to be readable: OpenSSL
	                           * holds no whole record */
	TLS_READ_FULL,            /* buf is full: OpenSSL may hold more */
	TLS_READ_WRITABLE,        /* for it to be writable: OpenSSL must write
	                           * first (a TLS 1.3 KeyUpdate's answer) */
	TLS_READ_EOF,             /* the peer closed: close_notify, or the
	                           * connection without one */
	TLS_READ_ERROR            /* a reset, a broken record: err, sys */
};
struct tls_read {
	size_t n;                 /* bytes in buf */
	int fresh;                /* they came with a read of the socket made
	                           * now; else OpenSSL held them from an
	                           * earlier one */
	int64_t real;             /* that read's receive time (tls_rx_take) */
	uint64_t floor;           /* ... and its doubt's floor (tls_rx_floor) */
	int whole;                /* fresh, and OpenSSL holds none of that
	                           * read's bytes (SSL_has_pending() is 0: no
	                           * record, not even part of one, is left):
	                           * the last byte of buf came in the last
	                           * bytes the read took, so in its newest
	                           * segment, the one real is the time of */
	enum tls_read_end end;
	unsigned long err;        /* TLS_READ_ERROR: OpenSSL's error, 0: none */
	int sys;                  /* ... and errno */
};
/* SSL_read into buf (len bytes at most) of what OpenSSL holds and of what
 * one read of the socket brings, at most one: the first SSL_read may read
 * it, the others take the records OpenSSL holds (its reads go no further:
 * EAGAIN), so that all of buf came with one read and has its time. Only
 * on an ssl that tls_read_ahead accepted. */
void tls_read(SSL *ssl, char *buf, size_t len, struct tls_read *r);

/* SSL_write of all of buf now, by a caller whose output holds nothing (so
 * no earlier write waits for its retry): n when it all went, else 0 (the
 * write must be retried, or failed). The caller then queues the same bytes
 * as one piece with tls_queue, and libevent's OpenSSL bufferevent retries
 * the write from there (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, which it sets)
 * or meets the error and reports it. At most TLS_WRITE_NOW_MAX bytes: the
 * bufferevent writes no more than that at once, and a retry must be as
 * long as the write it retries. Why: the bufferevent arms EPOLLOUT when
 * bytes are added to its empty output and disarms it once they are
 * written, two epoll_ctl(2) calls for each event forwarded. */
#define TLS_WRITE_NOW_MAX 16384
size_t tls_write_now(SSL *ssl, const void *buf, size_t n);
/* Adds buf to the empty out as one piece, so that a write tls_write_now
 * left to retry is retried with the same bytes. */
void tls_queue(struct evbuffer *out, const void *buf, size_t n);

/* Why the handshake or verification of ssl failed, for a 502 and the log. */
void tls_error_text(SSL *ssl, unsigned long err, char *buf, size_t len);
/* err is the peer's close without a close_notify (OpenSSL 3's unexpected
 * EOF), not a refusal. */
int tls_error_is_eof(unsigned long err);

#endif
