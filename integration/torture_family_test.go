package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// TestTortureFamily is the torture suite for the lock family besides
// Mutex: goroutines of three clients (one behind a delaying proxy on
// standalone) take RWMutex read and write holds, Semaphore permits and
// MultiMutex holds in every way the API offers — Lock, TryLock with and
// without WithWait, a Lock cancelled while it waits, fixed leases held
// past their end, re-entries, a writer's downgrade — while a controller
// kills connections (normal and pub/sub) and delays replies. Seeded as
// TestTorture (TORTURE_SEED, TORTURE_DUR: half of it per topology here).
//
// Invariants, checked as they happen:
//   - exclusion: no two live holds conflict (an RWMutex writer beside
//     anyone; Semaphore permits above the size; two MultiMutex holds on a
//     shared name). A hold is live while its context has not ended and its
//     lease's deadline has not passed; a conflict with a hold that hears
//     of its loss within famLateSignal is reported, not failed;
//   - errors: acquires end only by being granted, refused (Try) or by
//     their context; releases of live holds succeed, releases of lost
//     holds report ErrNotHeld; an overrun lease is lost, its loss signalled
//     within famLossSignalBound;
//   - progress: no blocking acquire outlasts famOpTimeout;
//   - quiescence: nothing is left in Redis but fencing counters, and no
//     goroutine (goleak in TestMain).
func TestTortureFamily(t *testing.T) {
	run := tortureSettings(t)
	dur := max(run.dur/2, 2*time.Second)
	t.Logf("torture family: seed %d (TORTURE_SEED=%d replays it), %v per topology", run.seed, run.seed, dur)
	forEachTopology(t, func(t *testing.T, tp topology) { runFamilyTorture(t, tp, run.seed, dur) })
}

const (
	famWatchdog   = 2 * time.Second
	famOpTimeout  = 10 * time.Second
	famLateSignal = 200 * time.Millisecond
	// famLossSignalBound is how long past its lease's end (and 50ms) an
	// overrun hold may wait for its loss signal.
	famLossSignalBound = 2 * time.Second
	famGoroutines      = 6
)

// famPrim is one primitive under torture: acquire takes a hold as the
// draw says, and the occupancy says whether two holds conflict.
type famPrim struct {
	name    string
	acquire func(ctx context.Context, c *rlock.Client, d famDraw) (*famHold, bool, error)
}

// famDraw is one iteration's random choices, drawn up front.
type famDraw struct {
	prim, client int
	how          int // howLock, howTry, howTryWait, howCancel
	opts         []rlock.LockOption
	lease        time.Duration // 0: the watchdog
	overrun      bool
	wait         time.Duration
	think        time.Duration
	read         bool  // RWMutex: a read hold
	nested       bool  // re-enter once through the hold's context
	downgrade    bool  // RWMutex writer: read, then Unlock the write
	n            int64 // Semaphore permits
	pause        time.Duration
}

// famHold is one hold: its context, how to release it, and its weight in
// the occupancy (what it excludes).
type famHold struct {
	ctx     context.Context
	release func(context.Context) error
	reenter func(context.Context) (context.Context, error) // nil: not reentrant
	// claim is what the hold occupies: for an RWMutex "r" or "w", for a
	// Semaphore the permits, for a MultiMutex its names.
	claim famClaim
	// downgrade, for a writer, takes a read hold through the write context.
	downgrade func(context.Context) (*famHold, error)
	lost      atomic.Int64 // unix ns when its context ended with ErrLockLost, if it did
}

type famClaim struct {
	write   bool
	permits int64
	names   []string
}

// famOccupancy tracks the live holds of one primitive and finds conflicts.
type famOccupancy struct {
	size  int64 // Semaphore size; 0 for the others
	mu    sync.Mutex
	holds map[*famHold]struct{}
}

func live(h *famHold, now time.Time) bool {
	if h.ctx.Err() != nil {
		return false
	}
	d, ok := rlock.LeaseEnd(h.ctx)
	return !ok || now.Before(d)
}

// enter adds h and returns the live holds it conflicts with.
func (o *famOccupancy) enter(h *famHold) []*famHold {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	var out []*famHold
	permits := h.claim.permits
	for x := range o.holds {
		if !live(x, now) {
			continue
		}
		switch {
		case o.size > 0:
			permits += x.claim.permits
		case len(h.claim.names) > 0:
			for _, n := range h.claim.names {
				if strings.Contains(" "+strings.Join(x.claim.names, " ")+" ", " "+n+" ") {
					out = append(out, x)
					break
				}
			}
		case h.claim.write || x.claim.write:
			out = append(out, x)
		}
	}
	if o.size > 0 && permits > o.size {
		for x := range o.holds {
			if live(x, now) {
				out = append(out, x)
			}
		}
	}
	o.holds[h] = struct{}{}
	return out
}

