package main

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/redisinfo"
)

// redisWindow measures what Redis did between openWindow and close: the CPU
// time it used and the calls of each command.
type redisWindow struct {
	rc   rueidis.Client
	cpu0 float64
}

// openWindow zeroes Redis' command statistics and reads its CPU time.
func openWindow(ctx context.Context, rc rueidis.Client) (*redisWindow, error) {
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	cpu0, err := redisinfo.CPU(ctx, rc)
	if err != nil {
		return nil, err
	}
	return &redisWindow{rc: rc, cpu0: cpu0}, nil
}

// close returns the CPU seconds Redis used since openWindow and the calls of
// each command since then.
func (w *redisWindow) close(ctx context.Context) (float64, map[string]int64, error) {
	cpu1, err := redisinfo.CPU(ctx, w.rc)
	if err != nil {
		return 0, nil, err
	}
	calls, err := redisinfo.Commands(ctx, w.rc)
	if err != nil {
		return 0, nil, err
	}
	return cpu1 - w.cpu0, calls, nil
}
