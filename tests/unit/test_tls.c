/* SPDX-License-Identifier: Apache-2.0 */
/* tls_read, the read of a TLS upstream's streaming body: the records of
 * one read of the socket at most (read-ahead), decrypted into one buffer;
 * what OpenSSL keeps for the next call, and how a read ends. The peer is
 * an OpenSSL server over memory BIOs, so that each test places the records
 * on the wire itself (several in one segment, half of one, a close_notify,
 * bytes that are no record). */

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "rxtime.h"
#include "tls.h"

#include "unit.h"

/* The peer (server, memory BIOs) and tokentap's side (client, stamped BIO
 * on the read end of a loopback TCP pair). TLS 1.3, or 1.2 where a test's
 * state says so. */
struct pair {
	int wire, fd;              /* the peer writes to wire; fd is read */
	SSL_CTX *sctx, *cctx;
	SSL *peer, *ssl;
	BIO *in, *out;             /* the peer's */
};

static X509 *self_signed(EVP_PKEY *k)
{
	X509 *x = X509_new();
	X509_NAME *n;

	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"t",
	    -1, -1, 0);
	X509_set_issuer_name(x, n);
	assert_true(X509_sign(x, k, EVP_sha256()) > 0);
	return x;
}

/* What the peer's OpenSSL wrote, sent as it is. */
static void flush_peer(struct pair *p)
{
	char buf[16384];
	int n;

	while ((n = BIO_read(p->out, buf, sizeof buf)) > 0)
		assert_int_equal(write(p->wire, buf, (size_t)n), n);
}

/* What tokentap's side wrote, to the peer's OpenSSL. */
static void feed_peer(struct pair *p)
{
	char buf[16384];
	ssize_t n;

	while ((n = recv(p->wire, buf, sizeof buf, MSG_DONTWAIT)) > 0)
		BIO_write(p->in, buf, (int)n);
}

static int setup(void **state)
{
	struct pair *p = calloc(1, sizeof *p);
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	X509 *x;
	int fds[2], i, done = 0;
	int tls12 = *state != NULL && *(int *)*state;

	assert_non_null(p);
	assert_non_null(k);
	x = self_signed(k);
	p->sctx = SSL_CTX_new(TLS_server_method());
	p->cctx = SSL_CTX_new(TLS_client_method());
	assert_int_equal(SSL_CTX_use_certificate(p->sctx, x), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(p->sctx, k), 1);
	SSL_CTX_set_num_tickets(p->sctx, 0);       /* no records after the handshake */
	if (tls12)
		SSL_CTX_set_max_proto_version(p->sctx, TLS1_2_VERSION);
	X509_free(x);
	EVP_PKEY_free(k);
	unit_tcp_pair(fds);
	p->wire = fds[0];
	p->fd = fds[1];
	fcntl(p->fd, F_SETFL, O_NONBLOCK);
	p->peer = SSL_new(p->sctx);
	p->in = BIO_new(BIO_s_mem());
	p->out = BIO_new(BIO_s_mem());
	SSL_set_bio(p->peer, p->in, p->out);
	SSL_set_accept_state(p->peer);
	p->ssl = SSL_new(p->cctx);
	assert_int_equal(tls_stamp_reads(p->ssl, p->fd, 1), 0);
	SSL_set_connect_state(p->ssl);
	for (i = 0; i < 100 && done != 3; i++) {
		done |= SSL_do_handshake(p->ssl) == 1;
		usleep(1000);
		feed_peer(p);
		done |= (SSL_do_handshake(p->peer) == 1) << 1;
		flush_peer(p);
	}
	assert_int_equal(done, 3);
	ERR_clear_error();
	assert_int_equal(tls_read_ahead(p->ssl, 1), 0);
	*state = p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	SSL_free(p->ssl);
	SSL_free(p->peer);
	SSL_CTX_free(p->sctx);
	SSL_CTX_free(p->cctx);
	close(p->wire);
	close(p->fd);
	free(p);
	return 0;
}

/* The records of text, as the peer would send them (one per call). */
static size_t seal(struct pair *p, const char *text, char *out, size_t cap)
{
	int n;

	assert_int_equal(SSL_write(p->peer, text, (int)strlen(text)), (int)strlen(text));
	n = BIO_read(p->out, out, (int)cap);
	assert_true(n > 0);
	return (size_t)n;
}

/* Bytes on the wire, and in tokentap's socket once this returns. */
static void put(struct pair *p, const char *bytes, size_t n)
{
	int have = 0, before = 0, i;

	ioctl(p->fd, FIONREAD, &before);
	assert_int_equal(write(p->wire, bytes, n), (ssize_t)n);
	for (i = 0; i < 1000 && (size_t)(have - before) < n; i++) {
		ioctl(p->fd, FIONREAD, &have);
		if ((size_t)(have - before) < n)
			usleep(100);
	}
}

