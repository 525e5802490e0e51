package benchredis

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/redisinfo"
)

// Window measures what Redis did between OpenWindow and Close: the CPU
// time it used and the calls of each command.
type Window struct {
	rc   rueidis.Client
	cpu0 float64
}

// OpenWindow zeroes Redis' command statistics and reads its CPU time.
func OpenWindow(ctx context.Context, rc rueidis.Client) (*Window, error) {
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return nil, fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	cpu0, err := redisinfo.CPU(ctx, rc)
	if err != nil {
		return nil, err
	}
	return &Window{rc: rc, cpu0: cpu0}, nil
}

// Close returns the CPU seconds Redis used since OpenWindow and the calls of
// each command since then.
func (w *Window) Close(ctx context.Context) (float64, map[string]int64, error) {
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
