package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeMounter keeps a mount table in memory.
type fakeMounter struct {
	mu      sync.Mutex
	mounts  map[string]string   // target -> source
	args    map[string][]string // target -> mount command line
	env     map[string][]string // target -> daemon environment
	dead    map[string]bool     // targets whose daemon is gone
	calls   int                 // Mount calls
	failure error               // what Mount returns, when set
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{mounts: map[string]string{}, args: map[string][]string{}, env: map[string][]string{}, dead: map[string]bool{}}
}

func (f *fakeMounter) Mount(_ context.Context, _ string, args, env []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failure != nil {
		return f.failure
	}
	target, source := args[len(args)-1], args[len(args)-2]
	f.mounts[target], f.args[target], f.env[target] = source, args, env
	return nil
}

func (f *fakeMounter) Unmount(_ context.Context, target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.mounts, target)
	delete(f.dead, target)
	return nil
}

func (f *fakeMounter) Check(target string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead[target] {
		return errors.New("transport endpoint is not connected")
	}
	return nil
}

func (f *fakeMounter) Mounts() ([]Mount, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Mount
	for t, s := range f.mounts {
		out = append(out, Mount{Target: t, Source: s})
	}
	return out, nil
}

func (f *fakeMounter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mounts)
}

// fakeArgs stands in for the CLI's parser: options starting with "bad"
// fail with the line the CLI would print.
func fakeArgs(source, target string, options []string) ([]string, error) {
	for _, o := range options {
		if strings.HasPrefix(o, "bad") {
			return nil, errors.New(`unknown mount option "` + o + `"`)
		}
	}
	return append(append([]string{"mount"}, options...), source, target), nil
}

func newTestNode(t *testing.T, m *fakeMounter, root string) *Node {
	t.Helper()
	n, err := NewNode(Config{NodeID: "node-a", CacheRoot: root, Mounter: m, Args: fakeArgs})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func publishReq(volumeID, target string, vctx, secrets map[string]string) *csipb.NodePublishVolumeRequest {
	return &csipb.NodePublishVolumeRequest{
		VolumeId:   volumeID,
		TargetPath: target,
		VolumeCapability: &csipb.VolumeCapability{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		},
		VolumeContext: vctx,
		Secrets:       secrets,
		Readonly:      true,
	}
}

func unpublish(t *testing.T, n *Node, volumeID, target string) {
	t.Helper()
	if _, err := n.NodeUnpublishVolume(context.Background(), &csipb.NodeUnpublishVolumeRequest{VolumeId: volumeID, TargetPath: target}); err != nil {
		t.Fatalf("unpublish %s: %v", target, err)
	}
}

var vol1 = map[string]string{"source": "s3://data/train", "endpoint_url": "http://minio:9000", "cache_size": "1GiB", "csi.storage.k8s.io/pod.name": "p"}

func TestPublishIsIdempotent(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	target := filepath.Join(dir, "target")
	for i := range 2 {
		if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
			t.Fatalf("publish %d: %v", i+1, err)
		}
	}
	if m.calls != 1 || m.count() != 1 {
		t.Fatalf("two identical publishes made %d mount calls and %d mounts, want 1 and 1", m.calls, m.count())
	}
	args := m.args[target]
	for _, want := range []string{"endpoint_url=http://minio:9000", "cache_size=1GiB", "allow_other"} {
		if !slices.Contains(args, want) {
			t.Errorf("mount command line %q lacks %q", args, want)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "csi.storage.k8s.io") {
			t.Errorf("pod information reached the mount command line: %q", a)
		}
	}
}

func TestPublishRemountsADeadMount(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	target := filepath.Join(dir, "target")
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
		t.Fatal(err)
	}
	cacheDir := n.records[target].CacheDir
	m.mu.Lock()
	m.dead[target] = true
	m.mu.Unlock()
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
		t.Fatalf("publishing a volume whose daemon died: %v", err)
	}
	if m.calls != 2 || m.Check(target) != nil {
		t.Errorf("a dead mount was not mounted again (%d mount calls, check: %v)", m.calls, m.Check(target))
	}
	if n.records[target].CacheDir != cacheDir {
		t.Errorf("remount took cache dir %q, want the volume's own %q", n.records[target].CacheDir, cacheDir)
	}
}

