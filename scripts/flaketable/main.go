// Command flaketable reads `go test -json` streams and prints one markdown
// table: each test, how many times it ran in each mode, and how many of
// those runs failed. scripts/flakes.sh runs it over the streams of a flake
// hunt; it never runs a test itself.
//
//	flaketable [-packages] MODE=FILE [MODE=FILE ...]
//
// With -packages, a row is a package: how many of its tests ran, and the
// runs and failures of all of them together.
//
// A FILE is the -json output of one `go test` command; MODE names the
// column it counts in (race, gomaxprocs1, hog, e2e). A package that failed
// to build or whose binary exited before its tests reported (a panic, a
// timeout) is counted as a failed run of a row named after the package.
// The exit status is 1 when any run failed.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
)

// event is the part of a test2json event the table needs.
type event struct {
	Action  string
	Package string
	Test    string
}

// tally counts the runs and failures of one row in one mode.
type tally struct{ runs, fails int }

// table is every row's tally per mode.
type table struct {
	modes     []string
	byPackage bool
	rows      map[string]map[string]*tally
	rowTests  map[string]map[string]bool // by package: the tests counted in each row
}

func (t *table) add(mode, row string, failed bool) {
	if t.byPackage {
		pkg, test, _ := strings.Cut(row, ".")
		if t.rowTests[pkg] == nil {
			t.rowTests[pkg] = map[string]bool{}
		}
		t.rowTests[pkg][test] = true
		row = pkg
	}
	if t.rows[row] == nil {
		t.rows[row] = map[string]*tally{}
	}
	c := t.rows[row][mode]
	if c == nil {
		c = &tally{}
		t.rows[row][mode] = c
	}
	c.runs++
	if failed {
		c.fails++
	}
}

// read counts one stream: every pass or fail of a test, and every package
// whose binary failed without a failing test to blame.
func (t *table) read(mode string, r io.Reader) error {
	short := func(pkg string) string {
		if i := strings.LastIndex(pkg, "/"); i >= 0 {
			return pkg[i+1:]
		}
		return pkg
	}
	testFailed := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue // a build error printed as text; its package's "fail" event counts it
		}
		switch {
		case ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail"):
			t.add(mode, short(ev.Package)+"."+ev.Test, ev.Action == "fail")
			if ev.Action == "fail" {
				testFailed[ev.Package] = true
			}
		case ev.Test == "" && ev.Action == "fail":
			if !testFailed[ev.Package] {
				t.add(mode, short(ev.Package)+" (package run)", true)
			}
			testFailed[ev.Package] = false
		}
	}
	return sc.Err()
}

func (t *table) print(w io.Writer) (failures int) {
	names := make([]string, 0, len(t.rows))
	for name := range t.rows {
		names = append(names, name)
	}
	fails := func(name string) int {
		n := 0
		for _, c := range t.rows[name] {
			n += c.fails
		}
		return n
	}
	sort.Slice(names, func(i, j int) bool {
		if fi, fj := fails(names[i]), fails(names[j]); fi != fj {
			return fi > fj
		}
		return names[i] < names[j]
	})
	first := "test"
	if t.byPackage {
		first = "package (tests)"
	}
	fmt.Fprintf(w, "| %s | %s | failures |\n|---|", first, strings.Join(t.modes, " runs | ")+" runs")
	fmt.Fprintf(w, "%s---|\n", strings.Repeat("---|", len(t.modes)))
	for _, name := range names {
		if t.byPackage {
			fmt.Fprintf(w, "| %s (%d) |", name, len(t.rowTests[name]))
		} else {
			fmt.Fprintf(w, "| %s |", name)
		}
		for _, mode := range t.modes {
			if c := t.rows[name][mode]; c != nil {
				fmt.Fprintf(w, " %d |", c.runs)
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintf(w, " %d |\n", fails(name))
		failures += fails(name)
	}
	return failures
}

func main() {
	byPackage := flag.Bool("packages", false, "a row per package instead of per test")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: flaketable [-packages] MODE=FILE [MODE=FILE ...]")
		os.Exit(2)
	}
	t := &table{rows: map[string]map[string]*tally{}, rowTests: map[string]map[string]bool{}, byPackage: *byPackage}
	for _, arg := range flag.Args() {
		mode, file, ok := strings.Cut(arg, "=")
		if !ok || mode == "" {
			fmt.Fprintf(os.Stderr, "flaketable: %q: want MODE=FILE\n", arg)
			os.Exit(2)
		}
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "flaketable: %v\n", err)
			os.Exit(2)
		}
		err = t.read(mode, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "flaketable: %s: %v\n", file, err)
			os.Exit(2)
		}
		if !slices.Contains(t.modes, mode) {
			t.modes = append(t.modes, mode)
		}
	}
	if t.print(os.Stdout) > 0 {
		os.Exit(1)
	}
}
