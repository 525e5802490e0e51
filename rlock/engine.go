package rlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// side is one primitive's side of one lock: a few script calls that this
// file and turn.go compose into one contention protocol, and hold.go into
// one hold (docs/design.md, "The engine, on one page").
type side struct {
	c         *Client
	name      string
	key       string // the context key of its holds; with spin, its turn's key (turnKey)
	inbox     string // the channel on which a release wakes this client
	what      string // "lock", "leadership", "read lock", "write lock", "permits": for messages; a release hands over only to its kind (chooseHeir)
	metric    lockKind
	spin      bool
	exclusive bool // a hold keeps the turn, so its last release may hand over (Mutex)
	shared    bool // requests never exclude each other (readers): try once before the turn

	// acquire runs the acquire script once.
	acquire func(ctx context.Context, a luascripts.AcquireArgs) (reply, error)
	// reenter adds one hold for owner: its new count, 0 if it holds none
	// (nil: no re-entry, Semaphore).
	reenter func(ctx context.Context, owner string) (int64, error)
	release func(ctx context.Context, a luascripts.ReleaseArgs) (luascripts.ReleaseReply, error)
	// leave takes the client off the queue, passing on a wake-up it got.
	leave func(ctx context.Context) error
	// keep lists the keys a hold keeps alive, in watchdog groups (the first
	// key holds the owner's field, the rest follow it).
	keep [][]string
}

// reply is one acquire call's answer; fail refuses for good (a
// Semaphore's size mismatch).
type reply struct {
	luascripts.AcquireReply
	fail error
}

// try is one acquire for owner, and when it was sent: leases run from
// there. It is also the baton a turn's waiter receives (turn.go): a
// handover's grant, or only the heir's owner id when the handover's outcome
// is unknown (the waiter undoes it), or nothing.
type try struct {
	reply
	owner string
	sent  time.Time
}

// turnKey names sd's turn: its key and variant, as a pair (Redisson's
// keys are bare names, so no suffix can mark the spin variant's turn).
type turnKey struct {
	key  string
	spin bool
}

func (sd *side) turnKey() turnKey { return turnKey{sd.key, sd.spin} }

// onWait marks obs's acquire (or Await) of name as waiting, and calls the
// OnWait hook.
func (c *Client) onWait(obs *acquireObs, name string) {
	obs.waiting()
	if hook := c.opts.OnWait; hook != nil {
		hook(name)
	}
}

// lock is a side's Lock: a re-entry when ctx carries a hold of the side,
// else a new owner's acquire.
func (sd *side) lock(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
	if lv := sd.c.carried(ctx, sd.key); lv != nil && sd.reenter != nil {
		return lv.h.reenter(ctx, lv)
	}
	// A MultiMutex's member call carries the MultiMutex call's obs: that
	// call is the one recorded, and the member's waits are its waits.
	own := lo.obs == nil
	if own {
		lo.obs = sd.c.obs.begin(ctx, sd.metric, sd.name)
	}
	start := time.Now()
	lctx, blocker, err := sd.acquireNew(ctx, lo, deadline, noWait)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = sd.waitError(start, err, blocker)
	}
	if own {
		lo.obs.end(ctx, err)
	}
	return lctx, err
}

