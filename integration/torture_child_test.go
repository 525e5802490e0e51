package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/redistest"
)

// tortureRole is the child role of TestTorture's worker processes.
const tortureRole = "torture"

// The "torture" role is dispatched from init rather than from runChild's
// table, so that the suite adds files without editing the ones it shares:
// init runs before TestMain, and a torture child never reaches it.
func init() {
	if childproc.Role() == tortureRole {
		os.Exit(tortureChild())
	}
}

// tortureChildMaxRun bounds a child whose parent never says "stop" (and
// did not die either, or Pdeathsig would have ended it).
const tortureChildMaxRun = 3 * time.Hour

// tortureChild runs a torture process. Protocol, one line each: the child
// writes a "ready" event, waits for "go" on stdin, streams its events on
// stdout until "stop" (or EOF) arrives, closes everything, reports its
// counters, checks its own goroutines and writes "done".
func tortureChild() int {
	var cfg tortureConfig
	if err := childproc.Params(&cfg); err != nil {
		fmt.Fprintf(os.Stderr, "torture child: %v\n", err)
		return 2
	}
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	rec := func(ev tortureEvent) {
		mu.Lock()
		defer mu.Unlock()
		if err := out.Encode(ev); err != nil {
			fmt.Fprintf(os.Stderr, "torture child: writing an event: %v\n", err)
		}
	}
	lines := bufio.NewScanner(os.Stdin)
	rec(tortureEvent{Kind: evReady})
	if !lines.Scan() || lines.Text() != "go" {
		fmt.Fprintln(os.Stderr, "torture child: no go-ahead")
		return 2
	}
	run, stop := context.WithTimeout(context.Background(), tortureChildMaxRun)
	defer stop()
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer stop()
		for lines.Scan() && lines.Text() != "stop" {
		}
	}()
	err := runTortureProcess(run, cfg, rec)
	if errors.Is(run.Err(), context.DeadlineExceeded) {
		fmt.Fprintf(os.Stderr, "torture child: never told to stop within %v\n", tortureChildMaxRun)
		return 1
	}
	<-read // it called stop, on "stop" or EOF, and is ending
	if err != nil {
		fmt.Fprintf(os.Stderr, "torture child: %v\n", err)
		return 1
	}
	// Every client is closed: nothing of latchkey or rueidis may still run.
	if err := findChildLeaks(); err != nil {
		rec(tortureEvent{Kind: evBad, Inv: invQuiet, Lock: -1, Who: fmt.Sprintf("p%d", cfg.Proc), Hard: true,
			From: time.Now().UnixNano(), Note: "goroutines left after every client closed: " + err.Error()})
	}
	rec(tortureEvent{Kind: evDone})
	return 0
}

// findChildLeaks is the harness's leak check for a process that has no
// TestMain: goleak, retried for the same grace (a cluster client's topology
// refresh may outlive its Close by up to a second).
func findChildLeaks() error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := goleak.Find(redistest.GoleakIgnores...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
