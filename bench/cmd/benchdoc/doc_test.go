package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// assertContains reports each of wants that doc lacks.
func assertContains(t *testing.T, doc string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(doc, want) {
			t.Errorf("the document lacks %q", want)
		}
	}
}

// generateFixture runs benchdoc on testdata/lockbench.json into a temporary
// tree shaped like the repository (docs/benchmarks.md, docs/bench/*.svg) and
// returns the document and the tree's root.
func generateFixture(t *testing.T, market []results.Market) (string, string) {
	t.Helper()
	root := t.TempDir()
	o := options{
		in:     "testdata/lockbench.json",
		market: filepath.Join(root, "market.json"),
		doc:    filepath.Join(root, "docs", "benchmarks.md"),
		svg:    filepath.Join(root, "docs", "bench"),
	}
	if err := os.MkdirAll(filepath.Dir(o.doc), 0o755); err != nil {
		t.Fatal(err)
	}
	if market != nil {
		b, err := json.Marshal(market)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(o.market, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := generate(o); err != nil {
		t.Fatalf("generate: %v", err)
	}
	doc, err := os.ReadFile(o.doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc), root
}

// sectionOf is the part of doc from the heading from to the heading to.
func sectionOf(t *testing.T, doc, from, to string) string {
	t.Helper()
	i, j := strings.Index(doc, from), strings.Index(doc, to)
	if i < 0 || j < i {
		t.Fatalf("no section from %q to %q (at %d, %d)", from, to, i, j)
	}
	return doc[i:j]
}

// generateDoc runs benchdoc with o and returns the document.
func generateDoc(t *testing.T, o options) string {
	t.Helper()
	if err := generate(o); err != nil {
		t.Fatalf("generate: %v", err)
	}
	doc, err := os.ReadFile(o.doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

func TestDocTables(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	assertContains(t, doc,
		"# Benchmarks",
		"- **Machine:** Test CPU, 2 cores, linux 6.1.0",
		"- **Go:** go1.25.0",
		"- **Redis:** 7.0.15, redis-server process on loopback",
		"- **Command:** `go run ./cmd/lockbench -suite -out results/lockbench.json`",
		"- **Date:** 2025-01-02 03:04:05 UTC",
		"### (a) uncontended: 1 × 1 goroutines, 1 key, critical section 0µs",
		"### (d) one hot key, 1ms work: 4 × 8 goroutines, 1 key, critical section 1.0ms",
		// latchkey in (b): 60000 acq/s is 1.20× rueidislock's 50000, the
		// best peer; every figure with its range.
		"| latchkey | pub/sub wake-up, no polling | 60000 (54000–66000) | 1.20× | 400µs (360µs–440µs) | 2.0ms (1.8ms–2.2ms) | 0.95× | "+
			"2.4ms (2.2ms–2.6ms) | 3.0ms (2.7ms–3.3ms) | 15µs (14µs–16µs) | 1.07× | 8.00 (7.20–8.80) | 0 | 0 |",
		// A range of one value is left out.
		"| latchkey | pub/sub wake-up, no polling | 10000 | 1.11× | 90µs | 150µs |",
		// Every peer names its setting.
		"| redsync | delay random 50ms–250ms (its default) | 8000 (7200–8800) |",
		"| redislock | backoff 4ms–128ms, 2^(n+1) ms | 9000 (8100–9900) |",
		// A pipe in an error message must not split the cell.
		"| 2 (+1 timeouts) — last: unlock: a\\|b |",
		"## Watchdog scale",
		"| 10000 | 100 | 100 | 10000 | 30.0ms | 9.0ms | 10 |",
		"| 100000 | 1000 | 1000 | 100000 | 290.0ms | 140.0ms (1 GC cycle) | 11 |",
		"commands a Lua script runs as well as the EVALSHA",
		"\n| --- | --- | ---: | ---: |", // the setting column is text
	)
	results := sectionOf(t, doc, "## Results by scenario", "## Spin frontier")
	if n := strings.Count(results, "\n### ("); n != 5 {
		t.Errorf("%d scenario tables, want 5", n)
	}
	// Sweep points stay out of the scenario tables.
	if strings.Contains(results, "delay 8ms") {
		t.Error("a sweep point is in a scenario table")
	}
}

// TestDocFrontier: the frontier's section has the chart and a table per
// contended scenario with every setting, the default and the sweep's.
func TestDocFrontier(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	section := sectionOf(t, doc, "## Spin frontier", "## (f) Idle waiting")
	assertContains(t, section,
		"![Spin frontier: p99 wait against Redis CPU per acquisition, per retry setting](bench/frontier.svg)",
		"at every other one of 2ms, 8ms, 32ms and 128ms",
		"Defaults ran 5s per repetition, sweep points 2s",
		"**(c) one hot key: 4×8, 1 key, cs 0µs**",
		"| latchkey-spin | backoff 1ms–8ms, jittered | 60.0ms (54.0ms–66.0ms) | 110µs (99µs–121µs) | 0µs | 90.0ms (81.0ms–99.0ms) | 850 (765–935) | 7.00 (6.30–7.70) | 0 |",
		"| redsync | delay 8ms | 300.0ms (270.0ms–330.0ms) | 90µs (81µs–99µs) |",
	)
	if strings.Contains(section, "(a) uncontended") {
		t.Error("the frontier covers (a)")
	}
	// Per library, settings by value: latchkey-spin's caps ascending,
	// redsync's fixed delays before its random default.
	d := section[strings.Index(section, "**(d)"):strings.Index(section, "**(e)")]
	assertInOrder(t, "(d) frontier table", d, "| latchkey |", "backoff 1ms–2ms, jittered", "backoff 1ms–8ms, jittered", "backoff 1ms–32ms, jittered",
		"backoff 1ms–128ms, jittered", "| redsync | delay 8ms", "| redsync | delay 32ms", "| redsync | delay random", "| redislock | backoff 4ms–8ms",
		"| redislock | backoff 4ms–128ms", "| rueidislock |")
}

// assertInOrder reports each of parts that text lacks or has before the
// part listed ahead of it.
func assertInOrder(t *testing.T, what, text string, parts ...string) {
	t.Helper()
	last := -1
	for _, s := range parts {
		i := strings.Index(text, s)
		if i <= last {
			t.Errorf("%s: %q at %d, after %d", what, s, i, last)
		}
		last = i
	}
}

func TestDocIdle(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	section := sectionOf(t, doc, "## (f) Idle waiting", "## (g) Fleet")
	assertContains(t, section,
		"**4 × 16 goroutines, 1 key, holders keep it 2.00s.**",
		"readings every 100.0ms, counted only 1.00s after the run's start (when every waiter is just starting to wait) and at least 250.0ms away from every grant and release, and from the run's end",
		"| library | setting | Redis cmds/s while blocked | Redis CPU ms/s while blocked |",
		"| baseline | Redis with no client but the sampler | 0.00 | 2.30 (1.84–2.76) | 2.80s (2.24s–3.36s) | 0 | 0 | 0 |",
		"| latchkey | pub/sub wake-up, no polling | 0.20 (0.16–0.24) | 2.40 (1.92–2.88) | 2.80s (2.24s–3.36s) | 2 | 0 | 0 |",
		"| redsync | delay random 50ms–250ms (its default) | 1268 (1014–1522) |",
	)
}

// TestDocFleet: the fleet's section has its chart and a row per library per
// size, sizes ascending, with throughput as a share of 1/cs, the pub/sub
// calls and the tries, "–" for a library that does not count them.
func TestDocFleet(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	section := sectionOf(t, doc, "## (g) Fleet", "## Where the Redis CPU goes")
	assertContains(t, section,
		"**(g) fleet, one goroutine per process: 4, 16 and 64 processes × 1 goroutine, 1 key, critical section 5.0ms.**",
		"a share of 1/cs (200 acquisitions/s",
		"Runs of 2s, medians over 3 repetitions, min–max in parentheses.",
		"![Fleet (g): Redis CPU per acquisition against the number of processes](bench/fleet-cpu.svg)",
		"| processes | library | setting | acq/s | % of 1/cs | Redis CPU/acq | Redis cmds/acq | SUBSCRIBE/acq | UNSUBSCRIBE/acq | tries/acq | mean wait | max wait | violations | errors |\n"+
			"| --- | --- | --- | ---: |",
		// 180 acq/s with a 5ms critical section is 90% of 1/cs.
		"| 4 | latchkey | pub/sub wake-up, no polling | 180 (162–198) | 90.0% (81.0%–99.0%) | 600µs (540µs–660µs) | 33.0 (29.7–36.3) | "+
			"1.00 (0.90–1.10) | 0.99 (0.89–1.09) | 3.00 (2.70–3.30) | 17.0ms (15.3ms–18.7ms) | 25.0ms (22.5ms–27.5ms) | 0 | 0 |",
		"| 64 | latchkey-spin | backoff 1ms–128ms, jittered | 124 (112–136) | 62.0% (55.8%–68.2%) | 1.1ms (1.0ms–1.3ms) | 34.0 (30.6–37.4) | 0.00 | 0.00 | 8.00 (7.20–8.80) |",
		"| 64 | rueidislock | invalidation wake-up, no polling | 34.0 (30.6–37.4) | 17.0% (15.3%–18.7%) | 5.2ms (4.7ms–5.7ms) | 191 (172–210) | 0.00 | 0.00 | – | 1.00s (900.0ms–1.10s) |",
	)
	if n := strings.Count(section, "\n| "); n != 2+15 {
		t.Errorf("%d table lines, want the header, its rule and 5 libraries × 3 sizes", n)
	}
	assertInOrder(t, "fleet table", section, "| 4 | latchkey |", "| 4 | rueidislock |", "| 16 | latchkey |", "| 16 | rueidislock |", "| 64 | latchkey |", "| 64 | rueidislock |")
	// The fleet chart is in its section, not among the bar charts.
	if strings.Contains(sectionOf(t, doc, "## Charts", "## Watchdog scale"), fleetFile) {
		t.Error("the fleet chart is under Charts too")
	}
	assertContains(t, sectionOf(t, doc, "## Method", "**Violations**"),
		"**Fleet (g).**", "SUBSCRIBE per acquisition is INFO commandstats' calls of SUBSCRIBE and SSUBSCRIBE", "those of UNSUBSCRIBE and SUNSUBSCRIBE")
}

// TestDocFleetOnly: a run of scenario g alone makes a document with the
// fleet and its chart, and no bar charts, which have nothing to show.
func TestDocFleetOnly(t *testing.T) {
	dir := t.TempDir()
	f, err := results.Read("testdata/lockbench.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Results, f.Sweep, f.Idle, f.Watchdog, f.Meta.Scenarios = nil, nil, nil, nil, nil
	f.Fleet.Reps = 1 // as make bench runs it
	in := filepath.Join(dir, "in.json")
	if err := results.Write(in, f); err != nil {
		t.Fatal(err)
	}
	doc := generateDoc(t, options{in: in, market: filepath.Join(dir, "m.json"), doc: filepath.Join(dir, "b.md"), svg: dir})
	assertContains(t, doc, "## (g) Fleet", "| 16 | redsync |", "(fleet-cpu.svg)", "Runs of 2s, one repetition, so each figure is one run's and has no range.")
	for _, file := range []string{"throughput.svg", frontierFile} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			t.Errorf("%s was written without a scenario to chart", file)
		}
	}
}

func TestDocCommands(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	section := sectionOf(t, doc, "## Where the Redis CPU goes", "## Charts")
	if n := strings.Count(section, "| command | latchkey | latchkey-spin |"); n != 5 {
		t.Errorf("%d command tables, want one per scenario (5)", n)
	}
	c := section[strings.Index(section, "**(c)"):strings.Index(section, "**(d)")]
	// Most called first, then by name; a command one lock does not call
	// is "–"; the last row is the total.
	want := "| EVALSHA | 2.00 (1.50–2.50) | 2.50 (2.00–3.00) |\n| GET | 1.50 | – |\n| HGET | 1.00 | 1.00 |\n| INCR | 1.00 | 1.00 |\n" +
		"| PTTL | 1.00 | 1.00 |\n| SET | 1.00 | 1.00 |\n| PUBLISH | 0.50 | – |\n| all (Redis cmds/acq) | 7.60 (6.84–8.36) | 6.50 (5.85–7.15) |\n"
	if !strings.Contains(c, want) {
		t.Errorf("(c) command table:\n%s\nwant:\n%s", c, want)
	}
}

// TestDocTargets checks every verdict against the fixture's figures.
func TestDocTargets(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	want := map[string]status{
		// (c): latchkey-spin at its default cap, 1.5ms at 29µs, is below
		// latchkey's 5ms at 30µs on both.
		"(c) spin frontier": missed,
		"(d) spin frontier": met,
		"(e) spin frontier": met,
		// 0.2 cmds/s against latchkey-spin's 61.5 and the pollers' 1268 and 1485.
		"(f) latchkey Redis cmds/s while blocked ≤ 0.05 × latchkey-spin's": met,
		"(f) latchkey Redis cmds/s while blocked ≤ 0.05 × every polling":   met,
		"(a) latchkey acq/s ≥ 1.00 × best peer's":                          met,
		"(b) latchkey acq/s ≥ 1.00 × best peer's":                          met,
		"(c) latchkey acq/s ≥ 1.00 × best peer's":                          met,
		"(d) latchkey acq/s ≥ 1.00 × best peer's":                          met,
		"(e) latchkey acq/s ≥ 1.00 × best peer's":                          missed, // 189 against 192
		"(a) latchkey Redis CPU/acq ≤ 1.00 × best peer's":                  met,
		"(b) latchkey Redis CPU/acq ≤ 1.00 × best peer's":                  missed, // 15 against 14
		"(c) latchkey Redis CPU/acq ≤ 1.00 × best peer's":                  met,
		"(d) latchkey Redis CPU/acq ≤ 1.00 × best peer's":                  met,
		"(e) latchkey Redis CPU/acq ≤ 1.00 × best peer's":                  met,
		"(c) latchkey p99 wait ≤ 0.25 × best peer's":                       met,
		"(d) latchkey p99 wait ≤ 0.25 × best peer's":                       missed, // 40ms against 130ms
		"(e) latchkey p99 wait ≤ 0.25 × best peer's":                       met,
		// cycle 100µs (1/10000 acq/s), ideal 1/(1ms+100µs) = 909: 880 is 0.97×.
		"(d) latchkey acq/s ≥ 0.95 × ideal":      met,
		"watchdog: ≤ 1 000 renew calls per tick": met,
		"watchdog: goroutine count constant":     missed, // 10, 10, 10, 11
	}
	rows := regexp.MustCompile(`(?m)^\| (\(.\)|watchdog:)(.*) \| (.*) \| \*\*(.*)\*\* \|$`).FindAllStringSubmatch(doc, -1)
	if len(rows) != len(want) {
		t.Fatalf("%d target rows, want %d:\n%q", len(rows), len(want), rows)
	}
	for _, r := range rows {
		what := r[1] + r[2]
		found := false
		for prefix, st := range want {
			if strings.HasPrefix(what, prefix) {
				found = true
				if status(r[4]) != st {
					t.Errorf("target %q: %s (%s), want %s", what, r[4], r[3], st)
				}
			}
		}
		if !found {
			t.Errorf("unexpected target %q", what)
		}
	}
	assertContains(t, doc,
		"880 acq/s = 0.97× ideal (909 acq/s: cs 1.0ms + cycle 100µs)",
		// A missed frontier says which setting beat latchkey, and by how much.
		"at or below latchkey on both: cap 128ms*: p99 3.33×, CPU 1.03×.",
		// A peer's figure names its setting.
		"40.0ms = 0.31× redislock [backoff 4ms–128ms, 2^(n+1) ms]'s 130.0ms",
		"0.20 cmds/s = 0.00× latchkey-spin [backoff 1ms–128ms, jittered]'s 61.5",
	)
}

// TestDocWithoutSweepOrIdle: results from before the sweep and scenario f
// (or a run without them) still make a document; those parts say nothing
// or "not measured", and the frontier chart is left out.
func TestDocWithoutSweepOrIdle(t *testing.T) {
	dir := t.TempDir()
	f, err := results.Read("testdata/lockbench.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Sweep, f.Idle, f.Fleet = nil, nil, nil
	f.Meta.Scenarios = f.Meta.Scenarios[:2] // a and b only
	in := filepath.Join(dir, "in.json")
	if err := results.Write(in, f); err != nil {
		t.Fatal(err)
	}
	doc := generateDoc(t, options{in: in, market: filepath.Join(dir, "m.json"), doc: filepath.Join(dir, "b.md"), svg: dir})
	for _, part := range []string{"## Spin frontier", "## (f) Idle waiting", "frontier.svg", "## (g) Fleet", "fleet-cpu.svg", "**Fleet (g).**"} {
		if strings.Contains(doc, part) {
			t.Errorf("the document has %q without its results", part)
		}
	}
	for _, file := range []string{frontierFile, fleetFile} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			t.Errorf("%s was written without its results", file)
		}
	}
	assertContains(t, doc, "| (f) latchkey Redis cmds/s while blocked ≤ 0.05 × every polling peer's | – | **not measured** |")
}

func TestDocChartsAreSVG(t *testing.T) {
	doc, root := generateFixture(t, nil)
	links := regexp.MustCompile(`!\[[^]]*\]\(([^)]+\.svg)\)`).FindAllStringSubmatch(doc, -1)
	if len(links) != len(charts) {
		t.Fatalf("%d chart links, want %d", len(links), len(charts))
	}
	for _, l := range links {
		path := filepath.Join(root, "docs", filepath.FromSlash(l[1]))
		f, err := os.Open(path)
		if err != nil {
			t.Fatalf("chart link %s: %v", l[1], err)
		}
		root, texts := parseSVG(t, f)
		f.Close()
		if root != "svg" {
			t.Errorf("%s: root element %q, want svg", l[1], root)
		}
		want := []string{"latchkey", "redislock", "(d) one hot key, 1ms work: 4×8, 1 key, cs 1.0ms"}
		switch {
		case strings.HasSuffix(l[1], frontierFile):
			// Each polling library's points are labelled with their setting.
			want = append(want, "cap 2ms", "cap 128ms*", "delay 8ms", "rueidislock")
		case strings.HasSuffix(l[1], fleetFile):
			// A line per library, named with its setting, over the sizes.
			want = []string{"(g) fleet, one goroutine per process: 4/16/64 × 1, 1 key, cs 5.0ms", "latchkey", "rueidislock",
				"redsync (delay 50–250ms)", "latchkey-spin (cap 128ms)", "\n4\n", "\n16\n", "\n64\n", "Redis CPU per acquisition, µs (log)"}
		default:
			want = append(want, "redsync (delay 50–250ms)", "latchkey-spin (cap 128ms)")
		}
		for _, w := range want {
			if !strings.Contains(texts, w) {
				t.Errorf("%s has no text %q", l[1], w)
			}
		}
	}
}

// parseSVG reads a whole XML document and returns its root element's name
// and all its character data.
func parseSVG(t *testing.T, r io.Reader) (string, string) {
	t.Helper()
	dec := xml.NewDecoder(r)
	var root string
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		}
	}
	return root, text.String()
}

