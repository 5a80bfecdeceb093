#!/bin/bash
# Writes link/netpermd.order: the functions of BINARY that a typical session runs (start-up, queries, a
# subscriber, link and address changes, reloads, shutdown), found with callgrind. lld places them first and
# together, so the code a running daemon needs sits in few pages. Function names change as the code does; names
# that are gone are skipped at link time and new ones land unordered, so regenerate (`make orderfile`) after large
# changes: BENCHMARKS.md's idle RSS is the figure that drifts.
# Usage (root, valgrind installed): link/make-order.sh BINARY [OUT]
set -euo pipefail
bin=$(realpath "$1")
out=${2:-$(dirname "$0")/netpermd.order}
conf=$(dirname "$(realpath "$0")")/../config/run.conf
ns=netperm-order-$$
dir=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

ip netns add "$ns"
ip -n "$ns" link add v0 type veth peer name v1
ip -n "$ns" link set lo up
ip -n "$ns" link set v0 up
ip -n "$ns" link set v1 up
ip -n "$ns" addr add 10.9.0.1/24 dev v0
ip -n "$ns" route add default via 10.9.0.2 dev v0
cp "$conf" "$dir/conf"
mkdir "$dir/state"

ip netns exec "$ns" valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" --dump-instr=no \
    --compress-strings=no --compress-pos=no --demangle=no \
    "$bin" --socket "$dir/sock" --config "$dir/conf" --state-dir "$dir/state" --log-level info 2>"$dir/log" &
pid=$!
# Under valgrind start-up takes seconds; give it at most a minute.
for _ in $(seq 600); do [ -S "$dir/sock" ] && break; sleep 0.1; done
[ -S "$dir/sock" ] || { cat "$dir/log"; echo "make-order: the daemon did not start" >&2; exit 1; }

ask() { printf '%s\n' "$@" | socat -t 10 - "UNIX-CONNECT:$dir/sock" >/dev/null; }
# Waits (at most 30 s) until the subscriber has seen PATTERN.
seen() {
    for _ in $(seq 300); do grep -q "$1" "$dir/events" && return 0; sleep 0.1; done
    echo "make-order: the subscriber never saw $1" >&2; exit 1
}
# A subscriber that sees every change below, then leaves.
{ echo SUBSCRIBE; sleep 12; } | socat -t 10 - "UNIX-CONNECT:$dir/sock" >"$dir/events" &
sub=$!
seen '"snapshot"'
ask PING HELP STATUS LINKS QUERY "QUERY updater" "QUERY nosuchapp" APPS PROMPTS BOGUS
ip -n "$ns" link set v0 down
seen '"reason":"no-network"'
ask "WAIT updater 1"
ip -n "$ns" link set v0 up
ip -n "$ns" route add default via 10.9.0.2 dev v0
seen '"reason":"ok"'
ip -n "$ns" addr add 10.9.1.1/24 dev v1
ask RELOAD "QUERY socat" "WAIT updater 5"
touch "$dir/conf"
seen '"generation":3'
ask STATUS QUIT
wait "$sub"
kill -TERM "$pid"
wait "$pid" || true
pid=

# callgrind names each object once ("ob=") and then its functions ("fn="); keep the binary's, without
# callgrind's "'2" recursion suffixes and unnamed addresses.
awk -v bin="$bin" '/^ob=/ { mine = (substr($0, 4) == bin) } /^fn=/ && mine { print substr($0, 4) }' \
    "$dir/callgrind.out" | sed "s/'[0-9]*$//" | grep -v '^0x' | LC_ALL=C sort -u > "$out"
echo "make-order: $(wc -l < "$out") functions in $out"
