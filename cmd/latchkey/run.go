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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// forwarded are the signals run passes on to CMD. SIGQUIT too: Go's
// default for it (a stack dump, exit 2) would leave CMD running unlocked.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// caught are the forwarded signals run was not started ignoring: catching
// one would undo the ignore for CMD too (nohup's SIGHUP, a background
// job's SIGINT), since a child starts with the default for every signal
// Go handles.
func caught() []os.Signal {
	var sigs []os.Signal
	for _, s := range forwarded {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// runCmd is `latchkey run`.
func runCmd(args, env []string, std stdio) int {
	var c common
	fs := newFlags("run", "[flags] NAME [--] CMD [ARG...]", env, std, &c)
	wait, lease, grace, wdTimeout := new(seconds), new(seconds), seconds(10*time.Second), new(seconds)
	fs.Var(wait, "wait", "give up when the lock is still busy after `D`, in seconds (10, 0.5) or as a duration (1m30s), and exit 1 (or --conflict-exit-code); 0 tries once, like flock -n; unset waits as long as it takes")
	fs.Var(lease, "lease", "hold the lock for `D` at most (1ms to 8760h) instead of having the watchdog keep it while CMD runs")
	fs.Var(&grace, "grace", "when the lock is lost, wait `D` after SIGTERM before CMD gets SIGKILL")
	fs.Var(wdTimeout, "watchdog-timeout", "the lease the watchdog keeps renewing, every third of `D`; a lost lock is noticed within half of it (default 30s; 30ms to 8760h)")
	clientName := fs.String("client-name", "", "how status and list name this holder (default \"latchkey run\" and CMD's base name; CMD's arguments are never recorded)")
	conflict := fs.Int("conflict-exit-code", exitError, "the exit status `N` (0 to 255) when the lock is busy (--wait ran out)")
	shared := fs.Bool("shared", false, "take the read side of the RWMutex NAME: readers share it, its writers exclude them (CMD gets no token)")
	permits := fs.Int64("permits", 0, "take `N` permits of the Semaphore NAME; needs --size (default 1 with --size; CMD gets no token)")
	size := fs.Int64("size", 0, "the number of permits `S` of the Semaphore NAME, as all its users give it")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(fs, "missing NAME")
	}
	name, cmdArgs := rest[0], rest[1:]
	if len(cmdArgs) > 0 && cmdArgs[0] == "--" {
		cmdArgs = cmdArgs[1:]
	}
	if set["size"] && !set["permits"] {
		*permits = 1
	}
	switch {
	case len(cmdArgs) == 0:
		return usageError(fs, "missing CMD")
	case *wait < 0 || grace < 0 || *wdTimeout < 0:
		return usageError(fs, "durations must not be negative")
	case set["lease"] && (time.Duration(*lease) < rlock.MinLease || time.Duration(*lease) > rlock.MaxLease):
		return usageError(fs, "--lease %v: want between %v and %v (or no --lease, to have the watchdog keep the lock)", time.Duration(*lease), rlock.MinLease, rlock.MaxLease)
	case len(*clientName) > rlock.MaxClientNameLen:
		return usageError(fs, "--client-name is %d bytes, the limit is %d", len(*clientName), rlock.MaxClientNameLen)
	case *conflict < 0 || *conflict > 255:
		return usageError(fs, "--conflict-exit-code %d: want 0 to 255", *conflict)
	case *shared && (set["permits"] || set["size"]):
		return usageError(fs, "--shared takes an RWMutex's read side, --permits and --size a Semaphore's permits: not both")
	case set["permits"] && !set["size"]:
		return usageError(fs, "--permits needs --size, the Semaphore's number of permits")
	case set["size"] && *size < 1:
		return usageError(fs, "--size %d: want at least 1", *size)
	case set["size"] && (*permits < 1 || *permits > *size):
		return usageError(fs, "--permits %d: want 1 to --size (%d)", *permits, *size)
	}
	if code := checkInput(std, rlock.ValidateName(name)); code >= 0 {
		return code
	}
	if *clientName == "" {
		*clientName = defaultClientName(cmdArgs[0])
	}

	// Signals are caught from here on: during the wait they end it, and
	// once CMD runs they are CMD's.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, caught()...)
	defer signal.Stop(sigs)

	// `latchkey status` shows what the holder runs.
	locks, closeLocks, err := connect(c, rlock.Options{WatchdogTimeout: time.Duration(*wdTimeout), ClientName: strings.ToValidUTF8(*clientName, "?")})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	defer closeLocks()

	var opts []rlock.LockOption
	if set["lease"] {
		opts = append(opts, rlock.WithLease(time.Duration(*lease)))
	}
	l := mutexSide(locks.Mutex(name))
	switch {
	case *shared:
		l = readSide(locks.RWMutex(name))
	case set["size"]:
		l = permitsSide(locks.Semaphore(name, *size), *permits)
	}
	// Cancelled only to cut a wait short, or at the end: the lock's context
	// derives from it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitFor := time.Duration(-1) // as long as it takes
	if set["wait"] {
		waitFor = time.Duration(*wait)
	}
	lctx, code := acquire(ctx, cancel, l, waitFor, opts, *conflict, sigs, std)
	if code >= 0 {
		return code
	}
	code = hold(l, lctx, cmdArgs, env, time.Duration(grace), sigs, std)
	if err := l.unlock(lctx); err != nil && code != exitLost {
		if errors.Is(err, rlock.ErrNotHeld) {
			// Lost just as CMD ended, before the loss was seen: the
			// exclusion did not hold to the end.
			fmt.Fprintf(std.err, "latchkey: the lock %q was lost before %s ended\n", name, cmdArgs[0])
			return exitLost
		}
		fmt.Fprintf(std.err, "latchkey: releasing the lock %q: %s (it expires with its lease)\n", name, errText(err))
	}
	return code
}

// side is what run takes of the lock NAME: a Mutex, an RWMutex's read side
// or permits of a Semaphore, whose methods differ only in their names.
type side struct {
	name    string
	lock    func(ctx context.Context, opts ...rlock.LockOption) (context.Context, error)
	tryLock func(ctx context.Context, opts ...rlock.LockOption) (context.Context, bool, error)
	unlock  func(lctx context.Context) error
	token   func(lctx context.Context) (int64, error) // nil: no fencing tokens
}

func mutexSide(m *rlock.Mutex) side {
	return side{name: m.Name(), lock: m.Lock, tryLock: m.TryLock, unlock: m.Unlock, token: m.Token}
}

func readSide(rw *rlock.RWMutex) side {
	return side{name: rw.Name(), lock: rw.RLock, tryLock: rw.TryRLock, unlock: rw.RUnlock}
}

func permitsSide(s *rlock.Semaphore, n int64) side {
	return side{
		name: s.Name(),
		lock: func(ctx context.Context, opts ...rlock.LockOption) (context.Context, error) {
			return s.Acquire(ctx, n, opts...)
		},
		tryLock: func(ctx context.Context, opts ...rlock.LockOption) (context.Context, bool, error) {
			return s.TryAcquire(ctx, n, opts...)
		},
		unlock: s.Release,
	}
}

// acquire takes l with ctx as run's flags say: waiting as long as it takes
// when wait is negative, else for wait at most; until a signal in sigs ends
// the wait (with cancel). It returns the lock's context and -1, or the exit
// status: conflict when the lock stayed busy.
func acquire(ctx context.Context, cancel context.CancelFunc, l side, wait time.Duration, opts []rlock.LockOption, conflict int, sigs <-chan os.Signal, std stdio) (context.Context, int) {
	type result struct {
		lctx context.Context
		ok   bool
		err  error
		busy error // the cause that ends a wait that ran out
	}
	res := make(chan result, 1)
	go func() {
		var r result
		switch {
		case wait < 0:
			r.lctx, r.err = l.lock(ctx, opts...)
			r.ok = r.err == nil
		case wait == 0:
			r.lctx, r.ok, r.err = l.tryLock(ctx, opts...)
		default:
			r = result{busy: waitOut(wait)}
			r.lctx, r.err = lockFor(ctx, l, wait, r.busy, opts)
			r.ok = r.err == nil
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
			_ = l.unlock(r.lctx) // acquired as the wait was cut short
		}
		fmt.Fprintf(std.err, "latchkey: %v while waiting for the lock %q\n", sig, l.name)
		return nil, 128 + signum(sig)
	}
	switch {
	case r.busy != nil && errors.Is(r.err, r.busy) && exitFor(r.err) == exitUnavailable:
		// The wait ran out with Redis out of reach (its last try's error):
		// that, not a holder, is why; --conflict-exit-code must not hide it.
		fmt.Fprintf(std.err, "latchkey: waiting for the lock %q: %s\n", l.name, errText(r.err))
		return nil, exitUnavailable
	case r.busy != nil && errors.Is(r.err, r.busy):
		// The library's WaitError says who held the lock and our place.
		fmt.Fprintf(std.err, "latchkey: the lock %q is busy\n%s\n", l.name, errText(r.err))
		return nil, conflict
	case r.err != nil:
		fmt.Fprintf(std.err, "latchkey: taking the lock %q: %s\n", l.name, errText(r.err))
		return nil, exitFor(r.err)
	case !r.ok:
		fmt.Fprintf(std.err, "latchkey: the lock %q is busy\n", l.name)
		return nil, conflict
	}
	return r.lctx, -1
}

// waitOut is the cause that ends a --wait of d that ran out.
func waitOut(d time.Duration) error { return fmt.Errorf("--wait %v ran out", d) }

// lockFor takes l, giving up after wait with cause busy. The wait ends by
// a cancellation, not a deadline, which would end the hold too; and by
// Lock's, not TryLock's, so that giving up says who blocked it.
func lockFor(ctx context.Context, l side, wait time.Duration, busy error, opts []rlock.LockOption) (context.Context, error) {
	wctx, stop := context.WithCancelCause(ctx)
	timer := time.AfterFunc(wait, func() { stop(busy) })
	lctx, err := l.lock(wctx, opts...)
	if err == nil && !timer.Stop() {
		// The wait ran out as the lock came: its context is ending.
		_ = l.unlock(lctx)
		return nil, fmt.Errorf("latchkey: the lock %q came as --wait ran out: %w", l.name, busy)
	}
	return lctx, err
}

// hold runs CMD while l is held through lctx and returns run's exit status:
// CMD's, or exitLost when lctx ended first, after which CMD got SIGTERM
// and, grace later, SIGKILL. Signals in sigs are passed on to CMD.
func hold(l side, lctx context.Context, cmdArgs, env []string, grace time.Duration, sigs <-chan os.Signal, std stdio) int {
	// A LATCHKEY_TOKEN inherited from an outer run is not this lock's.
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "LATCHKEY_TOKEN=") })
	if l.token != nil {
		token, err := l.token(lctx)
		if err != nil {
			fmt.Fprintf(std.err, "latchkey: the lock %q: %s\n", l.name, errText(err))
			return exitLost
		}
		env = append(env, "LATCHKEY_TOKEN="+strconv.FormatInt(token, 10))
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Env = append(env, "LATCHKEY_NAME="+l.name)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = std.in, std.out, std.err
	cmd.SysProcAttr = cmdSysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
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
			fmt.Fprintf(std.err, "latchkey: the lock %q was lost (%s); stopping %s\n", l.name, errText(context.Cause(lctx)), cmdArgs[0])
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