func (o *famOccupancy) leave(h *famHold) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.holds, h)
}

// famTorture is one topology's run.
type famTorture struct {
	t       *testing.T
	prims   []famPrim
	occ     []*famOccupancy
	clients []*rlock.Client
	run     context.Context

	mu       sync.Mutex
	hard     []string
	soft     []string
	grants   map[string]int
	conflict []famConflict
}

type famConflict struct {
	prim   string
	a, b   *famHold
	at     time.Time
	detail string
}

func (f *famTorture) fail(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hard = append(f.hard, fmt.Sprintf(format, args...))
}

func runFamilyTorture(t *testing.T, tp topology, seed uint64, dur time.Duration) {
	lockAddrs, proxy, prefix := tortureServers(t, tp, "torturefam")
	opts := rlock.Options{Prefix: prefix, WatchdogTimeout: famWatchdog, ReleaseTimeout: tortureReleaseTimeout}
	f := &famTorture{t: t, grants: map[string]int{}}
	for i := range 3 {
		addrs := lockAddrs
		if i == 1 && proxy != nil {
			addrs = []string{proxy.Addr}
		}
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(rc.Close)
		c, err := rlock.NewClient(rc, opts)
		require.NoError(t, err)
		f.clients = append(f.clients, c)
	}
	f.prims, f.occ = famTorturePrims()
	admins := nodeClients(t, lockAddrs)

	run, stop := context.WithTimeout(context.Background(), dur)
	defer stop()
	f.run = run
	var wg sync.WaitGroup
	for g := range famGoroutines {
		rng := mrand.New(mrand.NewPCG(seed, uint64(g)))
		wg.Go(func() { f.loop(rng) })
	}
	faults := 0
	wg.Go(func() { faults = famController(run, mrand.New(mrand.NewPCG(seed, 1<<40)), admins, proxy) })
	wg.Wait()
	for _, c := range f.clients {
		require.NoError(t, c.Close())
	}
	f.judgeConflicts()
	t.Logf("torture family %s: grants %v, %d faults, %d reported anomalies", tp.name, f.grants, faults, len(f.soft))
	for _, s := range f.soft {
		t.Logf("reported: %s", s)
	}
	for _, h := range f.hard {
		t.Errorf("violation: %s", h)
	}
	if left := awaitQuiet(t, admins, prefix); len(left) > 0 {
		t.Errorf("violation: quiescence: left behind: %v", left)
	}
	if t.Failed() {
		t.Logf("replay with TORTURE_SEED=%d", seed)
	}
	cleanupPrefix(t, admins, prefix)
}

// famController injects faults until run ends and returns how many.
func famController(run context.Context, rng *mrand.Rand, admins []rueidis.Client, proxy *netProxy) int {
	n := 0
	for {
		think(run, time.Duration(300+rng.IntN(1200))*time.Millisecond)
		if run.Err() != nil {
			return n
		}
		kind := rng.IntN(3)
		switch {
		case kind == 2 && proxy != nil:
			spec, _ := json.Marshal(toxic{Name: "fam-delay", Type: "latency", Stream: "downstream", Toxicity: 1,
				Attributes: map[string]int64{"latency": int64(20 + rng.IntN(150)), "jitter": int64(rng.IntN(20))}})
			if _, err := proxy.p.Toxics.AddToxicJson(strings.NewReader(string(spec))); err == nil {
				think(run, time.Duration(200+rng.IntN(400))*time.Millisecond)
				_ = proxy.p.Toxics.RemoveToxic(context.Background(), "fam-delay")
			}
		default:
			for _, a := range admins {
				cmd := a.B().ClientKill().TypeNormal().Build()
				if kind == 1 {
					cmd = a.B().ClientKill().TypePubsub().Build()
				}
				_ = a.Do(context.Background(), cmd).Error()
			}
		}
		n++
	}
}

// loop runs iterations until the run ends.
func (f *famTorture) loop(rng *mrand.Rand) {
	for f.run.Err() == nil {
		d := f.draw(rng)
		f.iteration(d)
		think(f.run, d.pause)
	}
}

