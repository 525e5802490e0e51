package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/locks"
	"github.com/latchkey/latchkey/bench/internal/results"
)

// commandLibs are the libraries whose commands per acquisition the
// document splits by command: latchkey's two locks.
var commandLibs = []string{locks.Latchkey, locks.LatchkeySpin}

// writeCommands shows, per scenario, Redis' calls per acquisition of each
// command for latchkey's locks at their default settings.
func writeCommands(b *bytes.Buffer, f *results.File) {
	b.WriteString("## Where the Redis CPU goes\n\n")
	b.WriteString("Redis' calls per acquisition of each command (INFO commandstats), at the default settings: EVALSHA once per script run, " +
		"and each command a script runs under its own name. The harness's and the connections' own commands are left out " +
		"(" + overheadList() + "); the last row is the Redis cmds/acq of the scenario tables. Medians over the repetitions, min–max in parentheses.\n\n")
	found := false
	for _, sc := range f.Meta.Scenarios {
		var rs []*results.Result
		for _, lib := range commandLibs {
			if r := f.Find(lib, sc.Name); r != nil && len(r.Commands) > 0 {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		found = true
		fmt.Fprintf(b, "**%s**\n\n", scenarioHeading(sc))
		cells := []string{"command"}
		for _, r := range rs {
			cells = append(cells, r.Lib)
		}
		b.WriteString(header(cells...))
		for _, cmd := range commandOrder(rs) {
			cells := []string{strings.ToUpper(cmd)}
			for _, r := range rs {
				sp, ok := r.Commands[cmd]
				if !ok {
					cells = append(cells, "–")
					continue
				}
				cells = append(cells, spreadCell(sp, fmtNum))
			}
			b.WriteString(row(cells...))
		}
		cells = []string{"all (Redis cmds/acq)"}
		for _, r := range rs {
			cells = append(cells, cmds.cell(r))
		}
		b.WriteString(row(cells...))
		b.WriteString("\n")
	}
	if !found {
		b.WriteString("Not measured (a results file without per-command counts).\n\n")
	}
}

// commandOrder lists the commands of rs, most called by the first result
// first, then by name.
func commandOrder(rs []*results.Result) []string {
	var names []string
	for _, r := range rs {
		for cmd := range r.Commands {
			if !slices.Contains(names, cmd) {
				names = append(names, cmd)
			}
		}
	}
	first := rs[0].Commands
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(first[b].Median, first[a].Median), cmp.Compare(a, b))
	})
	return names
}
