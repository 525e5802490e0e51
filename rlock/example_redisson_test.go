package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// With ProtocolRedisson, a Mutex is the RLock that a Java service gets
// from redisson.getLock("orders:export") (or getFencedLock) on the same
// Redis: Redisson's hash at that very key, one field per holder, and its
// unlock message, so Go and Java holders exclude and wake each other.
func ExampleProtocol() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{Protocol: rlock.ProtocolRedisson})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx := context.Background()
	m := locks.Mutex("orders:export")
	lctx, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Redisson's format: "<client id>:<n>" -> hold count.
	fields, err := rc.Do(ctx, rc.B().Hgetall().Key("orders:export").Build()).AsStrMap()
	if err != nil {
		log.Fatal(err)
	}
	for owner, count := range fields {
		fmt.Println("held by this client:", strings.HasPrefix(owner, locks.ID()+":"), "count:", count)
	}
	// RFencedLock's token, from "redisson_lock_token:{orders:export}".
	token, err := m.Token(lctx)
	fmt.Println("token:", token > 0, err)
	// Publishes "0" on "redisson_lock__channel:{orders:export}": Java
	// waiters wake as they would for a Java unlock.
	fmt.Println("unlock:", m.Unlock(lctx))

	// Only Mutex and SpinMutex have a Redisson counterpart here.
	_, err = locks.RWMutex("orders:export").RLock(ctx)
	fmt.Println("rwmutex refused:", errors.Is(err, rlock.ErrInvalidOptions))
	// Output:
	// held by this client: true count: 1
	// token: true <nil>
	// unlock: <nil>
	// rwmutex refused: true
}
