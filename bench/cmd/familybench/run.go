package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/bench/internal/precise"
	"github.com/latchkey/latchkey/bench/internal/results"
	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/rlock"
)

const (
	// startMargin is how far ahead the goroutines' common start is set,
	// so that every one of them is waiting for it when it comes.
	startMargin = 50 * time.Millisecond
	// runSlack bounds a run beyond its measured duration: connecting,
	// warming up, the last holds.
	runSlack = time.Minute
	// errorBackoff keeps a goroutine whose acquire fails at once from
	// spinning.
	errorBackoff = 10 * time.Millisecond
	// lockName is the contended lock of every scenario.
	lockName = "familybench"
)

// bench is what every run shares.
type bench struct {
	cfg      config
	addr     string
	admin    rueidis.Client
	progress io.Writer
}

// execute runs cfg's scenarios, prints a table per scenario to out and a
// line per run to progress, and writes cfg.out.
func execute(ctx context.Context, cfg config, out, progress io.Writer) (err error) {
	addr, label, closeRedis, err := benchredis.Get(ctx, cfg.addr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRedis()) }()
	admin, err := benchredis.Connect(addr)
	if err != nil {
		return err
	}
	defer admin.Close()
	b := &bench{cfg: cfg, addr: addr, admin: admin, progress: progress}
	version, err := redisinfo.Version(ctx, admin)
	if err != nil {
		return err
	}
	f := &results.Family{Meta: results.FamilyMeta{
		Date: time.Now().UTC().Truncate(time.Second), Command: cfg.command, Host: results.Machine(),
		RedisVersion: version, Redis: label, Reps: cfg.reps, DurS: cfg.dur.Seconds(),
		LeaseS: cfg.lease.Seconds(), TimeoutS: cfg.timeout.Seconds(),
	}}
	scs := cfg.buildScenarios()
	for _, sc := range scs {
		for _, v := range sc.variants {
			sc.Variants = append(sc.Variants, results.FamilyVariant{Name: v.name, Desc: v.desc})
		}
	}
	// Every repetition runs every variant once; the order rotates, so that
	// no variant always follows the same one.
	for rep := range cfg.reps {
		for _, sc := range scs {
			n := len(sc.variants)
			for i := range n {
				k := (i + rep) % n
				r, err := b.runOnce(ctx, sc, &sc.variants[k])
				if err != nil {
					return fmt.Errorf("%s, %s, repetition %d: %w", sc.Name, sc.variants[k].name, rep+1, err)
				}
				fmt.Fprintf(progress, "%s rep %d/%d %-14s %s\n", sc.Name, rep+1, cfg.reps, sc.variants[k].name, describe(&sc.FamilyScenario, &r))
				sc.Variants[k].Reps = append(sc.Variants[k].Reps, r)
			}
		}
	}
	if err := benchredis.Flush(ctx, admin); err != nil {
		return err
	}
	for _, sc := range scs {
		f.Scenarios = append(f.Scenarios, sc.FamilyScenario)
	}
	printTables(out, f)
	if cfg.out != "" {
		return results.WriteFamily(cfg.out, f)
	}
	return nil
}

// member is one client's goroutines' view of a run.
type member struct {
	rc rueidis.Client
	c  *rlock.Client
}

// openClients connects n latchkey clients, each on a rueidis client of its
// own, and returns them with the function that closes them all.
func openClients(addr string, n int) ([]member, func() error, error) {
	var ms []member
	closeAll := func() error {
		var errs []error
		for _, m := range ms {
			errs = append(errs, m.c.Close())
			m.rc.Close()
		}
		ms = nil
		return errors.Join(errs...)
	}
	for range n {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("connecting to %s: %w", addr, err), closeAll())
		}
		c, err := rlock.NewClient(rc, rlock.Options{})
		if err != nil {
			rc.Close()
			return nil, nil, errors.Join(err, closeAll())
		}
		ms = append(ms, member{rc: rc, c: c})
	}
	return ms, closeAll, nil
}

