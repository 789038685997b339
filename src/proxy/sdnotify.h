/* SPDX-License-Identifier: Apache-2.0 */
/* Readiness and status for systemd (Type=notify) over sd_notify(3)'s plain
 * datagram protocol, without linking libsystemd. Outside systemd
 * (NOTIFY_SOCKET unset) every call does nothing and succeeds. */
#ifndef TOKENTAP_SDNOTIFY_H
#define TOKENTAP_SDNOTIFY_H

/* Sends state, newline-separated assignments such as "READY=1" or
 * "STOPPING=1\nSTATUS=draining", as one datagram to $NOTIFY_SOCKET (a path,
 * or an abstract name when it starts with '@').
 * Returns 0 when sent or when there is no socket, -1 on error (logged). */
int sdnotify_send(const char *state);

/* The same with printf formatting, for STATUS=... texts. */
int sdnotify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "RELOADING=1\nMONOTONIC_USEC=<now>": MONOTONIC_USEC is CLOCK_MONOTONIC,
 * which systemd (253+, Type=notify-reload) needs to match the reload to
 * the READY=1 that ends it. */
int sdnotify_reloading(void);

#endif
