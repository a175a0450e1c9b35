//go:build e2e

package test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// sanityController stands in for the Controller service shardfs does not
// have: the sanity suite creates a volume before its node tests publish
// it, and this one only hands back the suite's parameters as the volume
// context, the way a static PersistentVolume carries its attributes.
type sanityController struct {
	csipb.UnimplementedControllerServer
}

// sanityIdentity is the stand-in's Identity service, which the suite asks
// of every endpoint it is given.
type sanityIdentity struct {
	csipb.UnimplementedIdentityServer
}

func (sanityIdentity) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: "csi.shardfs.io", VendorVersion: "test"}, nil
}

func (sanityIdentity) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: []*csipb.PluginCapability{{
		Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (sanityIdentity) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (sanityController) CreateVolume(_ context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{VolumeId: req.GetName(), VolumeContext: req.GetParameters()}}, nil
}

func (sanityController) DeleteVolume(context.Context, *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	return &csipb.DeleteVolumeResponse{}, nil
}

func (sanityController) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: []*csipb.ControllerServiceCapability{{
		Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// TestCSISanity runs csi-test's conformance suite, the csi-sanity command
// a CSI driver's authors run, against the plugin's socket, with real
// mounts of the test MinIO and the volume's secret. It runs as a command
// of its own: the suite refuses go test's -parallel and -count.
func TestCSISanity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	startCSIPlugin(t, sock, filepath.Join(dir, "cache"))

	ctrlSock := filepath.Join(dir, "controller.sock")
	lis, err := net.Listen("unix", ctrlSock)
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	csipb.RegisterControllerServer(server, sanityController{})
	csipb.RegisterIdentityServer(server, sanityIdentity{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		server.Serve(lis)
	}()
	t.Cleanup(func() {
		server.Stop()
		<-served
	})

	secrets := filepath.Join(dir, "secrets.yaml")
	if err := os.WriteFile(secrets, []byte("NodePublishVolumeSecret:\n  AWS_ACCESS_KEY_ID: "+accessKey+"\n  AWS_SECRET_ACCESS_KEY: "+secretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	params := filepath.Join(dir, "params.yaml")
	if err := os.WriteFile(params, []byte("source: "+e2e.source()+"\nendpoint_url: "+e2e.minio.url+"\ncache_size: 64MiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	t.Cleanup(func() { cleanUpTarget(target + "/target") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(e2e.root, ".tools", "bin", "csi-sanity"),
		"--csi.endpoint", "unix://"+sock,
		"--csi.controllerendpoint", "unix://"+ctrlSock,
		"--csi.mountdir", target,
		"--csi.stagingdir", filepath.Join(dir, "staging"),
		"--csi.secrets", secrets,
		"--csi.testvolumeparameters", params,
		// The Controller Service specs would test the stand-in, not shardfs.
		"--ginkgo.skip", `Controller Service \[Controller Server\]`,
		"--ginkgo.no-color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("csi-sanity: %v\n%s", err, out)
	}
	// "SUCCESS! -- 11 Passed | 0 Failed | 1 Pending | 91 Skipped"
	m := regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("csi-sanity printed no summary:\n%s", out)
	}
	t.Logf("csi-sanity: %s", m[0])
	// Identity (3), node capabilities and info, and the publish and
	// unpublish specs: a suite that ran fewer ran none of the node's.
	if passed, _ := strconv.Atoi(string(m[1])); passed < 11 || string(m[2]) != "0" {
		t.Fatalf("csi-sanity: %s, want at least 11 passed and none failed\n%s", m[0], out)
	}
}
