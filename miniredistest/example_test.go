package miniredistest

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// newLocks is what a unit test of yours needs: a latchkey Client on an
// in-process miniredis, no server to install. The three options matter:
// ForceSingleClient, since miniredis answers CLUSTER SLOTS and rueidis would
// take it for a Cluster (then latchkey uses sharded pub/sub, which miniredis
// lacks); AlwaysRESP2, since miniredis refuses other commands on a
// connection that subscribed, which RESP3 multiplexes; and DisableCache,
// which RESP2 requires.
func newLocks(mr *miniredis.Miniredis, opts rlock.Options) (*rlock.Client, func()) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:       []string{mr.Addr()},
		ForceSingleClient: true,
		AlwaysRESP2:       true,
		DisableCache:      true,
	})
	if err != nil {
		log.Fatal(err)
	}
	locks, err := rlock.NewClient(rc, opts)
	if err != nil {
		log.Fatal(err)
	}
	return locks, func() { locks.Close(); rc.Close() }
}

// startLocks starts a miniredis and returns a Client on it, and the func
// that closes both.
func startLocks() (*rlock.Client, *miniredis.Miniredis, func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	locks, done := newLocks(mr, rlock.Options{})
	return locks, mr, func() { done(); mr.Close() }
}

// The rlock package's Example and ExampleMutex_Lock_reentrant on miniredis:
// Lock, a nested Lock through the lock's context (re-entry), and the
// Unlocks.
func Example() {
	locks, _, done := startLocks()
	defer done()

	m := locks.Mutex("invoice:42")
	lctx, err := m.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	inner, err := locks.Mutex("invoice:42").Lock(lctx) // re-enters at once
	if err != nil {
		log.Fatal(err)
	}
	n, _ := m.HoldCount(inner)
	fmt.Println("hold count:", n)
	fmt.Println(m.Unlock(inner), m.Unlock(lctx))
	locked, _ := m.IsLocked(context.Background())
	fmt.Println("locked after the last Unlock:", locked)
	// Output:
	// hold count: 2
	// <nil> <nil>
	// locked after the last Unlock: false
}

// ExampleClient_Do on miniredis.
func ExampleClient_Do() {
	locks, _, done := startLocks()
	defer done()

	err := locks.Do(context.Background(), "report:daily", func(lctx context.Context) error {
		fmt.Println("writing the report")
		return nil
	})
	fmt.Println(err)
	// Output:
	// writing the report
	// <nil>
}

// ExampleRWMutex on miniredis: readers share, a reader cannot upgrade, a
// writer reads too and keeps reading after its Unlock.
func ExampleRWMutex() {
	locks, _, done := startLocks()
	defer done()
	ctx := context.Background()
	config := locks.RWMutex("config")

	r1, _ := config.RLock(ctx)
	r2, _ := config.RLock(ctx)
	_, ok, _ := config.TryLock(ctx)
	fmt.Println("writer while two read:", ok)
	_, err := config.Lock(r1)
	fmt.Println(errors.Is(err, rlock.ErrUpgrade))
	_ = config.RUnlock(r1)
	_ = config.RUnlock(r2)

	w, _ := config.Lock(ctx)
	token, _ := config.Token(w)
	read, _ := config.RLock(w)
	_ = config.Unlock(w)
	fmt.Println(token > 0, read.Err() == nil)
	fmt.Println(config.RUnlock(read))
	// Output:
	// writer while two read: false
	// true
	// true true
	// <nil>
}

// ExampleSemaphore on miniredis: six jobs of 1 or 2 permits share 3, and
// never hold more at once.
func ExampleSemaphore() {
	locks, _, done := startLocks()
	defer done()

	pool := locks.Semaphore("licences", 3)
	var mu sync.Mutex
	inUse, most := int64(0), int64(0)
	var wg sync.WaitGroup
	for job := range 6 {
		n := int64(1 + job%2)
		wg.Go(func() {
			pctx, err := pool.Acquire(context.Background(), n)
			if err != nil {
				log.Print(err)
				return
			}
			mu.Lock()
			inUse += n
			most = max(most, inUse)
			mu.Unlock()
			mu.Lock()
			inUse -= n
			mu.Unlock()
			if err := pool.Release(pctx); err != nil {
				log.Print(err)
			}
		})
	}
	wg.Wait()
	free, err := pool.Available(context.Background())
	fmt.Println(most <= pool.Size(), free, err)
	// Output:
	// true 3 <nil>
}
