package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Table is the summary of one workload on one store: a row per sweep
// value, pass and system.
type Table struct {
	Scenario, Workload, Store, Dataset string
	Figure                             string
	Higher                             bool
	XName                              string
	Trees                              []Tree // in the order the rows name them
	Machines                           []string
	Rows                               []Row
}

// Tree is one tree the rows of a table were measured with, and the
// systems whose rows name it.
type Tree struct {
	Tree    string
	Systems []string
}

// Row is one system at one point, over its rounds.
type Row struct {
	X                   float64
	Pass                int
	System, Role        string
	Median, Min, Max    float64
	Rounds, Failed      int
	Failures            []string // the distinct reasons of the failed rounds, first lines
	Skipped             string   // why the scenario does not run this row (Record.Skipped)
	VsCeiling, VsPeer   float64  // NaN when there is no ceiling or peer row
	DaemonCPU, StoreCPU float64  // CPU-seconds per GB read, medians
	ReaderCPU           float64
	PeakRSSMiB          float64
	FetchedPerRead      float64 // bytes the store sent per byte the readers got
	FetchedPerServed    float64 // shardfs: bytes it fetched per byte it answered READs with (its own counters)
	EvictedPerServed    float64 // shardfs: bytes it fetched and evicted unread per byte it answered READs with
}

// Series is one line of a plot: a system's medians and ranges against X.
type Series struct {
	System string    `json:"system"`
	X      []float64 `json:"x"`
	Median []float64 `json:"median"`
	Min    []float64 `json:"min"`
	Max    []float64 `json:"max"`
}

// Plot is one PNG: a workload's figure against its swept parameter.
type Plot struct {
	Key    string   `json:"key"` // scenario/workload/store, as Markdown's links are keyed
	File   string   `json:"file"`
	Title  string   `json:"title"`
	XLabel string   `json:"xlabel"`
	YLabel string   `json:"ylabel"`
	Series []Series `json:"series"`
}