func TestDocMarket(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	if !strings.Contains(doc, "## Market\n\nNot run") {
		t.Error("without market.json the market section does not say \"Not run\"")
	}
	market := []results.Market{
		{Variant: "latchkey-item", Sellers: 5, Buyers: 5, DurationS: 60, Listed: 900, Bought: 850, Retries: 3, P50BuyUS: 800, P99BuyUS: 4200, Errors: 0},
		{Variant: "watch", Sellers: 5, Buyers: 5, DurationS: 60, Listed: 200, Bought: 180, Retries: 9000, P50BuyUS: 1500, P99BuyUS: 250000},
		{Variant: "coarse-lock", Sellers: 1, Buyers: 1, DurationS: 60, Listed: 500, Bought: 490, Retries: 0, P50BuyUS: 300, P99BuyUS: 1200},
	}
	doc, _ = generateFixture(t, market)
	assertContains(t, doc,
		"**Table M-1 (cf. Redis in Action 6-1)",
		"**Table M-3 (cf. 6-3)",
		"| watch | 5/5 | 60s | 200 | 180 | 9000 | 1.5ms | 250.0ms | 0 |",
		"| latchkey-item | 5/5 | 60s | 900 | 850 | 3 | 800µs | 4.2ms | 0 |",
	)
	// M-1 has WATCH only, M-2 adds the coarse lock, M-3 has every run.
	section := sectionOf(t, doc, "## Market", "## Method")
	for variant, tables := range map[string]int{"watch": 3, "coarse-lock": 2, "latchkey-item": 1} {
		if n := strings.Count(section, "| "+variant+" |"); n != tables {
			t.Errorf("variant %s is in %d tables, want %d", variant, n, tables)
		}
	}
}