func TestPublishOtherSettingsIsAlreadyExists(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	target := filepath.Join(dir, "target")
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{"source": "s3://data/train", "endpoint_url": "http://minio:9000", "cache_size": "2GiB"}
	for name, req := range map[string]*csipb.NodePublishVolumeRequest{
		"same volume, other settings": publishReq("v1", target, other, nil),
		"another volume":              publishReq("v2", target, vol1, nil),
	} {
		_, err := n.NodePublishVolume(context.Background(), req)
		if status.Code(err) != codes.AlreadyExists {
			t.Errorf("%s at a published target: got %v, want AlreadyExists", name, err)
		}
	}
	if m.calls != 1 {
		t.Errorf("conflicting publishes made %d mount calls, want 1", m.calls)
	}
}

func TestPublishInvalidArgumentLeavesNothing(t *testing.T) {
	t.Parallel()
	creds := map[string]string{"AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK"}
	cases := []struct {
		name     string
		vctx     map[string]string
		secrets  map[string]string
		failure  error
		wantLine string
	}{
		{"no source", map[string]string{"cache_size": "1GiB"}, nil, nil, "volume context has no source"},
		{"unknown option", map[string]string{"source": "s3://b", "bad_option": "1"}, nil, nil, `unknown mount option "bad_option=1"`},
		{"node path", map[string]string{"source": "s3://b", "cache_dir": "/etc"}, nil, nil, "volume context may not set cache_dir"},
		{"unknown secret key", vol1, map[string]string{"password": "x"}, nil, `secret key "password" is not one of`},
		{"half a secret", vol1, map[string]string{"AWS_ACCESS_KEY_ID": "AK"}, nil, "secret needs both"},
		{"mount fails", vol1, creds, &MountError{Line: "listing s3://data/train: access denied"}, "listing s3://data/train: access denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m, dir := newFakeMounter(), t.TempDir()
			m.failure = c.failure
			n := newTestNode(t, m, filepath.Join(dir, "cache"))
			target := filepath.Join(dir, "target")
			_, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, c.vctx, c.secrets))
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), c.wantLine) {
				t.Fatalf("got %v, want InvalidArgument starting %q", err, c.wantLine)
			}
			if strings.Contains(status.Convert(err).Message(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
			if m.count() != 0 || len(n.records) != 0 || len(n.claims) != 0 {
				t.Errorf("left behind: %d mounts, %d records, %d cache claims", m.count(), len(n.records), len(n.claims))
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Errorf("target directory left behind (stat: %v)", err)
			}
		})
	}
}

func TestSecretReachesOnlyTheEnvironment(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	n.env = []string{"PATH=/bin", "AWS_ACCESS_KEY_ID=node-key", "AWS_SESSION_TOKEN=node-token"}
	target := filepath.Join(dir, "target")
	secret := map[string]string{"AWS_ACCESS_KEY_ID": "vol-key", "AWS_SECRET_ACCESS_KEY": "vol-secret"}
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, secret)); err != nil {
		t.Fatal(err)
	}
	env := m.env[target]
	slices.Sort(env)
	want := []string{"AWS_ACCESS_KEY_ID=vol-key", "AWS_SECRET_ACCESS_KEY=vol-secret", "PATH=/bin"}
	if !slices.Equal(env, want) {
		t.Errorf("daemon environment %q, want %q (the node's session token must not mix with the volume's keys)", env, want)
	}
	for _, a := range m.args[target] {
		if strings.Contains(a, "vol-secret") || strings.Contains(a, "vol-key") {
			t.Errorf("a credential reached the command line: %q", a)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "cache", ".csi-state", "*"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if strings.Contains(string(raw), "vol-secret") {
			t.Errorf("%s holds the secret", f)
		}
	}
	// Without a secret the daemon gets the node's environment: its AWS chain.
	target2 := filepath.Join(dir, "target2")
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target2, vol1, nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.env[target2], n.env) {
		t.Errorf("without a secret the daemon got %q, want the node's %q", m.env[target2], n.env)
	}
}

