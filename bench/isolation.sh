#!/usr/bin/env bash
# Isolation shown with cores apart: the design's answer to "keep the rest of
# the store standing" is separation, so this gives the store's databases a
# core of their own and runs the rehearsal's quiet-sale probe beside a rush.
#
#  - PostgreSQL (the postmaster and every backend) and Redis, all threads,
#    are pinned to DB_CORE (default 0) with `taskset -a -p`;
#  - "flashsale serve" (on that Redis and PostgreSQL) and the crowd
#    ("flashsale rehearse --target", and the probe it runs as its own
#    process) to APP_CORE (default 1);
#  - the rehearsal runs USERS (100,000) shoppers for UNITS (2,000) units
#    against the server, with a quiet second sale and a plain query against
#    PostgreSQL beside the big one, their p99 taken idle first, then during
#    the sale and in its rush (as bench/rehearse.sh's part 2 does);
#  - at exit, whatever happened, every pinned process gets its affinity back
#    (backends PostgreSQL forked during the run too, from the postmaster's
#    mask), and the script says so.
#
#   bench/isolation.sh        # USERS=100000 UNITS=2000 DB_CORE=0 APP_CORE=1 REDIS_CORE=$DB_CORE CROWD_NICE=10
#
# REDIS_CORE=1 puts Redis beside the server instead: Redis carries the
# rush (the queue, the gate, the limits), so on PostgreSQL's core it is
# the rush's share of that core; beside the server, PostgreSQL has a core
# to itself.
#
# Pinning changes PostgreSQL and Redis for everyone on the machine for the
# run's minute or two; run it on a machine you may do that to. Needs root or
# the databases' owner (taskset -p on their processes), taskset, pgrep,
# psql and redis-cli, PostgreSQL and Redis at TEST_DATABASE_URL and
# TEST_REDIS_URL; everything it makes there (a schema, a Redis key prefix,
# the server) is removed at the end. Prints the report and keeps it in OUT
# (default ./isolation-out).
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-100000}
UNITS=${UNITS:-2000}
DB_CORE=${DB_CORE:-0}
APP_CORE=${APP_CORE:-1}
REDIS_CORE=${REDIS_CORE:-$DB_CORE}
# The crowd shares the server's core: at nice 10 once the probe has its idle
# baseline (as bench/rehearse.sh), it takes the CPU the server leaves, as
# shoppers on machines of their own would; 0 leaves it at the server's.
CROWD_NICE=${CROWD_NICE:-10}
OUT=${OUT:-./isolation-out}
. bench/lib.sh
need isolation.sh taskset pgrep psql redis-cli

# The processes to pin: PostgreSQL's by its server binary's name (the
# postmaster, the oldest, and its children), Redis's as the one at
# REDIS_URL says (other Redis servers on the machine are left alone).
pg_pids() { pgrep -x postgres || true; }
postmaster=$(pgrep -o -x postgres || true)
[ -n "$postmaster" ] || { echo "isolation.sh: no postgres process on this machine to pin" >&2; exit 1; }
redis_pid=$(redis-cli -u "$REDIS_URL" info server | tr -d '\r' | awk -F: '/^process_id:/ {print $2}')
[ -n "$redis_pid" ] || { echo "isolation.sh: the Redis at $REDIS_URL does not say its process id" >&2; exit 1; }

# The affinity of every process pinned, to give back at exit.
declare -A saved=()
pg_mask=$(taskset -p "$postmaster" | awk '{print $NF}')
pin() { # pin CORE PID...: remember each PID's mask, then pin all its threads
	local core=$1 pid
	shift
	for pid in "$@"; do
		if [ -z "${saved[$pid]:-}" ]; then
			saved[$pid]=$(taskset -p "$pid" 2>/dev/null | awk '{print $NF}')
			[ -n "${saved[$pid]}" ] || { unset "saved[$pid]"; continue; }
		fi
		taskset -a -p -c "$core" "$pid" >/dev/null
	done
}
restore() {
	local pid n=0
	for pid in "${!saved[@]}"; do
		taskset -a -p "${saved[$pid]}" "$pid" >/dev/null 2>&1 && n=$((n + 1))
	done
	# Backends forked while the postmaster was pinned inherited its core:
	# they get the postmaster's own mask back.
	for pid in $(pg_pids); do
		[ -n "${saved[$pid]:-}" ] || { taskset -a -p "$pg_mask" "$pid" >/dev/null 2>&1 && n=$((n + 1)); }
	done
	echo "isolation.sh: affinity restored on $n processes (PostgreSQL's to mask $pg_mask, the others to what each had)"
}
# lib.sh's cleanup stops the server and drops the scratch schema; the
# affinity comes back after it, on any exit.
finish() {
	local rc=$?
	cleanup
	restore
	exit "$rc"
}
scratch isolation
trap finish EXIT
mkdir -p "$OUT"

echo "building..."
go build -o "$work/flashsale" ./cmd/flashsale
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

start server "$work/flashsale" serve --addr 127.0.0.1:0 --data-dir "$work/server" --redis-url "$REDIS_URL" \
	--redis-prefix "$prefix" --database-url "$dburl" --admin-token "$admin" --log-level warn

# shellcheck disable=SC2046 # one PID a word
pin "$DB_CORE" $(pg_pids)
echo "pinned to core $DB_CORE: PostgreSQL, ${#saved[@]} processes, all threads"
pin "$REDIS_CORE" "$redis_pid"
echo "pinned to core $REDIS_CORE: Redis (pid $redis_pid), all threads"
pin "$APP_CORE" "$server_pid"
echo "pinned to core $APP_CORE: the server (pid $server_pid), all threads, and the crowd with its probe (started there)"
for pid in "$postmaster" "$redis_pid" "$server_pid"; do
	echo "  $(taskset -p "$pid")"
done

echo
echo "== against a server on Redis and PostgreSQL, cores apart: $USERS shoppers, $UNITS units, a quiet sale beside"
# The crowd is started on its core, so the probe it forks is there too.
taskset -c "$APP_CORE" "$work/flashsale" rehearse --target "$server_url" --admin-token "$admin" \
	--users "$USERS" --units "$UNITS" --seed 2 --no-progress --quiet-sale --plain-query-url "$dburl" \
	--crowd-nice "$CROWD_NICE" --report "$OUT/isolation.html" 2>&1 | tee "$OUT/isolation.txt"
