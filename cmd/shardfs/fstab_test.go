package main

import (
	"strings"
	"testing"
)

func TestFstabArgs(t *testing.T) {
	flags := mountCommand().Flags
	cases := []struct {
		name string
		args []string
		want string // the rewritten command line, or "error: SUBSTRING"
	}{
		{"mount.fuse3 form, underscores", []string{"s3://b/p", "/mnt", "-o", "ro,noatime,noexec,nosuid,nodev,endpoint_url=http://h:9000,cache_dir=/nvme/x"},
			"mount s3://b/p /mnt --endpoint-url=http://h:9000 --cache-dir=/nvme/x"},
		{"dashes alike", []string{"s3://b", "/mnt", "-o", "rw,cache-size=2GiB,memory_cache_size=0,dev,suid"},
			"mount s3://b /mnt --cache-size=2GiB --memory-cache-size=0"},
		{"fstab's own options dropped", []string{"s3://b", "/mnt", "-o", "defaults,_netdev,nofail,noauto,user,x-systemd.automount,comment=x,region=eu-west-1"},
			"mount s3://b /mnt --region=eu-west-1"},
		{"bool flag without and with a value", []string{"/data", "/mnt", "-o", "allow_other,force_path_style=false"},
			"mount /data /mnt --allow-other --force-path-style=false"},
		{"-o joined and repeated", []string{"/data", "/mnt", "-oread_ahead_kb=1024", "-o", "uid=1000,gid=1000"},
			"mount /data /mnt --read-ahead-kb=1024 --uid=1000 --gid=1000"},
		{"no options", []string{"/data", "/mnt"}, "mount /data /mnt"},
		{"value keeps its equals signs", []string{"/data", "/mnt", "-o", "endpoint_url=http://h/?a=b"},
			"mount /data /mnt --endpoint-url=http://h/?a=b"},
		{"unknown option", []string{"s3://b", "/mnt", "-o", "ro,endpoint_url=x,cache_dri=/nvme"}, `error: unknown mount option "cache_dri"`},
		{"value missing", []string{"s3://b", "/mnt", "-o", "cache_dir"}, `error: mount option "cache_dir" needs a value`},
		{"one-letter alias is no option", []string{"s3://b", "/mnt", "-o", "f"}, `error: unknown mount option "f"`},
		{"foreground would hang mount", []string{"s3://b", "/mnt", "-o", "foreground"}, `error: mount option "foreground" would keep mount(8) waiting`},
		{"stray argument", []string{"s3://b", "/mnt", "extra"}, `error: unexpected argument "extra"`},
		{"-o without options", []string{"s3://b", "/mnt", "-o"}, `error: unexpected argument "-o"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fstabArgs(append([]string{"shardfs"}, tc.args...), flags)
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("fstabArgs(%q) = %q, %v; want an error containing %q", tc.args, got, err, want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("fstabArgs(%q): %v", tc.args, err)
			}
			if g := strings.Join(got[1:], " "); g != tc.want {
				t.Errorf("fstabArgs(%q)\n got %s\nwant %s", tc.args, g, tc.want)
			}
		})
	}
}

func TestIsMountHelperCall(t *testing.T) {
	app := newApp()
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"shardfs", "s3://b/p", "/mnt", "-o", "ro"}, true},
		{[]string{"shardfs", "/data", "/mnt"}, true},
		{[]string{"shardfs", "mount", "s3://b/p", "/mnt"}, false},
		{[]string{"shardfs", "ls", "s3://b/p"}, false},
		{[]string{"shardfs", "--help"}, false},
		{[]string{"shardfs", "s3://b/p"}, false},
		{[]string{"shardfs", "s3://b/p", "--help"}, false},
		{[]string{"shardfs"}, false},
	}
	for _, tc := range cases {
		if got := isMountHelperCall(app, tc.args); got != tc.want {
			t.Errorf("isMountHelperCall(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// Every option a user types must still map to a flag after flags are renamed.
func TestFstabOptionsNameMountFlags(t *testing.T) {
	flags := mountCommand().Flags
	for _, opt := range []string{"endpoint_url", "cache_dir", "cache_size", "region", "profile", "manifest", "log_file", "allow_other", "uid", "gid"} {
		if mountFlag(strings.ReplaceAll(opt, "_", "-"), flags) == nil {
			t.Errorf("mount option %s names no flag of 'shardfs mount'", opt)
		}
	}
}
