package gds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Capabilities is the JSON document /.shardfs/ctl returns.
type Capabilities struct {
	ABIVersion int               `json:"abi_version"`
	IoctlType  int               `json:"ioctl_type"`
	Commands   map[string]uint32 `json:"commands"`
	BlockSize  int64             `json:"block_size"`
	Alignment  int64             `json:"alignment"`
	Leases     bool              `json:"leases"`
	// RAMLeases says LEASE_FROM_RAM may pin blocks of a shared RAM tier.
	RAMLeases bool `json:"ram_leases"`
	// WholeFiles says WHOLE_FILE may find shards held whole (the cache has
	// the whole-shard file tier).
	WholeFiles       bool              `json:"whole_files"`
	MaxBufferSize    int64             `json:"max_buffer_size"`
	MaxRegistrations int               `json:"max_registrations"`
	MaxLeaseBytes    int64             `json:"max_lease_bytes"`
	MinABIVersion    int               `json:"min_abi_version"`
	Batch            BatchCapabilities `json:"batch"`
	GPUs             []GPU             `json:"gpus"`
	// GPUError says why GPUs is empty when discovery failed for a reason
	// other than a missing driver.
	GPUError string `json:"gpu_error,omitempty"`
}

// BatchCapabilities are the bounds of the batch commands.
type BatchCapabilities struct {
	EntrySize         int `json:"entry_size"`
	MaxBatch          int `json:"max_batch"`
	MaxInFlightPerUID int `json:"max_in_flight_per_uid"`
	MaxInFlight       int `json:"max_in_flight"`
	Workers           int `json:"workers"`
}

// Capabilities returns the ctl file's content. GPU discovery runs once;
// a missing driver or any discovery failure gives an empty GPU list.
func (s *Server) Capabilities(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	cached := s.caps
	s.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	c := Capabilities{
		ABIVersion: ABIVersion,
		IoctlType:  IoctlType,
		Commands: map[string]uint32{
			"register": CmdRegister, "unregister": CmdUnregister, "read": CmdRead,
			"lease": CmdLease, "lease_drop": CmdLeaseDrop,
			"submit": CmdSubmit, "wait": CmdWait, "whole_file": CmdWholeFile,
		},
		MinABIVersion: MinABIVersion,
		Batch: BatchCapabilities{
			EntrySize: BatchEntrySize, MaxBatch: s.cfg.MaxBatch,
			MaxInFlightPerUID: s.cfg.MaxInFlightPerUID, MaxInFlight: s.cfg.MaxInFlight,
			Workers: s.cfg.BatchWorkers,
		},
		BlockSize:        s.cfg.BlockSize,
		Alignment:        s.cfg.Alignment,
		Leases:           s.leaseFn != nil,
		RAMLeases:        s.ramLeaseFn != nil,
		WholeFiles:       s.whole != nil,
		MaxBufferSize:    s.cfg.MaxBufferSize,
		MaxRegistrations: s.cfg.MaxRegistrations,
		MaxLeaseBytes:    s.cfg.MaxLeaseBytes,
		GPUs:             []GPU{},
	}
	if s.gpus != nil {
		gpus, err := s.gpus.GPUs(ctx)
		switch {
		case err == nil:
			c.GPUs = append(c.GPUs, gpus...)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("gpu discovery: %w", err)
		case !errors.Is(err, ErrNoDriver):
			s.log.Warn("gpu discovery failed", "err", err)
			c.GPUError = err.Error()
		}
	}
	doc, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("capabilities: %w", err)
	}
	doc = append(doc, '\n')
	s.mu.Lock()
	s.caps = doc
	s.mu.Unlock()
	return doc, nil
}