static void put_sealed(struct pair *p, const char *text)
{
	char rec[20000];
	put(p, rec, seal(p, text, rec, sizeof rec));
}

static void fill(char *s, char c, size_t n)
{
	memset(s, c, n);
	s[n] = '\0';
}

static void test_one_read_brings_all_the_records_the_socket_has(void **state)
{
	struct pair *p = *state;
	char wire[3000], buf[65536];
	size_t n = 0;
	struct tls_read r;

	n += seal(p, "data: 1\n\n", wire + n, sizeof wire - n);
	n += seal(p, "data: 2\n\n", wire + n, sizeof wire - n);
	n += seal(p, "data: 3\n\n", wire + n, sizeof wire - n);
	put(p, wire, n);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 27);
	assert_memory_equal(buf, "data: 1\n\ndata: 2\n\ndata: 3\n\n", 27);
	assert_int_equal(r.end, TLS_READ_WAIT);
	assert_true(r.fresh);
	assert_true(r.real != 0);
	assert_false(SSL_has_pending(p->ssl));
	/* nothing more: a wait, and no time */
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_WAIT);
	assert_false(r.fresh);
}

/* A full buffer leaves the rest in OpenSSL, which the next call takes
 * without a read of the socket: those bytes came with the read before
 * (not fresh), and what the socket brought meanwhile waits for the call
 * after. */
static void test_a_full_buffer_leaves_the_rest_to_the_next_call(void **state)
{
	struct pair *p = *state;
	char a[1001], b[1001], c[1001], wire[4000], buf[65536];
	size_t n = 0;
	struct tls_read r;

	fill(a, 'a', 1000);
	fill(b, 'b', 1000);
	fill(c, 'c', 1000);
	n += seal(p, a, wire + n, sizeof wire - n);
	n += seal(p, b, wire + n, sizeof wire - n);
	n += seal(p, c, wire + n, sizeof wire - n);
	put(p, wire, n);
	tls_read(p->ssl, buf, 1500, &r);
	assert_int_equal(r.n, 1500);
	assert_int_equal(r.end, TLS_READ_FULL);
	assert_true(r.fresh);
	assert_true(SSL_has_pending(p->ssl));
	put_sealed(p, "data: later\n\n");
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 1500);
	assert_memory_equal(buf, b + 500, 500);
	assert_memory_equal(buf + 500, c, 1000);
	assert_false(r.fresh);
	assert_int_equal(r.end, TLS_READ_WAIT);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 13);
	assert_memory_equal(buf, "data: later\n\n", 13);
	assert_true(r.fresh);
}

/* Half a record: what came before it is read, the half waits in OpenSSL
 * (SSL_has_pending) for the rest, which a later read brings. */
static void test_half_a_record_waits_for_its_rest(void **state)
{
	struct pair *p = *state;
	char wire[3000], buf[65536];
	size_t n = 0, half;
	struct tls_read r;

	n += seal(p, "data: 1\n\n", wire + n, sizeof wire - n);
	half = n;
	n += seal(p, "data: 2\n\n", wire + n, sizeof wire - n);
	half += (n - half) / 2;
	put(p, wire, half);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_WAIT);
	assert_true(SSL_has_pending(p->ssl));
	put(p, wire + half, n - half);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_memory_equal(buf, "data: 2\n\n", 9);
	assert_true(r.fresh);
	assert_false(SSL_has_pending(p->ssl));
}

static void test_close_notify_ends_after_the_bytes_before_it(void **state)
{
	struct pair *p = *state;
	char wire[3000], buf[65536];
	size_t n;
	struct tls_read r;

	n = seal(p, "data: 1\n\n", wire, sizeof wire);
	SSL_shutdown(p->peer);
	n += (size_t)BIO_read(p->out, wire + n, (int)(sizeof wire - n));
	put(p, wire, n);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_EOF);
	assert_int_equal(ERR_peek_error(), 0);
}

/* The peer's FIN in tokentap's socket. A millisecond's sleep was not
 * always enough: a busy host's loopback delivers it in a softirq that can
 * run later (make test once read a wait where the end was due). */
static void wait_fin(struct pair *p)
{
	struct pollfd pf = { .fd = p->fd, .events = POLLRDHUP };

	for (int i = 0; i < 50 && !(pf.revents & POLLRDHUP); i++)
		assert_true(poll(&pf, 1, 100) >= 0);
	assert_true(pf.revents & POLLRDHUP);
}

/* The connection closed without close_notify: a dirty shutdown, allowed
 * (an end, not an error), once the bytes before it were read. */
static void test_a_close_without_close_notify_is_an_end(void **state)
{
	struct pair *p = *state;
	char buf[65536];
	struct tls_read r;

	put_sealed(p, "data: 1\n\n");
	shutdown(p->wire, SHUT_WR);
	wait_fin(p);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_WAIT);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_EOF);
	assert_int_equal(ERR_peek_error(), 0);
}