func TestGenerateMissingResults(t *testing.T) {
	dir := t.TempDir()
	err := generate(options{in: filepath.Join(dir, "none.json"), market: filepath.Join(dir, "m.json"), doc: filepath.Join(dir, "b.md"), svg: dir})
	if err == nil || !strings.Contains(err.Error(), "make bench") {
		t.Errorf("generate without results: %v, want an error that says to run make bench", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"results": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := generate(options{in: bad, doc: filepath.Join(dir, "b.md"), svg: dir}); !errors.Is(err, results.ErrBadFile) {
		t.Errorf("generate with no results: %v, want ErrBadFile", err)
	}
}

func TestFormat(t *testing.T) {
	for x, want := range map[float64]string{1234.4: "1234", 56.78: "56.8", 8.004: "8.00", -0.5: "-0.50"} {
		if got := fmtNum(x); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", x, got, want)
		}
	}
	for _, c := range []struct {
		a, b float64
		want string
	}{{3, 2, "1.50×"}, {1, 3, "0.33×"}, {250, 10, "25×"}, {1, 0, "–"}} {
		if got := fmtRatio(c.a, c.b); got != c.want {
			t.Errorf("fmtRatio(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	for _, c := range []struct {
		med, lo, hi float64
		want        string
	}{{12, 10, 14, "12.0 (10.0–14.0)"}, {12, 12, 12, "12.0"}, {12, 0, 0, "12.0"}, {0, 0, 0, "0.00"}, {1, 0, 2, "1.00 (0.00–2.00)"}} {
		if got := fmtSpread(c.med, c.lo, c.hi, fmtNum); got != c.want {
			t.Errorf("fmtSpread(%v, %v, %v) = %q, want %q", c.med, c.lo, c.hi, got, c.want)
		}
	}
	if got := joinNames([]string{"a", "b", "c"}); got != "a, b and c" {
		t.Errorf("joinNames = %q", got)
	}
}

func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var ls []string
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				ls = append(ls, tk.Label)
			}
		}
		return ls
	}
	if got := labels(0.8, 600); !slices.Equal(got, []string{"1", "2", "5", "10", "20", "50", "100", "200", "500"}) {
		t.Errorf("labels over 0.8–600: %v", got)
	}
	// Narrower than a decade: every tick is labelled.
	if got := labels(22, 95); !slices.Equal(got, []string{"30", "40", "50", "60", "70", "80", "90"}) {
		t.Errorf("labels over 22–95: %v", got)
	}
	// Large values in full, small ones short.
	if got := labels(0.15, 25000); !slices.Equal(got, []string{"0.2", "0.5", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "10000", "20000"}) {
		t.Errorf("labels over 0.15–25000: %v", got)
	}
}

