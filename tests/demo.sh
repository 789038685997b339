#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make demo: tokentap-mock (a healthy and a slow backend), tokentap in front
# of them (conf/demo.yaml), a short load from tokentap-load, then tokentap's
# own figures and the alert the slow route raised. Stops what it started.
#   DEMO_SECONDS=3 sh tests/demo.sh    (shorter scenarios, as the tests run it)
set -u
B=${TOKENTAP_BUILD:-build}
D=build/demo
SECS=${DEMO_SECONDS:-6}
mkdir -p "$D"
rm -f "$D"/*.jsonl "$D"/*.err
PIDS=""
cleanup() {
	[ -n "$PIDS" ] && kill $PIDS 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT INT TERM

wait_port() {
	i=0
	until python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "demo: nothing listens on port $1" >&2; exit 1; }
		sleep 0.05
	done
}

for p in 18000 18001 18080 19464; do
	if python3 -c "import socket; socket.create_connection(('127.0.0.1', $p), 0.2)" 2>/dev/null; then
		echo "demo: port $p is in use; stop what runs there first" >&2
		exit 1
	fi
done

"$B/tokentap-mock" -l 127.0.0.1:18000 --log "$D/mock.jsonl" 2>"$D/mock.err" &
PIDS="$PIDS $!"
"$B/tokentap-mock" -l 127.0.0.1:18001 --ttft 2500ms --tpot 40ms 2>"$D/mock-slow.err" &
PIDS="$PIDS $!"
"$B/tokentap" -c conf/demo.yaml 2>"$D/tokentap.err" &
PIDS="$PIDS $!"
wait_port 18000; wait_port 18001; wait_port 18080; wait_port 19464

echo "== tokentap listens on 127.0.0.1:18080; admin: http://127.0.0.1:19464/stats /metrics /alerts /ui"
echo "== client side: tokentap-load through tokentap (conf/demo-scenarios.yaml, ${SECS}s each)"
sed "s/duration: 6s/duration: ${SECS}s/" conf/demo-scenarios.yaml > "$D/scenarios.yaml"
"$B/tokentap-load" --scenarios "$D/scenarios.yaml"
echo
echo "== a slow backend behind route \"slow\" (TTFT 2.5 s): its alert should fire"
"$B/tokentap-load" -c 6 -n 12 --max-tokens 10 -H "X-Tenant-Id: team-batch" \
	http://127.0.0.1:18080/slow/v1/chat/completions >/dev/null 2>&1
sleep 2
echo
echo "== tokentap's own view (GET /stats?by=route,tenant)"
python3 tests/demo/stats_table.py http://127.0.0.1:19464 --by route,tenant
echo
echo "== tokentap's log"
grep -E "alert (firing|resolved)" "$D/tokentap.err" || echo "(no alert transitions logged)"
echo
echo "access log: $D/access.jsonl ($(wc -l < "$D/access.jsonl") requests)"
