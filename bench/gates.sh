#!/usr/bin/env bash
# The funnel's gates side by side (issue 7): reserve decisions per second,
# win and sold-out paths, of
#
#   (a) the in-process gate            go test -bench ./memory/
#   (b) the Redis gate                 go test -bench ./redis/
#   (c) PostgreSQL conditional UPDATE on one row   go test -bench ./postgres/
#   (d) PostgreSQL SELECT ... FOR UPDATE, then UPDATE
#   (e) the raw Redis reference: redis-benchmark -c 50 running the design's
#       script (section 6.1, bench/design_reserve.lua) with EVALSHA
#
# all in the same run, interleaved round by round, so that the shared
# machine's load falls on each alike. Prints every run, the medians, and the
# ratios Redis gate / redis-benchmark, Redis gate / PG UPDATE and
# in-process / PG UPDATE (of the medians, and the median of each round's).
#
#   bench/gates.sh          # ROUNDS=3 BENCHTIME=2s REQUESTS=200000 CLIENTS=50
#   BASE=/tmp/main bench/gates.sh   # also (a) and (b) of the tree at BASE
#
# With BASE (a checkout of another commit, e.g. `git worktree add --detach
# /tmp/main main`), the gates of that tree run in the same rounds as this
# one's, alternately (the first in odd rounds, the second in even), and the
# medians and ratios are printed for both: a change measured against its
# baseline under the same load.
#
# Needs go, redis-cli and redis-benchmark (apt-get install -y redis-tools;
# the script installs it where apt-get can), PostgreSQL and Redis at
# TEST_DATABASE_URL and TEST_REDIS_URL. The reference's keys live under a
# scratch prefix and are deleted at the end, with the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
BENCHTIME=${BENCHTIME:-2s}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
export TEST_REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
# A missing database or Redis fails the run rather than skipping a row.
export CI=true

if ! command -v redis-benchmark >/dev/null; then
	echo "installing redis-tools for redis-benchmark" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-tools >/dev/null
fi
for tool in go redis-cli redis-benchmark; do
	command -v "$tool" >/dev/null || { echo "gates.sh: $tool is needed" >&2; exit 1; }
done