func (f *famTorture) draw(rng *mrand.Rand) famDraw {
	d := famDraw{
		prim: rng.IntN(len(f.prims)), client: rng.IntN(len(f.clients)),
		how:   []int{howLock, howLock, howLock, howTry, howTryWait, howTryWait, howCancel}[rng.IntN(7)],
		wait:  time.Duration(5+rng.IntN(300)) * time.Millisecond,
		think: time.Duration(rng.IntN(8000)) * time.Microsecond,
		read:  rng.IntN(5) != 0, nested: rng.IntN(4) == 0, downgrade: rng.IntN(4) == 0,
		n:     int64(1 + rng.IntN(3)),
		pause: time.Duration(rng.IntN(20)) * time.Millisecond,
	}
	if rng.IntN(10) < 3 {
		d.lease = tortureMinLease + time.Duration(rng.Int64N(int64(tortureMaxLease-tortureMinLease)))
		d.opts = []rlock.LockOption{rlock.WithLease(d.lease)}
		d.overrun = rng.IntN(3) == 0
	}
	if d.how == howTryWait {
		d.opts = append(d.opts, rlock.WithWait(d.wait))
	}
	return d
}

func (f *famTorture) iteration(d famDraw) {
	p, occ := f.prims[d.prim], f.occ[d.prim]
	ctx, cancel := context.WithCancel(f.run)
	defer cancel()
	limit := famOpTimeout
	if d.how == howCancel {
		limit = d.wait
	}
	timer := time.AfterFunc(limit, cancel)
	call := time.Now()
	h, ok, err := p.acquire(ctx, f.clients[d.client], d)
	// A grant that came as the limit ran out has a context the test itself
	// cancelled: its lease can no longer be seen to end it.
	fired := !timer.Stop()
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		if d.how != howCancel && f.run.Err() == nil {
			f.fail("%s: a blocking acquire took over %v: %v", p.name, famOpTimeout, err)
		}
		return
	case err != nil && (d.how == howTry || d.how == howTryWait) && connectionLost(err.Error()):
		// A try whose connection a kill dropped, with no wait left to
		// try again, reports it, as Mutex's TryLock does; Lock retries.
		f.mu.Lock()
		f.soft = append(f.soft, fmt.Sprintf("%s: TryLock: %v", p.name, err))
		f.mu.Unlock()
		return
	case err != nil:
		f.fail("%s: acquire after %v: %v", p.name, time.Since(call), err)
		return
	case !ok:
		return
	}
	f.mu.Lock()
	f.grants[p.name]++
	f.mu.Unlock()
	if fired {
		d.overrun = false
	}
	f.session(p, occ, h, d)
}

// session holds h (and what it nests), checks it against the occupancy,
// and releases it.
func (f *famTorture) session(p famPrim, occ *famOccupancy, h *famHold, d famDraw) {
	watch(h)
	f.check(p, occ, h)
	defer occ.leave(h)
	if d.nested && h.reenter != nil {
		if nctx, err := h.reenter(h.ctx); err == nil {
			think(f.run, d.think)
			f.releaseOf(p, h, nctx, nil)
		} else if !errors.Is(err, rlock.ErrLockLost) && h.ctx.Err() == nil {
			// A re-entry may fail only with the hold: lost, or its context
			// ended (a lease's deadline, the run's end) while it was out.
			f.fail("%s: re-entry: %v", p.name, err)
		}
	}
	if d.downgrade && h.downgrade != nil {
		r, err := h.downgrade(h.ctx)
		switch {
		case err == nil:
			watch(r)
			f.releaseOf(p, h, h.ctx, occ) // the write goes, the read stays
			f.check(p, occ, r)
			think(f.run, d.think)
			f.releaseOf(p, r, r.ctx, occ)
			return
		case !errors.Is(err, rlock.ErrLockLost) && h.ctx.Err() == nil:
			// As a re-entry: it may fail only with the write hold, lost or
			// its context ended (its lease, the run's end) under the call.
			f.fail("%s: downgrade: %v", p.name, err)
		}
	}
	hold := d.think
	if d.overrun {
		hold = d.lease + 50*time.Millisecond
	}
	think(f.run, hold)
	if d.overrun {
		// The exclusion check counts the hold dead at its deadline; the loss
		// signal must follow, but how soon is a timing claim: a starved
		// process once ran its lease timer over 50ms late.
		think(h.ctx, famLossSignalBound)
	}
	if d.overrun && f.run.Err() == nil && !errors.Is(context.Cause(h.ctx), rlock.ErrLockLost) {
		f.fail("%s: a lease of %v held %v past its end was not lost: %v", p.name, d.lease, hold+famLossSignalBound-d.lease, context.Cause(h.ctx))
	}
	f.releaseOf(p, h, h.ctx, occ)
}

