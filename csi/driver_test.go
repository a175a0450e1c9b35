package csi

import (
	"context"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestSocketPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"unix:///csi/csi.sock":  "/csi/csi.sock",
		"unix:/csi/csi.sock":    "/csi/csi.sock",
		"/csi/csi.sock":         "/csi/csi.sock",
		"tcp://127.0.0.1:10000": "",
		"unix://csi.sock":       "",
		"csi.sock":              "",
	} {
		got, err := socketPath(in)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("socketPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestServeAnswersAndStops serves on a socket, answers Identity and Node
// calls there, and returns once its context ends.
func TestServeAnswersAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, "unix://"+sock, Config{NodeID: "node-a", CacheRoot: filepath.Join(dir, "cache"), Mounter: newFakeMounter(), Args: fakeArgs})
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info, err := csipb.NewIdentityClient(conn).GetPluginInfo(context.Background(), &csipb.GetPluginInfoRequest{}, grpc.WaitForReady(true))
	if err != nil || info.GetName() != DriverName {
		t.Fatalf("GetPluginInfo: %v, %v; want %s", info, err, DriverName)
	}
	node, err := csipb.NewNodeClient(conn).NodeGetInfo(context.Background(), &csipb.NodeGetInfoRequest{})
	if err != nil || node.GetNodeId() != "node-a" {
		t.Fatalf("NodeGetInfo: %v, %v; want node-a", node, err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve after its context ended: %v", err)
	}
}
