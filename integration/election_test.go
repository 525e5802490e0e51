package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/rlock"
)

// electionLease is the leases of the election tests' leaders: short, so
// that a dead leader is followed quickly; its renewals come every third.
const electionLease = time.Second

// observed is what one Observe delivered, kept so a test can await a
// delivery and check the whole sequence afterwards.
type observed struct {
	mu      sync.Mutex
	got     []rlock.Leadership
	changed chan struct{} // closed and replaced at each delivery
	done    chan struct{} // closed when Observe's channel closed
}

// observeElection runs e.Observe until the test ends.
func observeElection(t *testing.T, e *rlock.Election) *observed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &observed{changed: make(chan struct{}), done: make(chan struct{})}
	ch := e.Observe(ctx)
	go func() {
		defer close(o.done)
		for l := range ch {
			o.mu.Lock()
			o.got = append(o.got, l)
			close(o.changed)
			o.changed = make(chan struct{})
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-o.done // the channel closes when ctx ends
	})
	return o
}

// await waits until the last delivery satisfies ok.
func (o *observed) await(t *testing.T, d time.Duration, what string, ok func(rlock.Leadership) bool) rlock.Leadership {
	t.Helper()
	deadline := time.After(d)
	for {
		o.mu.Lock()
		changed, n := o.changed, len(o.got)
		var last rlock.Leadership
		if n > 0 {
			last = o.got[n-1]
		}
		o.mu.Unlock()
		if n > 0 && ok(last) {
			return last
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("after %v no observer delivery of %s; delivered: %+v", d, what, o.all())
		}
	}
}

func (o *observed) all() []rlock.Leadership {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]rlock.Leadership(nil), o.got...)
}

// requireRising checks that the leaders delivered have strictly rising
// tokens, whatever came between them.
func (o *observed) requireRising(t *testing.T) {
	t.Helper()
	var top int64
	for _, l := range o.all() {
		if l.Token != 0 {
			require.Greater(t, l.Token, top, "delivered: %+v", o.all())
			top = l.Token
		}
	}
}

func leads(value string) func(rlock.Leadership) bool {
	return func(l rlock.Leadership) bool { return l.Value == value }
}

func noLeader(l rlock.Leadership) bool { return l == rlock.Leadership{} }

// campaign is one Campaign running in the background.
type campaign struct {
	value string
	e     *rlock.Election
	lctx  context.Context
	err   error
	at    time.Time // when Campaign returned
}

// startCampaign campaigns with value on a client of its own and returns
// once the campaigner waits in Redis' queue (its first wait), so that
// campaigns started one after another queue in that order.
func startCampaign(t *testing.T, ctx context.Context, tp topology, name, value string, won chan<- *campaign) *campaign {
	t.Helper()
	att := newAttempts()
	c := lockClient(t, tp, att.options(rlock.Options{WatchdogTimeout: electionLease, ClientName: value}))
	cp := &campaign{value: value, e: c.Election(name)}
	go func() {
		cp.lctx, cp.err = cp.e.Campaign(ctx, value)
		cp.at = time.Now()
		won <- cp
	}()
	await(t, att.reached(waitKey(name), 1), 10*time.Second, value+" to queue")
	return cp
}

// electorConfig is the "elector" child's parameters.
type electorConfig struct {
	Addrs           []string
	Name, Value     string
	WatchdogTimeout time.Duration
}

// electorChild is the "elector" role: campaign, report "leader" with the
// token, and lead until killed (or stdin closes).
func electorChild() error {
	var cfg electorConfig
	if err := childproc.Params(&cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cfg.Addrs, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: cfg.WatchdogTimeout, ClientName: cfg.Value})
	if err != nil {
		return err
	}
	defer locks.Close()
	e := locks.Election(cfg.Name)
	lctx, err := e.Campaign(ctx, cfg.Value)
	if err != nil {
		return err
	}
	token, err := e.Token(lctx)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(os.Stdout).Encode(holderEvent{Event: "leader", Token: token}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // lead until killed
	return e.Resign(lctx)
}

