package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// The torture run's fault controller: one goroutine in the test process
// that, at seeded random intervals, kills connections, force-unlocks a lock
// or delays the replies of the clients behind the proxy. Every fault is
// recorded with the interval it was in force, so that the judge can tell an
// anomaly it explains from one it does not. Workers inject two faults of
// their own (Client.Close, and fixed leases held past their end) and record
// those too.

// Fault kinds.
const (
	faultKillNormal = "kill-normal" // CLIENT KILL TYPE normal on every lock node
	faultKillPubSub = "kill-pubsub" // CLIENT KILL TYPE pubsub on every lock node
	faultForce      = "force"       // ForceUnlock of one lock
	faultDelay      = "delay"       // latency on the proxy's replies (standalone)
)

type controller struct {
	rng    *rand.Rand
	admins []rueidis.Client // one per lock node; CLIENT KILL skips its caller
	rc     rueidis.Client   // under force
	force  *rlock.Client
	proxy  *netProxy // nil on Cluster
	locks  []string
	rec    recorder
}

func newController(cfg tortureConfig, admins []rueidis.Client, proxy *netProxy, rec recorder) (*controller, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cfg.LockAddrs, DisableCache: true})
	if err != nil {
		return nil, err
	}
	force, err := rlock.NewClient(rc, rlock.Options{Prefix: cfg.Prefix})
	if err != nil {
		rc.Close()
		return nil, err
	}
	return &controller{
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0xc0)), // a stream no worker uses (proc<<32|g)
		admins: admins, rc: rc, force: force, proxy: proxy, locks: cfg.Locks, rec: rec,
	}, nil
}

// loop injects faults until ctx ends; it lifts a delay before it returns.
// Every draw is made whatever the fault, to keep the schedule seed-bound.
func (c *controller) loop(ctx context.Context) error {
	defer c.rc.Close()
	defer c.force.Close()
	for {
		gap := time.Duration(300+c.rng.IntN(1200)) * time.Millisecond
		kind := c.rng.IntN(4)
		lock := c.rng.IntN(len(c.locks))
		latency := time.Duration(20+c.rng.IntN(150)) * time.Millisecond
		jitter := time.Duration(c.rng.IntN(20)) * time.Millisecond
		span := time.Duration(200+c.rng.IntN(400)) * time.Millisecond
		think(ctx, gap)
		if ctx.Err() != nil {
			return nil
		}
		var err error
		switch {
		case kind == 0:
			err = c.kill(ctx, faultKillNormal)
		case kind == 1:
			err = c.kill(ctx, faultKillPubSub)
		case kind == 2 || c.proxy == nil:
			c.forceUnlock(ctx, lock)
		default:
			err = c.delay(ctx, latency, jitter, span)
		}
		if err != nil {
			return err
		}
	}
}

func (c *controller) kill(ctx context.Context, kind string) error {
	from := time.Now()
	total := int64(0)
	for _, a := range c.admins {
		cmd := a.B().ClientKill().TypeNormal().Build()
		if kind == faultKillPubSub {
			cmd = a.B().ClientKill().TypePubsub().Build()
		}
		n, err := a.Do(ctx, cmd).AsInt64()
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		total += n
	}
	c.rec(tortureEvent{Kind: evFault, Fault: kind, Lock: -1, From: from.UnixNano(), To: time.Now().UnixNano(),
		Note: fmt.Sprintf("%d connection(s)", total)})
	return nil
}

// forceUnlock may fail (its own connection may just have been killed); the
// fault is recorded all the same, since it may have reached the server.
func (c *controller) forceUnlock(ctx context.Context, lock int) {
	from := time.Now()
	fctx, cancel := context.WithTimeout(ctx, tortureOpTimeout)
	held, err := c.force.ForceUnlock(fctx, c.locks[lock])
	cancel()
	note := fmt.Sprintf("held=%v", held)
	if err != nil {
		note = "error: " + err.Error()
	}
	c.rec(tortureEvent{Kind: evFault, Fault: faultForce, Lock: lock, From: from.UnixNano(), To: time.Now().UnixNano(), Note: note})
}

// delay holds back every reply through the proxy by latency±jitter for
// span. Its window runs until the last delayed reply can have arrived.
func (c *controller) delay(ctx context.Context, latency, jitter, span time.Duration) error {
	spec, err := json.Marshal(toxic{Name: "torture-delay", Type: "latency", Stream: "downstream", Toxicity: 1,
		Attributes: map[string]int64{"latency": latency.Milliseconds(), "jitter": jitter.Milliseconds()}})
	if err != nil {
		return err
	}
	from := time.Now()
	if _, err := c.proxy.p.Toxics.AddToxicJson(strings.NewReader(string(spec))); err != nil {
		return fmt.Errorf("adding %s: %w", spec, err)
	}
	think(ctx, span)
	if err := c.proxy.p.Toxics.RemoveToxic(context.Background(), "torture-delay"); err != nil {
		return fmt.Errorf("removing the delay: %w", err)
	}
	to := time.Now().Add(latency + jitter)
	c.rec(tortureEvent{Kind: evFault, Fault: faultDelay, Lock: -1, From: from.UnixNano(), To: to.UnixNano(),
		Note: fmt.Sprintf("%v±%v for %v", latency, jitter, span)})
	return nil
}
