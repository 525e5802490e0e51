package luascripts_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

func TestParseAcquire(t *testing.T) {
	valid := []struct {
		in   []int64
		want luascripts.AcquireReply
	}{
		{[]int64{1, 1}, luascripts.AcquireReply{Acquired: true, Token: 1}},
		{[]int64{1, 42}, luascripts.AcquireReply{Acquired: true, Token: 42}},
		{[]int64{1, 0}, luascripts.AcquireReply{Acquired: true}}, // a reader or permits: no token
		{[]int64{0, 1500, 0}, luascripts.AcquireReply{PTTL: 1500 * time.Millisecond}},
		{[]int64{0, 0, 3}, luascripts.AcquireReply{PTTL: 0, Place: 3}},
		{[]int64{0, -1, 1}, luascripts.AcquireReply{PTTL: -time.Millisecond, Place: 1}}, // holder without expiry
		{[]int64{0, -2, 0}, luascripts.AcquireReply{PTTL: -2 * time.Millisecond}},       // vanished
		{[]int64{-1, 5}, luascripts.AcquireReply{Size: 5}},                              // a Semaphore in use with size 5
	}
	for _, tc := range valid {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			got, err := luascripts.ParseAcquire(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	invalid := [][]int64{
		nil,
		{},
		{1},
		{0, 1500},     // the old two-word refusal
		{0, 40, 1, 2}, // the old refusal, with its reservation flag
		{0, 1, -1},    // no negative place
		{1, 1, 1},     // the old three-word grant
		{1, 1, 1, 1},  // too long
		{1, -1},       // negative token
		{0, -3, 0},    // PTTL below -2 does not exist
		{2, 1},
		{-1, 0}, // a size is at least 1
	}
	for _, in := range invalid {
		t.Run(fmt.Sprintf("invalid %v", in), func(t *testing.T) {
			got, err := luascripts.ParseAcquire(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, luascripts.ErrUnexpectedReply), "err = %v", err)
			assert.Contains(t, err.Error(), "acquire")
			assert.Equal(t, luascripts.AcquireReply{}, got)
		})
	}
}

func TestParseRelease(t *testing.T) {
	valid := []struct {
		in   []int64
		want luascripts.ReleaseReply
	}{
		{[]int64{-3, 7}, luascripts.ReleaseReply{Handed: true, Token: 7}},
		{[]int64{-3, 0}, luascripts.ReleaseReply{Handed: true}}, // a retry after the counter was deleted
		{[]int64{-1, 0}, luascripts.ReleaseReply{Left: -1}},
		{[]int64{-1, 2}, luascripts.ReleaseReply{Left: -1, Woken: 2}}, // a Semaphore's leftovers cleared
		{[]int64{0, 0}, luascripts.ReleaseReply{}},
		{[]int64{0, 1}, luascripts.ReleaseReply{Woken: 1}},
		{[]int64{0, 3}, luascripts.ReleaseReply{Woken: 3}}, // readers, permits
		{[]int64{1, 0}, luascripts.ReleaseReply{Left: 1}},
		{[]int64{42, 0}, luascripts.ReleaseReply{Left: 42}},
	}
	for _, tc := range valid {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			got, err := luascripts.ParseRelease(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, in := range [][]int64{
		nil, {0}, {1, 0, 0},
		{-2, 0}, {-4, 0}, {-100, 0}, // no such status
		{0, -1}, {-3, -1},
	} {
		t.Run(fmt.Sprintf("invalid %v", in), func(t *testing.T) {
			_, err := luascripts.ParseRelease(in)
			require.Error(t, err)
			assert.True(t, errors.Is(err, luascripts.ErrUnexpectedReply), "err = %v", err)
			assert.Contains(t, err.Error(), "release")
		})
	}
}

func TestParseRenew(t *testing.T) {
	valid := []struct {
		in   []int64
		n    int
		want []bool
	}{
		{[]int64{}, 0, []bool{}},
		{nil, 0, []bool{}},
		{[]int64{1}, 1, []bool{true}},
		{[]int64{0}, 1, []bool{false}},
		{[]int64{1, 0, 1, 1, 0}, 5, []bool{true, false, true, true, false}},
	}
	for _, tc := range valid {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			got, err := luascripts.ParseRenew(tc.in, tc.n)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	invalid := []struct {
		in []int64
		n  int
	}{
		{nil, 1},            // fewer replies than keys
		{[]int64{1, 1}, 1},  // more replies than keys
		{[]int64{1}, 2},     // fewer
		{[]int64{2}, 1},     // not 0/1
		{[]int64{1, -1}, 2}, // not 0/1
	}
	for _, tc := range invalid {
		t.Run(fmt.Sprintf("invalid %v n=%d", tc.in, tc.n), func(t *testing.T) {
			got, err := luascripts.ParseRenew(tc.in, tc.n)
			require.Error(t, err)
			assert.True(t, errors.Is(err, luascripts.ErrUnexpectedReply), "err = %v", err)
			assert.Contains(t, err.Error(), "renew")
			assert.Nil(t, got)
		})
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want string
	}{
		{time.Nanosecond, "1"},
		{500 * time.Microsecond, "1"},
		{time.Millisecond, "1"},
		{time.Millisecond + time.Nanosecond, "2"},
		{1500 * time.Microsecond, "2"},
		{2 * time.Millisecond, "2"},
		{30 * time.Second, "30000"},
		{0, "0"},
	} {
		assert.Equal(t, tc.want, luascripts.Millis(tc.in), "Millis(%v)", tc.in)
	}
}

func TestScriptNames(t *testing.T) {
	for _, tc := range []struct {
		s    *luascripts.Script
		name string
	}{
		{luascripts.Acquire, "acquire"},
		{luascripts.Reenter, "reenter"},
		{luascripts.Release, "release"},
		{luascripts.Leave, "leave"},
		{luascripts.Renew, "renew"},
		{luascripts.ForceUnlock, "forceunlock"},
		{luascripts.Describe, "describe"},
	} {
		assert.Equal(t, tc.name, tc.s.Name())
		// The embedded source is the script itself, header included.
		assert.Contains(t, tc.s.Source(), "-- "+tc.name+":")
		assert.Contains(t, tc.s.Source(), "redis.call")
	}
	// Those that queue or wake clients have the queue prelude, after the clock.
	for _, s := range []*luascripts.Script{luascripts.Acquire, luascripts.Release, luascripts.Leave, luascripts.ForceUnlock} {
		assert.True(t, strings.HasPrefix(s.Source(), "-- clock:"), s.Name())
		assert.Contains(t, s.Source(), "\n-- queue:", s.Name())
		assert.Contains(t, s.Source(), "local function wake(", s.Name())
	}
	for _, s := range []*luascripts.Script{luascripts.Reenter, luascripts.Renew} {
		assert.NotContains(t, s.Source(), "-- queue:", s.Name())
	}
}
