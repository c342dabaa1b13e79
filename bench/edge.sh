#!/usr/bin/env bash
# The edge against a bare net/http server: status and ticket through
# "flashsale serve --role edge" in front of an origin on Redis and
# PostgreSQL, and a bare handler returning a small JSON body, loaded by the
# same wrk with the same threads, connections and requests, in the same
# run, interleaved round by round. Prints each run, the medians and the
# ratios; the target is edge >= 0.7 x bare.
#
# The machine is shared, so requests/s swing with whatever else runs.
# Two more figures steady the comparison: the median of each round's
# ratio (edge and bare measured back to back), and the CPU time the
# server under test spent per request (from /proc, which the load of
# other processes barely moves).
#
#   bench/edge.sh                 # ROUNDS=3 DURATION=10s CONNS=64 THREADS=2 USERS=2000
#
# Needs wrk (apt-get install -y wrk), psql and redis-cli, PostgreSQL and
# Redis at TEST_DATABASE_URL and TEST_REDIS_URL. Everything it makes (a
# schema, a Redis key prefix, processes, files) is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
USERS=${USERS:-2000}
SKU=bench

. bench/lib.sh
need edge.sh wrk psql redis-cli curl
scratch bench

echo "building..."
go build -o "$work/flashsale" ./cmd/flashsale
go build -o "$work/benchtool" ./bench/benchtool

keys="kb:$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"

start bare "$work/benchtool" bare --addr 127.0.0.1:0
start origin "$work/flashsale" serve --role origin --addr 127.0.0.1:0 --data-dir "$work/origin" \
	--redis-url "$REDIS_URL" --redis-prefix "$prefix" --database-url "$dburl" \
	--admin-token "$admin" --token-keys "$keys" --log-level warn
start edge "$work/flashsale" serve --role edge --addr 127.0.0.1:0 --data-dir "$work/edge" \
	--redis-url "$REDIS_URL" --redis-prefix "$prefix" --origin-url "$origin_url" --origin-token "$admin" \
	--token-keys "$keys" --log-level warn

# A sale open now, a million units, admitting one shopper a second: the
# shoppers of the benchmark wait, as most of a crowd does.
opens=$(date -u -d '-1 second' +%Y-%m-%dT%H:%M:%SZ)
curl -fsS -o /dev/null -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
	-d "{\"sku\":\"$SKU\",\"name\":\"Benchmark\",\"initialStock\":1000000,\"opensAt\":\"$opens\",\"admissionPerSecond\":1}" \
	"$origin_url/admin/sales"
for _ in $(seq 1 50); do
	curl -fsS -o /dev/null "$edge_url/sale/$SKU" 2>/dev/null && break
	sleep 0.1
done

"$work/benchtool" jwts --users "$USERS" --prefix "bench-" >"$work/jwts"
export SKU JWTS="$work/jwts"
# Every shopper of the pool takes a place once; the runs then measure the
# crowd asking again, as it does (the same place, never a better one).
wrk -t"$THREADS" -c"$CONNS" -d5s -s bench/ticket.lua "$edge_url" >/dev/null

# The polling shopper arrives after all of them, so it waits throughout.
jwt=$("$work/benchtool" jwts --users 1 --prefix "bench-poller-")
TICKET=$(curl -fsS -H "Authorization: Bearer $jwt" "$edge_url/sale/$SKU/ticket" | sed -E 's/.*"token":"([^"]+)".*/\1/')
POLLER_JWT=$jwt
export TICKET POLLER_JWT
state=$(curl -fsS "$edge_url/sale/$SKU/status?token=$TICKET")
echo "the poller's status: $state"
case $state in *'"waiting"'*) ;; *) echo "the poller is not waiting" >&2; exit 1 ;; esac

# cputicks PID: user + system CPU time of the process, in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

declare -A runs cpu ratios
# run NAME SCRIPT URL PID: one wrk run; records requests/s and the
# server's CPU microseconds per request in LAST and the tables; fails on
# any error.
run() {
	local name=$1 script=$2 url=$3 pid=$4 out rps before after n us
	before=$(cputicks "$pid")
	out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s "$script" "$url")
	after=$(cputicks "$pid")
	if grep -qE 'Non-2xx|Socket errors' <<<"$out"; then
		echo "$name: errors in the run:" >&2
		echo "$out" >&2
		exit 1
	fi
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	us=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$n" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
	runs[$name]="${runs[$name]:-} $rps"
	cpu[$name]="${cpu[$name]:-} $us"
	printf '  %-12s %9.0f req/s  %6.1f us CPU/request\n' "$name" "$rps" "$us"
	LAST=$rps
}

for round in $(seq 1 "$ROUNDS"); do
	echo "round $round (wrk -t$THREADS -c$CONNS -d$DURATION)"
	for route in status ticket; do
		run "bare-$route" "bench/$route.lua" "$bare_url" "$bare_pid"
		b=$LAST
		run "edge-$route" "bench/$route.lua" "$edge_url" "$edge_pid"
		ratios[$route]="${ratios[$route]:-} $(awk -v e="$LAST" -v b="$b" 'BEGIN {printf "%.2f", e / b}')"
	done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "medians of $ROUNDS runs:"
for name in bare-status edge-status bare-ticket edge-ticket; do
	printf '  %-12s %9.0f req/s  %6.1f us CPU/request   (req/s:%s)\n' "$name" \
		"$(median "${runs[$name]}")" "$(median "${cpu[$name]}")" "${runs[$name]}"
done
ok=true
for route in status ticket; do
	ratio=$(awk -v e="$(median "${runs[edge-$route]}")" -v b="$(median "${runs[bare-$route]}")" 'BEGIN {printf "%.2f", e / b}')
	paired=$(median "${ratios[$route]}")
	cpuratio=$(awk -v e="$(median "${cpu[edge-$route]}")" -v b="$(median "${cpu[bare-$route]}")" 'BEGIN {printf "%.2f", b / e}')
	verdict=ok
	awk -v r="$paired" 'BEGIN {exit !(r < 0.7)}' && { verdict="SHORT of 0.7"; ok=false; }
	echo "  $route through the edge: medians ${ratio}x the bare server; median of the rounds' ratios ${paired}x" \
		"(rounds:${ratios[$route]}); bare/edge CPU per request ${cpuratio}x: $verdict"
done
$ok
