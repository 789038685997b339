#!/bin/sh
# The image's entrypoint: the admin endpoints stay on the container's
# loopback unless a token guards them (TOKENTAP_ADMIN_TOKEN). Arguments
# given to `docker run` replace the config choice.
[ $# -gt 0 ] && exec /usr/bin/tokentap "$@"
if [ -n "${TOKENTAP_ADMIN_TOKEN:-}" ]; then
	exec /usr/bin/tokentap -c /etc/tokentap/tokentap-admin.yaml
fi
# a published port 9464 reaches nothing then: say so once, at start
echo "tokentap-entrypoint: the admin endpoints (/metrics, /stats, /ui) listen" \
    "on the container's loopback only; set TOKENTAP_ADMIN_TOKEN to serve them" \
    "on port 9464 behind that token" >&2
exec /usr/bin/tokentap -c /etc/tokentap/tokentap.yaml