// startElector runs an elector child and returns once it leads.
func startElector(t *testing.T, tp topology, name, value string) (*holderProc, int64) {
	t.Helper()
	h := startHolderRole(t, "elector", electorConfig{Addrs: tp.addrs, Name: name, Value: value, WatchdogTimeout: electionLease})
	return h, h.next(t, "leader").Token
}

// TestElectionFailover: the leader's process is killed (-9) while three
// followers campaign. Exactly one follower leads within a lease and one
// renewal period of the kill, with a higher token, and every observer
// reports it.
func TestElectionFailover(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		obs := []*observed{
			observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name)),
			observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name)),
		}
		child, childToken := startElector(t, tp, name, "child")
		for _, o := range obs {
			o.await(t, 10*time.Second, "the child leading", leads("child"))
		}
		ctx, cancel := context.WithCancel(context.Background())
		won := make(chan *campaign, 3)
		for i := range 3 {
			startCampaign(t, ctx, tp, name, fmt.Sprintf("follower-%d", i), won)
		}

		killed := time.Now()
		child.signal(t, syscall.SIGKILL)
		var first *campaign
		select {
		case first = <-won:
		case <-time.After(10 * time.Second):
			t.Fatal("no follower leads 10s after the leader was killed")
		}
		require.NoError(t, first.err)
		took := first.at.Sub(killed)
		t.Logf("%s leads %v after the kill", first.value, took.Round(time.Millisecond))
		require.LessOrEqual(t, took, electionLease+electionLease/3, "a new leader within a lease and one renewal")
		token, err := first.e.Token(first.lctx)
		require.NoError(t, err)
		require.Greater(t, token, childToken)
		for _, o := range obs {
			l := o.await(t, 5*time.Second, first.value+" leading", leads(first.value))
			require.Equal(t, token, l.Token)
			require.Equal(t, first.value, l.Client.Name)
			o.requireRising(t)
		}
		// One leader: the others still campaign.
		select {
		case other := <-won:
			t.Fatalf("%s leads too (err %v)", other.value, other.err)
		default:
		}
		l, err := first.e.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, token, l.Token)

		require.NoError(t, first.e.Resign(first.lctx))
		cancel()
		for range 2 {
			// The rest give up, or one led in between: let it go.
			if cp := <-won; cp.err == nil {
				require.NoError(t, cp.e.Resign(cp.lctx))
			}
		}
	})
}

// TestElectionResignHandsToOldest: each resignation hands leadership to
// the campaigner that queued first, across clients, and observers see
// each leader in turn; the last resignation, with nobody campaigning,
// leaves no leader.
func TestElectionResignHandsToOldest(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		ctx := t.Context()
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 5*time.Second, "no leader at first", noLeader)
		a := lockClient(t, tp, rlock.Options{}).Election(name)
		actx, err := a.Campaign(ctx, "a")
		require.NoError(t, err)
		obs.await(t, 5*time.Second, "a leading", leads("a"))

		won := make(chan *campaign, 3)
		var order []*campaign
		for _, v := range []string{"b", "c", "d"} {
			order = append(order, startCampaign(t, ctx, tp, name, v, won))
		}
		require.NoError(t, a.Resign(actx))
		for i, want := range order {
			var got *campaign
			select {
			case got = <-won:
			case <-time.After(10 * time.Second):
				t.Fatalf("nobody took over from the resignation before %s", want.value)
			}
			require.NoError(t, got.err)
			require.Equal(t, want.value, got.value, "leader %d", i+2)
			obs.await(t, 5*time.Second, want.value+" leading", leads(want.value))
			require.NoError(t, got.e.Resign(got.lctx))
		}
		obs.await(t, 5*time.Second, "no leader after the last resignation", noLeader)
		obs.requireRising(t)
		_, err = a.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrNoLeader)
	})
}

