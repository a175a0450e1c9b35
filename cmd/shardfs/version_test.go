package main

import (
	"runtime/debug"
	"testing"
)

// The line names the revision and whether its tree was modified, and
// says nothing of a revision the build was not stamped with.
func TestDescribeBuildNamesTheRevisionAndAModifiedTree(t *testing.T) {
	const rev = "9bc6307a1b2c3d4e5f60718293a4b5c6d7e8f901"
	for _, c := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, "(devel) (9bc6307a1b2c) go1.26.8"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, "(devel) (9bc6307a1b2c, modified) go1.26.8"},
		{nil, "(devel) go1.26.8"},
	} {
		info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: c.settings}
		if got := describeBuild(info); got != c.want {
			t.Errorf("settings %v: %q, want %q", c.settings, got, c.want)
		}
	}
}
