package main

import (
	"time"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// suite is the standard set of scenarios.
var suite = []results.Scenario{
	{Name: "a", Label: "uncontended", Procs: 1, G: 1, Keys: 1},
	{Name: "b", Label: "many keys, one holder each", Procs: 1, G: 32, Keys: 32},
	{Name: "c", Label: "one hot key, no work", Procs: 4, G: 8, Keys: 1},
	{Name: "d", Label: "one hot key, 1ms work", Procs: 4, G: 8, Keys: 1, CSUS: 1000},
	{Name: "e", Label: "fan-in, tail latency", Procs: 4, G: 16, Keys: 1, CSUS: 5000},
}

// floorScenario is (d) with one goroutine in one process: nobody waits, so
// its throughput is the ceiling of one holder at a time with (d)'s critical
// section on this machine, the reference the (d) ideal is read against.
var floorScenario = results.Scenario{Name: "d-floor", Label: "(d) with one goroutine: the ceiling", Procs: 1, G: 1, Keys: 1, CSUS: 1000}

// suiteScenarios are the suite's scenarios a–e that -scenarios chose
// ((f) and (g) run on their own: see idle.go and fleet.go).
func (c config) suiteScenarios() []results.Scenario {
	var scs []results.Scenario
	for _, sc := range suite {
		if c.runs(sc.Name) {
			scs = append(scs, sc)
		}
	}
	return scs
}

// custom is the scenario the flags describe when not running the suite.
func (c config) custom() results.Scenario {
	return results.Scenario{Name: c.name, Label: "from the command line", Procs: c.procs, G: c.g, Keys: c.keys, CSUS: usOf(c.cs)}
}

func usOf(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func durOfUS(us float64) time.Duration { return time.Duration(us * float64(time.Microsecond)) }
