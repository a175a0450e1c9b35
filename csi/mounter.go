package csi

import "context"

// Mounter starts, stops and lists the mount daemons. The plugin's real one
// runs `shardfs mount` (which daemonizes) so that the daemon outlives the
// plugin's container; tests use a fake.
type Mounter interface {
	// Mount runs the mount command line args (without the program name)
	// for target with env as the whole environment, and returns once the
	// mount answers or has failed. A failure the mount command reports
	// itself is a *MountError carrying its one line.
	Mount(ctx context.Context, target string, args, env []string) error
	// Unmount detaches target even while files are open and stops its
	// daemon. Called only for a target Mounts lists.
	Unmount(ctx context.Context, target string) error
	// Mounts lists the shardfs mounts in the mount table.
	Mounts() ([]Mount, error)
	// Check tells whether the mount at target answers: nil, or why not
	// (a daemon killed leaves its mount in the table, answering ENOTCONN).
	Check(target string) error
}

// Mount is one shardfs mount in the mount table.
type Mount struct {
	Target string // the mount point
	Source string // what the mount table shows as its source
}

// MountError is the one line the mount command printed when it failed.
type MountError struct{ Line string }

func (e *MountError) Error() string { return e.Line }

// ArgsFunc turns SOURCE, TARGET and mount options ("key=value" or a bare
// "key", the names fstab uses) into the mount command line, after the
// program name. Its error is the one line the CLI prints for the same
// options, and means the volume context is invalid.
type ArgsFunc func(source, target string, options []string) ([]string, error)