// acquireNew takes the side for a new owner: it enters the turn and, unless
// handed the lock, contends until ctx ends or deadline (zero: none) passes
// (errBusy). noWait tries once. A wait that ended says what it waited
// behind then (blocker, nil: nothing known), for its WaitError.
func (sd *side) acquireNew(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (_ context.Context, blocker *refusal, _ error) {
	c := sd.c
	if sd.shared {
		// Requests that never block each other need not take turns to ask.
		lctx, t, err := sd.tryAside(ctx, ctx, lo)
		switch {
		case t.Acquired:
			return lctx, nil, err
		case err != nil && !transient(ctx, err):
			return nil, nil, ended(ctx, ctx, err)
		case noWait || expired(deadline):
			return nil, nil, busyOr(err)
		}
	}
	tn, b, blocker, err := c.enterTurn(ctx, sd, lo, deadline, noWait)
	if err != nil {
		return nil, blocker, err
	}
	if b.Acquired {
		// Handed the lock: still counted until newHold has made it a hold,
		// or given it back if Close came first (see granted).
		defer c.contenders.Done()
		lctx, err := c.newHold(ctx, sd, tn, b, lo)
		return lctx, nil, err
	}
	if b.owner != "" {
		// A handover of unknown outcome: give it back before contending.
		_ = sd.undo(b.owner, 1)
	}
	// A plain try first (a free lock needs no subscription), unless the
	// client is subscribed already: then it may be queued, which a plain
	// try would not keep. noWait never queues.
	if !sd.spin && !noWait && tn.sub == nil && c.hub.Subscribed(sd.inbox) {
		if afterSubscribedHint != nil {
			afterSubscribedHint()
		}
		// Close cuts this Subscribe as it cuts the wait: the subscription
		// may have ended since the hint, and a new one waits for Redis.
		sctx, release := c.cut(ctx)
		sub, err := c.hub.Subscribe(sctx, sd.inbox)
		release()
		switch {
		case err == nil:
			tn.sub = sub
		case c.isClosed():
			c.leaveTurn(tn, sd, true, true)
			return nil, nil, ErrClosed
		}
	}
	var first try
	var firstErr error
	if sd.spin || tn.sub == nil {
		first, firstErr = sd.attempt(ctx, lo, tn, false)
		switch {
		case firstErr == nil && first.Acquired:
			lctx, err := sd.granted(ctx, tn, first, lo)
			return lctx, nil, err
		case firstErr != nil && !transient(ctx, firstErr):
			blocker = c.lastRefusal(tn)
			c.leaveTurn(tn, sd, true, true)
			return nil, blocker, ended(ctx, ctx, firstErr)
		case noWait || expired(deadline):
			c.leaveTurn(tn, sd, true, true)
			return nil, nil, busyOr(firstErr)
		}
	}
	// Close cancels the contender's calls and waits for it to leave the queue.
	cctx, release := c.cut(ctx)
	defer release()
	t, err := sd.contend(cctx, tn, lo, deadline, first, firstErr)
	if err != nil {
		blocker = c.lastRefusal(tn)
		c.leaveTurn(tn, sd, true, true)
		return nil, blocker, ended(ctx, cctx, err)
	}
	lctx, err := sd.granted(ctx, tn, t, lo)
	return lctx, nil, err
}

// grantedBeside drops the last refusal of sd's turn, if any, at a grant
// made outside it (a reader's first try): the refusal is older than the
// grant, so its holder may be gone (see turn.last).
func (c *Client) grantedBeside(sd *side) {
	c.mu.Lock()
	if t := c.turns[sd.turnKey()]; t != nil {
		t.last = nil
	}
	c.mu.Unlock()
}

// lastRefusal is what the baton holder of t waits behind: its last
// refusal, or the one its predecessor left (see turn.last).
func (c *Client) lastRefusal(t *turn) *refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.last
}

// afterSubscribedHint, set only by tests, runs between the Subscribed hint
// and the Subscribe it prompts: the hint may go stale there (a linger ends).
var afterSubscribedHint func()

// granted turns the contender's grant into a hold: an exclusive hold keeps
// the turn, any other passes it on. The contender counts until newHold has
// returned: a grant that Close cut short is released there, and Close must
// await that release, lest it run after Close on a closed rueidis client,
// leaving the lock held for its lease with nobody holding it.
func (sd *side) granted(ctx context.Context, tn *turn, t try, lo lockOptions) (context.Context, error) {
	defer sd.c.contenders.Done()
	if sd.exclusive {
		sd.c.keepTurn(tn)
		return sd.c.newHold(ctx, sd, tn, t, lo)
	}
	sd.c.leaveTurn(tn, sd, false, false) // the grant dequeued the client
	return sd.c.newHold(ctx, sd, nil, t, lo)
}

