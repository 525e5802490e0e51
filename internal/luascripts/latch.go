package luascripts

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// LatchKeys are the Redis key and channel of one count-down latch, in one
// Cluster slot, as latchcountdown (which publishes) needs.
type LatchKeys struct {
	Latch   string // hash {count -> n, round -> id, keep -> ms}, no expiry while set; at zero kept keep ms
	Channel string // where reaching zero is broadcast, shared by every client
}

// NewLatchKeys derives a latch's keys from its base key "<prefix>:{<name>}",
// the same base as the lock of that name, whose keys they never equal.
func NewLatchKeys(base string) LatchKeys {
	return LatchKeys{Latch: base + ":latch", Channel: base + ":latch:ch"}
}

// RunLatchSet runs the latchset script: it gives the latch count n (> 0)
// and round id round unless it has a count already, and reports whether.
// A count set under round already reports true, even once counted down to
// zero, so a retry of a call of unknown outcome with the same round is
// exact while that zero is kept: keep (rounded up to a millisecond) after
// it, which must outlast the caller's retries.
func RunLatchSet(ctx context.Context, c rueidis.Client, k LatchKeys, n int64, round string, keep time.Duration) (bool, error) {
	v, err := LatchSet.Exec(ctx, c, []string{k.Latch}, []string{itoa(n), round, Millis(keep)}).AsInt64()
	switch {
	case err != nil:
		return false, err
	case v != 0 && v != 1:
		return false, unexpected("latchset", v)
	}
	return v == 1, nil
}

// CountDownStatus is the latchcountdown script's answer.
type CountDownStatus int64

// Count-down outcomes.
const (
	CountDownNoLatch  CountDownStatus = -1 // the latch was not set (absent, or at zero): nothing changed
	CountDownReleased CountDownStatus = 0  // this call reached zero, and published to nobody
	CountDownCounting CountDownStatus = 1  // a count is left
	CountDownWoke     CountDownStatus = 2  // as CountDownReleased, and the message reached a subscribed client
)

// RunLatchCountDown runs the latchcountdown script, which publishes payload
// on the latch's channel (SPUBLISH when sharded) when the count reaches
// zero; CountDownWoke when that reached a subscriber.
func RunLatchCountDown(ctx context.Context, c rueidis.Client, k LatchKeys, sharded bool, payload string) (CountDownStatus, error) {
	mode := "p"
	if sharded {
		mode = "s"
	}
	n, err := LatchCountDown.Exec(ctx, c, []string{k.Latch, k.Channel}, []string{mode, payload}).AsInt64()
	switch {
	case err != nil:
		return 0, err
	case n < -1 || n > 2:
		return 0, unexpected("latchcountdown", n)
	}
	return CountDownStatus(n), nil
}

// LatchState is what a latch holds: its count (0 when there is no latch)
// and the id of the round that latchset started ("" when none).
type LatchState struct {
	Count int64
	Round string
}

// ReadLatch runs the latchread script: the latch's count and round id, read
// together.
func ReadLatch(ctx context.Context, c rueidis.Client, k LatchKeys) (LatchState, error) {
	v, err := LatchRead.Exec(ctx, c, []string{k.Latch}, nil).ToArray()
	if err != nil {
		return LatchState{}, err
	}
	fields := make([]*string, len(v))
	for i, m := range v {
		s, err := m.ToString()
		switch {
		case rueidis.IsRedisNil(err):
		case err != nil:
			return LatchState{}, err
		default:
			fields[i] = &s
		}
	}
	return ParseLatch(fields)
}

// ParseLatch decodes latchread's {count, round} reply, nil standing for an
// absent field. A missing count reads as 0, a latch that is not set.
func ParseLatch(fields []*string) (LatchState, error) {
	if len(fields) != 2 {
		return LatchState{}, unexpected("latchread", len(fields))
	}
	var st LatchState
	if fields[0] != nil {
		n, err := strconv.ParseInt(*fields[0], 10, 64)
		if err != nil {
			return LatchState{}, unexpected("latchread", "count "+strconv.Quote(*fields[0]))
		}
		st.Count = max(n, 0)
	}
	if fields[1] != nil {
		st.Round = *fields[1]
	}
	return st, nil
}
