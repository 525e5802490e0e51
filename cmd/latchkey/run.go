package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// forwarded are the signals run passes on to CMD. SIGQUIT too: Go's
// default for it (a stack dump, exit 2) would leave CMD running unlocked.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// runCmd is `latchkey run`.
func runCmd(args, env []string, std stdio) int {
	var c common
	fs := newFlags("run", "[flags] NAME [--] CMD [ARG...]", env, std, &c)
	wait := fs.Duration("wait", 0, "give up when the lock is still busy after `D` (exit 1); 0 tries once, like flock -n; unset waits as long as it takes")
	lease := fs.Duration("lease", 0, "hold the lock for `D` at most instead of having the watchdog keep it while CMD runs")
	grace := fs.Duration("grace", 10*time.Second, "when the lock is lost, wait `D` after SIGTERM before CMD gets SIGKILL")
	wdTimeout := fs.Duration("watchdog-timeout", 0, "the lease the watchdog keeps renewing, every third of `D`; a lost lock is noticed within a third of it (default 30s)")
	clientName := fs.String("client-name", "", "how status and list name this holder (default \"latchkey run\" and CMD's base name; CMD's arguments are never recorded)")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	waitSet, leaseSet := false, false
	fs.Visit(func(f *flag.Flag) {
		waitSet = waitSet || f.Name == "wait"
		leaseSet = leaseSet || f.Name == "lease"
	})
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(fs, "missing NAME")
	}
	name, cmdArgs := rest[0], rest[1:]
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	switch {
	case len(cmdArgs) == 0:
		return usageError(fs, "missing CMD")
	case *wait < 0 || *grace < 0 || *wdTimeout < 0:
		return usageError(fs, "durations must not be negative")
	case leaseSet && *lease <= 0:
		return usageError(fs, "--lease must be positive")
	case len(*clientName) > rlock.MaxClientNameLen:
		return usageError(fs, "--client-name is %d bytes, the limit is %d", len(*clientName), rlock.MaxClientNameLen)
	}
	if *clientName == "" {
		*clientName = defaultClientName(cmdArgs[0])
	}

	// Signals are caught from here on: during the wait they end it, and
	// once CMD runs they are CMD's.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// `latchkey status` shows what the holder runs.
	locks, closeLocks, err := connect(c, rlock.Options{WatchdogTimeout: *wdTimeout, ClientName: strings.ToValidUTF8(*clientName, "?")})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		return exitError
	}
	defer closeLocks()

	var opts []rlock.LockOption
	if leaseSet {
		opts = append(opts, rlock.WithLease(*lease))
	}
	m := locks.Mutex(name)
	// Cancelled only to cut a wait short, or at the end: the lock's context
	// derives from it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lctx, code := acquire(ctx, cancel, m, waitSet, *wait, opts, sigs, std)
	if code >= 0 {
		return code
	}
	code = hold(m, lctx, cmdArgs, env, *grace, sigs, std)
	if err := m.Unlock(lctx); err != nil && code != exitLost {
		if errors.Is(err, rlock.ErrNotHeld) {
			// Lost just as CMD ended, before the loss was seen: the
			// exclusion did not hold to the end.
			fmt.Fprintf(std.err, "latchkey: the lock %q was lost before %s ended\n", name, cmdArgs[0])
			return exitLost
		}
		fmt.Fprintf(std.err, "latchkey: releasing the lock %q: %v (it expires with its lease)\n", name, err)
	}
	return code
}

// acquire takes m with ctx as run's flags say, until a signal in sigs ends
// the wait (with cancel). It returns the lock's context and -1, or the exit
// status.
func acquire(ctx context.Context, cancel context.CancelFunc, m *rlock.Mutex, waitSet bool, wait time.Duration, opts []rlock.LockOption, sigs <-chan os.Signal, std stdio) (context.Context, int) {
	type result struct {
		lctx context.Context
		ok   bool
		err  error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		switch {
		case !waitSet:
			r.lctx, r.err = m.Lock(ctx, opts...)
			r.ok = r.err == nil
		case wait == 0:
			r.lctx, r.ok, r.err = m.TryLock(ctx, opts...)
		default:
			r.lctx, r.ok, r.err = m.TryLock(ctx, append(opts, rlock.WithWait(wait))...)
		}
		res <- r
	}()
	var r result
	select {
	case r = <-res:
	case sig := <-sigs:
		cancel()
		r = <-res
		if r.ok {
			_ = m.Unlock(r.lctx) // acquired as the wait was cut short
		}
		fmt.Fprintf(std.err, "latchkey: %v while waiting for the lock %q\n", sig, m.Name())
		return nil, 128 + signum(sig)
	}
	switch {
	case r.err != nil:
		fmt.Fprintf(std.err, "latchkey: taking the lock %q: %v\n", m.Name(), r.err)
		return nil, exitError
	case !r.ok:
		fmt.Fprintf(std.err, "latchkey: the lock %q is busy\n", m.Name())
		return nil, exitError
	}
	return r.lctx, -1
}

// hold runs CMD while m is held through lctx and returns run's exit status:
// CMD's, or exitLost when lctx ended first, after which CMD got SIGTERM
// and, grace later, SIGKILL. Signals in sigs are passed on to CMD.
func hold(m *rlock.Mutex, lctx context.Context, cmdArgs, env []string, grace time.Duration, sigs <-chan os.Signal, std stdio) int {
	token, err := m.Token(lctx)
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: the lock %q: %v\n", m.Name(), err)
		return exitLost
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Env = append(env[:len(env):len(env)], "LATCHKEY_TOKEN="+strconv.FormatInt(token, 10), "LATCHKEY_NAME="+m.Name())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = std.in, std.out, std.err
	cmd.SysProcAttr = cmdSysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitNoExec
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	lost := lctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-done:
			if lost == nil {
				return exitLost
			}
			return exitStatus(cmd.ProcessState, err, std)
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-lost:
			lost = nil
			fmt.Fprintf(std.err, "latchkey: the lock %q was lost (%v); stopping %s\n", m.Name(), context.Cause(lctx), cmdArgs[0])
			_ = cmd.Process.Signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(std.err, "latchkey: %s still runs %v after SIGTERM; killing it\n", cmdArgs[0], grace)
			_ = cmd.Process.Kill()
		}
	}
}

// exitStatus turns CMD's end into run's exit status, as a shell would:
// its exit code, or 128 plus the signal that killed it.
func exitStatus(ps *os.ProcessState, err error, std stdio) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	fmt.Fprintf(std.err, "latchkey: waiting for the command: %v\n", err)
	return exitError
}

// signum is sig's number, or 0.
func signum(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// defaultClientName names a run's client after its command's base name:
// the client name is readable by anyone who can read Redis, and arguments
// may carry secrets (--token=…).
func defaultClientName(cmd string) string {
	name := "latchkey run " + filepath.Base(cmd)
	if len(name) > rlock.MaxClientNameLen {
		name = name[:rlock.MaxClientNameLen-3] + "..."
	}
	return name
}