// tryAside is one try outside the turn (a shared side's first try, a
// downgrade's), whose grant becomes a hold of parent. It counts as a turn's
// contender does, from before the call until the grant is a hold or given
// back, so that Close awaits the release of a grant it cut short; and Close
// cuts the call as it cuts a contender's, so that it does not wait for as
// long as Redis does (a cut call is still awaited up to ReleaseTimeout, and
// its grant given back). t.Acquired reports a grant, newHold's outcome in
// lctx and err; otherwise err is the try's (nil: refused), or ErrClosed once
// Close has begun.
func (sd *side) tryAside(ctx, parent context.Context, lo lockOptions) (lctx context.Context, t try, err error) {
	c := sd.c
	if !c.enlist() {
		return nil, try{}, ErrClosed
	}
	defer c.contenders.Done()
	cctx, release := c.cut(ctx)
	t, err = sd.attempt(cctx, lo, nil, false)
	closed := errors.Is(context.Cause(cctx), ErrClosed) // read before release cancels cctx
	release()
	switch {
	case err == nil && t.Acquired:
		c.grantedBeside(sd)
		lctx, err = c.newHold(parent, sd, nil, t, lo)
		return lctx, t, err
	case err != nil && closed && ctx.Err() == nil:
		return nil, try{}, ErrClosed
	}
	return nil, t, err
}

// attempt runs the acquire script once for a new owner id. An unknown
// outcome is undone at once and returns a transient error; the next
// attempt's owner id differs, so a grant landing after the undo is no one's
// we count on. A call that ctx ends is still awaited (uncut), and a grant
// it got is given back. A refusal is recorded as tn's last, when the caller
// holds the baton of a turn tn (nil: none).
func (sd *side) attempt(ctx context.Context, lo lockOptions, tn *turn, queued bool) (try, error) {
	if ctx.Err() != nil {
		return try{}, ctxErr(ctx) // send nothing: uncut would
	}
	c := sd.c
	t := try{owner: c.newOwner(), sent: time.Now()}
	// rueidis returns when ctx ends but sends the call all the same, maybe on
	// another connection than the undo or leave sent next: await its reply.
	actx, stop := uncut(ctx, c.opts.ReleaseTimeout)
	var err error
	entry := c.entry
	if sd.spin {
		entry = c.spinEntry
	}
	// A grant not acknowledged by ctx's deadline is given back all the
	// same, and a refusal's WAIT says nothing: none outlasts the deadline.
	sync := c.opts.sync()
	sync.By, _ = ctx.Deadline()
	t.reply, err = sd.acquire(actx, luascripts.AcquireArgs{Owner: t.owner, Lease: c.lease(lo), Client: entry, Waiter: queued, Sync: sync, About: c.about, Wake: c.wake})
	stop()
	if hook := c.opts.OnAttempt; hook != nil {
		hook(sd.name, t.Acquired && err == nil)
	}
	if err == nil && !t.Acquired && tn != nil {
		r := &refusal{reply: t.reply, at: time.Now()}
		c.mu.Lock()
		tn.last = r
		c.mu.Unlock()
	}
	switch {
	case err != nil && t.Acquired:
		return try{}, c.notReplicated(sd.name, err, sd.undo(t.owner, 1))
	case err == nil && t.Acquired && ctx.Err() != nil:
		_ = sd.undo(t.owner, 1) // a failure leaves it to expire within its lease
		return try{}, ctxErr(ctx)
	case err == nil && t.fail != nil:
		return try{}, t.fail
	case err == nil:
		return t, nil
	case luascripts.Classify(err) == luascripts.Permanent:
		return try{}, fmt.Errorf("latchkey: %s %q: %w", sd.what, sd.name, err)
	}
	return try{}, c.unknownOutcome(sd.name, err, sd.undo(t.owner, 1))
}

// uncut is ctx without its cancellation, until d after ctx ends: for a call
// whose outcome must be known before the next one is sent. stop releases it.
func uncut(ctx context.Context, d time.Duration) (uctx context.Context, stop func()) {
	if ctx.Done() == nil {
		return ctx, func() {}
	}
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(ctx, func() {
		luascripts.Sleep(uctx, d)
		cancel()
	})
	return uctx, func() {
		unwatch()
		cancel()
	}
}

