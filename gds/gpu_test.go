package gds

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func busID(s string) (b [32]uint8) {
	copy(b[:], s)
	return b
}

func mockDevice(name, bus, uuid string, mem uint64, numa nvml.Return) *mock.Device {
	return &mock.Device{
		GetNameFunc:       func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetPciInfoFunc:    func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{BusId: busID(bus)}, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: mem}, nvml.SUCCESS },
		GetUUIDFunc:       func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetNumaNodeIdFunc: func() (int, nvml.Return) { return 1, numa },
	}
}

func mockLib(init nvml.Return, devs ...nvml.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return init },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
}

func TestNVMLDiscovery(t *testing.T) {
	// The second device's driver cannot report its NUMA node: it comes
	// from sysfs instead.
	sysfs := t.TempDir()
	os.MkdirAll(filepath.Join(sysfs, "0000:b1:00.0"), 0o755)
	os.WriteFile(filepath.Join(sysfs, "0000:b1:00.0", "numa_node"), []byte("3\n"), 0o644)
	lib := mockLib(nvml.SUCCESS,
		mockDevice("NVIDIA H100 80GB HBM3", "00000000:3B:00.0", "GPU-aaaa", 80<<30, nvml.SUCCESS),
		mockDevice("NVIDIA H100 80GB HBM3", "00000000:B1:00.0", "GPU-bbbb", 80<<30, nvml.ERROR_NOT_SUPPORTED),
	)
	src := NewNVMLSource(lib)
	src.sysfs = sysfs
	gpus, err := src.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-aaaa", PCIBusID: "0000:3b:00.0", MemoryBytes: 80 << 30, NUMANode: 1},
		{Index: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-bbbb", PCIBusID: "0000:b1:00.0", MemoryBytes: 80 << 30, NUMANode: 3},
	}
	if !reflect.DeepEqual(gpus, want) {
		t.Errorf("got %+v\nwant %+v", gpus, want)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("NVML shut down %d times, want 1", n)
	}
}

func TestNVMLNoDriver(t *testing.T) {
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED} {
		gpus, err := NewNVMLSource(mockLib(ret)).GPUs(context.Background())
		if !errors.Is(err, ErrNoDriver) || gpus != nil {
			t.Errorf("init %s: %v, %v; want ErrNoDriver", ret, gpus, err)
		}
	}
	gpus, err := NewNVMLSource(mockLib(nvml.SUCCESS)).GPUs(context.Background())
	if err != nil || len(gpus) != 0 {
		t.Errorf("driver without devices: %v, %v; want empty list", gpus, err)
	}
	_, err = NewNVMLSource(mockLib(nvml.ERROR_UNKNOWN)).GPUs(context.Background())
	if err == nil || errors.Is(err, ErrNoDriver) {
		t.Errorf("init failure reported as %v", err)
	}
}

func TestNVMLDeviceFailure(t *testing.T) {
	dev := mockDevice("x", "0000:01:00.0", "u", 1, nvml.SUCCESS)
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	if _, err := NewNVMLSource(mockLib(nvml.SUCCESS, dev)).GPUs(context.Background()); err == nil {
		t.Error("lost GPU not reported")
	}
}

// The real library on this machine: without a driver that is ErrNoDriver,
// with one a list; never another error.
func TestDiscoverGPUsOnThisMachine(t *testing.T) {
	gpus, err := DiscoverGPUs(context.Background())
	if err != nil && !errors.Is(err, ErrNoDriver) {
		t.Fatalf("DiscoverGPUs: %v", err)
	}
	t.Logf("gpus=%+v err=%v", gpus, err)
}

func TestSysfsBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:3B:00.0": "0000:3b:00.0",
		"0000:3B:00.0":     "0000:3b:00.0",
		"":                 "",
	} {
		b := busID(in)
		if got := sysfsBusID(b[:]); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
}
