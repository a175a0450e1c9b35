package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// podInfoPrefix marks the keys kubelet adds to the volume context
// (podInfoOnMount, and "ephemeral" for inline volumes); they are no mount
// options.
const podInfoPrefix = "csi.storage.k8s.io/"

// reservedOptions are mount options a volume may not set: they name paths
// on the node, which the plugin chooses.
var reservedOptions = map[string]string{
	"cache_dir": "the plugin puts each source's cache under its --cache-root",
	"log_file":  "the plugin keeps each volume's daemon log under its --cache-root",
	"manifest":  "it would name a file on the node",
}

// secretKeys are the keys a volume's secret may hold, named as the AWS
// variables they become in the daemon's environment.
var secretKeys = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// Node is the Node service. Calls for different targets run at once; a
// second call for a target whose call is still running is refused with
// Aborted, which kubelet retries.
type Node struct {
	csipb.UnimplementedNodeServer
	cfg Config
	env []string // the daemons' environment before a volume's secret

	mu      sync.Mutex
	records map[string]record // by target: volumes this node has published
	claims  map[string]string // cache dir -> the target whose daemon uses it
	busy    map[string]bool   // targets with a call in progress
}

// NewNode prepares the Node service. It finds the shardfs mounts a
// previous plugin left serving in the mount table, keeps the records of
// those and drops the others, so that the mounts can be published again
// (idempotently) and unpublished.
func NewNode(cfg Config) (*Node, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, env: os.Environ(), records: map[string]record{}, claims: map[string]string{}, busy: map[string]bool{}}
	mounts, err := cfg.Mounter.Mounts()
	if err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	mounted := map[string]bool{}
	for _, m := range mounts {
		mounted[m.Target] = true
	}
	for target, r := range n.loadRecords() {
		if !mounted[target] {
			n.removeRecord(target)
			continue
		}
		n.records[target] = r
		n.claims[r.CacheDir] = target
		cfg.Log.Info("found a volume still mounted", "volume", r.VolumeID, "target", target)
	}
	return n, nil
}

func (n *Node) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

func (n *Node) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: n.cfg.NodeID}, nil
}

