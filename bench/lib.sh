# Shared by the bench scripts (sourced, not run): a scratch schema in
# PostgreSQL, a Redis key prefix and a work directory of the run's own,
# removed at exit with every process started through start.
#
#   need NAME TOOL...      fails unless every TOOL is installed
#   scratch NAME           sets work, suffix, schema, prefix, dburl, admin
#   start NAME CMD...      runs CMD in the background until it prints
#                          "listening on URL"; sets NAME_url and NAME_pid

DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}

need() {
	local name=$1 tool
	shift
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "$name: $tool is needed (wrk: apt-get install -y wrk)" >&2; exit 1; }
	done
}

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	psql "$DATABASE_URL" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
	redis-cli -u "$REDIS_URL" --scan --pattern "$prefix*" | xargs -r redis-cli -u "$REDIS_URL" del >/dev/null || true
	rm -rf "$work"
}

scratch() {
	work=$(mktemp -d)
	suffix=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	schema=${1}_$suffix
	prefix="$1:$suffix:"
	admin=admin-$suffix
	trap cleanup EXIT
	psql "$DATABASE_URL" -qc "CREATE SCHEMA $schema"
	case $DATABASE_URL in *\?*) dburl="$DATABASE_URL&search_path=$schema" ;; *) dburl="$DATABASE_URL?search_path=$schema" ;; esac
}

start() {
	local name=$1 url=""
	shift
	"$@" >"$work/$name.out" 2>"$work/$name.err" &
	pids+=($!)
	for _ in $(seq 1 100); do
		url=$(grep -o 'http://[0-9.:]*' "$work/$name.out" | head -1 || true)
		[ -n "$url" ] && break
		sleep 0.1
	done
	[ -n "$url" ] || { echo "$name did not start:" >&2; cat "$work/$name.err" >&2; exit 1; }
	printf -v "${name}_url" %s "$url"
	printf -v "${name}_pid" %s "${pids[-1]}"
	echo "$name: $url"
}
