package redistest

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// ServerMillis is the server's clock (TIME) in milliseconds since the
// epoch: the clock by which Redis expires keys, and by which latchkey's
// lease sets score the end of each lease.
func ServerMillis(ctx context.Context, c rueidis.Client) (int64, error) {
	v, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	if len(v) != 2 {
		return 0, fmt.Errorf("TIME: %q", v)
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	us, err2 := strconv.ParseInt(v[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("TIME: %q", v)
	}
	return sec*1000 + us/1000, nil
}
