package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// The lock's contract as a sequential specification, for porcupine: the
// state is who holds the lock. Lock by c is possible only when it is free,
// and makes c the holder; a TryLock that reports false is possible only
// while someone else holds it; Unlock by c succeeds only when c holds it,
// and fails (ErrNotHeld) only when c does not. A history of real calls is
// linearizable when every call can be given one instant inside its
// [call, return] interval such that, in that order, each step is possible.

type opKind int

const (
	opLock opKind = iota
	opTryLock
	opUnlock
)

func (k opKind) String() string { return [...]string{"Lock", "TryLock", "Unlock"}[k] }

// lockOp is a call's input; its output is a bool: Lock and TryLock
// acquired, Unlock released.
type lockOp struct {
	client int
	kind   opKind
}

const nobody = -1

var mutexModel = porcupine.Model{
	Init: func() any { return nobody },
	Step: func(state, input, output any) (bool, any) {
		holder, op, ok := state.(int), input.(lockOp), output.(bool)
		switch {
		case op.kind == opUnlock && ok:
			return holder == op.client, nobody
		case op.kind == opUnlock:
			return holder != op.client, holder
		case ok:
			return holder == nobody, op.client
		default: // refused: only TryLock may be, and only while another holds it
			return op.kind == opTryLock && holder != nobody && holder != op.client, holder
		}
	},
	DescribeOperation: func(input, output any) string {
		op := input.(lockOp)
		return fmt.Sprintf("%v by %d -> %v", op.kind, op.client, output)
	},
	DescribeState: func(state any) string {
		if state.(int) == nobody {
			return "free"
		}
		return fmt.Sprintf("held by %d", state)
	},
}

// Workload size: per configuration 5 clients × 30 rounds, about 300
// operations, in well under a second with pub/sub and a few with spin.
const (
	linClients = 5
	linRounds  = 30
	linPause   = 2 * time.Millisecond // most a client holds the lock, or waits between rounds
)

// TestLinearizability: five clients (each its own rlock.Client over its own
// rueidis client, as five processes would be) lock and unlock one key, with
// random short holds and pauses, and sometimes TryLock instead of Lock. The
// recorded history must be linearizable with respect to mutexModel. Locks
// are watchdog-kept and held for milliseconds, so nothing expires.
func TestLinearizability(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		for _, spin := range []bool{false, true} {
			kind := "pubsub"
			if spin {
				kind = "spin"
			}
			t.Run(kind, func(t *testing.T) {
				seed := rand.Uint64()
				start := time.Now()
				history := lockHistory(t, tp, spin, seed)
				took := time.Since(start)
				result, info := porcupine.CheckOperationsVerbose(mutexModel, history, time.Minute)
				t.Logf("%d operations in %v (seed %d): %s", len(history), took.Round(time.Millisecond), seed, result)
				if result != porcupine.Ok {
					t.Errorf("the history is not linearizable (%s); seed %d", result, seed)
					visualize(t, mutexModel, info)
				}
			})
		}
	})
}

// lockHistory runs the workload and returns its history. Timestamps are
// nanoseconds on the monotonic clock since the start; the call time is taken
// before the call and the return time after it, so each interval contains
// the instant the operation took effect on the server.
func lockHistory(t *testing.T, tp topology, spin bool, seed uint64) []porcupine.Operation {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := lockName(t)
	start := time.Now()
	clock := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		history []porcupine.Operation
	)
	record := func(client int, kind opKind, call int64, ok bool) {
		ret := clock()
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: lockOp{client, kind}, Call: call, Output: ok, Return: ret})
	}

	var wg sync.WaitGroup
	for id := range linClients {
		c := lockClient(t, tp, rlock.Options{})
		m := c.Mutex(name)
		if spin {
			m = c.SpinMutex(name)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		// Workload shaping, not synchronisation: the pauses vary the
		// interleavings.
		pause := func() { time.Sleep(time.Duration(rng.Int64N(int64(linPause)))) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range linRounds {
				kind := opLock
				if rng.IntN(4) == 0 {
					kind = opTryLock
				}
				call := clock()
				var lctx context.Context
				var ok bool
				var err error
				if kind == opTryLock {
					lctx, ok, err = m.TryLock(ctx)
				} else {
					lctx, err = m.Lock(ctx)
					ok = err == nil
				}
				if err != nil {
					t.Errorf("client %d: %v: %v", id, kind, err)
					return
				}
				record(id, kind, call, ok)
				if !ok {
					pause()
					continue
				}
				pause()
				if lctx.Err() != nil {
					t.Errorf("client %d: lock lost while held: %v", id, context.Cause(lctx))
				}
				call = clock()
				err = m.Unlock(lctx)
				if err != nil && !errors.Is(err, rlock.ErrNotHeld) {
					t.Errorf("client %d: Unlock: %v", id, err)
					return
				}
				record(id, opUnlock, call, err == nil)
				pause()
			}
		}()
	}
	wg.Wait()
	return history
}

