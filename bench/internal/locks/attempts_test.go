package locks

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

func TestCountsAttempts(t *testing.T) {
	for _, lib := range Counting {
		if !slices.Contains(All, lib) {
			t.Errorf("%s counts attempts but is not a library", lib)
		}
	}
	if CountsAttempts(Rueidislock) || !CountsAttempts(Redsync) || !CountsAttempts(Latchkey) {
		t.Error("rueidislock shows no tries; redsync's and latchkey's are counted")
	}
}

// TestSetCounter: redsync's tries are its SETs; its scripts (EVALSHA) and
// anything else do not count, sent alone or in a pipeline.
func TestSetCounter(t *testing.T) {
	n := 0
	h := setCounter{onSet: func() { n++ }}
	ctx := context.Background()
	sent := 0
	process := h.ProcessHook(func(context.Context, redis.Cmder) error { sent++; return nil })
	for _, cmd := range []redis.Cmder{
		redis.NewBoolCmd(ctx, "set", "k", "v", "px", 10000, "nx"),
		redis.NewBoolCmd(ctx, "setnx", "k", "v"),
		redis.NewCmd(ctx, "evalsha", "abc", 1, "k", "v"),
		redis.NewStringCmd(ctx, "get", "k"),
	} {
		if err := process(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	pipeline := h.ProcessPipelineHook(func(_ context.Context, cmds []redis.Cmder) error { sent += len(cmds); return nil })
	if err := pipeline(ctx, []redis.Cmder{redis.NewBoolCmd(ctx, "set", "k", "v", "nx"), redis.NewIntCmd(ctx, "del", "k")}); err != nil {
		t.Fatal(err)
	}
	if n != 3 || sent != 6 {
		t.Errorf("counted %d SETs of 6 commands sent (%d passed on), want 3 and every command passed on", n, sent)
	}
}

// TestCountingRetry: every backoff asked for is a failed try, and the
// backoffs are those of the strategy it wraps.
func TestCountingRetry(t *testing.T) {
	failed := 0
	newStrategy := func() redislock.RetryStrategy {
		return redislock.ExponentialBackoff(RedislockBackoffMin, 8*time.Millisecond)
	}
	r := countingRetry{RetryStrategy: newStrategy(), onFailed: func() { failed++ }}
	twin := newStrategy()
	for i := range 5 {
		if got, want := r.NextBackoff(), twin.NextBackoff(); got != want {
			t.Errorf("backoff %d: %v, the strategy's own %v", i+1, got, want)
		}
	}
	if failed != 5 {
		t.Errorf("%d failed tries counted, want 5", failed)
	}
}