static void test_bytes_that_are_no_record_are_an_error(void **state)
{
	struct pair *p = *state;
	char buf[65536];
	/* an application data record of 32 bytes that no key made */
	static const char junk[] = "\x17\x03\x03\x00\x20xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	struct tls_read r;

	put(p, junk, sizeof junk - 1);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_ERROR);
	assert_true(r.err != 0);
	assert_int_equal(ERR_peek_error(), 0);
}

/* An error another connection left in the thread's queue (a TLS client's
 * failed SSL_write, not taken yet) does not make a read that waits look
 * like a broken one. */
static void test_a_stale_error_in_the_queue_is_not_this_reads(void **state)
{
	struct pair *p = *state;
	char buf[65536];
	struct tls_read r;

	ERR_raise(ERR_LIB_SSL, SSL_R_BAD_LENGTH);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_WAIT);
	put_sealed(p, "data: 1\n\n");
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_WAIT);
	ERR_clear_error();
}

/* tokentap's side of the socket cannot send: its send buffer fixed
 * (no autotuning) and filled to the last byte. */
static void fill_send_buffer(struct pair *p)
{
	char junk[65536];
	int small = 4096;
	size_t chunk;

	setsockopt(p->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
	memset(junk, 'j', sizeof junk);
	for (chunk = sizeof junk; chunk > 0; chunk /= 2)
		while (send(p->fd, junk, chunk, MSG_DONTWAIT) > 0)
			;
	assert_true(send(p->fd, junk, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
}

/* A broken record on a connection whose socket cannot send: an error,
 * not a wait for the socket to be writable. OpenSSL 3 tries its fatal
 * alert from inside SSL_read, and on a full socket it cannot leave; it
 * says nothing of a write to wait for then (had it, every later SSL_read
 * would fail the same way and a wait for writable would spin). */
static void test_a_broken_record_is_an_error_when_the_alert_cannot_leave(void **state)
{
	struct pair *p = *state;
	char buf[65536];
	static const char junk[] = "\x17\x03\x03\x00\x20xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	struct tls_read r;

	fill_send_buffer(p);
	put(p, junk, sizeof junk - 1);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_ERROR);
	assert_false(SSL_want_write(p->ssl));
	assert_true(r.err != 0);
	assert_int_equal(ERR_peek_error(), 0);
}

/* A TLS 1.3 KeyUpdate that asks for one back: OpenSSL 3 answers it with
 * its next write, not in the read, so a full socket does not stop the
 * read. */
static void test_a_keyupdate_is_answered_by_a_write_not_the_read(void **state)
{
	struct pair *p = *state;
	char buf[65536];
	struct tls_read r;

	fill_send_buffer(p);
	assert_int_equal(SSL_key_update(p->peer, SSL_KEY_UPDATE_REQUESTED), 1);
	put_sealed(p, "data: 1\n\n");      /* the KeyUpdate, then the record */
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_WAIT);
	assert_int_equal(SSL_get_key_update_type(p->ssl), SSL_KEY_UPDATE_NOT_REQUESTED);
}

/* A TLS 1.2 peer asks for a renegotiation: OpenSSL 3 starts it with
 * the client's next write (its ClientHello), not in a read, so the reads
 * go on, whether the socket could send or not. */
static void test_a_renegotiation_request_does_not_stop_the_reads(void **state)
{
	struct pair *p = *state;
	char wire[3000], buf[65536];
	size_t n;
	struct tls_read r;

	fill_send_buffer(p);
	assert_int_equal(SSL_renegotiate(p->peer), 1);
	SSL_do_handshake(p->peer);          /* the HelloRequest */
	n = (size_t)BIO_read(p->out, wire, sizeof wire);
	n += seal(p, "data: 1\n\n", wire + n, sizeof wire - n);
	put(p, wire, n);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_int_equal(r.end, TLS_READ_WAIT);
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.end, TLS_READ_WAIT);
	put_sealed(p, "data: 2\n\n");
	tls_read(p->ssl, buf, sizeof buf, &r);
	assert_int_equal(r.n, 9);
	assert_memory_equal(buf, "data: 2\n\n", 9);
	assert_true(r.fresh);
	assert_int_equal(r.end, TLS_READ_WAIT);
	assert_int_equal(ERR_peek_error(), 0);
}

int main(void)
{
	static int tls12 = 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_one_read_brings_all_the_records_the_socket_has, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_full_buffer_leaves_the_rest_to_the_next_call, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_half_a_record_waits_for_its_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_close_notify_ends_after_the_bytes_before_it, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_close_without_close_notify_is_an_end, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_bytes_that_are_no_record_are_an_error, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_stale_error_in_the_queue_is_not_this_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_broken_record_is_an_error_when_the_alert_cannot_leave, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_keyupdate_is_answered_by_a_write_not_the_read, setup, teardown),
		cmocka_unit_test_prestate_setup_teardown(
		    test_a_renegotiation_request_does_not_stop_the_reads, setup, teardown,
		    &tls12),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
