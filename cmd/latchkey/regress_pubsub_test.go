package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressForceUnlockPubSubMode: --pubsub sharded lets the CLI join
// applications that wait with sharded pub/sub on a standalone Redis. The
// CLI always chose classic there, so its force-unlock's wake-up reached
// none of their waiters (and dropped them from the queue as gone): they
// waited out the lease they had been told.
func TestRegressForceUnlockPubSubMode(t *testing.T) {
	ctx := context.Background()
	sharded := func() *rlock.Client {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{strings.TrimPrefix(redisURL, "redis://")}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		c, err := rlock.NewClient(rc, rlock.Options{PubSub: rlock.PubSubSharded})
		if err != nil {
			rc.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(); rc.Close() })
		return c
	}
	holder, waiter := sharded(), sharded()
	name := lockName(t)
	hctx, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lctx, err := waiter.Mutex(name).Lock(ctx)
		if err == nil {
			err = waiter.Mutex(name).Unlock(lctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := holder.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Waiters) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(10 * time.Millisecond) // polling Redis' state: no event to await
	}
	if r := latchkey(t, "", "force-unlock", "--yes", "--pubsub", "sharded", name); r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("force-unlock --pubsub sharded: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The holder's watchdog lease is 30 s: only a wake-up gets the waiter in.
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sharded waiter was not woken by the force-unlock")
	}
	_ = holder.Mutex(name).Unlock(hctx)
	if r := latchkey(t, "", "status", "--pubsub", "fanout", name); r.code != exitUsage || !strings.Contains(r.stderr, "--pubsub") && !strings.Contains(r.stderr, "-pubsub") {
		t.Errorf("--pubsub fanout: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
}