// watch notes when h's context ends with ErrLockLost.
func watch(h *famHold) {
	ctx := h.ctx
	context.AfterFunc(ctx, func() {
		if errors.Is(context.Cause(ctx), rlock.ErrLockLost) {
			h.lost.Store(time.Now().UnixNano())
		}
	})
}

func (f *famTorture) check(p famPrim, occ *famOccupancy, h *famHold) {
	for _, x := range occ.enter(h) {
		f.mu.Lock()
		f.conflict = append(f.conflict, famConflict{prim: p.name, a: h, b: x, at: time.Now(),
			detail: fmt.Sprintf("%+v beside %+v", h.claim, x.claim)})
		f.mu.Unlock()
	}
}

// releaseOf releases the level lctx carries: it must succeed while h is
// live, and report ErrNotHeld once h was lost. At h's last level (occ not
// nil) h leaves the occupancy first: once the release has run in Redis,
// another hold may be granted before the release call returns.
func (f *famTorture) releaseOf(p famPrim, h *famHold, lctx context.Context, occ *famOccupancy) {
	wasLive := live(h, time.Now())
	if occ != nil {
		occ.leave(h)
	}
	err := h.release(lctx)
	switch {
	case err == nil:
	case errors.Is(err, rlock.ErrNotHeld) && (!wasLive || errors.Is(err, rlock.ErrLockLost)):
	case errors.Is(err, rlock.ErrNotHeld) && errors.Is(context.Cause(h.ctx), rlock.ErrLockLost):
	default:
		// A release whose call failed under a fault expires within its
		// lease: reported, not failed.
		f.mu.Lock()
		f.soft = append(f.soft, fmt.Sprintf("%s: release (live=%v): %v", p.name, wasLive, err))
		f.mu.Unlock()
	}
}

// judgeConflicts fails every conflict but those where one side heard of
// its loss within famLateSignal of the conflict (a loss signal delayed by
// scheduling on a loaded machine).
func (f *famTorture) judgeConflicts() {
	for _, c := range f.conflict {
		late := func(h *famHold) bool {
			lost := h.lost.Load()
			return lost != 0 && time.Unix(0, lost).Sub(c.at) < famLateSignal
		}
		if late(c.a) || late(c.b) {
			f.soft = append(f.soft, fmt.Sprintf("%s: conflict with a hold that heard of its loss late: %s", c.prim, c.detail))
			continue
		}
		f.hard = append(f.hard, fmt.Sprintf("%s: exclusion: %s", c.prim, c.detail))
	}
}

// famTorturePrims are the primitives under torture, with their occupancies.
func famTorturePrims() ([]famPrim, []*famOccupancy) {
	prims := []famPrim{{name: "rwmutex", acquire: famRW}, {name: "semaphore", acquire: famSem}, {name: "multimutex", acquire: famMulti}}
	occ := make([]*famOccupancy, len(prims))
	for i := range prims {
		occ[i] = &famOccupancy{holds: map[*famHold]struct{}{}}
	}
	occ[1].size = famSemSize
	return prims, occ
}

// famSemSize is the tortured Semaphore's size; requests take 1 to 3.
const famSemSize = 4

func famSem(ctx context.Context, c *rlock.Client, d famDraw) (*famHold, bool, error) {
	s := c.Semaphore("sem", famSemSize)
	var pctx context.Context
	var ok bool
	var err error
	if d.how == howTry || d.how == howTryWait {
		pctx, ok, err = s.TryAcquire(ctx, d.n, d.opts...)
	} else {
		pctx, err = s.Acquire(ctx, d.n, d.opts...)
		ok = err == nil
	}
	if !ok {
		return nil, false, err
	}
	return &famHold{ctx: pctx, release: s.Release, claim: famClaim{permits: d.n}}, true, nil
}

// famMultiNames are the tortured MultiMutex's names: each hold takes two
// or three of them, in any order, so that holds overlap in every way.
var famMultiNames = []string{"m0", "m1", "m2", "m3"}