// contend makes tries until one grants, ctx ends or deadline passes
// (errBusy), after a first plain try (first, firstErr) or none. Between
// tries it waits as the side's waitStrategy says.
func (sd *side) contend(ctx context.Context, tn *turn, lo lockOptions, deadline time.Time, t try, err error) (try, error) {
	var ws waitStrategy = &polling{Backoff: luascripts.Backoff{Min: sd.c.opts.SpinBackoffMin, Max: sd.c.opts.SpinBackoffMax}}
	if !sd.spin {
		ws = &notified{tn: tn}
	}
	queued, serr := ws.ready(ctx, sd, deadline)
	if serr != nil {
		return try{}, serr
	}
	if queued {
		t, err = sd.attempt(ctx, lo, tn, true)
	}
	var lastErr error
	retry := retryBackoff()
	for {
		var wait time.Duration
		switch {
		case err == nil && t.Acquired:
			return t, nil
		case err == nil:
			lastErr = nil
			retry.Reset()
			wait = ttlBound(t.PTTL)
		case transient(ctx, err):
			// The try may not have run: try again after a short backoff.
			lastErr, wait = err, retry.Next()
		default:
			return t, err
		}
		var open bool
		if wait, open = boundWait(ws.delay(wait, lastErr != nil), deadline); !open {
			return t, busyOr(lastErr)
		}
		sd.c.onWait(lo.obs, sd.name)
		if err := ws.pause(ctx, wait); err != nil {
			return t, withLast(err, lastErr)
		}
		t, err = sd.attempt(ctx, lo, tn, queued)
	}
}

// waitStrategy is what a contender does between refused tries.
type waitStrategy interface {
	// ready prepares the wait; queued says the tries queue the client, and
	// that the first is made at once.
	ready(ctx context.Context, sd *side, deadline time.Time) (queued bool, err error)
	// delay is the pause before the next try, given the one the last try
	// asks for: the holder's TTL or, after a failed try, a short backoff.
	delay(wait time.Duration, failed bool) time.Duration
	// pause waits d, or less when woken.
	pause(ctx context.Context, d time.Duration) error
}

// notified waits for a wake-up: subscribed, it takes the mark, tries as a
// queued waiter and waits for a message, a new subscription since the mark,
// or the TTL (docs/design.md, "Waiting without losing a wake-up").
type notified struct {
	tn   *turn
	mark notify.Mark
}

func (n *notified) ready(ctx context.Context, sd *side, deadline time.Time) (bool, error) {
	if n.tn.sub == nil {
		sub, err := sd.c.subscribe(ctx, sd.inbox, deadline, nil)
		if err != nil {
			return false, err
		}
		n.tn.sub = sub
	}
	n.mark = n.tn.sub.Mark()
	return true, nil
}

func (n *notified) delay(wait time.Duration, _ bool) time.Duration { return wait }

func (n *notified) pause(ctx context.Context, d time.Duration) error {
	_, err := n.tn.sub.Wait(ctx, n.mark, d)
	n.mark = n.tn.sub.Mark()
	return err
}

// polling, the spin variants' strategy, never queues: it sleeps with
// exponential backoff and equal jitter (SpinBackoffMin doubling to
// SpinBackoffMax), never past the holder's TTL.
type polling struct{ luascripts.Backoff }

func (p *polling) ready(context.Context, *side, time.Time) (bool, error) { return false, nil }

func (p *polling) delay(wait time.Duration, failed bool) time.Duration {
	d := jitter(p.Next())
	if !failed {
		d = min(d, wait)
	}
	return d
}

func (p *polling) pause(ctx context.Context, d time.Duration) error {
	if !luascripts.Sleep(ctx, d) {
		return context.Cause(ctx)
	}
	return nil
}

// subscribe subscribes to channel, giving up at deadline (errBusy; zero:
// none). A subscription that failed for a reason that may clear (retried)
// is tried again, with a backoff, until ctx ends; failed, when not nil,
// hears of each such failure.
func (c *Client) subscribe(ctx context.Context, channel string, deadline time.Time, failed func(error)) (*notify.Subscription, error) {
	sctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	for retry := retryBackoff(); ; {
		sub, err := c.hub.Subscribe(sctx, channel)
		if err == nil {
			return sub, nil
		}
		if sctx.Err() == nil && !errors.Is(err, notify.ErrClosed) && retried(redisCause(err)) {
			if failed != nil {
				failed(err)
			}
			if retry.Sleep(sctx) {
				continue
			}
		}
		if ctx.Err() == nil && sctx.Err() != nil {
			return nil, errBusy
		}
		return nil, err
	}
}

// retried reports whether a waiter tries again after err: a call of
// unknown outcome, or a refusal for a state Redis passes through.
func retried(err error) bool {
	return luascripts.Classify(err) == luascripts.Unknown || luascripts.Passing(err)
}