// runOnce runs v in sc once: FLUSHALL, connect the clients, warm up (every
// goroutine takes and releases each kind of hold on a lock of its own),
// open Redis' window, run every goroutine from a common start to its end,
// close the clients and read the window.
func (b *bench) runOnce(ctx context.Context, sc *scenario, v *variant) (results.FamilyRep, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.dur+runSlack)
	defer cancel()
	rep := results.FamilyRep{DurS: b.cfg.dur.Seconds()}
	if err := benchredis.Flush(ctx, b.admin); err != nil {
		return rep, err
	}
	ms, closeClients, err := openClients(b.addr, sc.Clients)
	if err != nil {
		return rep, err
	}
	defer closeClients()
	if err := warmUp(ctx, ms, sc, v); err != nil {
		return rep, fmt.Errorf("warming up: %w", err)
	}
	win, err := benchredis.OpenWindow(ctx, b.admin)
	if err != nil {
		return rep, err
	}
	start := time.Now().Add(startMargin)
	end := start.Add(b.cfg.dur)
	var occ occupancy
	tallies := make([]tally, sc.Clients*sc.G)
	var wg sync.WaitGroup
	for i, m := range ms {
		for j := range sc.G {
			acqs := v.open(m.c, lockName, sc)
			t := &tallies[i*sc.G+j]
			t.init(len(sc.Kinds))
			// The same draws for every variant: goroutine i*G+j's
			// sequence of kinds depends on the seed and its index only.
			rng := newRand(b.cfg.seed, i*sc.G+j)
			wg.Go(func() {
				time.Sleep(time.Until(start))
				b.loop(ctx, sc, v, acqs, rng, end, &occ, t)
			})
		}
	}
	wg.Wait()
	// Close before the last reading, so that it follows all the clients'
	// traffic.
	if err := closeClients(); err != nil {
		return rep, fmt.Errorf("closing the clients: %w", err)
	}
	cpu, calls, err := win.Close(ctx)
	if err != nil {
		return rep, err
	}
	rep.RedisCPUS, rep.RedisCmds = cpu, redisinfo.LockCommands(calls)
	rep.Ops = make(map[string]results.FamilyOps, len(sc.Kinds))
	for k, kind := range sc.Kinds {
		var h latency.Histogram
		var n int64
		for i := range tallies {
			h.Merge(&tallies[i].waits[k])
			n += tallies[i].acquired[k]
		}
		o := results.FamilyOps{Count: n}
		if h.Count() > 0 {
			o.P50US, o.P99US, o.MaxUS = us(h.Quantile(50)), us(h.Quantile(99)), us(h.Max())
		}
		rep.Ops[kind] = o
	}
	for i := range tallies {
		t := &tallies[i]
		rep.Violations += t.violations
		rep.Errors += t.errors
		rep.Timeouts += t.timeouts
		if t.lastErr != "" {
			rep.LastError = t.lastErr
		}
	}
	return rep, ctx.Err()
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// warmUp has every goroutine's handles take and release each kind of hold
// once, on a lock of its own, so that connections are open, scripts loaded
// and subscriptions made before the measurement.
func warmUp(ctx context.Context, ms []member, sc *scenario, v *variant) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, m := range ms {
		for j := range sc.G {
			wg.Go(func() {
				for _, acquire := range v.open(m.c, fmt.Sprintf("%s:warm:%d:%d", lockName, i, j), sc) {
					release, err := acquire(ctx)
					if err == nil {
						err = release()
					}
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tally is one goroutine's count, per kind; only that goroutine writes it.
type tally struct {
	acquired []int64
	// waits has a sample per acquisition, and one per acquire still
	// waiting when the run ended (its wait so far, a lower bound).
	waits                        []latency.Histogram
	violations, errors, timeouts int64
	lastErr                      string
}

func (t *tally) init(kinds int) {
	t.acquired = make([]int64, kinds)
	t.waits = make([]latency.Histogram, kinds)
}

func (t *tally) fail(err error) {
	t.errors++
	t.lastErr = err.Error()
}

// occupancy counts the holders in this process, which is all of them:
// exclusive and shared. A holder raises its count and then reads the
// other's, so that of two overlapping holders at least one sees the other.
type occupancy struct{ exclusive, shared atomic.Int64 }

// enter records a hold and tells whether it is allowed beside the others.
func (o *occupancy) enter(exclusive bool, size int64) bool {
	if exclusive {
		return o.exclusive.Add(1) == 1 && o.shared.Load() == 0
	}
	n := o.shared.Add(1)
	return o.exclusive.Load() == 0 && (size == 0 || n <= size)
}

func (o *occupancy) leave(exclusive bool) {
	if exclusive {
		o.exclusive.Add(-1)
	} else {
		o.shared.Add(-1)
	}
}

// newRand is goroutine g's source of draws.
func newRand(seed uint64, g int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(g))) }

// draw picks a kind by the scenario's shares.
func draw(rng *rand.Rand, shares []float64) int {
	x := rng.Float64()
	for k, s := range shares {
		if x < s {
			return k
		}
		x -= s
	}
	return len(shares) - 1
}

// loop is one goroutine: draw a kind, acquire it (bounded by the
// per-acquire deadline and the end of the run), hold for cs, release;
// until end.
func (b *bench) loop(ctx context.Context, sc *scenario, v *variant, acqs []acquirer, rng *rand.Rand, end time.Time, occ *occupancy, t *tally) {
	for {
		k := draw(rng, sc.Shares)
		t0 := time.Now()
		if !t0.Before(end) || ctx.Err() != nil {
			return
		}
		deadline := t0.Add(b.cfg.timeout)
		if end.Before(deadline) {
			deadline = end
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		release, err := acqs[k](actx)
		got := time.Now()
		if err != nil {
			cancel()
			switch {
			case ctx.Err() != nil:
				return
			case actx.Err() != nil:
				if deadline.Before(end) {
					t.timeouts++
				} else {
					// Still waiting at the end: dropping the wait would
					// hide the waiters an unfair lock starves.
					t.waits[k].Record(end.Sub(t0))
				}
			default:
				t.fail(err)
				time.Sleep(errorBackoff)
			}
			continue
		}
		if !occ.enter(v.exclusive[k], sc.Size) {
			t.violations++
		}
		precise.Sleep(b.cfg.cs)
		occ.leave(v.exclusive[k])
		if err := release(); err != nil {
			t.fail(fmt.Errorf("release: %w", err))
		}
		cancel()
		if got.Before(end) {
			t.acquired[k]++
			t.waits[k].Record(got.Sub(t0))
		} else {
			t.waits[k].Record(end.Sub(t0))
		}
	}
}
