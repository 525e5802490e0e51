package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/rlock"
)

// ranButLost runs every call of the script ran, while on, and then fails it
// as a connection lost before the reply would (the outcome looks unknown,
// the change is made); every call of the script refused it fails without
// running it.
type ranButLost struct {
	rueidis.Client
	ran, refused string
	on           *atomic.Bool
}

func (c ranButLost) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if !c.on.Load() {
		return c.Client.Do(ctx, cmd)
	}
	switch scriptOf(cmd.Commands()) {
	case c.ran:
		res := c.Client.Do(ctx, cmd)
		if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
			return res // rueidis sends it again with EVAL
		}
		return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
	case c.refused:
		return rueidis.NewErrorResult(io.ErrUnexpectedEOF)
	}
	return c.Client.Do(ctx, cmd)
}

// scriptOf is the SHA-1 of the script an EVALSHA or EVAL runs, or "".
func scriptOf(args []string) string {
	switch {
	case len(args) > 1 && args[0] == "EVALSHA":
		return args[1]
	case len(args) > 1 && args[0] == "EVAL":
		sum := sha1.Sum([]byte(args[1]))
		return hex.EncodeToString(sum[:])
	}
	return ""
}

// TestRegressReentryUndoFailed: a re-entry of unknown outcome whose undo
// failed too left Redis one hold above the local count, with nothing to
// send the undo again; the next Unlock's release then found the count
// wrong, reported the hold lost (ErrNotHeld) and left the lock held with
// nobody to release it until its lease ran out. The undo is now re-sent
// before the hold's next call, as a failed Unlock's release is.
func TestRegressReentryUndoFailed(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx := context.Background()
		for _, side := range []struct {
			name           string
			reenter, unlck *luascripts.Script
			lock           func(c *rlock.Client, name string) (func(context.Context) (context.Context, error), func(context.Context) error, string)
		}{
			{"mutex", luascripts.Reenter, luascripts.Release, func(c *rlock.Client, name string) (func(context.Context) (context.Context, error), func(context.Context) error, string) {
				m := c.Mutex(name)
				return func(ctx context.Context) (context.Context, error) { return m.Lock(ctx) }, m.Unlock, m.Key()
			}},
			{"read", luascripts.RWReenter, luascripts.RWUnlock, func(c *rlock.Client, name string) (func(context.Context) (context.Context, error), func(context.Context) error, string) {
				rw := c.RWMutex(name)
				return func(ctx context.Context) (context.Context, error) { return rw.RLock(ctx) }, rw.RUnlock, ""
			}},
		} {
			t.Run(side.name, func(t *testing.T) {
				var on atomic.Bool
				raw := redisClient(t, tp)
				c, err := rlock.NewClient(ranButLost{Client: raw, ran: shaOf(side.reenter), refused: shaOf(side.unlck), on: &on},
					rlock.Options{ReleaseTimeout: 50 * time.Millisecond})
				require.NoError(t, err)
				t.Cleanup(func() { require.NoError(t, c.Close()) })
				name := lockName(t)
				lock, unlock, key := side.lock(c, name)
				lctx, err := lock(ctx)
				require.NoError(t, err)

				on.Store(true) // the re-entry runs, its reply and its undo are lost
				_, err = lock(lctx)
				require.Error(t, err, "the re-entry of unknown outcome")
				on.Store(false)

				require.NoError(t, unlock(lctx), "Unlock after a failed undo of a re-entry")
				if key != "" {
					require.False(t, exists(t, raw, key), "the lock is still held after its last Unlock")
				}
				requireNoLeftovers(t, tp, name)
			})
		}
	})
}
