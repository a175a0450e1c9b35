#!/usr/bin/env bash
# Installs the test dependencies, then runs every check and every test: the
# Python package installed and its tests, gofmt, go.mod tidy (`go mod tidy
# -diff` shows nothing), go vet, go build, the read-ahead tests with their
# invariants checked, the unit and end-to-end tests under the race detector,
# and once more with GOMAXPROCS=1. Runs all steps, prints a summary, and
# exits non-zero when any step failed.
#   bash scripts/test.sh            (extra `go test` flags: GO_TEST_FLAGS="-run X -v")
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$SHARDFS_ROOT"

bash scripts/install-deps.sh

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
run_step "go vet" go vet ./...
run_step "go build" go build ./...
run_step "go test -tags invariants (prefetch)" go test -tags invariants -count=1 ./prefetch/
run_step "go test -race" env SHARDFS_TEST_RACE=1 go test -race -count=1 -timeout 40m $GO_TEST_FLAGS ./...
run_step "go test GOMAXPROCS=1" env GOMAXPROCS=1 go test -count=1 -timeout 30m $GO_TEST_FLAGS ./...

printf '\n'
if [ ${#failed[@]} -gt 0 ]; then
	printf 'FAILED: %s\n' "${failed[*]}"
	exit 1
fi
echo "all checks passed"
