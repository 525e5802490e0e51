package rlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
)

// ErrNoLeader: Election.Leader found nobody leading.
var ErrNoLeader = errors.New("latchkey: no leader")

// Leadership is one term of an election's leader, as Leader and Observe
// report it. The zero Leadership means that nobody leads.
type Leadership struct {
	Value  string     // what the leader passed to Campaign
	Token  int64      // its fencing token: increasing across leaders unless Redis lost the counter
	Since  time.Time  // when its grant was asked for, by its clock
	Client ClientInfo // the leader's Client
}

// Election is a handle on one named leader election. Get it from
// Client.Election. The leader holds the Mutex of the same name (Inspect,
// List, ForceUnlock and `latchkey run` see it so), with its watchdog,
// fencing token and loss signal; campaigners wait in its queue, so
// leadership passes to the oldest. An election adds the leader's value and
// announcements to observers.
type Election struct {
	c    *Client
	name string
	keys luascripts.ElectionKeys
	sd   *side
	err  error // invalid name, reported by every method
}

// Election returns a handle on the election called name. Handles are
// cheap; any number of goroutines may share one. With ProtocolRedisson
// every method returns ErrInvalidOptions: Redisson has no election.
func (c *Client) Election(name string) *Election {
	k, err := lockKeys(c.opts.Prefix, name)
	if err == nil {
		// Redisson has no election, and the Mutex side copied below would
		// be Redisson's: its watchdog would renew a key the leader never holds.
		err = c.latchkeyOnly("Election")
	}
	keys := luascripts.NewElectionKeys(k)
	// The Mutex's side (turn, queue, watchdog: the value is a field of the
	// lock hash), with the election's acquire and release.
	sd := *c.newMutex(name, false).sd
	sd.what = "leadership"
	sd.acquire = func(ctx context.Context, a luascripts.AcquireArgs) (reply, error) {
		value, _ := ctx.Value(campaignValue{}).(string)
		r, err := luascripts.RunElect(ctx, c.rc, keys, a, value)
		return reply{AcquireReply: r}, err
	}
	// RunResign drops the heir: the oldest campaigner queued in Redis is next.
	sd.release = func(ctx context.Context, a luascripts.ReleaseArgs) (luascripts.ReleaseReply, error) {
		return luascripts.RunResign(ctx, c.rc, keys, a)
	}
	return &Election{c: c, name: name, keys: keys, sd: &sd, err: err}
}

// campaignValue is the context key that carries Campaign's value to the
// side's acquire, which the engine calls with the caller's context.
type campaignValue struct{}

// Name is the election's name.
func (e *Election) Name() string { return e.name }

// Campaign blocks until this caller leads the election with value, or ctx
// ends. It returns a context that ends when leadership does: by Resign, or
// with cause ErrLockLost when it is lost. The watchdog renews the lease
// until Resign; a leader that dies is followed once its lease runs out. A
// ctx that carries this election's leadership is refused with
// ErrInvalidArgument.
func (e *Election) Campaign(ctx context.Context, value string) (context.Context, error) {
	return e.c.lockCall(ctx, e.err, nil, func(ctx context.Context, lo lockOptions, deadline time.Time, noWait bool) (context.Context, error) {
		if e.c.carried(ctx, e.keys.Lock) != nil {
			return nil, fmt.Errorf("%w: the context already carries a hold of %q", ErrInvalidArgument, e.name)
		}
		return e.sd.lock(context.WithValue(ctx, campaignValue{}, value), lo, deadline, noWait)
	})
}

// Resign is Mutex.Unlock for the leadership lctx carries: the oldest
// campaigner leads next, or observers learn that none leads.
func (e *Election) Resign(lctx context.Context) error {
	return e.c.unlockCarried(lctx, e.err, e.keys.Lock, e.name, "leadership")
}

// Token is Mutex.Token for the leadership lctx carries.
func (e *Election) Token(lctx context.Context) (int64, error) {
	return e.c.tokenCarried(lctx, e.err, e.keys.Lock, e.name, "leadership")
}

// Leader returns the current leader, or ErrNoLeader when none leads. A
// holder of the Mutex of the same name (`latchkey run`) leads with an
// empty Value.
func (e *Election) Leader(ctx context.Context) (Leadership, error) {
	if err := ready(ctx, e.err); err != nil {
		return Leadership{}, err
	}
	l, _, err := e.read(ctx)
	switch {
	case err != nil:
		err = e.readError(err)
	case l == (Leadership{}):
		err = fmt.Errorf("%w in %q", ErrNoLeader, e.name)
	}
	return l, err
}

// read returns the leader (zero when none) and its lease left (< 0 when
// none leads or its lock has no expiry), or the script's error as it is,
// for luascripts.Classify.
func (e *Election) read(ctx context.Context) (Leadership, time.Duration, error) {
	r, err := luascripts.ReadLeader(ctx, e.c.rc, e.keys)
	if err != nil {
		return Leadership{}, 0, err
	}
	if r.PTTL == -2*time.Millisecond {
		return Leadership{}, r.PTTL, nil
	}
	l := Leadership{Value: r.Value, Token: r.Record.Token, Since: r.Record.Since}
	_ = json.Unmarshal([]byte(r.Record.About), &l.Client) // best effort, as Inspect's
	return l, r.PTTL, nil
}

