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
	tb := newTestTable(false)
	readBoth(t, tb, race, hog)
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

// TestTableByPackageSumsItsTests: with -packages, a package's row counts
// its distinct tests and the runs and failures of all of them.
func TestTableByPackageSumsItsTests(t *testing.T) {
	race := `{"Action":"pass","Package":"x/prefetch","Test":"TestA"}
{"Action":"pass","Package":"x/prefetch","Test":"TestB"}
{"Action":"pass","Package":"x/prefetch","Test":"TestA"}
`
	hog := `{"Action":"fail","Package":"x/prefetch","Test":"TestB"}
`
	tb := newTestTable(true)
	readBoth(t, tb, race, hog)
	var out strings.Builder
	if n := tb.print(&out); n != 1 {
		t.Errorf("%d failures counted, want 1", n)
	}
	want := `| package (tests) | race runs | hog runs | failures |
|---|---|---|---|
| prefetch (2) | 3 | 1 | 1 |
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func newTestTable(byPackage bool) *table {
	return &table{rows: map[string]map[string]*tally{}, rowTests: map[string]map[string]bool{}, byPackage: byPackage, modes: []string{"race", "hog"}}
}

func readBoth(t *testing.T, tb *table, race, hog string) {
	t.Helper()
	if err := tb.read("race", strings.NewReader(race)); err != nil {
		t.Fatal(err)
	}
	if err := tb.read("hog", strings.NewReader(hog)); err != nil {
		t.Fatal(err)
	}
}
