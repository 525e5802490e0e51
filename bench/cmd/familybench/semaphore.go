//go:build semaphore

// The semaphore scenario's variants, for a build with rlock's Semaphore and
// SpinSemaphore: go run -tags semaphore ./cmd/familybench. Once they are in
// the tree, drop the build constraint above and the scenario runs in
// `make bench` like the others.

package main

import (
	"context"

	"github.com/latchkey/latchkey/rlock"
)

func init() {
	semaphoreVariants = []variant{
		{name: "semaphore", desc: "`Client.Semaphore`: pub/sub wake-ups", exclusive: []bool{false},
			open: func(c *rlock.Client, name string, sc *scenario) []acquirer {
				s := c.Semaphore(name, sc.Size)
				return []acquirer{hold(func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) }, s.Release)}
			}},
		{name: "spin-semaphore", desc: "`Client.SpinSemaphore`: polling with backoff", exclusive: []bool{false},
			open: func(c *rlock.Client, name string, sc *scenario) []acquirer {
				s := c.SpinSemaphore(name, sc.Size)
				return []acquirer{hold(func(ctx context.Context) (context.Context, error) { return s.Acquire(ctx, 1) }, s.Release)}
			}},
	}
}
