package integration

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Helpers of the regression tests (regress_test.go).

// cleanupIfFailed removes the lock's keys (the hash, its wait queue and the
// queue's descriptions; not its fencing counter) when the test has failed, so that a failing regression
// test does not also fail the suite's final check for leftover keys. It
// must be registered before the lock clients, so that it runs after they
// closed. A passing test leaves whatever it left: the suite's check then
// judges it.
func cleanupIfFailed(t *testing.T, rc rueidis.Client, key string) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, k := range []string{key, key + ":q"} {
			_ = rc.Do(ctx, rc.B().Del().Key(k).Build()).Error()
		}
	})
}

// queueMembers lists the members of the lock's wait queue (none when the
// queue key does not exist).
func queueMembers(t testing.TB, rc rueidis.Client, key string) []string {
	t.Helper()
	members, err := rc.Do(context.Background(), rc.B().Zrange().Key(key+":q").Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	return members
}

// awaitCond polls cond every millisecond until it holds or d has passed:
// for states of Redis or of a client that no event announces.
func awaitCond(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond) // polling a state no event announces
	}
}