// visualize writes porcupine's interactive view of a failed check to a file
// that outlives the test.
func visualize(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo) {
	f, err := os.CreateTemp("", "latchkey-linearizability-*.html")
	if err != nil {
		t.Logf("no visualization: %v", err)
		return
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		t.Logf("no visualization: %v", err)
		return
	}
	t.Logf("visualization: %s", f.Name())
}

// TestMutexModel: the checker, with this model, accepts the overlaps a
// correct lock may show and rejects every kind of violation, so
// TestLinearizability can fail.
func TestMutexModel(t *testing.T) {
	op := func(client int, kind opKind, call, ret int64, ok bool) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: lockOp{client, kind}, Call: call, Output: ok, Return: ret}
	}
	for name, tc := range map[string]struct {
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		"sequential handoff": {[]porcupine.Operation{
			op(0, opLock, 0, 1, true), op(0, opUnlock, 2, 3, true), op(1, opLock, 4, 5, true), op(1, opUnlock, 6, 7, true),
		}, porcupine.Ok},
		"a long Lock call that took effect last": {[]porcupine.Operation{
			op(0, opLock, 0, 10, true), op(1, opLock, 1, 2, true), op(1, opUnlock, 3, 4, true),
		}, porcupine.Ok},
		"TryLock refused while another holds": {[]porcupine.Operation{
			op(0, opLock, 0, 1, true), op(1, opTryLock, 2, 3, false), op(0, opUnlock, 4, 5, true),
		}, porcupine.Ok},
		"two overlapping holders": {[]porcupine.Operation{
			op(0, opLock, 0, 1, true), op(1, opLock, 2, 3, true), op(0, opUnlock, 4, 5, true), op(1, opUnlock, 6, 7, true),
		}, porcupine.Illegal},
		"TryLock refused while free": {[]porcupine.Operation{
			op(0, opTryLock, 0, 1, false),
		}, porcupine.Illegal},
		"Unlock by a stranger succeeds": {[]porcupine.Operation{
			op(0, opLock, 0, 1, true), op(1, opUnlock, 2, 3, true),
		}, porcupine.Illegal},
		"the holder's Unlock fails": {[]porcupine.Operation{
			op(0, opLock, 0, 1, true), op(0, opUnlock, 2, 3, false),
		}, porcupine.Illegal},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperationsTimeout(mutexModel, tc.history, 10*time.Second))
		})
	}
}

// linHistory records a workload's operations for porcupine. Timestamps
// are nanoseconds on the monotonic clock since its start: call before the
// call, return after it, so each interval holds the instant the operation
// took effect on the server.
type linHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newLinHistory() *linHistory { return &linHistory{start: time.Now()} }

func (h *linHistory) clock() int64 { return int64(time.Since(h.start)) }

// record adds an operation that was called at call and returns now.
func (h *linHistory) record(client int, input any, call int64, ok bool) {
	ret := h.clock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: input, Call: call, Output: ok, Return: ret})
}

// checkLinearizable checks a workload's history against model, writing
// porcupine's view of a failure to a file.
func checkLinearizable(t *testing.T, model porcupine.Model, seed uint64, run func(seed uint64) []porcupine.Operation) {
	start := time.Now()
	history := run(seed)
	result, info := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	t.Logf("%d operations in %v (seed %d): %s", len(history), time.Since(start).Round(time.Millisecond), seed, result)
	if result != porcupine.Ok {
		t.Errorf("the history is not linearizable (%s); seed %d", result, seed)
		visualize(t, model, info)
	}
}

// linRound is one round of a linearizability workload: an acquire (its
// history input, and the call), then, if granted, a release.
type linRound struct {
	in      any
	acquire func(ctx context.Context) (context.Context, bool, error)
	out     any
	release func(hctx context.Context) error
}

// linWorkload runs linClients clients, each its own latchkey client, for
// linRounds rounds each: round draws a round from the client's generator;
// random pauses between the calls vary the interleavings. It returns the
// history.
func linWorkload(t *testing.T, tp topology, seed uint64, round func(c *rlock.Client, name string, id int, rng *rand.Rand) linRound) []porcupine.Operation {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := lockName(t)
	h := newLinHistory()
	var wg sync.WaitGroup
	for id := range linClients {
		c := lockClient(t, tp, rlock.Options{})
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		pause := func() { time.Sleep(time.Duration(rng.Int64N(int64(linPause)))) } // workload shaping
		wg.Go(func() {
			for range linRounds {
				r := round(c, name, id, rng)
				call := h.clock()
				hctx, ok, err := r.acquire(ctx)
				if err != nil {
					t.Errorf("client %d: %v: %v", id, r.in, err)
					return
				}
				h.record(id, r.in, call, ok)
				pause()
				if !ok {
					continue
				}
				call = h.clock()
				err = r.release(hctx)
				if err != nil && !errors.Is(err, rlock.ErrNotHeld) {
					t.Errorf("client %d: release: %v", id, err)
					return
				}
				h.record(id, r.out, call, err == nil)
				pause()
			}
		})
	}
	wg.Wait()
	return h.ops
}