// Summarize groups records into tables, in the order their workloads
// first appear.
func Summarize(recs []Record) []Table {
	type key struct{ scenario, workload, store string }
	var order []key
	groups := map[key][]Record{}
	for _, r := range recs {
		k := key{r.Scenario, r.Workload, r.Store}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Table
	for _, k := range order {
		out = append(out, summarize(groups[k]))
	}
	return out
}

func summarize(recs []Record) Table {
	first := recs[0]
	if i := slices.IndexFunc(recs, func(r Record) bool { return r.Skipped == "" }); i >= 0 {
		first = recs[i] // a skipped row names no figure
	}
	t := Table{Scenario: first.Scenario, Workload: first.Workload, Store: first.Store, Dataset: first.Dataset,
		Figure: first.Figure, Higher: first.HigherIsBetter, XName: first.XName}
	type point struct {
		x    float64
		pass int
	}
	type cell struct {
		point
		system string
	}
	var systems []string
	var points []point
	cells := map[cell][]Record{}
	roles := map[string]string{}
	for _, r := range recs {
		if !slices.Contains(systems, r.System) {
			systems = append(systems, r.System)
		}
		p := point{r.X, r.Pass}
		if !slices.Contains(points, p) {
			points = append(points, p)
		}
		cells[cell{p, r.System}] = append(cells[cell{p, r.System}], r)
		roles[r.System] = r.Role
		if r.Skipped != "" {
			continue
		}
		t.Trees = addTree(t.Trees, r.Tree, r.System)
		if m := r.Machine.String(); !slices.Contains(t.Machines, m) {
			t.Machines = append(t.Machines, m)
		}
	}
	sort.SliceStable(points, func(i, j int) bool {
		if points[i].x != points[j].x {
			return points[i].x < points[j].x
		}
		return points[i].pass < points[j].pass
	})
	for _, p := range points {
		var rows []Row
		for _, y := range systems {
			rs := cells[cell{p, y}]
			if len(rs) == 0 {
				continue
			}
			rows = append(rows, summarizeCell(rs, p.x, p.pass, y, roles[y]))
		}
		ceiling, peer := math.NaN(), math.NaN()
		for _, r := range rows {
			if r.Rounds == 0 {
				continue
			}
			switch r.Role {
			case "ceiling":
				if math.IsNaN(ceiling) || better(r.Median, ceiling, t.Higher) {
					ceiling = r.Median
				}
			case "peer":
				if math.IsNaN(peer) || better(r.Median, peer, t.Higher) {
					peer = r.Median
				}
			}
		}
		for i := range rows {
			rows[i].VsCeiling, rows[i].VsPeer = rows[i].Median/ceiling, rows[i].Median/peer
		}
		t.Rows = append(t.Rows, rows...)
	}
	return t
}

// addTree notes that system's rows name tree.
func addTree(trees []Tree, tree, system string) []Tree {
	i := slices.IndexFunc(trees, func(t Tree) bool { return t.Tree == tree })
	if i < 0 {
		return append(trees, Tree{Tree: tree, Systems: []string{system}})
	}
	if !slices.Contains(trees[i].Systems, system) {
		trees[i].Systems = append(trees[i].Systems, system)
	}
	return trees
}

// treesText names the tables' trees: one alone, or each with its systems.
func treesText(trees []Tree) string {
	if len(trees) == 1 {
		return "tree " + trees[0].Tree
	}
	var parts []string
	for _, t := range trees {
		parts = append(parts, fmt.Sprintf("%s (%s)", t.Tree, strings.Join(t.Systems, ", ")))
	}
	return "trees " + strings.Join(parts, ", ")
}

func (t Table) key() string { return t.Scenario + "/" + t.Workload + "/" + t.Store }

func better(a, b float64, higher bool) bool {
	if higher {
		return a > b
	}
	return a < b
}

func summarizeCell(rs []Record, x float64, pass int, system, role string) Row {
	row := Row{X: x, Pass: pass, System: system, Role: role}
	var vals, daemon, store, readers, rss, fetched, perServed, evicted []float64
	for _, r := range rs {
		if r.Skipped != "" {
			row.Skipped = r.Skipped
			continue
		}
		if r.Error != "" {
			row.Failed++
			if reason, _, _ := strings.Cut(r.Error, "\n"); !slices.Contains(row.Failures, reason) {
				row.Failures = append(row.Failures, reason)
			}
			continue
		}
		vals = append(vals, r.Value)
		gb := float64(r.BytesRead) / 1e9
		if gb > 0 {
			if r.DaemonPeakRSS > 0 { // a mount: local copies and direct GETs have no daemon
				daemon = append(daemon, r.CPU.Daemon/gb)
			}
			store = append(store, (r.CPU.Store+r.CPU.Proxy)/gb)
			readers = append(readers, r.CPU.Readers/gb)
			fetched = append(fetched, float64(r.StoreSentBytes)/float64(r.BytesRead))
		}
		if r.DaemonPeakRSS > 0 {
			rss = append(rss, float64(r.DaemonPeakRSS)/(1<<20))
		}
		if r.DaemonServedBytes > 0 {
			perServed = append(perServed, float64(r.DaemonFetchedBytes)/float64(r.DaemonServedBytes))
			if r.DaemonEvictedUnreadBytes != nil {
				evicted = append(evicted, float64(*r.DaemonEvictedUnreadBytes)/float64(r.DaemonServedBytes))
			}
		}
	}
	row.Rounds = len(vals)
	row.Median, row.Min, row.Max = median(vals), math.NaN(), math.NaN()
	if len(vals) > 0 {
		row.Min, row.Max = slices.Min(vals), slices.Max(vals)
	}
	row.DaemonCPU, row.StoreCPU, row.ReaderCPU = median(daemon), median(store), median(readers)
	row.PeakRSSMiB, row.FetchedPerRead, row.FetchedPerServed = median(rss), median(fetched), median(perServed)
	row.EvictedPerServed = median(evicted)
	return row
}

// notRun reports whether the row was skipped in every round (Skipped)
// and so has no figures and no failures.
func (r Row) notRun() bool { return r.Skipped != "" && r.Rounds == 0 && r.Failed == 0 }

// median is the middle value (the mean of the middle two), NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Markdown renders the tables: a heading, what made them, the plot (plots
// maps a Plot's Key to its link) and the rows.
func Markdown(tables []Table, plots map[string]string) string {
	var b strings.Builder
	for _, t := range tables {
		dir := "higher is better"
		if !t.Higher {
			dir = "lower is better"
		}
		fmt.Fprintf(&b, "### %s: %s, %s store\n\n", t.Scenario, t.Workload, t.Store)
		fmt.Fprintf(&b, "`shardfs bench run bench/scenarios/%s.yaml`, data set %s; figure: %s (%s); %s; %s.\n\n",
			t.Scenario, t.Dataset, t.Figure, dir, treesText(t.Trees), strings.Join(t.Machines, "; "))
		if png, ok := plots[t.key()]; ok {
			fmt.Fprintf(&b, "![%s %s, %s](%s)\n\n", t.Scenario, t.Workload, t.Store, png)
		}
		var head []string
		if t.XName != "" {
			head = append(head, t.XName)
		}
		passes := slices.ContainsFunc(t.Rows, func(r Row) bool { return r.Pass > 1 })
		if passes {
			head = append(head, "pass")
		}
		head = append(head, "system", t.Figure+" (median)", "range", "rounds", "× ceiling", "× best peer",
			"daemon CPU-s/GB", "store CPU-s/GB", "readers CPU-s/GB", "daemon peak RSS MiB", "fetched / read", "daemon fetched / served", "daemon evicted unread / served")
		fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat("---|", len(head)))
		for _, r := range t.Rows {
			var cols []string
			if t.XName != "" {
				cols = append(cols, num(r.X))
			}
			if passes {
				cols = append(cols, fmt.Sprint(r.Pass))
			}
			rounds := fmt.Sprint(r.Rounds)
			if r.Failed > 0 {
				rounds += fmt.Sprintf(" (%d failed)", r.Failed)
			}
			figure, span := num(r.Median), num(r.Min)+"–"+num(r.Max)
			switch {
			case r.notRun():
				figure, span = "not run", "–"
			case r.Rounds == 0:
				figure, span = "failed", "–"
			}
			cols = append(cols, r.System, figure, span, rounds, num(r.VsCeiling), num(r.VsPeer),
				num(r.DaemonCPU), num(r.StoreCPU), num(r.ReaderCPU), num(r.PeakRSSMiB), num(r.FetchedPerRead), num(r.FetchedPerServed), num(r.EvictedPerServed))
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cols, " | "))
		}
		b.WriteString("\n")
		writeFailures(&b, t)
	}
	return b.String()
}