func famMulti(ctx context.Context, c *rlock.Client, d famDraw) (*famHold, bool, error) {
	names := []string{famMultiNames[d.n%4], famMultiNames[(d.n+1)%4]}
	if d.read { // reuse the draw: four holds in five take a third name
		names = append(names, famMultiNames[(d.n+3)%4])
	}
	mm := c.MultiMutex(names...)
	var lctx context.Context
	var ok bool
	var err error
	if d.how == howTry || d.how == howTryWait {
		lctx, ok, err = mm.TryLock(ctx, d.opts...)
	} else {
		lctx, err = mm.Lock(ctx, d.opts...)
		ok = err == nil
	}
	if !ok {
		return nil, false, err
	}
	return &famHold{ctx: lctx, release: mm.Unlock, claim: famClaim{names: mm.Names()},
		reenter: func(ctx context.Context) (context.Context, error) { return mm.Lock(ctx) }}, true, nil
}

func famRW(ctx context.Context, c *rlock.Client, d famDraw) (*famHold, bool, error) {
	rw := c.RWMutex("rw")
	var lctx context.Context
	var ok bool
	var err error
	switch {
	case d.read && (d.how == howTry || d.how == howTryWait):
		lctx, ok, err = rw.TryRLock(ctx, d.opts...)
	case d.read:
		lctx, err = rw.RLock(ctx, d.opts...)
		ok = err == nil
	case d.how == howTry || d.how == howTryWait:
		lctx, ok, err = rw.TryLock(ctx, d.opts...)
	default:
		lctx, err = rw.Lock(ctx, d.opts...)
		ok = err == nil
	}
	if !ok {
		return nil, false, err
	}
	if d.read {
		return &famHold{ctx: lctx, release: rw.RUnlock, reenter: func(ctx context.Context) (context.Context, error) { return rw.RLock(ctx) }}, true, nil
	}
	h := &famHold{ctx: lctx, release: rw.Unlock, claim: famClaim{write: true},
		reenter: func(ctx context.Context) (context.Context, error) { return rw.Lock(ctx) }}
	h.downgrade = func(wctx context.Context) (*famHold, error) {
		rctx, err := rw.RLock(wctx)
		if err != nil {
			return nil, err
		}
		return &famHold{ctx: rctx, release: rw.RUnlock}, nil
	}
	return h, true, nil
}

// cleanupPrefix deletes every key under prefix, fences included.
func cleanupPrefix(t *testing.T, admins []rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range admins {
		keys, err := scanKeys(ctx, a, prefix+":*")
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, a.Do(ctx, a.B().Del().Key(k).Build()).Error())
		}
	}
}

// TestFamOccupancy: the occupancy finds every kind of conflict, and only
// among live holds, so TestTortureFamily can fail.
func TestFamOccupancy(t *testing.T) {
	bg := context.Background()
	ended, cancel := context.WithCancel(bg)
	cancel()
	hold := func(ctx context.Context, c famClaim) *famHold { return &famHold{ctx: ctx, claim: c} }
	rw := &famOccupancy{holds: map[*famHold]struct{}{}}
	require.Empty(t, rw.enter(hold(bg, famClaim{})), "readers share")
	require.Empty(t, rw.enter(hold(bg, famClaim{})), "readers share")
	require.Len(t, rw.enter(hold(bg, famClaim{write: true})), 2, "a writer beside two readers")
	w := &famOccupancy{holds: map[*famHold]struct{}{}}
	require.Empty(t, w.enter(hold(ended, famClaim{write: true})))
	require.Empty(t, w.enter(hold(bg, famClaim{write: true})), "a writer beside an ended one")
	require.Len(t, w.enter(hold(bg, famClaim{})), 1, "a reader beside a writer")
	sem := &famOccupancy{size: 3, holds: map[*famHold]struct{}{}}
	require.Empty(t, sem.enter(hold(bg, famClaim{permits: 2})))
	require.Empty(t, sem.enter(hold(bg, famClaim{permits: 1})))
	require.NotEmpty(t, sem.enter(hold(bg, famClaim{permits: 1})), "four permits of three")
	multi := &famOccupancy{holds: map[*famHold]struct{}{}}
	require.Empty(t, multi.enter(hold(bg, famClaim{names: []string{"a", "b"}})))
	require.Empty(t, multi.enter(hold(bg, famClaim{names: []string{"c"}})))
	require.Len(t, multi.enter(hold(bg, famClaim{names: []string{"b", "c"}})), 2, "b and c taken twice")
}