# redis-benchmark takes host and port, not a URL.
hostport=${TEST_REDIS_URL#redis://}
hostport=${hostport%%/*}
hostport=${hostport##*@}
rhost=${hostport%%:*}
rport=${hostport##*:}
[ "$rport" = "$hostport" ] && rport=6379
db=0
case $TEST_REDIS_URL in redis://*/[0-9]*) db=${TEST_REDIS_URL##*/} db=${db%%\?*} ;; esac
rcli() { redis-cli -u "$TEST_REDIS_URL" "$@"; }

work=$(mktemp -d)
suffix=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
# One hash tag, as the design's keys have.
stock="bench:gates:$suffix:{sale}:stock"
buyers="bench:gates:$suffix:{sale}:buyers"
cleanup() {
	rcli del "$stock" "$buyers" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "building the benchmarks..."
for pkg in memory redis postgres; do
	go test -c -o "$work/$pkg.test" "./$pkg/"
done
if [ -n "${BASE:-}" ]; then
	for pkg in memory redis; do
		(cd "$BASE" && go test -c -o "$work/base-$pkg.test" "./$pkg/")
	done
fi
sha=$(rcli -x script load <bench/design_reserve.lua)

declare -A runs
# gobench PKG BENCH=NAME...: one run of PKG's benchmarks BENCH (without
# the Benchmark prefix); records each one's decisions per second (from
# ns/op) under its NAME.
# With TREE=base it runs BASE's binary, in BASE's package directory.
gobench() {
	local pkg=$1 pattern="" out pair bin=$work/$1.test dir=$1
	shift
	if [ "${TREE:-}" = base ]; then bin=$work/base-$pkg.test dir=$BASE/$pkg; fi
	for pair in "$@"; do pattern="$pattern|^Benchmark${pair%%=*}\$"; done
	out=$(cd "$dir" && "$bin" -test.run '^$' -test.bench "${pattern#|}" -test.benchtime "$BENCHTIME")
	for pair in "$@"; do
		local bench=${pair%%=*} name=${pair#*=} ns ops
		ns=$(awk -v b="Benchmark$bench-" 'index($1, b) == 1 {print $3}' <<<"$out")
		[ -n "$ns" ] || { echo "no result for $bench in:" >&2; echo "$out" >&2; exit 1; }
		ops=$(awk -v ns="$ns" 'BEGIN {printf "%.0f", 1e9 / ns}')
		runs[$name]="${runs[$name]:-} $ops"
		printf '  %-22s %12s ops/s  (%s ns/op)\n' "$name" "$ops" "$ns"
	done
}

# reference NAME STOCK: one redis-benchmark run of the design's script on a
# stock of STOCK units, every request a new shopper.
reference() {
	local name=$1 ops
	rcli del "$buyers" >/dev/null
	rcli set "$stock" "$2" >/dev/null
	ops=$(redis-benchmark -h "$rhost" -p "$rport" --dbnum "$db" -c "$CLIENTS" -n "$REQUESTS" -r 100000000 -q \
		evalsha "$sha" 2 "$stock" "$buyers" "user:__rand_int__" |
		tr '\r' '\n' | awk '/requests per second/ {for (i = 1; i <= NF; i++) if ($i == "requests") v = $(i - 1)} END {print v}')
	[ -n "$ops" ] || { echo "redis-benchmark gave no figure" >&2; exit 1; }
	ops=$(awk -v v="$ops" 'BEGIN {printf "%.0f", v}')
	runs[$name]="${runs[$name]:-} $ops"
	printf '  %-22s %12s ops/s\n' "$name" "$ops"
}

for round in $(seq 1 "$ROUNDS"); do
	echo "round $round (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
	gates() { gobench memory ReserveWin=memory-win ReserveSoldOut=memory-soldout; gobench redis ReserveWin=redis-win ReserveSoldOut=redis-soldout; }
	based() { TREE=base gobench memory ReserveWin=base-memory-win ReserveSoldOut=base-memory-soldout; TREE=base gobench redis ReserveWin=base-redis-win ReserveSoldOut=base-redis-soldout; }
	if [ -z "${BASE:-}" ]; then
		gates
	elif [ $((round % 2)) = 1 ]; then
		based
		gates
	else
		gates
		based
	fi
	reference reference-win 1000000000
	reference reference-soldout 0
	gobench postgres ConditionalUpdate=update-win ConditionalUpdateSoldOut=update-soldout \
		SelectForUpdate=forupdate-win SelectForUpdateSoldOut=forupdate-soldout
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# ratio A B: median of A over median of B, and the median of the rounds'
# own ratios.
ratio() {
	local a=(${runs[$1]}) b=(${runs[$2]}) each="" i
	for i in "${!a[@]}"; do each="$each $(awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {printf "%.2f", x / y}')"; done
	awk -v x="$(median "${runs[$1]}")" -v y="$(median "${runs[$2]}")" -v m="$(median "$each")" -v e="$each" \
		'BEGIN {printf "%8.2fx  (median of the rounds: %.2fx;%s)", x / y, m, e}'
}

echo
echo "medians of $ROUNDS rounds, decisions per second:"
printf '  %-56s %12s %12s\n' "" "win" "sold out"
row() { printf '  %-56s %12s %12s\n' "$1" "$(median "${runs[$2-win]}")" "$(median "${runs[$2-soldout]}")"; }
row "(a) in-process gate (memory)" memory
row "(b) Redis gate (redis)" redis
row "(c) PostgreSQL conditional UPDATE, one row" update
row "(d) PostgreSQL SELECT ... FOR UPDATE, then UPDATE" forupdate
row "(e) redis-benchmark -c $CLIENTS, EVALSHA of the design's script" reference
if [ -n "${BASE:-}" ]; then
	row "(a) in-process gate, BASE ($BASE)" base-memory
	row "(b) Redis gate, BASE" base-redis
fi
echo
echo "ratios:"
for path in win soldout; do
	echo "  $path"
	echo "    Redis gate / redis-benchmark:  $(ratio "redis-$path" "reference-$path")"
	echo "    Redis gate / PG UPDATE:        $(ratio "redis-$path" "update-$path")"
	echo "    in-process / PG UPDATE:        $(ratio "memory-$path" "update-$path")"
	if [ -n "${BASE:-}" ]; then
		echo "    BASE's Redis gate / redis-benchmark: $(ratio "base-redis-$path" "reference-$path")"
		echo "    BASE's Redis gate / PG UPDATE:       $(ratio "base-redis-$path" "update-$path")"
		echo "    Redis gate / BASE's:           $(ratio "redis-$path" "base-redis-$path")"
		echo "    in-process gate / BASE's:      $(ratio "memory-$path" "base-memory-$path")"
	fi
done
