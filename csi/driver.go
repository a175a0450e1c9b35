// Package csi is the Kubernetes CSI node plugin of shardfs: the Identity
// and Node services over gRPC, for static PersistentVolumes and inline
// ephemeral volumes, always read-only.
//
// It owns the translation of a CSI request into one shardfs mount: the
// volume context (fstab option names) and secret (AWS variable names) are
// checked, each volume gets a daemon of its own, a per-source cache dir
// under the plugin's cache root, and a small record under its state dir
// so that a restarted plugin recognises the mounts it finds in the mount
// table. It never parses mount options itself (the caller's ArgsFunc
// does, with the CLI's parser), never starts or stops a daemon other than
// through its Mounter, never writes a credential to disk or to a log, and
// has no Controller service: volumes are neither created nor attached.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// DriverName is the name the plugin registers with kubelet; CSIDriver
// objects and PersistentVolumes name it.
const DriverName = "csi.shardfs.io"

// Config is what a plugin needs to run.
type Config struct {
	NodeID    string       // the node's name as kubelet knows it
	CacheRoot string       // host directory holding one cache dir per source
	StateDir  string       // records of published volumes; default CacheRoot/.csi-state
	LogDir    string       // daemon logs; default CacheRoot/.csi-logs
	Version   string       // reported by GetPluginInfo
	Mounter   Mounter      // starts, stops and lists mount daemons
	Args      ArgsFunc     // mount options to the mount command line
	Log       *slog.Logger // the plugin's own log; never sees secrets
}

func (c *Config) fill() error {
	switch {
	case c.NodeID == "":
		return errors.New("--node-id is required")
	case c.CacheRoot == "":
		return errors.New("--cache-root is required")
	case !filepath.IsAbs(c.CacheRoot):
		return fmt.Errorf("--cache-root %q: must be an absolute path", c.CacheRoot)
	case c.Mounter == nil || c.Args == nil:
		return errors.New("csi: Config needs a Mounter and an ArgsFunc")
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(c.CacheRoot, ".csi-state")
	}
	if c.LogDir == "" {
		c.LogDir = filepath.Join(c.CacheRoot, ".csi-logs")
	}
	if c.Version == "" {
		c.Version = "unknown"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{c.CacheRoot, c.StateDir, c.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	return nil
}

// Serve listens on endpoint (unix:///path/csi.sock, or a plain path) and
// serves the Identity and Node services until ctx ends. A stale socket
// file left by a killed plugin is replaced. Before it listens, it finds
// the mounts a previous plugin left serving (see NewNode).
func Serve(ctx context.Context, endpoint string, cfg Config) error {
	path, err := socketPath(endpoint)
	if err != nil {
		return err
	}
	node, err := NewNode(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", path, err)
	}
	server := grpc.NewServer(grpc.UnaryInterceptor(logCalls(node.cfg.Log)))
	csipb.RegisterIdentityServer(server, &identity{version: node.cfg.Version})
	csipb.RegisterNodeServer(server, node)

	// The goroutine below is owned by Serve, which waits for it: it stops
	// the server when ctx ends (letting calls in flight finish), or when
	// the server failed by itself.
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
		}
		server.GracefulStop()
	}()
	node.cfg.Log.Info("serving CSI", "endpoint", path, "node", node.cfg.NodeID, "driver", DriverName)
	err = server.Serve(lis)
	close(done)
	<-stopped
	return err
}

// socketPath accepts unix:///abs/path, unix:/abs/path and /abs/path.
func socketPath(endpoint string) (string, error) {
	if strings.HasPrefix(endpoint, "/") {
		return endpoint, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("--endpoint %q: must be unix:///path/to/csi.sock", endpoint)
	}
	path := u.Path
	if u.Host != "" || !filepath.IsAbs(path) {
		return "", fmt.Errorf("--endpoint %q: the socket path must be absolute", endpoint)
	}
	return path, nil
}

// logCalls logs each call's method and outcome; requests are never logged,
// since they carry secrets.
func logCalls(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			log.Warn("call failed", "method", info.FullMethod, "code", status.Code(err).String(), "err", status.Convert(err).Message())
		} else {
			log.Debug("call", "method", info.FullMethod)
		}
		return resp, err
	}
}

// identity is the Identity service.
type identity struct {
	csipb.UnimplementedIdentityServer
	version string
}

func (i *identity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: DriverName, VendorVersion: i.version}, nil
}

// GetPluginCapabilities names no service: without a Controller service
// kubelet neither attaches nor provisions, and without topology the
// volume may be used on any node.
func (i *identity) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{}, nil
}

func (i *identity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}
