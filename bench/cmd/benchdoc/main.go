// Command benchdoc writes docs/benchmarks.md and its SVG charts from the
// results lockbench wrote (lockbench -suite -out) and, when it exists, the
// market benchmark's results/market.json.
//
// Usage (from bench/; `make bench` runs it):
//
//	benchdoc [-in results/lockbench.json] [-market results/market.json] [-family results/family.json] [-doc ../docs/benchmarks.md] [-svg ../docs/bench]
//
// With -family it adds the lock family's section (familybench's results).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// Default paths, relative to bench/.
const (
	DefaultIn     = "results/lockbench.json"
	DefaultMarket = "results/market.json"
	DefaultDoc    = "../docs/benchmarks.md"
	DefaultSVG    = "../docs/bench"
	DefaultNotes  = "../docs/bench/notes.md"
)

func main() {
	var o options
	flag.StringVar(&o.in, "in", DefaultIn, "lockbench's results file")
	flag.StringVar(&o.market, "market", DefaultMarket, "the market benchmark's results (optional: the doc says \"not run\" without it)")
	flag.StringVar(&o.family, "family", "", "familybench's results: adds the lock family's section (\"not run\" when the file does not exist); none without the flag")
	flag.StringVar(&o.doc, "doc", DefaultDoc, "the markdown file to write")
	flag.StringVar(&o.svg, "svg", DefaultSVG, "the directory for the SVG charts")
	flag.StringVar(&o.notes, "notes", DefaultNotes, "hand-written analysis included after the targets (optional: skipped when the file does not exist)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "benchdoc: unexpected arguments; see benchdoc -h")
		os.Exit(2)
	}
	if err := generate(o); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(1)
	}
}

type options struct{ in, market, family, doc, svg, notes string }

// generate reads the results and writes the charts, then the document that
// links them.
func generate(o options) error {
	f, err := results.Read(o.in)
	if err != nil {
		return err
	}
	market, err := results.ReadMarket(o.market)
	if err != nil {
		return err
	}
	var family *results.Family
	if o.family != "" {
		if family, err = results.ReadFamily(o.family); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.svg, 0o755); err != nil {
		return fmt.Errorf("creating the chart directory: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(o.doc), o.svg)
	if err != nil {
		return fmt.Errorf("linking the charts from %s: %w", o.doc, err)
	}
	var links []chartLink
	var errs []error
	for _, ch := range charts {
		var buf bytes.Buffer
		if err := ch.render(&buf, f); errors.Is(err, errNoData) {
			continue
		} else if err != nil {
			errs = append(errs, fmt.Errorf("chart %s: %w", ch.file, err))
			continue
		}
		if err := os.WriteFile(filepath.Join(o.svg, ch.file), buf.Bytes(), 0o644); err != nil {
			errs = append(errs, err)
			continue
		}
		links = append(links, chartLink{file: ch.file, title: ch.title, path: filepath.ToSlash(filepath.Join(rel, ch.file))})
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	notes, err := os.ReadFile(o.notes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading the notes: %w", err)
	}
	var doc bytes.Buffer
	writeDoc(&doc, docInput{file: f, market: market, marketPath: o.market, family: family, familyPath: o.family, charts: links, notes: string(notes)})
	return os.WriteFile(o.doc, doc.Bytes(), 0o644)
}
