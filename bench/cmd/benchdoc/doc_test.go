package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
		// latchkey in (b): 60000 acq/s is 1.20× rueidislock's 50000, the best peer.
		"| latchkey | 60000 | 1.20× | 400µs | 2.0ms | 0.95× | 4.0ms | 9.0ms | 15µs | 1.07× | 8.00 | 0 | 0 |",
		// A pipe in an error message must not split the cell.
		"| 2 (+1 timeouts) — last: unlock: a\\|b |",
		"## Watchdog scale",
		"| 10000 | 100 | 100 | 10000 | 30.0ms | 9.0ms | 10 |",
		"| 100000 | 1000 | 1000 | 100000 | 290.0ms | 140.0ms (1 GC cycle) | 11 |",
		"commands a Lua script runs as well as the EVALSHA",
	)
	if n := strings.Count(doc, "\n### ("); n != 4 {
		t.Errorf("%d scenario tables, want 4", n)
	}
}

// TestDocTargets checks every verdict against the fixture's figures.
func TestDocTargets(t *testing.T) {
	doc, _ := generateFixture(t, nil)
	want := map[string]status{
		// handoff 100µs (1/10000 acq/s), ideal 1/(1ms+100µs) = 909: 880 is 0.97×.
		"(d) latchkey acq/s ≥ 0.93 × ideal": met,
		// 40ms against redislock's 130ms is 0.31×.
		"(d) latchkey p99 wait ≤ 0.25 × best peer's":         missed,
		"(d) latchkey Redis CPU/acq ≤ best peer's":           met,
		"(d) latchkey Redis CPU/acq ≤ 0.2 × latchkey-spin's": met,
		"(c) latchkey acq/s ≥ 1.50 × best peer's":            missed,
		"(b) latchkey acq/s ≥ 1.25 × best peer's":            missed,
		"watchdog: ≤ 1 000 renew calls per tick":             met,
		"watchdog: goroutine count constant":                 missed, // 10, 10, 10, 11
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
	if !strings.Contains(doc, "880 acq/s = 0.97× ideal (909 acq/s: cs 1.0ms + handoff 100µs)") {
		t.Error("the (d) ideal target does not show its figures")
	}
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
		for _, want := range []string{"latchkey", "redislock", "(d) one hot key, 1ms work: 4×8, 1 key, cs 1.0ms"} {
			if !strings.Contains(texts, want) {
				t.Errorf("%s has no text %q", l[1], want)
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
	section := doc[strings.Index(doc, "## Market"):strings.Index(doc, "## Method")]
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
	if err := generate(o); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(o.doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	targets, why, results := strings.Index(s, "## Targets"), strings.Index(s, "## Why\n\nbecause"), strings.Index(s, "## Results by scenario")
	if targets < 0 || why < targets || results < why {
		t.Fatalf("notes not between the targets and the results (at %d, %d, %d)", targets, why, results)
	}
	o.notes = dir // a directory cannot be read as a file
	if err := generate(o); err == nil {
		t.Fatal("an unreadable notes file was ignored")
	}
}
