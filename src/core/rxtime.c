/* SPDX-License-Identifier: Apache-2.0 */
#include "rxtime.h"
#include "net.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/errqueue.h>
#include <linux/net_tstamp.h>

/* The control data of one read: SCM_TIMESTAMPING's three timespecs (only
 * the first, the software stamp, is filled for software receive stamps). */
#define CONTROL_LEN CMSG_SPACE(sizeof(struct scm_timestamping))

int rxtime_enable(int fd)
{
	int flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	return setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags);
}

ssize_t rxtime_recv(int fd, void *buf, size_t len, int flags, int64_t *real_ns)
{
	union {
		char buf[CONTROL_LEN];
		struct cmsghdr align;
	} control;
	struct iovec iov = { buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = control.buf, .msg_controllen = sizeof control.buf };
	struct cmsghdr *cm;
	ssize_t n;

	if (real_ns == NULL) {
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		return net_recvmsg(fd, &msg, flags);
	}
	n = net_recvmsg(fd, &msg, flags);
	*real_ns = 0;
	/* the one control message a TCP read carries with these flags */
	if (n > 0 && !(msg.msg_flags & MSG_CTRUNC) && (cm = CMSG_FIRSTHDR(&msg)) != NULL &&
	    cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_TIMESTAMPING &&
	    cm->cmsg_len >= CMSG_LEN(sizeof(struct scm_timestamping))) {
		struct scm_timestamping ts;
		memcpy(&ts, CMSG_DATA(cm), sizeof ts);
		*real_ns = (int64_t)ts.ts[0].tv_sec * 1000000000 + ts.ts[0].tv_nsec;
	}
	return n;
}

void rxtime_clock_init(struct rxtime_clock *c)
{
	memset(c, 0, sizeof *c);
}

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int64_t dist(int64_t a, int64_t b)
{
	return a > b ? a - b : b - a;
}

uint64_t rxtime_mono_at(struct rxtime_clock *c, int64_t real_ns, uint64_t now_us,
    int64_t real_now_ns)
{
	int64_t now_ns = (int64_t)now_us * 1000;
	int64_t off = real_now_ns - now_ns, m_new, m_old, m;
	int new_ok, old_ok;

	if (c->sampled_us == 0) {
		c->offset_ns = off;
	} else if (dist(off, c->offset_ns) > RXTIME_STEP_NS) {
		c->before_ns = c->offset_ns;
		c->offset_ns = off;
		c->step_from_us = c->sampled_us;
		c->step_to_us = now_us;
		c->steps++;
	} else if (off < c->offset_ns) {
		/* a sample is late by the time between its two reads, never
		 * early: the smallest is the closest */
		c->offset_ns = off;
	}
	c->sampled_us = now_us;
	if (real_ns == 0)
		return 0;
	/* the stamp's own side of the last step: after it under the offset
	 * now (and not in the future), before it under the one before;
	 * neither or both: in doubt */
	m_new = real_ns - c->offset_ns;
	new_ok = (c->step_to_us == 0 || m_new >= (int64_t)c->step_to_us * 1000) &&
	    m_new > 0 && m_new <= now_ns + RXTIME_STEP_NS;
	m_old = real_ns - c->before_ns;
	old_ok = c->step_to_us != 0 && m_old <= (int64_t)c->step_from_us * 1000 &&
	    m_old > 0;
	if (new_ok == old_ok)
		goto unplaced;
	m = new_ok ? m_new : m_old;
	/* within the offset's own jitter of now: now */
	if (m > now_ns)
		m = now_ns;
	return (uint64_t)m / 1000;
unplaced:
	c->unplaced++;
	return 0;
}

/* The first sample, a step, or this thread was preempted between the
 * two clock reads: a pair read close together tells. Out of line: the
 * common case (rxtime_mono) then needs no frame of its own. */
static __attribute__((noinline)) uint64_t resample(struct rxtime_clock *c,
    int64_t real_ns)
{
	struct timespec r, m1, m2;

	for (int i = 0; i < 3; i++) {
		clock_gettime(CLOCK_MONOTONIC, &m1);
		clock_gettime(CLOCK_REALTIME, &r);
		clock_gettime(CLOCK_MONOTONIC, &m2);
		if (ns_of(&m2) - ns_of(&m1) < RXTIME_STEP_NS / 10)
			break;
	}
	return rxtime_mono_at(c, real_ns, (uint64_t)ns_of(&m1) / 1000, ns_of(&r));
}

uint64_t rxtime_mono(struct rxtime_clock *c, int64_t real_ns, uint64_t now_us)
{
	struct timespec r;
	int64_t real_now, now_ns, d, m;

	if (real_ns == 0)
		return 0;
	clock_gettime(CLOCK_REALTIME, &r);
	real_now = ns_of(&r);
	now_ns = (int64_t)now_us * 1000;
	d = real_now - now_ns - c->offset_ns;
	if (c->sampled_us == 0 || d > RXTIME_STEP_NS || d < -RXTIME_STEP_NS)
		return resample(c, real_ns);
	/* the common case, every read but the first: no step seen ever, the
	 * offset as sampled before (or closer), the stamp in the past */
	if (c->step_to_us == 0) {
		if (d < 0)
			c->offset_ns += d;
		c->sampled_us = now_us;
		m = real_ns - c->offset_ns;
		if (m <= now_ns && m > 0)
			return (uint64_t)m / 1000;
	}
	return rxtime_mono_at(c, real_ns, now_us, real_now);
}
