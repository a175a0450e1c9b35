package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestCSIMountArgs(t *testing.T) {
	t.Parallel()
	args, err := csiMountArgs("s3://b/p", "/pods/x/mount", []string{"endpoint_url=http://h:9000", "cache-size=1GiB", "allow_other", "ro", "_netdev"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"mount", "--endpoint-url=http://h:9000", "--cache-size=1GiB", "--allow-other", "s3://b/p", "/pods/x/mount"}
	if !slices.Equal(args, want) {
		t.Errorf("got %q, want %q", args, want)
	}
}

func TestCSIMountArgsRefusesWhatTheCLIRefuses(t *testing.T) {
	t.Parallel()
	mountFlags := findCommand(newApp().Commands, "mount").Flags
	_, fstabErr := fstabArgs([]string{"shardfs", "s3://b", "/mnt", "-o", "no_such=1"}, mountFlags)
	for _, c := range []struct {
		option string
		want   string
	}{
		{"no_such=1", fstabErr.Error()},
		{"foreground", "would keep mount(8) waiting"},
		{"cache_size=lots", "cache-size"},
		{"page_cache=sometimes", "--page-cache"},
	} {
		_, err := csiMountArgs("s3://b", "/mnt", []string{c.option})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("option %q: got %v, want one line containing %q", c.option, err, c.want)
		}
	}
}

// TestCSIMountArgsAtOnce: the Node service publishes several volumes at
// once, so their options are parsed at once; under the race detector a
// parse that writes the CLI library's shared flags without taking turns
// fails this test.
func TestCSIMountArgsAtOnce(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := csiMountArgs("s3://b/p", fmt.Sprintf("/pods/%d/mount", i), []string{"endpoint_url=http://h:9000", "cache_size=1GiB"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
