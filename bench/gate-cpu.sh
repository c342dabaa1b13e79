#!/usr/bin/env bash
# The Redis gate's cost per decision, of this tree against another, on a
# Redis of the script's own (docs/benchmarks/gates.md, issue 24):
#
#   BASE=/tmp/main bench/gate-cpu.sh            # ROUNDS=5 WINS=50000 SOLDOUT=100000 PORT=6391
#
# It builds the redis package's test binary of this tree and of BASE (a
# checkout of the baseline, e.g. `git worktree add --detach /tmp/main
# main`), starts redis-server on PORT (no persistence), and runs
# BenchmarkReserveWin and BenchmarkReserveSoldOut of each alternately, the
# first to go changing each round, a fixed number of decisions a run. For
# each run it prints the wall time a decision (ns/op, 50 shoppers in
# flight), the script time a decision (INFO commandstats: EVALSHA and
# EVALSHA_RO) and the server's CPU time a decision (/proc utime + stime,
# 10 ms ticks). The server serves nothing else, so both are the gate's
# alone, and CPU time, unlike wall time, does not grow when a busy host
# takes the core away. Then the medians, and the medians of each round's
# this/BASE ratio. The server and the binaries go at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${BASE:?BASE must name a checkout of the baseline}"
ROUNDS=${ROUNDS:-5}
WINS=${WINS:-50000}
SOLDOUT=${SOLDOUT:-100000}
PORT=${PORT:-6391}
for tool in go redis-server redis-cli; do
	command -v "$tool" >/dev/null || { echo "gate-cpu.sh: $tool is needed" >&2; exit 1; }
done
if redis-cli -p "$PORT" ping >/dev/null 2>&1; then
	echo "gate-cpu.sh: something already answers on port $PORT; set PORT" >&2
	exit 1
fi

work=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
server=$!
cleanup() {
	kill "$server" 2>/dev/null || true
	wait "$server" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "building the benchmarks..."
go test -c -o "$work/this.test" ./redis/
(cd "$BASE" && go test -c -o "$work/base.test" ./redis/)

export TEST_REDIS_URL=redis://127.0.0.1:$PORT/0 CI=true
cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }
ticks=$(getconf CLK_TCK)
declare -A runs
# run TREE BENCH N: one run; records ns, script and cpu under TREE/BENCH.
run() {
	local tree=$1 bench=$2 n=$3 c0 c1 ns script cpu_us dir=redis
	[ "$tree" = base ] && dir=$BASE/redis
	redis-cli -p "$PORT" config resetstat >/dev/null
	c0=$(cpu)
	ns=$(cd "$dir" && "$work/$tree.test" -test.run '^$' -test.bench "^Benchmark$bench\$" -test.benchtime "${n}x" |
		awk '/^Benchmark/ {print $3}')
	c1=$(cpu)
	[ -n "$ns" ] || { echo "no result for $bench of $tree" >&2; exit 1; }
	script=$(redis-cli -p "$PORT" info commandstats |
		awk -F'[=,:]' -v n="$n" '/^cmdstat_evalsha(_ro)?:/ {t += $5} END {printf "%.2f", t / n}')
	cpu_us=$(awk -v a="$c0" -v b="$c1" -v n="$n" -v hz="$ticks" 'BEGIN {printf "%.2f", (b - a) * 1e6 / hz / n}')
	runs[$tree/$bench/ns]="${runs[$tree/$bench/ns]:-} $ns"
	runs[$tree/$bench/script]="${runs[$tree/$bench/script]:-} $script"
	runs[$tree/$bench/cpu]="${runs[$tree/$bench/cpu]:-} $cpu_us"
	printf '  %-5s %-15s %10s ns/op  %6s us script  %6s us cpu\n' "$tree" "$bench" "$ns" "$script" "$cpu_us"
}

for round in $(seq 1 "$ROUNDS"); do
	echo "round $round (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
	order="base this"
	[ $((round % 2)) = 0 ] && order="this base"
	for bench in ReserveWin ReserveSoldOut; do
		n=$WINS
		[ "$bench" = ReserveSoldOut ] && n=$SOLDOUT
		for tree in $order; do run "$tree" "$bench" "$n"; done
	done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "medians of $ROUNDS rounds, a decision (this / BASE; the median of the rounds' ratios):"
for bench in ReserveWin ReserveSoldOut; do
	for m in ns script cpu; do
		a=(${runs[this/$bench/$m]}) b=(${runs[base/$bench/$m]}) each=""
		for i in "${!a[@]}"; do each="$each $(awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {printf "%.2f", x / y}')"; done
		printf '  %-15s %-7s %10s / %-10s %sx  (%s)\n' "$bench" "$m" "$(median "${runs[this/$bench/$m]}")" \
			"$(median "${runs[base/$bench/$m]}")" "$(median "$each")" "${each# }"
	done
done
