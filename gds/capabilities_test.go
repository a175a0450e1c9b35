package gds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

type fakeGPUs struct {
	gpus  []GPU
	err   error
	calls int
}

func (g *fakeGPUs) GPUs(context.Context) ([]GPU, error) {
	g.calls++
	return g.gpus, g.err
}

func capabilities(t *testing.T, srv *Server) Capabilities {
	t.Helper()
	doc, err := srv.Capabilities(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var c Capabilities
	if err := json.Unmarshal(doc, &c); err != nil {
		t.Fatalf("ctl is not JSON: %v\n%s", err, doc)
	}
	return c
}

func TestCapabilities(t *testing.T) {
	f, c := newRingFixture(t, Config{Alignment: 4096})
	gpus := &fakeGPUs{gpus: []GPU{{Index: 0, Name: "H100", PCIBusID: "0000:3b:00.0", MemoryBytes: 80 << 30, NUMANode: 0}}}
	srv := NewServer(Config{BlockSize: c.BlockSize(), Alignment: 4096}, f.files, c, gpus, nil)
	defer srv.Close()
	got := capabilities(t, srv)
	if got.ABIVersion != ABIVersion || got.BlockSize != ringBlock || got.Alignment != 4096 || !got.Leases {
		t.Errorf("capabilities %+v", got)
	}
	if got.Commands["read"] != CmdRead || got.Commands["lease"] != CmdLease || got.IoctlType != IoctlType {
		t.Errorf("commands %v", got.Commands)
	}
	if len(got.GPUs) != 1 || got.GPUs[0].PCIBusID != "0000:3b:00.0" || got.GPUs[0].MemoryBytes != 80<<30 {
		t.Errorf("gpus %+v", got.GPUs)
	}
	capabilities(t, srv)
	if gpus.calls != 1 {
		t.Errorf("GPU discovery ran %d times, want once", gpus.calls)
	}
}

func TestCapabilitiesWithoutGPUs(t *testing.T) {
	f := newFixture(t, Config{})
	for name, src := range map[string]GPUSource{
		"no source": nil,
		"no driver": &fakeGPUs{err: fmt.Errorf("nvml init: %w", ErrNoDriver)},
		"failure":   &fakeGPUs{err: errors.New("nvml: GPU is lost")},
	} {
		srv := NewServer(Config{}, f.files, nil, src, nil)
		got := capabilities(t, srv)
		srv.Close()
		if got.GPUs == nil || len(got.GPUs) != 0 || got.Leases {
			t.Errorf("%s: gpus %v leases %v; want an empty list, no leases", name, got.GPUs, got.Leases)
		}
		if wantErr := name == "failure"; (got.GPUError != "") != wantErr {
			t.Errorf("%s: gpu_error %q", name, got.GPUError)
		}
	}
}
