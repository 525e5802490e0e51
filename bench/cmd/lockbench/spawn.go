package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// childWaitDelay bounds how long a killed worker's pipes may stay open.
const childWaitDelay = 5 * time.Second

// child is one worker process seen from the parent.
type child struct {
	proc   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	dec    *json.Decoder
	stderr bytes.Buffer
}

// fail describes the worker's failure with what it printed.
func (c *child) fail(what string, err error) error {
	return fmt.Errorf("worker %d: %s: %w\n--- its stderr ---\n%s", c.proc, what, err, bytes.TrimSpace(c.stderr.Bytes()))
}

// workers is the set of worker processes of one run. ctx kills them all
// (exec.CommandContext) when it ends.
type workers struct{ children []*child }

// spawn starts one worker per params by re-executing this binary.
func spawn(ctx context.Context, params []workerParams) (*workers, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to start workers: %w", err)
	}
	ws := &workers{}
	for _, p := range params {
		enc, _ := json.Marshal(p) // plain struct: cannot fail
		c := &child{proc: p.Proc, cmd: exec.CommandContext(ctx, self)}
		c.cmd.Env = append(os.Environ(), workerEnv+"="+string(enc))
		c.cmd.Stderr = &c.stderr
		c.cmd.WaitDelay = childWaitDelay
		stdin, inErr := c.cmd.StdinPipe()
		stdout, outErr := c.cmd.StdoutPipe()
		if err := errors.Join(inErr, outErr); err != nil {
			ws.stop()
			return nil, fmt.Errorf("worker %d: %w", p.Proc, err)
		}
		c.stdin, c.dec = stdin, json.NewDecoder(stdout)
		if err := c.cmd.Start(); err != nil {
			ws.stop()
			return nil, fmt.Errorf("starting worker %d: %w", p.Proc, err)
		}
		ws.children = append(ws.children, c)
	}
	return ws, nil
}

// awaitReady returns once every worker has said it is ready.
func (ws *workers) awaitReady() error {
	for _, c := range ws.children {
		var r ready
		if err := c.dec.Decode(&r); err != nil || !r.Ready {
			return c.fail("getting ready", errors.Join(err, c.cmd.Wait()))
		}
	}
	return nil
}

// release gives every worker the same start instant.
func (ws *workers) release(start time.Time) error {
	line := strconv.FormatInt(start.UnixNano(), 10) + "\n"
	for _, c := range ws.children {
		if _, err := io.WriteString(c.stdin, line); err != nil {
			return c.fail("starting", err)
		}
	}
	return nil
}

// collect reads every worker's report and waits for all of them to exit.
func (ws *workers) collect() ([]report, error) {
	reps := make([]report, 0, len(ws.children))
	for _, c := range ws.children {
		var r report
		if err := c.dec.Decode(&r); err != nil {
			return nil, c.fail("reporting", errors.Join(err, c.cmd.Wait()))
		}
		if err := c.cmd.Wait(); err != nil {
			return nil, c.fail("exiting", err)
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
		c.stdin.Close()
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	}
}
