package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/shardfs/shardfs/gds"
)

func gpusCommand() *cli.Command {
	return &cli.Command{
		Name:         "gpus",
		Usage:        "list the NVIDIA GPUs the driver sees (PCI bus id, memory, NUMA node)",
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			gpus, err := gds.DiscoverGPUs(c.Context)
			if errors.Is(err, gds.ErrNoDriver) {
				fmt.Fprintln(c.App.Writer, "no NVIDIA driver: no GPUs to list")
				return nil
			}
			if err != nil {
				return err
			}
			if len(gpus) == 0 {
				fmt.Fprintln(c.App.Writer, "the NVIDIA driver sees no GPU")
				return nil
			}
			w := tabwriter.NewWriter(c.App.Writer, 2, 4, 2, ' ', 0)
			fmt.Fprintln(w, "INDEX\tNAME\tPCI BUS ID\tMEMORY\tNUMA\tUUID")
			for _, g := range gpus {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\n", g.Index, g.Name, g.PCIBusID, formatSize(int64(g.MemoryBytes)), g.NUMANode, g.UUID)
			}
			return w.Flush()
		},
	}
}
