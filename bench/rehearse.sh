#!/usr/bin/env bash
# The rehearsal at the real number, and against a server on the real
# components, in one run:
#
#  1. in process, the design's own sale: USERS (2,000,000) shoppers for
#     UNITS (10,000) units, on the embedded default, time compressed;
#  2. against "flashsale serve" on Redis and PostgreSQL over loopback:
#     TARGET_USERS (100,000) shoppers for TARGET_UNITS (2,000) units, with a
#     quiet second sale and a plain query beside the big one, their p99
#     compared with an idle baseline taken first (the probe in a process of
#     its own; the crowd at nice CROWD_NICE, 10, once the probe has its
#     baseline, so that it takes the CPU the server leaves, as shoppers on
#     machines of their own would).
#
#   bench/rehearse.sh        # USERS=2000000 UNITS=10000 TARGET_USERS=100000 TARGET_UNITS=2000 CROWD_NICE=10 EDGE=0
#
# SERVE_FLAGS adds flags to part 2's server (the origin, with EDGE=1), to
# try a setting: SERVE_FLAGS="--sale-max-in-flight 8".
#
# EDGE=1 runs part 2 against an origin (serve --role origin) with the
# waiting room at an edge (serve --role edge) in front of it, both on the
# same machine: the crowd's tickets, polls and admissions go to the edge.
#
# Prints each report and keeps them (with their HTML pages) in OUT
# (default ./rehearsal-out). Needs PostgreSQL and Redis at TEST_DATABASE_URL
# and TEST_REDIS_URL for the second part; everything it makes there (a
# schema, a Redis key prefix, the server) is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-2000000}
UNITS=${UNITS:-10000}
TARGET_USERS=${TARGET_USERS:-100000}
TARGET_UNITS=${TARGET_UNITS:-2000}
CROWD_NICE=${CROWD_NICE:-10}
EDGE=${EDGE:-0}
# Split into words on purpose: several flags may be given.
read -r -a serve_flags <<<"${SERVE_FLAGS:-}"
OUT=${OUT:-./rehearsal-out}
. bench/lib.sh
need rehearse.sh psql redis-cli
scratch rehearse
mkdir -p "$OUT"

echo "building..."
go build -o "$work/flashsale" ./cmd/flashsale
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 1. in process: $USERS shoppers, $UNITS units"
/usr/bin/time -f "wall %e s, CPU %U s user + %S s system, peak RSS %M KB" \
	"$work/flashsale" rehearse --users "$USERS" --units "$UNITS" --seed 1 --no-progress \
	--report "$OUT/in-process.html" 2>&1 | tee "$OUT/in-process.txt"

echo
edge=()
if [ "$EDGE" = 1 ]; then
	echo "== 2. against an origin and an edge on Redis and PostgreSQL: $TARGET_USERS shoppers, $TARGET_UNITS units, a quiet sale beside"
	keys="kr:$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
	start server "$work/flashsale" serve --role origin --addr 127.0.0.1:0 --data-dir "$work/server" --redis-url "$REDIS_URL" \
		--redis-prefix "$prefix" --database-url "$dburl" --admin-token "$admin" --token-keys "$keys" --log-level warn "${serve_flags[@]}"
	start edge "$work/flashsale" serve --role edge --addr 127.0.0.1:0 --data-dir "$work/edge" --redis-url "$REDIS_URL" \
		--redis-prefix "$prefix" --origin-url "$server_url" --origin-token "$admin" --token-keys "$keys" --log-level warn
	edge=(--edge "$edge_url")
else
	echo "== 2. against a server on Redis and PostgreSQL: $TARGET_USERS shoppers, $TARGET_UNITS units, a quiet sale beside"
	start server "$work/flashsale" serve --addr 127.0.0.1:0 --data-dir "$work/server" --redis-url "$REDIS_URL" \
		--redis-prefix "$prefix" --database-url "$dburl" --admin-token "$admin" --log-level warn "${serve_flags[@]}"
fi
"$work/flashsale" rehearse --target "$server_url" "${edge[@]}" --admin-token "$admin" --users "$TARGET_USERS" --units "$TARGET_UNITS" \
	--seed 2 --no-progress --quiet-sale --plain-query-url "$dburl" --crowd-nice "$CROWD_NICE" --report "$OUT/against-server.html" \
	2>&1 | tee "$OUT/against-server.txt"
