#!/usr/bin/env bash
# A flake hunt: runs every unit test package COUNT times under the race
# detector, COUNT times with GOMAXPROCS=1, and COUNT times under the race
# detector while a CPU hog keeps every core busy; then every end-to-end test
# E2E_COUNT times (daemon built with -race, as scripts/test.sh runs them).
# Prints one table (test, runs per mode, failures), also written to
# .work/flakes/table.md, then the same by package (.work/flakes/packages.md),
# and exits non-zero when any run failed.
#   bash scripts/flakes.sh                       (COUNT=50 HOG_COUNT=COUNT E2E_COUNT=10)
#   COUNT=10 E2E_COUNT=2 bash scripts/flakes.sh  (a shorter hunt)
#   MODES="race hog" bash scripts/flakes.sh      (some of: race gomaxprocs1 hog e2e)
# Every run of every mode is recorded, failed or not; a mode that could not
# start (a build error) shows as a failed "(package run)" row.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

COUNT=${COUNT:-50}
HOG_COUNT=${HOG_COUNT:-$COUNT}
E2E_COUNT=${E2E_COUNT:-10}
MODES=${MODES:-race gomaxprocs1 hog e2e}
OUT=$WORK_DIR/flakes
mkdir -p "$OUT"
rm -f "$OUT"/*.json

hog_pids=()
stop_hog() {
	local pid
	for pid in "${hog_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	hog_pids=()
}
trap stop_hog EXIT

# start_hog spins one busy loop per core, so that every test runs on a
# machine with no idle core.
start_hog() {
	local i
	for ((i = 0; i < $(nproc); i++)); do
		(while :; do :; done) &
		hog_pids+=($!)
	done
}

# go_json MODE ARGS...: one `go test -json` run, its stream kept for the
# table; a failed run does not stop the hunt.
go_json() {
	local mode=$1
	shift
	log "flakes: $mode: go test $*"
	local start=$SECONDS
	go test -json "$@" >"$OUT/$mode.json" 2>"$OUT/$mode.stderr" || true
	log "flakes: $mode: $((SECONDS - start)) s"
}

go build -o "$OUT/flaketable" ./scripts/flaketable
# The timeouts bound a run that hangs; 50 runs of the slowest package under
# the race detector on a loaded 2-core machine stay well inside them.
for mode in $MODES; do
	case $mode in
	race) go_json race -race -count="$COUNT" -timeout 3h ./... ;;
	gomaxprocs1) GOMAXPROCS=1 go_json gomaxprocs1 -count="$COUNT" -timeout 3h ./... ;;
	hog)
		start_hog
		go_json hog -race -count="$HOG_COUNT" -timeout 3h ./...
		stop_hog
		;;
	e2e)
		bash scripts/install-deps.sh
		SHARDFS_TEST_RACE=1 go_json e2e -tags e2e -count="$E2E_COUNT" -parallel 4 -timeout 5h ./test/
		;;
	*) die "unknown mode $mode (race, gomaxprocs1, hog, e2e)" ;;
	esac
done

args=()
for mode in $MODES; do
	args+=("$mode=$OUT/$mode.json")
done
status=0
"$OUT/flaketable" "${args[@]}" >"$OUT/table.md" || status=$?
"$OUT/flaketable" -packages "${args[@]}" >"$OUT/packages.md" || true
cat "$OUT/table.md"
printf '\nBy package (also in %s):\n' "$OUT/packages.md"
cat "$OUT/packages.md"
printf '\nCOUNT=%s HOG_COUNT=%s E2E_COUNT=%s at %s on %s (%s cores)\n' "$COUNT" "$HOG_COUNT" "$E2E_COUNT" "$(git rev-parse --short HEAD)$(git diff --quiet || echo +changes)" "$(hostname)" "$(nproc)"
[ "$status" -eq 0 ] || log "flakes: some runs failed; the go test output is in $OUT/*.json and $OUT/*.stderr"
exit "$status"