// writeFailures lists, under a table, why each of its failed rounds
// failed, and why each row not run was skipped: such rows have no
// figures, so the table shows none.
func writeFailures(b *strings.Builder, t Table) {
	var skipped []string
	for _, r := range t.Rows {
		if r.notRun() {
			skipped = append(skipped, fmt.Sprintf("- %s: %s\n", r.System, r.Skipped))
		}
	}
	if len(skipped) > 0 {
		b.WriteString("Not run:\n\n" + strings.Join(skipped, "") + "\n")
	}
	var lines []string
	for _, r := range t.Rows {
		if r.Failed == 0 {
			continue
		}
		where := r.System
		if t.XName != "" {
			where += fmt.Sprintf(" at %s %s", t.XName, num(r.X))
		}
		if r.Pass > 1 {
			where += fmt.Sprintf(", pass %d", r.Pass)
		}
		lines = append(lines, fmt.Sprintf("- %s: %d of %d rounds failed: %s\n", where, r.Failed, r.Failed+r.Rounds,
			strings.Join(r.Failures, "; ")))
	}
	if len(lines) > 0 {
		b.WriteString("Failed:\n\n" + strings.Join(lines, "") + "\n")
	}
}

// num writes a figure with three significant digits, and "–" for none.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.3g", v)
}

// Plots lists a plot per table whose workload sweeps a parameter: each
// system's median figure, with its range, against the parameter.
func Plots(tables []Table) []Plot {
	var out []Plot
	for _, t := range tables {
		if t.XName == "" {
			continue
		}
		p := Plot{Key: t.key(), File: fmt.Sprintf("%s-%s-%s.png", t.Scenario, t.Workload, t.Store),
			Title:  fmt.Sprintf("%s: %s, %s store", t.Scenario, t.Workload, t.Store),
			XLabel: t.XName, YLabel: t.Figure}
		for _, r := range t.Rows {
			if r.Pass > 1 || r.Rounds == 0 {
				continue
			}
			i := slices.IndexFunc(p.Series, func(s Series) bool { return s.System == r.System })
			if i < 0 {
				p.Series = append(p.Series, Series{System: r.System})
				i = len(p.Series) - 1
			}
			s := &p.Series[i]
			s.X, s.Median = append(s.X, r.X), append(s.Median, r.Median)
			s.Min, s.Max = append(s.Min, r.Min), append(s.Max, r.Max)
		}
		out = append(out, p)
	}
	return out
}

// Markers bound the generated part of a document: Splice replaces what
// lies between them and leaves the rest as written.
const (
	BeginMarker = "<!-- generated by shardfs bench report: begin -->"
	EndMarker   = "<!-- generated by shardfs bench report: end -->"
)

// Splice puts generated between the markers of doc.
func Splice(doc, generated string) (string, error) {
	i, j := strings.Index(doc, BeginMarker), strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("the document has no %q ... %q section", BeginMarker, EndMarker)
	}
	return doc[:i+len(BeginMarker)] + "\n" + generated + doc[j:], nil
}
