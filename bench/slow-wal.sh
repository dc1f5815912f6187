#!/usr/bin/env bash
# slow-wal.sh: runs a command (make bench-slow-wal: `make bench` with its producer pairs,
# enqueue and steady, and its backlog pairs) against a throwaway Postgres whose WAL flushes
# each take longer by a fixed delay, as on network block storage, where a flush takes a
# millisecond or more rather than a local disk's tenth of one. See docs/performance.md, "On a
# server whose WAL flushes are slow".
#
# The server runs under strace, which delays the return of every fdatasync (the WAL's flush,
# wal_sync_method's default on Linux) by DELAY_US microseconds and stops the server at no
# other call. It is started from the local server binaries (PG_BIN) with fsync on and the
# settings of the local server this project's benchmarks run on (autovacuum off, 128 MB of
# shared buffers), in a temporary directory removed on exit. As root, the server runs as the
# postgres user. The script prints what one commit costs on it, then runs the command with
# DATABASE_URL naming the server, and exits with the command's status.
#
# Usage: bench/slow-wal.sh COMMAND [ARG...]
# Environment: DELAY_US (1500), PORT (5499), PG_BIN (the newest /usr/lib/postgresql/*/bin).
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: bench/slow-wal.sh COMMAND [ARG...]" >&2; exit 2; }
DELAY_US=${DELAY_US:-1500}
PORT=${PORT:-5499}
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}

case $DELAY_US in '' | *[!0-9]*) echo "DELAY_US must be a whole number of microseconds, got '$DELAY_US'" >&2; exit 2 ;; esac
[ -x "$PG_BIN/initdb" ] || { echo "no Postgres server binaries in '$PG_BIN': set PG_BIN" >&2; exit 2; }
if ! command -v strace >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update -qq && apt-get install -y -qq strace >/dev/null
	else
		echo "strace is needed (apt-get install strace)" >&2
		exit 2
	fi
fi

dir=$(mktemp -d)
as=()
user=()
if [ "$(id -u)" = 0 ]; then # Postgres refuses to run as root
	chown postgres "$dir"
	as=(runuser -u postgres --)
	user=(-u postgres)
fi
tracer=
cleanup() {
	"${as[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	[ -n "$tracer" ] && wait "$tracer" 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

"${as[@]}" "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
strace -f -qq --seccomp-bpf -e trace=fdatasync -e inject=fdatasync:delay_exit="$DELAY_US" -o /dev/null "${user[@]}" \
	"$PG_BIN/postgres" -D "$dir/data" -p "$PORT" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$dir" \
	-c fsync=on -c synchronous_commit=on -c autovacuum=off -c shared_buffers=128MB -c max_connections=200 \
	>"$dir/server.log" 2>&1 &
tracer=$!
for _ in $(seq 100); do
	"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" && break
	kill -0 "$tracer" 2>/dev/null || { cat "$dir/server.log" >&2; exit 1; }
	sleep 0.2
done
"$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" || { echo "the server did not start in 20 s" >&2; cat "$dir/server.log" >&2; exit 1; }
export DATABASE_URL="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"

# What one commit costs on it: a single session inserting a row per transaction.
"$PG_BIN/psql" -q -d "$DATABASE_URL" -c 'CREATE TABLE commit_probe (x int)'
printf 'INSERT INTO commit_probe VALUES (1);\n' >"$dir/probe.sql"
"$PG_BIN/pgbench" -n -f "$dir/probe.sql" -T 3 -c 1 "$DATABASE_URL" 2>/dev/null |
	awk -v d="$DELAY_US" '/latency average/ { printf "one commit on this server (fdatasync delayed %d us): %s ms on average, one session\n", d, $4 }'
"$PG_BIN/psql" -q -d "$DATABASE_URL" -c 'DROP TABLE commit_probe'

"$@"
