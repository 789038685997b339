/* SPDX-License-Identifier: Apache-2.0 */
/* sd_notify(3) by hand: one AF_UNIX datagram per message to the socket
 * systemd names in $NOTIFY_SOCKET. A socket per call keeps this stateless
 * and thread-safe; messages are rare (start, reload, stop). */
#include "sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* Fills sa from $NOTIFY_SOCKET. Returns its length, 0 when unset, -1 when
 * unusable. */
static int notify_address(struct sockaddr_un *sa, socklen_t *len)
{
	const char *name = getenv("NOTIFY_SOCKET");
	size_t n;

	if (name == NULL || name[0] == '\0')
		return 0;
	n = strlen(name);
	/* vsock: and other schemes of newer systemd are not used by Debian 12's */
	if (name[0] != '/' && name[0] != '@') {
		log_warn("sdnotify: NOTIFY_SOCKET=%s: not a path or an abstract name", name);
		return -1;
	}
	/* a path needs room for its NUL; an abstract name has none */
	if (n >= sizeof sa->sun_path + (name[0] == '@')) {
		log_warn("sdnotify: NOTIFY_SOCKET is too long (%zu bytes)", n);
		return -1;
	}
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, name, n);
	if (name[0] == '@')
		sa->sun_path[0] = '\0';
	/* an abstract name is exactly its n bytes: trailing NULs would be part of it */
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
	return 1;
}

int sdnotify_send(const char *state)
{
	struct sockaddr_un sa;
	socklen_t salen = 0;
	ssize_t sent;
	int fd = -1, rc = -1;
	int have = notify_address(&sa, &salen);

	if (have <= 0)
		return have;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_warn("sdnotify: socket: %s", strerror(errno));
		goto out;
	}
	do
		sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		    (const struct sockaddr *)&sa, salen);
	while (sent < 0 && errno == EINTR);
	if (sent < 0) {
		log_warn("sdnotify: send to %s: %s", getenv("NOTIFY_SOCKET"), strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

int sdnotify_sendf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf) {
		log_warn("sdnotify: message too long (%d bytes)", n);
		return -1;
	}
	return sdnotify_send(buf);
}

int sdnotify_reloading(void)
{
	return sdnotify_sendf("RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)util_now_us());
}
