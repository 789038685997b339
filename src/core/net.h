/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime helpers every program needs once: descriptors, the event
 * base, the listening socket and its pause when accept(2) runs dry, the
 * reason phrases, a peer's address as text, and writing a socket
 * bufferevent's output now. */
#ifndef TOKENTAP_NET_H
#define TOKENTAP_NET_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct bufferevent;
struct event;
struct event_base;
struct sockaddr;

/* How long accepting stops after accept(2) ran out of descriptors. */
#define NET_ACCEPT_PAUSE_US 100000

/* Takes the hard limit of descriptors as the soft one: a stream holds one
 * or two, and the usual soft limit of 1024 is far too few. */
void net_raise_nofile(void);
/* Grows the process's descriptor table to hold want descriptors (at most
 * RLIMIT_NOFILE) now, before threads start; see net.c. */
void net_reserve_fds(unsigned long want);

/* recvmsg(2) and send(2) as the bare system calls: glibc's wrappers are
 * cancellation points, which cost an atomic compare-and-swap before and
 * after the call (some 60 instructions of the ~3,000 an event costs,
 * per read and its forward); tokentap's threads are never cancelled. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(SYS_recvmsg)
/* sanitizers check buffers in libc's wrappers (their interceptors), and
 * an ABI without the socket calls of its own goes through socketcall */
static inline ssize_t net_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return recvmsg(fd, msg, flags);
}

static inline ssize_t net_send(int fd, const void *buf, size_t len, int flags)
{
	return send(fd, buf, len, flags);
}
#else
static inline ssize_t net_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return syscall(SYS_recvmsg, fd, msg, flags);
}

static inline ssize_t net_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}
#endif

/* An event base with the event_config flags (EVENT_BASE_FLAG_*) the
 * program needs; 0 is libevent's default. NULL when libevent fails. */
struct event_base *net_base_new(int flags);

/* A non-blocking, close-on-exec TCP socket listening on host:port (host
 * "" for every address), with SO_REUSEADDR, and SO_REUSEPORT when
 * reuseport (each worker its own socket, the kernel spreading the
 * connections), listen(2)ing with backlog. A failure is logged as "what:
 * why". Returns the fd or -1. */
int net_listen(const char *host, unsigned port, int reuseport, int backlog,
    const char *what);
/* Is host:port free, no socket of any process bound there (SO_REUSEPORT
 * would let a second program share it silently)? 0, or -1 with the reason
 * logged under what. */
int net_address_free(const char *host, unsigned port, const char *what);

/* For an accept(2) that failed with err: when descriptors or memory ran
 * out (EMFILE, ENFILE, ENOBUFS, ENOMEM), a listener that stays readable
 * would spin, so this arms resume (a timer whose callback enables the
 * listeners again) for NET_ACCEPT_PAUSE_US, logs it (net_accept_log),
 * and returns 1: the caller then disables its listeners. 0 for any other
 * error. */
int net_accept_pause(struct event *resume, int err);

/* The accept errors' kind of log line (log.h's log_limited): clients in
 * numbers cause them, so at most 10 every 10 s, the others counted. */
struct log_limit;
extern struct log_limit net_accept_log;

/* A peer's IP address as text: an IPv4-mapped IPv6 address as the IPv4
 * one, "-" for a family that has none. */
void net_peer_ip(const struct sockaddr *sa, char *buf, size_t len);

/* The RFC 9110 reason phrase of status ("Content Too Large" for 413);
 * "OK" below 400 and "Error" from 400 for a status it does not know. */
const char *net_reason(unsigned status);

/* Writes what waits in a plain socket bufferevent's output now, in this
 * loop turn, instead of at its next EPOLLOUT; returns what is left. */
size_t net_write_now(struct bufferevent *bev);

#endif