// TestDocNotes: a notes file is included after the targets, verbatim; none
// is fine; an unreadable one is an error.
func TestDocNotes(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(notes, []byte("## Why\n\nbecause\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := options{in: "testdata/lockbench.json", market: filepath.Join(dir, "m.json"), doc: filepath.Join(dir, "b.md"), svg: dir, notes: notes}
	s := generateDoc(t, o)
	targets, why, results := strings.Index(s, "## Targets"), strings.Index(s, "## Why\n\nbecause"), strings.Index(s, "## Results by scenario")
	if targets < 0 || why < targets || results < why {
		t.Fatalf("notes not between the targets and the results (at %d, %d, %d)", targets, why, results)
	}
	o.notes = dir // a directory cannot be read as a file
	if err := generate(o); err == nil {
		t.Fatal("an unreadable notes file was ignored")
	}
}

// TestRunOrderClause: the Method says the runs' order rotated only for
// results that say so; older results ran in the same order every time.
func TestRunOrderClause(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	assertContains(t, doc, "the runs go one after another (A B C …, A B C …: the same order in every repetition)")
	if !strings.Contains(runOrderClause(true), "rotates") || strings.Contains(runOrderClause(false), "rotates") {
		t.Errorf("runOrderClause: %q for rotated results, %q for the others", runOrderClause(true), runOrderClause(false))
	}
}