func TestRestartFindsMounts(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	root := filepath.Join(dir, "cache")
	first := newTestNode(t, m, root)
	t1, t2, gone := filepath.Join(dir, "t1"), filepath.Join(dir, "t2"), filepath.Join(dir, "gone")
	for _, target := range []string{t1, t2, gone} {
		if _, err := first.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// The mount at "gone" disappears while no plugin runs.
	if err := m.Unmount(context.Background(), gone); err != nil {
		t.Fatal(err)
	}

	second := newTestNode(t, m, root)
	if len(second.records) != 2 {
		t.Fatalf("restarted plugin knows %d volumes, want the 2 still mounted", len(second.records))
	}
	if _, err := second.NodePublishVolume(context.Background(), publishReq("v1", t1, vol1, nil)); err != nil {
		t.Fatalf("publishing a found volume again: %v", err)
	}
	other := map[string]string{"source": "s3://data/other"}
	if _, err := second.NodePublishVolume(context.Background(), publishReq("v1", t2, other, nil)); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("other settings at a found volume's target: got %v, want AlreadyExists", err)
	}
	if m.calls != 3 {
		t.Errorf("restarted plugin mounted again: %d mount calls, want 3", m.calls)
	}
	// A third volume of the source must not take a cache dir a found
	// daemon still owns.
	t3 := filepath.Join(dir, "t3")
	if _, err := second.NodePublishVolume(context.Background(), publishReq("v1", t3, vol1, nil)); err != nil {
		t.Fatal(err)
	}
	if dirs := []string{second.records[t1].CacheDir, second.records[t2].CacheDir, second.records[t3].CacheDir}; dirs[2] == dirs[0] || dirs[2] == dirs[1] {
		t.Errorf("new volume shares a cache dir with a running one: %q", dirs)
	}
	for _, target := range []string{t1, t2, t3} {
		unpublish(t, second, "v1", target)
	}
	if m.count() != 0 {
		t.Errorf("%d mounts left after unpublishing all", m.count())
	}
	if files, _ := filepath.Glob(filepath.Join(root, ".csi-state", "*")); len(files) != 0 {
		t.Errorf("records left: %q", files)
	}
}

func TestUnpublishIsIdempotent(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	target := filepath.Join(dir, "target")
	unpublish(t, n, "v1", target) // never published
	if _, err := n.NodePublishVolume(context.Background(), publishReq("v1", target, vol1, nil)); err != nil {
		t.Fatal(err)
	}
	unpublish(t, n, "v1", target)
	unpublish(t, n, "v1", target)
	if m.count() != 0 {
		t.Errorf("still mounted after unpublish")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target directory not removed (stat: %v)", err)
	}
}

func TestCacheDirPerSource(t *testing.T) {
	t.Parallel()
	m, dir := newFakeMounter(), t.TempDir()
	n := newTestNode(t, m, filepath.Join(dir, "cache"))
	publish := func(target string, vctx map[string]string) string {
		t.Helper()
		if _, err := n.NodePublishVolume(context.Background(), publishReq("v", target, vctx, nil)); err != nil {
			t.Fatal(err)
		}
		return n.records[target].CacheDir
	}
	a := publish(filepath.Join(dir, "a"), vol1)
	b := publish(filepath.Join(dir, "b"), vol1)
	c := publish(filepath.Join(dir, "c"), map[string]string{"source": "s3://data/other", "endpoint_url": "http://minio:9000"})
	if a == b || a == c || b == c {
		t.Fatalf("cache dirs %q, %q, %q: two daemons would share one", a, b, c)
	}
	unpublish(t, n, "v", filepath.Join(dir, "a"))
	if again := publish(filepath.Join(dir, "d"), vol1); again != a {
		t.Errorf("the source's volume on this node again got %q, want its warm %q", again, a)
	}
}
