package main

import (
	"context"
	"fmt"

	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/rlock"
)

// acquirer takes one hold and returns the function that ends it. The
// caller must not cancel ctx before it has called release: a latchkey hold
// ends with the context it was taken with.
type acquirer func(ctx context.Context) (release func() error, err error)

// variant is one implementation of a scenario's lock.
type variant struct {
	name, desc string
	// open returns, on client c, an acquirer per kind of the scenario (in
	// its order) for the lock called name.
	open func(c *rlock.Client, name string, sc *scenario) []acquirer
	// exclusive tells, per kind, whether a hold excludes every other one;
	// the other holds share, at most scenario.size of them when it is set.
	exclusive []bool
}

// scenario is one load shape and the variants that run it.
type scenario struct {
	results.FamilyScenario
	variants []variant
	lease    rlock.LockOption
}

// Kinds of operation.
const (
	kindRead    = "read"
	kindWrite   = "write"
	kindAcquire = "acquire"
)

// rwVariants are the rw scenario's: the RWMutex, its spin variant, and a
// Mutex that takes every operation exclusively.
func rwVariants() []variant {
	rw := func(spin bool) func(c *rlock.Client, name string, sc *scenario) []acquirer {
		return func(c *rlock.Client, name string, sc *scenario) []acquirer {
			m := c.RWMutex(name)
			if spin {
				m = c.SpinRWMutex(name)
			}
			return []acquirer{holdWith(m.RLock, m.RUnlock, sc.lease), holdWith(m.Lock, m.Unlock, sc.lease)}
		}
	}
	return []variant{
		{name: "rwmutex", desc: "`Client.RWMutex`: pub/sub wake-ups, writers first", open: rw(false), exclusive: []bool{false, true}},
		{name: "spin-rwmutex", desc: "`Client.SpinRWMutex`: polling, backoff 1ms–128ms, no queue", open: rw(true), exclusive: []bool{false, true}},
		{name: "mutex", desc: "`Client.Mutex`: every operation exclusive, reads included", open: func(c *rlock.Client, name string, sc *scenario) []acquirer {
			m := c.Mutex(name)
			lock := holdWith(m.Lock, m.Unlock, sc.lease)
			return []acquirer{lock, lock}
		}, exclusive: []bool{true, true}},
	}
}

// semaphoreVariants are the semaphore scenario's: the Semaphore and its
// spin variant, each contender taking one permit.
func semaphoreVariants() []variant {
	sem := func(spin bool) func(c *rlock.Client, name string, sc *scenario) []acquirer {
		return func(c *rlock.Client, name string, sc *scenario) []acquirer {
			s := c.Semaphore(name, sc.Size)
			if spin {
				s = c.SpinSemaphore(name, sc.Size)
			}
			return []acquirer{hold(func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1, sc.lease) }, s.Release)}
		}
	}
	return []variant{
		{name: "semaphore", desc: "`Client.Semaphore`: pub/sub wake-ups, oldest first", open: sem(false), exclusive: []bool{false}},
		{name: "spin-semaphore", desc: "`Client.SpinSemaphore`: polling, backoff 1ms–128ms, no queue", open: sem(true), exclusive: []bool{false}},
	}
}

// holdWith makes an acquirer of a latchkey lock and unlock pair, every
// hold with lease.
func holdWith(lock func(context.Context, ...rlock.LockOption) (context.Context, error), unlock func(context.Context) error, lease rlock.LockOption) acquirer {
	return hold(func(ctx context.Context) (context.Context, error) { return lock(ctx, lease) }, unlock)
}

// hold makes an acquirer of an acquire that returns the context its
// release takes, as every latchkey primitive's does.
func hold(acquire func(context.Context) (context.Context, error), release func(context.Context) error) acquirer {
	return func(ctx context.Context) (func() error, error) {
		hctx, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return release(hctx) }, nil
	}
}

// scenarios builds the scenarios cfg asks for.
func (cfg config) buildScenarios() []*scenario {
	lease := rlock.WithLease(cfg.lease)
	var scs []*scenario
	for _, name := range cfg.scenarios {
		sc := &scenario{lease: lease}
		sc.Name, sc.Clients, sc.CSUS = name, cfg.clients, float64(cfg.cs.Nanoseconds())/1e3
		switch name {
		case "rw":
			sc.Label = fmt.Sprintf("RWMutex, %.0f %% reads", 100*cfg.reads)
			sc.G = cfg.rwG
			sc.Kinds, sc.Shares = []string{kindRead, kindWrite}, []float64{cfg.reads, 1 - cfg.reads}
			sc.Baseline = "rwmutex"
			sc.Note = fmt.Sprintf("Each operation reads with probability %g, the same sequence of draws for every variant; "+
				"the mutex row takes the reads exclusively too, so it is the figure a reader/writer lock exists to beat", cfg.reads)
			sc.variants = rwVariants()
		case "semaphore":
			sc.Label = fmt.Sprintf("Semaphore, %d permits, one per acquisition", cfg.size)
			sc.G, sc.Size = cfg.semG, cfg.size
			sc.Kinds, sc.Shares = []string{kindAcquire}, []float64{1}
			sc.Baseline = "semaphore"
			sc.Note = fmt.Sprintf("Every contender takes one permit, so at most %d hold at once and the others wait", cfg.size)
			sc.variants = semaphoreVariants()
		}
		scs = append(scs, sc)
	}
	return scs
}