// Observe reports the leader: the current one at once (the zero Leadership
// when none leads), then each change, until ctx ends, the Client closes, or
// Redis refuses the observer with an error no retry cures (Watch's), when
// it closes the channel. Grants, resignations and force-unlocks are
// announced, not polled; an observer also reads again when the lease it saw
// ends (a dead leader announces nothing), after a reconnect, and at least
// once per Options.WatchdogTimeout (a Mutex holder's Lock and Unlock
// announce nothing). Once things
// settle the last Leadership delivered is the current leader, and a slow
// reader sees the latest change, not each one. Every change of term is
// delivered, so Tokens go down when Redis lost its fencing counter (see
// docs/safety.md). Options.Logger hears of the errors retried (Warn) and of the one that
// ended the observer (Error); Watch returns the latter.
func (e *Election) Observe(ctx context.Context) <-chan Leadership {
	out := make(chan Leadership)
	go func() {
		defer close(out)
		send := func(l Leadership) error {
			select {
			case out <- l:
				return nil
			case <-ctx.Done(): // ctx is not nil when Watch calls send
				return ctxErr(ctx)
			case <-e.c.closing.Done():
				return ErrClosed
			}
		}
		log := e.c.opts.Logger
		var retrying func(error)
		if log != nil {
			retrying = func(err error) {
				if err != nil {
					log.Warn("latchkey: observing the election failed; retrying", "election", e.name, "error", err)
				} else {
					log.Info("latchkey: observing the election again", "election", e.name)
				}
			}
		}
		err := e.Watch(ctx, send, retrying)
		if log != nil && errors.Is(err, ErrObserveFailed) {
			log.Error("latchkey: observing the election stopped", "election", e.name, "error", err)
		}
	}()
	return out
}

// Watch calls f with the leader at once (the zero Leadership when none
// leads), then with each change, as Observe delivers them, until ctx ends
// or the Client closes (it returns ctx's error or ErrClosed), f returns an
// error (it returns that one), or Redis refuses the observer with an error
// no retry cures, such as an ACL's NOPERM (it returns ErrObserveFailed
// wrapping it). Errors that may clear, such as a lost connection or Redis
// loading its data (LOADING) or busy with a script (BUSY), are retried
// with a backoff; retrying, when not nil, is called with each one
// that differs from the last it was told, then with nil once a read
// succeeds again. Watch calls f and retrying on its caller's goroutine.
func (e *Election) Watch(ctx context.Context, f func(Leadership) error, retrying func(error)) error {
	if err := ready(ctx, e.err); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.c.closing, cancel)()
	// ended is Watch's error once wctx ended.
	ended := func() error {
		if e.c.isClosed() {
			return ErrClosed
		}
		return ctxErr(ctx)
	}
	retry := luascripts.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	told := retryTold{tell: retrying}
	sub, err := e.c.subscribe(wctx, e.keys.Observers, time.Time{}, func(err error) {
		told.failed(fmt.Errorf("latchkey: subscribing to the announcements of %q: %w", e.name, err))
	})
	switch {
	case err == nil:
	case wctx.Err() != nil || errors.Is(err, notify.ErrClosed):
		return ended()
	default:
		return fmt.Errorf("%w: subscribing to the announcements of %q: %w", ErrObserveFailed, e.name, err)
	}
	defer sub.Release()
	var last Leadership
	first := true
	for {
		mark := sub.Mark() // before the read, so an announcement after it ends the wait
		l, left, err := e.read(wctx)
		// A backstop, also under a longer lease: a Mutex's grant and release
		// are not announced. The watchdog's timeout, defaults applied
		// (Options' field is 0 unless set).
		wait := e.c.wd.Options().Timeout
		switch {
		case err != nil && wctx.Err() != nil:
			return ended()
		case err != nil && !retried(err):
			return fmt.Errorf("%w: reading the leader of %q: %w", ErrObserveFailed, e.name, err)
		case err != nil:
			told.failed(e.readError(err))
			wait = retry.Next()
		default:
			told.recovered()
			// Any other term is delivered, whatever its token: scripts run
			// on the master, so a lower one means the counter was lost.
			if first || l != last {
				if err := f(l); err != nil {
					return err
				}
				first, last = false, l
			}
			retry.Reset()
			if left >= 0 {
				wait = min(wait, ttlBound(left))
			}
		}
		if _, err := sub.Wait(wctx, mark, wait); err != nil {
			return ended()
		}
	}
}

// readError is the error of read, which returns the script's own.
func (e *Election) readError(err error) error {
	return fmt.Errorf("latchkey: reading the leader of %q: %w", e.name, err)
}

// retryTold tells an observer's retried errors to tell, when not nil: each
// one that differs from the last told, then nil once a read succeeds.
type retryTold struct {
	tell func(error)
	last string // the last error told, "" when none since the last success
}

func (r *retryTold) failed(err error) {
	if msg := err.Error(); msg != r.last {
		r.last = msg
		if r.tell != nil {
			r.tell(err)
		}
	}
}

func (r *retryTold) recovered() {
	if r.last != "" {
		r.last = ""
		if r.tell != nil {
			r.tell(nil)
		}
	}
}
