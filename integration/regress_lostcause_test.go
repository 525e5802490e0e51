package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/latchkey/latchkey/rlock"
)

// TestRegressLostAtCallCountsAsGone: a hold whose lock was deleted under it
// is lost with cause "gone" in latchkey.lock.lost, whichever call finds it
// gone. A re-entry said "gone", but an Unlock (last hold or not) and an
// Extend said "other", the label for causes the library cannot name.
func TestRegressLostAtCallCountsAsGone(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, _, observed := observe(t)
		// WithLease holds: no watchdog renewal finds the loss first.
		c := lockClient(t, tp, observed(rlock.Options{}))
		other := lockClient(t, tp, rlock.Options{})
		gone := attribute.String("latchkey.cause", "gone")
		calls := []struct {
			name string
			call func(m *rlock.Mutex, lctx context.Context) error
		}{
			{"last unlock", func(m *rlock.Mutex, lctx context.Context) error { return m.Unlock(lctx) }},
			{"inner unlock", func(m *rlock.Mutex, lctx context.Context) error {
				inner, err := m.Lock(lctx) // re-entered before the deletion
				require.NoError(t, err)
				_, err = other.ForceUnlock(ctx, m.Name())
				require.NoError(t, err)
				return m.Unlock(inner)
			}},
			{"extend", func(m *rlock.Mutex, lctx context.Context) error { return m.Extend(lctx, time.Minute) }},
		}
		for i, call := range calls {
			m := c.Mutex(lockName(t) + call.name)
			lctx := mustLock(t, ctx, m, rlock.WithLease(time.Minute))
			if call.name != "inner unlock" {
				ok, err := other.ForceUnlock(ctx, m.Name())
				require.NoError(t, err)
				require.True(t, ok)
			}
			require.ErrorIs(t, call.call(m, lctx), rlock.ErrNotHeld, call.name)
			assert.EqualValues(t, i+1, r.value("latchkey.lock.lost", gone), "%s: lost, gone", call.name)
			assert.Zero(t, r.value("latchkey.lock.lost", attribute.String("latchkey.cause", "other")), call.name)
		}
	})
}