// redisCause is Redis' reply that a refused subscription's error wraps, or
// err: luascripts.Classify knows a reply only unwrapped.
func redisCause(err error) error {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return re
	}
	return err
}

// runRelease runs the side's release of r (the caller sets Owner, Count,
// Retry, Sync and the heir's fields), retrying a lost reply until
// ReleaseTimeout whatever the caller's context (the scripts count a retried
// run once). A release the replicas did not acknowledge ran: its answer
// comes with ErrNotReplicated.
func (sd *side) runRelease(r luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
	c := sd.c
	r.Wake, r.HeirAbout = c.wake, c.about // HeirAbout is sent only with an heir
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReleaseTimeout)
	defer cancel()
	retry := retryBackoff()
	for {
		out, err := sd.release(ctx, r)
		var notSynced *luascripts.NotReplicatedError
		if err == nil || errors.As(err, &notSynced) {
			c.obs.add(wakeups, sd.metric, sd.name, out.Woken, plain)
		}
		switch {
		case err == nil:
			return out, nil
		case notSynced != nil:
			return out, fmt.Errorf("%w: release %q: released on the master, %w: a failover now could bring the hold back until its lease ends", ErrNotReplicated, sd.name, notSynced)
		case luascripts.Classify(err) != luascripts.Unknown && !luascripts.Passing(err) || !retry.Sleep(ctx):
			// A refusal Redis passes through (BUSY, LOADING, a failover) did
			// not run the call: retried too, else the lock stays its lease.
			return out, fmt.Errorf("latchkey: release %q: %w (the hold expires within its lease)", sd.name, err)
		}
		// Only a call that may have run makes the next one a retry, which
		// reads an owner found gone as its own doing.
		r.Retry = r.Retry || luascripts.Classify(err) == luascripts.Unknown
	}
}

// undo takes back a hold that a call of unknown outcome may have given
// owner: one hold if owner's count is count, nothing if the call never ran.
// It waits for no replicas (no Sync).
func (sd *side) undo(owner string, count int64) error {
	_, err := sd.runRelease(luascripts.ReleaseArgs{Owner: owner, Count: count, Retry: true})
	return err
}

// leaveQueue runs the leave script, best effort and bounded: an entry left
// behind costs a publish to nobody, and other waiters' waits are TTL-bounded.
func (sd *side) leaveQueue() {
	ctx, cancel := context.WithTimeout(context.Background(), min(sd.c.opts.ReleaseTimeout, leaveTimeout))
	defer cancel()
	_ = sd.leave(ctx)
}

const leaveTimeout = time.Second // one round trip: plenty when Redis answers at all

// retryBackoff is the pause between retries of a call of unknown outcome:
// short, since the next connection is usually up at once.
func retryBackoff() luascripts.Backoff {
	return luascripts.Backoff{Min: time.Millisecond, Max: 128 * time.Millisecond}
}

// unknownOutcome makes the error of a call that may have reached Redis,
// after undo, and logs it: Warn when undone, Error when the undo failed too.
func (c *Client) unknownOutcome(name string, err, undo error) *unknownOutcomeError {
	if l := c.opts.Logger; l != nil {
		if undo != nil {
			l.Error("latchkey: call of unknown outcome could not be undone; a hold may stay until its lease ends", "lock", name, "error", err, "undo_error", undo)
		} else {
			l.Warn("latchkey: call of unknown outcome undone", "lock", name, "error", err)
		}
	}
	return &unknownOutcomeError{name: name, err: err, undo: undo}
}

// unknownOutcomeError is a call that may have reached Redis, undone unless
// undo says why not.
type unknownOutcomeError struct {
	name string
	err  error
	undo error
}

func (e *unknownOutcomeError) Error() string {
	if e.undo != nil {
		return fmt.Sprintf("latchkey: acquire %q: outcome unknown: %v; the undo failed too (%v): a hold may remain until its lease ends", e.name, e.err, e.undo)
	}
	return fmt.Sprintf("latchkey: acquire %q: outcome unknown, undone: %v", e.name, e.err)
}

func (e *unknownOutcomeError) Unwrap() error { return e.err }

