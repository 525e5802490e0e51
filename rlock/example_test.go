package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// A worker takes the lock, does its work under the context Lock returned,
// and unlocks. Without a lease, the watchdog keeps the lock alive for as long
// as the work takes.
func Example() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx := context.Background()
	m := locks.Mutex("invoice:42")
	lctx, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(lctx)

	// lctx is cancelled, with cause rlock.ErrLockLost, if the lock is lost:
	// pass it to everything the lock protects.
	fmt.Println("holding", m.Name())
	// Output: holding invoice:42
}

// TryLock reports a busy lock with false rather than an error. With WithWait
// it waits a bounded time; a Lock elsewhere holds the lock meanwhile.
func ExampleMutex_TryLock() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()

	holder := locks.Mutex("report")
	hctx, _ := holder.Lock(ctx)

	other := locks.Mutex("report") // another handle is another owner
	_, ok, err := other.TryLock(ctx)
	fmt.Println("free now:", ok, err)
	_, ok, err = other.TryLock(ctx, rlock.WithWait(50*time.Millisecond))
	fmt.Println("free within 50ms:", ok, err)

	holder.Unlock(hctx)
	octx, ok, err := other.TryLock(ctx)
	fmt.Println("free after Unlock:", ok, err)
	other.Unlock(octx)
	// Output:
	// free now: false <nil>
	// free within 50ms: false <nil>
	// free after Unlock: true <nil>
}

// The context that Lock returns carries the ownership: a nested function
// that locks the same name with it re-enters, whatever handle it uses.
// Every Lock needs its Unlock; the lock is released at the last one.
func ExampleMutex_Lock_reentrant() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	nested := func(ctx context.Context) {
		m := locks.Mutex("account:7") // a fresh handle, as a library function would make
		lctx, err := m.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		n, _ := m.HoldCount(lctx)
		fmt.Println("nested hold count:", n)
		m.Unlock(lctx)
	}

	m := locks.Mutex("account:7")
	lctx, _ := m.Lock(context.Background())
	nested(lctx)
	n, _ := m.HoldCount(lctx)
	fmt.Println("outer hold count:", n)
	m.Unlock(lctx)
	locked, _ := m.IsLocked(context.Background())
	fmt.Println("locked after the last Unlock:", locked)
	// Output:
	// nested hold count: 2
	// outer hold count: 1
	// locked after the last Unlock: false
}

// With a fixed lease there is no watchdog: the lock expires, and the
// context Lock returned says why. The context ends on the local clock
// measured from when the acquire was sent, so it ends no later than the
// lock does on the server.
func ExampleWithLease() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()

	m := locks.Mutex("short-job")
	lctx, _ := m.Lock(ctx, rlock.WithLease(100*time.Millisecond))
	<-lctx.Done() // the job overran its lease
	fmt.Println("lost:", errors.Is(context.Cause(lctx), rlock.ErrLockLost))

	next := locks.Mutex("short-job")
	nctx, ok, _ := next.TryLock(ctx, rlock.WithWait(time.Second))
	fmt.Println("next owner got it:", ok)
	next.Unlock(nctx)
	// Output:
	// lost: true
	// next owner got it: true
}

// The spin variant has the same API and semantics, and polls instead of
// listening for unlocks. It is there to measure pub/sub against.
func ExampleClient_SpinMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{SpinBackoffMin: time.Millisecond, SpinBackoffMax: 64 * time.Millisecond})
	defer locks.Close()

	m := locks.SpinMutex("batch")
	lctx, err := m.Lock(context.Background())
	fmt.Println(err)
	fmt.Println(m.Unlock(lctx))
	// Output:
	// <nil>
	// <nil>
}
