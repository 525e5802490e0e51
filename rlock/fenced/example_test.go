package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// Every write to the protected resource carries the holder's fencing token.
// A holder whose lease ran out while it was paused finds its write rejected
// once the next holder has written.
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
	store := fenced.New(rc, "example-balance")
	defer store.Delete(ctx)

	// The first holder takes the lock and is then paused (simulated here by
	// remembering its token and letting the lock go).
	first := locks.Mutex("example-balance")
	lctx, _ := first.Lock(ctx)
	oldToken, _ := first.Token(lctx)
	first.Unlock(lctx)

	// The next holder writes with its own, higher token.
	next := locks.Mutex("example-balance")
	nctx, _ := next.Lock(ctx)
	token, _ := next.Token(nctx)
	fmt.Println("next holder writes:", store.Write(nctx, token, "100"))
	next.Unlock(nctx)

	// The paused holder wakes up and tries its write.
	err = store.Write(ctx, oldToken, "50")
	fmt.Println("stale write rejected:", errors.Is(err, fenced.ErrStale))
	// Output:
	// next holder writes: <nil>
	// stale write rejected: true
}