// transient reports whether err is worth retrying while ctx lasts: an
// undone unknown outcome (not a closing rueidis client's), or a refusal
// Redis passes through.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	// A refusal Redis passes through (BUSY, LOADING, a failover's READONLY
	// or CLUSTERDOWN) did not run the call: worth another try, as a call of
	// unknown outcome (undone) is.
	var u *unknownOutcomeError
	return errors.As(err, &u) && luascripts.Classify(u.err) == luascripts.Unknown || luascripts.Passing(err)
}

// notReplicated is the error of an acquire whose grant the replicas did
// not acknowledge (err, from the script layer), after undo gave it back.
func (c *Client) notReplicated(name string, err, undo error) error {
	if undo != nil {
		return fmt.Errorf("%w: acquire %q: %w; giving the grant back failed too (%v): it expires within its lease", ErrNotReplicated, name, err, undo)
	}
	return fmt.Errorf("%w: acquire %q: %w; the grant was given back", ErrNotReplicated, name, err)
}

// errBusy ends a Try call whose wait ran out.
var errBusy = errors.New("busy")

// tried is a Try call's result: errBusy is a plain "no", with a nil error.
func tried(lctx context.Context, err error) (context.Context, bool, error) {
	if errors.Is(err, errBusy) {
		return nil, false, nil
	}
	return lctx, err == nil, err
}

func expired(deadline time.Time) bool { return !deadline.IsZero() && !time.Now().Before(deadline) }

// boundWait cuts a wait d short at deadline (zero: none); it reports false
// when the deadline has passed already.
func boundWait(d time.Duration, deadline time.Time) (time.Duration, bool) {
	if deadline.IsZero() {
		return d, true
	}
	left := time.Until(deadline)
	return min(d, left), left > 0
}

// jitter is equal jitter: half of backoff for sure, half at random, so
// that pollers that collided once drift apart.
func jitter(backoff time.Duration) time.Duration {
	return backoff/2 + rand.N(backoff/2+1)
}

// ttlBound is how long a waiter may wait given the holder's PTTL: a
// millisecond past it, to wake after the expiry; a fixed bound without one.
func ttlBound(pttl time.Duration) time.Duration {
	if pttl < 0 {
		return DefaultNoExpiryWait
	}
	return pttl + time.Millisecond
}

// ended maps the error that ended a wait to what Lock (or Await) returns;
// cctx is ctx, or ctx with Close's cancellation (cause ErrClosed).
func ended(ctx, cctx context.Context, err error) error {
	switch {
	case errors.Is(err, notify.ErrClosed) || errors.Is(context.Cause(cctx), ErrClosed) && ctx.Err() == nil:
		return ErrClosed
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		if cause := context.Cause(ctx); cause != ctx.Err() && errors.Is(err, cause) {
			// err already says why ctx ended (a wait or a subscription
			// returns context.Cause): adding ctxErr as "the last error"
			// would say the cause twice ("context canceled: X (last
			// error: X)"). Only ctx's error is added, for errors.Is.
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return withLast(ctxErr(ctx), err)
	}
	return err
}

func busyOr(lastErr error) error {
	if lastErr != nil {
		return lastErr
	}
	return errBusy
}

// withLast adds the last transient error to the one that ended a wait, so
// that "context deadline exceeded" after a minute of a dead Redis says why.
func withLast(err, last error) error {
	if last == nil || err == nil {
		return err
	}
	return &endedError{err: err, last: last}
}

type endedError struct{ err, last error }

func (e *endedError) Error() string   { return e.err.Error() + " (last error: " + e.last.Error() + ")" }
func (e *endedError) Unwrap() []error { return []error{e.err, e.last} }

// cut is ctx, also cancelled, with cause ErrClosed, when the client
// closes; release frees what watches the client.
func (c *Client) cut(ctx context.Context) (cctx context.Context, release func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.closing, func() { cancel(ErrClosed) })
	return cctx, func() {
		stop()
		cancel(nil)
	}
}

// sleep waits d: nil when it passed, else why not: ctx's error, or
// ErrClosed when closing ended first (the caller's ctx ends later, if at
// all: Close ends lock contexts only at its last step).
func sleep(ctx context.Context, closing context.Context, d time.Duration) error {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(closing, stop)()
	switch {
	case luascripts.Sleep(sctx, d):
		return nil
	case ctx.Err() != nil:
		return ctxErr(ctx)
	}
	return ErrClosed
}
