#!/usr/bin/env bash
# Installs the test dependencies, then runs every check and every test: the
# Python package installed and its tests, gofmt, go.mod tidy (`go mod tidy
# -diff` shows nothing), go vet (the end-to-end files included), go build,
# the read-ahead tests with their invariants checked, the unit tests under
# the race detector and again with GOMAXPROCS=1, and the end-to-end tests
# (build tag e2e) once, against a daemon built with the race detector, with
# the tests that share no state running in parallel. Runs all steps, prints
# a summary with each step's time, and exits non-zero when any step failed.
#   bash scripts/test.sh            (extra `go test` flags: GO_TEST_FLAGS="-run X -v")
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

install_start=$SECONDS
bash scripts/install-deps.sh
timings=("$(printf '%5ds  %s' $((SECONDS - install_start)) "install-deps.sh")")

GO_TEST_FLAGS=${GO_TEST_FLAGS:-}
failed=()

run_step() {
	local name=$1
	shift
	printf '\n== %s\n' "$name"
	local start=$SECONDS
	if "$@"; then
		printf -- '-- %s: ok (%ds)\n' "$name" $((SECONDS - start))
	else
		printf -- '-- %s: FAILED (%ds)\n' "$name" $((SECONDS - start))
		failed+=("$name")
	fi
	timings+=("$(printf '%5ds  %s' $((SECONDS - start)) "$name")")
}

gofmt_clean() {
	local files
	files=$(find . \( -path ./.tools -o -path ./.work -o -path ./.git \) -prune -o -name '*.go' -print | xargs gofmt -l)
	[ -z "$files" ] || { printf 'not gofmt-ed:\n%s\n' "$files"; return 1; }
}

# The Python package is installed into $VENV_DIR and its tests import that
# copy (run from outside the checkout); the end-to-end tests' Python scripts
# use it too, through SHARDFS_PYTHON.
python_package() {
	install_python_package || return 1
	(cd / && SHARDFS_PACKAGE_SOURCE=$SHARDFS_ROOT/python "$VENV_DIR/bin/python" -m unittest discover -s "$SHARDFS_ROOT/python/tests" -t "$SHARDFS_ROOT/python/tests")
}
export SHARDFS_PYTHON=$VENV_DIR/bin/python

# shellcheck disable=SC2086
run_step "python package" python_package
run_step "gofmt" gofmt_clean
run_step "go mod tidy -diff" go mod tidy -diff
run_step "go vet" go vet -tags e2e ./...
run_step "go build" go build ./...
run_step "go test -tags invariants (prefetch)" go test -tags invariants -count=1 ./prefetch/
# Without the e2e tag, ./... is the unit tests alone.
run_step "go test -race (unit)" go test -race -count=1 -timeout 20m $GO_TEST_FLAGS ./...
run_step "go test GOMAXPROCS=1 (unit)" env GOMAXPROCS=1 go test -count=1 -timeout 20m $GO_TEST_FLAGS ./...
# The end-to-end tests wait mostly on subprocesses (mounts, MinIO, Python),
# so more of them run at once than there are cores.
run_step "go test -tags e2e (daemon -race)" env SHARDFS_TEST_RACE=1 go test -tags e2e -count=1 -parallel 4 -timeout 30m $GO_TEST_FLAGS ./test/

printf '\nstep times:\n'
printf '%s\n' "${timings[@]}"
printf '\n'
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[*]}"
	exit 1
fi
echo "all checks passed"
