package main

import (
	"strings"
	"testing"
)

// TestTableCountsRunsAndFailuresPerMode: a test that passed in one mode and
// failed once in another, and a package whose binary died with no failing
// test, are each counted where they happened, failures first.
func TestTableCountsRunsAndFailuresPerMode(t *testing.T) {
	race := `{"Action":"pass","Package":"x/prefetch","Test":"TestA"}
{"Action":"pass","Package":"x/prefetch","Test":"TestA"}
{"Action":"pass","Package":"x/prefetch"}
`
	hog := `{"Action":"fail","Package":"x/prefetch","Test":"TestA"}
{"Action":"pass","Package":"x/prefetch","Test":"TestA"}
{"Action":"fail","Package":"x/prefetch"}
not json: a build error
{"Action":"fail","Package":"x/cache"}
`
	tb := &table{rows: map[string]map[string]*tally{}, modes: []string{"race", "hog"}}
	if err := tb.read("race", strings.NewReader(race)); err != nil {
		t.Fatal(err)
	}
	if err := tb.read("hog", strings.NewReader(hog)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if n := tb.print(&out); n != 2 {
		t.Errorf("%d failures counted, want 2 (TestA once, the cache package once)", n)
	}
	want := `| test | race runs | hog runs | failures |
|---|---|---|---|
| cache (package run) | – | 1 | 1 |
| prefetch.TestA | 2 | 2 | 1 |
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}