// NodePublishVolume mounts the volume read-only at the target path with a
// daemon of its own, and returns once the mount answers.
func (n *Node) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	target, err := checkTarget(req.GetVolumeId(), req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	vc := req.GetVolumeCapability()
	switch {
	case vc == nil:
		return nil, status.Error(codes.InvalidArgument, "volume capability missing")
	case vc.GetBlock() != nil:
		return nil, status.Error(codes.InvalidArgument, "block access is not supported: a shardfs volume is a read-only file system")
	}
	source, options, err := volumeOptions(req.GetVolumeContext(), vc.GetMount().GetMountFlags())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	env, err := secretEnv(n.env, req.GetSecrets())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	fp := fingerprint(req.GetVolumeId(), append([]string{"source=" + source}, options...))

	release, err := n.begin(target)
	if err != nil {
		return nil, err
	}
	defer release()
	if mounted, err := n.isMounted(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if mounted {
		n.mu.Lock()
		r, known := n.records[target]
		n.mu.Unlock()
		switch {
		case known && r.Fingerprint == fp:
			err := n.cfg.Mounter.Check(target)
			if err == nil {
				return &csipb.NodePublishVolumeResponse{}, nil
			}
			// Its daemon is gone: detach the dead mount and mount again.
			n.cfg.Log.Warn("published volume does not answer; mounting it again", "volume", r.VolumeID, "target", target, "err", err)
			if err := n.cfg.Mounter.Unmount(ctx, target); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			n.forget(target)
		case known && r.VolumeID == req.GetVolumeId():
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published at %s with other settings", req.GetVolumeId(), target)
		default:
			return nil, status.Errorf(codes.AlreadyExists, "%s already holds another shardfs mount", target)
		}
	}

	cacheDir := n.claimCacheDir(source, options, target)
	args, err := n.cfg.Args(source, target, n.nodeOptions(options, cacheDir, target))
	if err != nil {
		n.releaseCacheDir(cacheDir)
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	created, err := makeTarget(target)
	if err != nil {
		n.releaseCacheDir(cacheDir)
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := n.cfg.Mounter.Mount(ctx, target, args, env); err != nil {
		n.releaseCacheDir(cacheDir)
		if created {
			os.Remove(target)
		}
		var me *MountError
		if errors.As(err, &me) {
			return nil, status.Error(codes.InvalidArgument, me.Line)
		}
		return nil, status.Error(codes.Internal, err.Error())
	}
	r := record{VolumeID: req.GetVolumeId(), Target: target, Source: source, Fingerprint: fp, CacheDir: cacheDir}
	if err := n.saveRecord(r); err != nil {
		// The mount serves; only a restarted plugin would not recognise it.
		n.cfg.Log.Warn("volume published without a record", "target", target, "err", err)
	}
	n.mu.Lock()
	n.records[target] = r
	n.mu.Unlock()
	n.cfg.Log.Info("published", "volume", r.VolumeID, "target", target, "source", source, "cache_dir", cacheDir)
	return &csipb.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume detaches the mount at once, even while a reader
// holds a file open (that reader's next call fails with ENOTCONN), stops
// the volume's daemon and removes the target directory. A target that is
// not mounted is no error.
func (n *Node) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	target, err := checkTarget(req.GetVolumeId(), req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	release, err := n.begin(target)
	if err != nil {
		return nil, err
	}
	defer release()
	mounted, err := n.isMounted(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		if err := n.cfg.Mounter.Unmount(ctx, target); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	n.forget(target)
	if mounted {
		n.cfg.Log.Info("unpublished", "volume", req.GetVolumeId(), "target", target)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// forget drops target's record and frees its cache dir.
func (n *Node) forget(target string) {
	n.mu.Lock()
	r, known := n.records[target]
	delete(n.records, target)
	if known && n.claims[r.CacheDir] == target {
		delete(n.claims, r.CacheDir)
	}
	n.mu.Unlock()
	n.removeRecord(target)
}

func checkTarget(volumeID, target string) (string, error) {
	switch {
	case volumeID == "":
		return "", status.Error(codes.InvalidArgument, "volume ID missing")
	case target == "":
		return "", status.Error(codes.InvalidArgument, "target path missing")
	case !filepath.IsAbs(target):
		return "", status.Errorf(codes.InvalidArgument, "target path %q: must be absolute", target)
	}
	return filepath.Clean(target), nil
}

// begin marks target busy until the returned function is called.
func (n *Node) begin(target string) (func(), error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.busy[target] {
		return nil, status.Errorf(codes.Aborted, "an operation on %s is in progress", target)
	}
	n.busy[target] = true
	return func() {
		n.mu.Lock()
		delete(n.busy, target)
		n.mu.Unlock()
	}, nil
}

func (n *Node) isMounted(target string) (bool, error) {
	mounts, err := n.cfg.Mounter.Mounts()
	if err != nil {
		return false, fmt.Errorf("listing mounts: %w", err)
	}
	for _, m := range mounts {
		if m.Target == target {
			return true, nil
		}
	}
	return false, nil
}

// volumeOptions splits the volume context into the source and the mount
// options ("key=value", or "key" for an empty value), sorted, with the
// capability's mount flags (a PersistentVolume's mountOptions) after them.
// Keys may use dashes or underscores, as in fstab.
func volumeOptions(vctx map[string]string, mountFlags []string) (string, []string, error) {
	var source string
	var options []string
	for k, v := range vctx {
		if strings.HasPrefix(k, podInfoPrefix) {
			continue
		}
		key := strings.ReplaceAll(k, "-", "_")
		if key == "source" {
			source = v
			continue
		}
		if why, ok := reservedOptions[key]; ok {
			return "", nil, fmt.Errorf("volume context may not set %s: %s", k, why)
		}
		if v == "" {
			options = append(options, k)
		} else {
			options = append(options, k+"="+v)
		}
	}
	if source == "" {
		return "", nil, errors.New("volume context has no source (s3://bucket[/prefix] or a directory on the node)")
	}
	sort.Strings(options)
	for _, f := range mountFlags {
		for _, opt := range strings.Split(f, ",") {
			key, _, _ := strings.Cut(opt, "=")
			if why, ok := reservedOptions[strings.ReplaceAll(key, "-", "_")]; ok {
				return "", nil, fmt.Errorf("mount options may not set %s: %s", key, why)
			}
			if opt != "" {
				options = append(options, opt)
			}
		}
	}
	return source, options, nil
}

// nodeOptions adds what the plugin decides to a volume's options: its
// cache dir, its daemon log, and allow_other, since pods read as users
// other than the plugin's.
func (n *Node) nodeOptions(options []string, cacheDir, target string) []string {
	out := append([]string{}, options...)
	out = append(out, "cache_dir="+cacheDir, "log_file="+filepath.Join(n.cfg.LogDir, shortHash(target)+".log"))
	for _, o := range options {
		if k, _, _ := strings.Cut(o, "="); strings.ReplaceAll(k, "-", "_") == "allow_other" {
			return out
		}
	}
	return append(out, "allow_other")
}

// secretEnv is base with the volume's credentials in place of any the
// plugin has. Without a secret the daemon gets base unchanged, and with it
// the node's AWS credential chain.
func secretEnv(base []string, secrets map[string]string) ([]string, error) {
	if len(secrets) == 0 {
		return base, nil
	}
	for k, v := range secrets {
		known := false
		for _, s := range secretKeys {
			known = known || k == s
		}
		switch {
		case !known:
			return nil, fmt.Errorf("secret key %q is not one of %s", k, strings.Join(secretKeys, ", "))
		case v == "":
			return nil, fmt.Errorf("secret key %s is empty", k)
		case strings.ContainsAny(v, "\x00\n"):
			return nil, fmt.Errorf("secret key %s holds a control character", k)
		}
	}
	if (secrets[secretKeys[0]] == "") != (secrets[secretKeys[1]] == "") {
		return nil, fmt.Errorf("secret needs both %s and %s", secretKeys[0], secretKeys[1])
	}
	if secrets[secretKeys[0]] == "" {
		return nil, fmt.Errorf("secret has %s without %s and %s", secretKeys[2], secretKeys[0], secretKeys[1])
	}
	env := make([]string, 0, len(base)+len(secrets))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, s := range secretKeys {
			drop = drop || name == s
		}
		if !drop {
			env = append(env, kv)
		}
	}
	for _, s := range secretKeys {
		if v := secrets[s]; v != "" {
			env = append(env, s+"="+v)
		}
	}
	return env, nil
}

// claimCacheDir picks the cache dir of a source: CacheRoot/HASH, named
// from the endpoint and the source, so that a pod rescheduled on the node
// finds its ring warm. A cache dir has one owner at a time; when this
// source's is taken (a second volume of the source on the node), the next
// free one of CacheRoot/HASH-1, -2, ... is used.
func (n *Node) claimCacheDir(source string, options []string, target string) string {
	endpoint := ""
	for _, o := range options {
		if k, v, _ := strings.Cut(o, "="); strings.ReplaceAll(k, "-", "_") == "endpoint_url" {
			endpoint = v
		}
	}
	base := filepath.Join(n.cfg.CacheRoot, shortHash(endpoint, source))
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := 0; ; i++ {
		dir := base
		if i > 0 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		if _, taken := n.claims[dir]; taken || lockedByOther(dir) {
			continue
		}
		n.claims[dir] = target
		return dir
	}
}

func (n *Node) releaseCacheDir(dir string) {
	n.mu.Lock()
	delete(n.claims, dir)
	n.mu.Unlock()
}

// lockedByOther tells whether a process holds the cache dir's lock (an
// exclusive flock on DIR/lock, taken by the daemon that owns it).
func lockedByOther(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil
}

// makeTarget creates the target directory; kubelet creates its parent.
func makeTarget(target string) (created bool, err error) {
	if _, err := os.Stat(target); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return false, fmt.Errorf("creating %s: %w", target, err)
	}
	return true, nil
}
