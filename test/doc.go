// Package test holds the end-to-end tests of shardfs: a real MinIO, real
// kernel FUSE mounts served by the shardfs binary in a subprocess, and real
// clients (find, tar, du, rclone, a PyTorch DataLoader) reading through them.
//
// The tests need /dev/fuse, fusermount3, rclone, Debian's python3-torch and
// the MinIO built by scripts/install-deps.sh. When any is missing they fail;
// they never skip. This package never reaches into the packages it tests:
// it drives the shardfs command as a user would.
//
// The test files carry the build tag e2e, so that `go test ./...` runs only
// the unit tests on any machine; scripts/test.sh runs this package with
// `-tags e2e`.
package test
