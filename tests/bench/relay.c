/* SPDX-License-Identifier: Apache-2.0 */
/* The floor of make bench: a bare TCP relay that does what every proxy
 * must and nothing else. Per connection it accepts, connects to the
 * upstream, and copies bytes both ways with one recv(2) and one send(2) per
 * readiness; a send that would block stops reading the other side until
 * the rest is out (backpressure). No parsing, no logs, no timers. One
 * thread and one epoll per worker, each with its own SO_REUSEPORT
 * listener, as tokentap's and nginx's workers.
 *
 *   relay LISTEN_PORT UPSTREAM_PORT [WORKERS]     (127.0.0.1 both)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (64 * 1024)

struct pair;
struct end {                     /* one socket and what waits to go to it */
	struct pair *p;
	int fd;
	unsigned events;             /* the epoll interest set now */
	char buf[BUF];               /* read from the other end, not yet sent */
	size_t off, len;
};
struct pair {
	struct end e[2];             /* 0: client, 1: upstream */
	int dead;
	struct pair *next_dead;
};

static int lport, uport;

/* An end is read while its peer has nothing waiting, written while it
 * has: backpressure in one rule. epoll_ctl only when that changes. */
static void interest(int ep, struct end *e, struct end *peer)
{
	unsigned want = (peer->len == 0 ? EPOLLIN : 0) | (e->len > 0 ? EPOLLOUT : 0);
	if (want == e->events)
		return;
	struct epoll_event ev = { .events = want, .data.ptr = e };
	epoll_ctl(ep, EPOLL_CTL_MOD, e->fd, &ev);
	e->events = want;
}

/* Sends what e holds: 0 sent or to be sent later, -1 on error. */
static int flush(struct end *e)
{
	ssize_t n = send(e->fd, e->buf + e->off, e->len - e->off, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == ENOTCONN ? 0 : -1;
	e->off += (size_t)n;
	if (e->off == e->len)
		e->off = e->len = 0;
	return 0;
}

/* One readiness of e: the rest of its buffer out, then one recv of what
 * it sent and one send of that to its peer. */
static int ready(struct end *e, struct end *peer, unsigned events)
{
	if ((events & EPOLLOUT) && e->len > 0 && flush(e) < 0)
		return -1;
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && peer->len == 0) {
		ssize_t n = recv(e->fd, peer->buf, BUF, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return -1;
		if (n > 0) {
			peer->len = (size_t)n;
			return flush(peer);
		}
	}
	return 0;
}

static int add(int ep, struct end *e)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = e };
	e->events = EPOLLIN;
	return epoll_ctl(ep, EPOLL_CTL_ADD, e->fd, &ev);
}

static void accept_one(int ep, int lfd)
{
	struct sockaddr_in up = { .sin_family = AF_INET, .sin_port = htons(uport),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	if (c < 0)
		return;
	int u = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pair *p = calloc(1, sizeof *p);
	if (u < 0 || p == NULL ||
	    (connect(u, (struct sockaddr *)&up, sizeof up) < 0 && errno != EINPROGRESS)) {
		close(c);
		if (u >= 0)
			close(u);
		free(p);
		return;
	}
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	p->e[0].p = p->e[1].p = p;
	p->e[0].fd = c;
	p->e[1].fd = u;
	add(ep, &p->e[0]);
	add(ep, &p->e[1]);
}

static void *worker(void *arg)
{
	(void)arg;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(lport),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, evs[256];

	setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 4096) < 0) {
		perror("relay: listen");
		exit(1);
	}
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		struct pair *dead = NULL;
		int n = epoll_wait(ep, evs, 256, -1);
		for (int i = 0; i < n; i++) {
			struct end *e = evs[i].data.ptr;
			if (e == NULL) {
				accept_one(ep, lfd);
				continue;
			}
			struct pair *p = e->p;
			struct end *peer = &p->e[e == &p->e[0]];
			if (p->dead)
				continue;
			if (ready(e, peer, evs[i].events) < 0) {
				/* one side is gone, so is the other; freed after
				 * the batch, which may name it again */
				close(p->e[0].fd);
				close(p->e[1].fd);
				p->dead = 1;
				p->next_dead = dead;
				dead = p;
				continue;
			}
			interest(ep, e, peer);
			interest(ep, peer, e);
		}
		while (dead != NULL) {
			struct pair *next = dead->next_dead;
			free(dead);
			dead = next;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: relay LISTEN_PORT UPSTREAM_PORT [WORKERS]\n");
		return 2;
	}
	lport = atoi(argv[1]);
	uport = atoi(argv[2]);
	int workers = argc > 3 ? atoi(argv[3]) : 2;
	signal(SIGPIPE, SIG_IGN);
	pthread_t t;
	for (int i = 1; i < workers; i++)
		pthread_create(&t, NULL, worker, NULL);
	worker(NULL);
	return 0;
}
