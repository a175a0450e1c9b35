package gds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoDriver means the NVIDIA management library could not be loaded or
// initialised: there is no NVIDIA driver on this machine. `shardfs gpus`
// prints it as one line and exits 0; capabilities report no GPUs.
var ErrNoDriver = errors.New("no NVIDIA driver")

// GPU is one device as NVML sees it.
type GPU struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	PCIBusID    string `json:"pci_bus_id"` // sysfs form, e.g. "0000:3b:00.0"
	MemoryBytes uint64 `json:"memory_bytes"`
	NUMANode    int    `json:"numa_node"` // -1 when unknown
}

// GPUSource lists the GPUs of this machine. An implementation returns
// ErrNoDriver (wrapped) when there is no driver, and an empty list when the
// driver sees no device.
type GPUSource interface {
	GPUs(ctx context.Context) ([]GPU, error)
}

// NVMLSource discovers GPUs through NVML.
type NVMLSource struct {
	lib nvml.Interface
	// sysfs is where PCI devices are looked up for their NUMA node when
	// NVML cannot say ("/sys/bus/pci/devices").
	sysfs string
}

// NewNVMLSource returns a source backed by lib; nil means the system's
// libnvidia-ml, loaded when GPUs is called.
func NewNVMLSource(lib nvml.Interface) *NVMLSource {
	if lib == nil {
		lib = nvml.New()
	}
	return &NVMLSource{lib: lib, sysfs: "/sys/bus/pci/devices"}
}

// DiscoverGPUs lists the GPUs the system's NVIDIA driver sees.
func DiscoverGPUs(ctx context.Context) ([]GPU, error) {
	return NewNVMLSource(nil).GPUs(ctx)
}

// GPUs initialises NVML, lists every device and shuts NVML down again, so
// the library stays loaded only while asked.
func (s *NVMLSource) GPUs(ctx context.Context) ([]GPU, error) {
	switch ret := s.lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED, nvml.ERROR_NO_PERMISSION:
		return nil, fmt.Errorf("nvml init: %s: %w", ret, ErrNoDriver)
	default:
		return nil, fmt.Errorf("nvml init: %s", ret)
	}
	defer s.lib.Shutdown()

	count, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml device count: %s", ret)
	}
	gpus := make([]GPU, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dev, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml device %d: %s", i, ret)
		}
		g, err := s.describe(i, dev)
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// describe reads one device's fields. Name, PCI id and memory are required;
// UUID and NUMA node are best effort (older drivers and some platforms do
// not report them).
func (s *NVMLSource) describe(i int, dev nvml.Device) (GPU, error) {
	g := GPU{Index: i, NUMANode: -1}
	var ret nvml.Return
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d name: %s", i, ret)
	}
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d pci info: %s", i, ret)
	}
	g.PCIBusID = sysfsBusID(pci.BusId[:])
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("nvml device %d memory: %s", i, ret)
	}
	g.MemoryBytes = mem.Total
	if uuid, ret := dev.GetUUID(); ret == nvml.SUCCESS {
		g.UUID = uuid
	}
	if node, ret := dev.GetNumaNodeId(); ret == nvml.SUCCESS {
		g.NUMANode = node
	} else {
		g.NUMANode = s.sysfsNUMANode(g.PCIBusID)
	}
	return g, nil
}

// sysfsBusID turns NVML's "00000000:3B:00.0" into sysfs's "0000:3b:00.0".
func sysfsBusID(raw []uint8) string {
	b := make([]byte, 0, len(raw))
	for _, c := range raw {
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	id := strings.ToLower(string(b))
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) > 4 {
		id = dom[len(dom)-4:] + ":" + rest
	}
	return id
}

// sysfsNUMANode reads the device's numa_node from sysfs; -1 when unknown.
func (s *NVMLSource) sysfsNUMANode(busID string) int {
	if busID == "" || strings.ContainsAny(busID, "/") {
		return -1
	}
	raw, err := os.ReadFile(filepath.Join(s.sysfs, busID, "numa_node"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return -1
	}
	return n
}
