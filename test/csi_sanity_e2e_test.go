//go:build e2e

package test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
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

// TestCSISanity runs the CSI conformance suite against the plugin's socket,
// with real mounts of the test MinIO and the volume's secret.
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
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.ControllerAddress = "unix://" + ctrlSock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	cfg.SecretsFile = secrets
	cfg.TestVolumeParameters = map[string]string{"source": e2e.source(), "endpoint_url": e2e.minio.url, "cache_size": "64MiB"}
	t.Cleanup(func() { cleanUpTarget(cfg.TargetPath + "/target") })
	// The Controller Service specs would test the stand-in, not shardfs.
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	suite.SkipStrings = append(suite.SkipStrings, "Controller Service \\[Controller Server\\]")
	reporter.Verbose = testing.Verbose()
	ginkgo.RunSpecs(t, "shardfs CSI sanity", suite, reporter)
	sc.Finalize()
}
