package rlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestRegressCloseAtSharedGrantReleases: a read grant that a Close cuts
// short is given back before Close returns, for the tries made outside the
// turn too: a read lock's first try, and a downgrade. Neither counted as a
// contender, so Close did not wait for them, and newHold saw the client
// closed and released the grant only after Close had returned: on the
// rueidis client a caller closes next, and the read hold stayed for its
// lease with nobody holding it. As in TestRegressCloseAtGrantReleases, the
// grant's reply is held until Close is under way and each release after it
// is slowed down.
func TestRegressCloseAtSharedGrantReleases(t *testing.T) {
	const slowRelease = 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		downgrade bool // the read lock is taken by the writer
	}{
		{"read", false},
		{"downgrade", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			plain := privateRedis(ctx, t)

			g := newGrantGate()
			hooked := newScriptHooks(plain)
			hooked.on(luascripts.RWRead, g.hook(slowedBy(0)))
			hooked.on(luascripts.RWUnlock, slowedBy(slowRelease))
			var err error
			g.c, err = NewClient(hooked, Options{})
			require.NoError(t, err)
			rw := g.c.RWMutex(t.Name())

			lctx := ctx
			if tc.downgrade {
				lctx, err = rw.Lock(ctx)
				require.NoError(t, err)
			}
			locked := make(chan error, 1)
			g.armed.Store(true)
			go func() {
				_, err := rw.RLock(lctx)
				locked <- err
			}()
			g.closeAtGrant(t)
			n, err := plain.Do(ctx, plain.B().Exists().Key(rw.keys.Readers, rw.keys.ReadLeases).Build()).AsInt64()
			require.NoError(t, err)
			require.Zero(t, n, "the read lock is still held in Redis after Close returned, by a grant it cut short")

			requireClosedErr(t, locked, "RLock")
		})
	}
}
