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
	Token  int64      // its fencing token: strictly increasing across leaders
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
	if err == nil && l == (Leadership{}) {
		err = fmt.Errorf("%w in %q", ErrNoLeader, e.name)
	}
	return l, err
}

// read returns the leader (zero when none) and its lease left (< 0 when
// none leads or its lock has no expiry).
func (e *Election) read(ctx context.Context) (Leadership, time.Duration, error) {
	r, err := luascripts.ReadLeader(ctx, e.c.rc, e.keys)
	if err != nil {
		return Leadership{}, 0, fmt.Errorf("latchkey: reading the leader of %q: %w", e.name, err)
	}
	if r.PTTL == -2*time.Millisecond {
		return Leadership{}, r.PTTL, nil
	}
	l := Leadership{Value: r.Value, Token: r.Record.Token, Since: r.Record.Since}
	_ = json.Unmarshal([]byte(r.Record.About), &l.Client) // best effort, as Inspect's
	return l, r.PTTL, nil
}

// Observe reports the leader: the current one at once (the zero Leadership
// when none leads), then each change, until ctx ends or the Client closes,
// when it closes the channel. Grants, resignations and force-unlocks are
// announced, not polled; an observer also reads again when the lease it saw
// ends (a dead leader announces nothing) and after a reconnect. Once things
// settle the last Leadership delivered is the current leader; delivered
// Tokens never go down, and a slow reader sees the latest change, not each
// one.
func (e *Election) Observe(ctx context.Context) <-chan Leadership {
	out := make(chan Leadership)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leadership) {
	defer close(out)
	if ready(ctx, e.err) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.c.closing, cancel)()
	retry := luascripts.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	var sub *notify.Subscription
	for sub == nil {
		var err error
		if sub, err = e.c.hub.Subscribe(ctx, e.keys.Observers); err != nil && (errors.Is(err, notify.ErrClosed) || !retry.Sleep(ctx)) {
			return
		}
	}
	defer sub.Release()
	var last Leadership
	var top int64 // the highest token delivered
	first := true
	for {
		mark := sub.Mark() // before the read, so an announcement after it ends the wait
		l, left, err := e.read(ctx)
		// A backstop: a Mutex's grant is not announced. The watchdog's
		// timeout, defaults applied (Options' field is 0 unless set).
		wait := e.c.wd.Options().Timeout
		switch {
		case err != nil:
			wait = retry.Next()
		case first || newer(l, last, top):
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
			first, last, top = false, l, max(top, l.Token)
			fallthrough
		default:
			retry.Reset()
			if left >= 0 {
				wait = ttlBound(left)
			}
		}
		if _, err := sub.Wait(ctx, mark, wait); err != nil {
			return
		}
	}
}

// newer reports whether l is a change to deliver after last: a leader with
// a token above top (the highest delivered; a lagging replica's lower one
// is not), or none after one.
func newer(l, last Leadership, top int64) bool {
	if l == (Leadership{}) {
		return last != (Leadership{})
	}
	return l.Token > top
}