// TestElectionObservePubSubKilled: the observers' and campaigners'
// pub/sub connections are killed (CLIENT KILL TYPE pubsub) before each of
// 41 changes of leadership; announcements sent while a subscription was
// down are lost. Once the kills stop, every observer
// reports the current leader, long before any lease could have ended
// (leases here are 30 s): the resubscription made it read again. Tokens
// delivered never went down.
func TestElectionObservePubSubKilled(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		ctx := t.Context()
		obs := []*observed{
			observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name)),
			observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name)),
		}
		x := lockClient(t, tp, rlock.Options{}).Election(name)
		y := lockClient(t, tp, rlock.Options{}).Election(name)

		// Each change comes right after a kill, while the subscriptions
		// are being made again: its announcement may be missed.
		n := 0
		for i := range 20 {
			n += killPubSubClients(t, tp)
			e := []*rlock.Election{x, y}[i%2]
			lctx, err := e.Campaign(ctx, fmt.Sprintf("term-%d", i))
			require.NoError(t, err)
			require.NoError(t, e.Resign(lctx))
		}
		n += killPubSubClients(t, tp)
		lctx, err := x.Campaign(ctx, "final")
		require.NoError(t, err)
		require.Positive(t, n, "no pub/sub connection was killed")
		token, err := x.Token(lctx)
		require.NoError(t, err)
		for _, o := range obs {
			l := o.await(t, 10*time.Second, "the final leader", leads("final"))
			require.Equal(t, token, l.Token)
			o.requireRising(t)
		}
		t.Logf("killed %d connections; deliveries %d and %d", n, len(obs[0].all()), len(obs[1].all()))
		require.NoError(t, x.Resign(lctx))
	})
}

// TestElectionNoLeader: Leader reports ErrNoLeader when nobody leads, and
// observers get the zero Leadership when leadership ends with nobody
// campaigning: by a resignation (announced), by a force-unlock (the
// leader's context ends with ErrLockLost; observers read again when the
// lease they saw ends) and by a leader's process killed (-9; the lease
// simply runs out and nothing is announced).
func TestElectionNoLeader(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		name := lockName(t)
		ctx := t.Context()
		c := lockClient(t, tp, rlock.Options{WatchdogTimeout: electionLease, ClientName: "me"})
		e := c.Election(name)
		_, err := e.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrNoLeader)
		obs := observeElection(t, lockClient(t, tp, rlock.Options{}).Election(name))
		obs.await(t, 5*time.Second, "no leader at first", noLeader)

		before := time.Now().Truncate(time.Millisecond)
		lctx, err := e.Campaign(ctx, "v1")
		require.NoError(t, err)
		l, err := e.Leader(ctx)
		require.NoError(t, err)
		token, err := e.Token(lctx)
		require.NoError(t, err)
		require.Equal(t, rlock.ClientInfo{ID: c.ID(), Name: "me", Host: l.Client.Host, PID: os.Getpid()}, l.Client)
		require.Equal(t, "v1", l.Value)
		require.Equal(t, token, l.Token)
		require.False(t, l.Since.Before(before), "since %v, campaign at %v", l.Since, before)
		obs.await(t, 5*time.Second, "v1 leading", leads("v1"))

		require.NoError(t, e.Resign(lctx))
		obs.await(t, 5*time.Second, "no leader after the resignation", noLeader)
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, rlock.ErrNoLeader)
		require.ErrorIs(t, e.Resign(lctx), rlock.ErrNotHeld)

		lctx, err = e.Campaign(ctx, "v2")
		require.NoError(t, err)
		obs.await(t, 5*time.Second, "v2 leading", leads("v2"))
		forced, err := lockClient(t, tp, rlock.Options{}).ForceUnlock(ctx, name)
		require.NoError(t, err)
		require.True(t, forced)
		requireLost(t, lctx, 2*electionLease, "the leader's context to end after the force-unlock")
		obs.await(t, 2*electionLease, "no leader after the force-unlock", noLeader)

		child, _ := startElector(t, tp, name, "child")
		obs.await(t, 5*time.Second, "the child leading", leads("child"))
		killed := time.Now()
		child.signal(t, syscall.SIGKILL)
		obs.await(t, 2*electionLease, "no leader after the kill", noLeader)
		t.Logf("no leader observed %v after the kill", time.Since(killed).Round(time.Millisecond))
		obs.requireRising(t)
	})
}
