package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/latchkey/latchkey/internal/childproc"
)

// child is one worker process seen from the parent.
type child struct {
	proc *childproc.Proc
	dec  *json.Decoder
}

// workers is the set of worker processes of one run. ctx kills them all
// when it ends.
type workers struct{ children []*child }

// spawn starts one worker per params by re-executing this binary.
func spawn(ctx context.Context, params []workerParams) (*workers, error) {
	ws := &workers{}
	for _, p := range params {
		proc, err := childproc.Start(ctx, childproc.Config{Role: workerRole, Params: p, Name: fmt.Sprintf("worker %d", p.Proc)})
		if err != nil {
			ws.stop()
			return nil, err
		}
		ws.children = append(ws.children, &child{proc: proc, dec: json.NewDecoder(proc.Stdout)})
	}
	return ws, nil
}

// awaitReady returns once every worker has said it is ready.
func (ws *workers) awaitReady() error {
	for _, c := range ws.children {
		var r ready
		err := c.dec.Decode(&r)
		if err == nil && !r.Ready {
			err = errors.New("its first message is not ready")
		}
		if err != nil {
			return c.proc.Fail("getting ready", err)
		}
	}
	return nil
}

// release gives every worker the same start instant.
func (ws *workers) release(start time.Time) error {
	line := strconv.FormatInt(start.UnixNano(), 10) + "\n"
	for _, c := range ws.children {
		if _, err := io.WriteString(c.proc.Stdin, line); err != nil {
			return c.proc.Fail("starting", err)
		}
	}
	return nil
}

// letClose tells every worker that the parent has read Redis for the run:
// a worker of a run with a ramp closes its library only then, so that its
// Close (an UNSUBSCRIBE, say) is never in the reading.
func (ws *workers) letClose() error {
	for _, c := range ws.children {
		if _, err := io.WriteString(c.proc.Stdin, closeLine); err != nil {
			return c.proc.Fail("letting it close", err)
		}
	}
	return nil
}

// closeLine on a worker's stdin is letClose's word.
const closeLine = "close\n"

// collect reads every worker's report and waits for all of them to exit.
func (ws *workers) collect() ([]report, error) {
	reps := make([]report, 0, len(ws.children))
	for _, c := range ws.children {
		var r report
		if err := c.dec.Decode(&r); err != nil {
			return nil, c.proc.Fail("reporting", err)
		}
		if err := c.proc.Wait(); err != nil {
			return nil, err
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// stop kills the workers that are still running and reaps them all. Closing
// stdin alone would do (a worker stops at EOF), but a wedged one must not
// hold up the benchmark.
func (ws *workers) stop() {
	for _, c := range ws.children {
		c.proc.Stdin.Close()
		c.proc.Kill()
	}
}
