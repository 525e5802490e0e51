package locks

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidislockLib is rueidislock with one key per lock (KeyMajority 1) and
// its default wake-up: client-side caching, whose invalidation of the lock
// key wakes the waiters of this process.
type rueidislockLib struct{ l rueidislock.Locker }

func openRueidislock(opts Options) (Lib, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{opts.Addr}},
		KeyMajority:  1,
		KeyValidity:  opts.Lease,
	})
	if err != nil {
		return nil, fmt.Errorf("locks: rueidislock: connecting to %s: %w", opts.Addr, err)
	}
	return &rueidislockLib{l: l}, nil
}

func (r *rueidislockLib) Locker(key string) Locker { return &rueidislockLocker{l: r.l, key: key} }

func (r *rueidislockLib) Close() error {
	r.l.Close()
	return nil
}

type rueidislockLocker struct {
	l   rueidislock.Locker
	key string
}

func (r *rueidislockLocker) Lock(ctx context.Context) (func() error, error) {
	// The hold lasts until cancel, or until ctx ends: rueidislock derives
	// the lock's context from ctx and shortens the key's validity to ctx's
	// deadline.
	_, cancel, err := r.l.WithContext(ctx, r.key)
	if err != nil {
		return nil, err
	}
	return func() error {
		cancel() // deletes the key and waits for that
		return nil
	}, nil
}
