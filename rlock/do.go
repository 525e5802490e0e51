package rlock

import (
	"context"
	"errors"
	"fmt"
)

// Do runs fn while holding the Mutex called name: Lock with opts, fn with
// the lock's context, Unlock. It returns fn's error joined with Unlock's, so
// a lock lost while fn ran shows (ErrNotHeld wrapping ErrLockLost) even when
// fn returned nil. fn should stop when its context ends: that is the loss
// signal. If fn panics, Do unlocks and the panic goes on.
func (c *Client) Do(ctx context.Context, name string, fn func(lctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: Do of %q needs a function to run", ErrInvalidArgument, name)
	}
	m := c.Mutex(name)
	lctx, err := m.Lock(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Unlock(lctx)) }()
	return fn(lctx)
}
