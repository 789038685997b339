#!/bin/sh
# The image's entrypoint: the admin endpoints stay on the container's
# loopback unless a token guards them (TOKENTAP_ADMIN_TOKEN). Arguments
# given to `docker run` replace the config choice.
[ $# -gt 0 ] && exec /usr/bin/tokentap "$@"
if [ -n "${TOKENTAP_ADMIN_TOKEN:-}" ]; then
	exec /usr/bin/tokentap -c /etc/tokentap/tokentap-admin.yaml
fi
exec /usr/bin/tokentap -c /etc/tokentap/tokentap.yaml
