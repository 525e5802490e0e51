package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTortureJudge shows, on made-up histories, that each of the judge's
// checks fails when it should, and that the faults excuse only what they
// can explain. No Redis: it runs in microseconds.
func TestTortureJudge(t *testing.T) {
	ms := func(n int) int64 { return int64(n) * int64(time.Millisecond) }
	hold := func(id, client string, from, to int) tortureEvent {
		return tortureEvent{Kind: evHold, Lock: 0, Who: id[:4], Client: client, Hold: id, From: ms(from), Got: ms(from), To: ms(to), Token: 1}
	}
	kill := func(at int) tortureEvent {
		return tortureEvent{Kind: evFault, Fault: faultKillNormal, Lock: -1, From: ms(at), To: ms(at + 1)}
	}
	lost := func(h tortureEvent, at int, lease time.Duration) tortureEvent {
		h.LostAt, h.Lease, h.Note = ms(at), lease, "lost"
		return h
	}
	overlap := tortureEvent{Kind: evBad, Inv: invExclusion, Lock: 0, Hold: "p1g0#1", Others: []string{"p0g0#1/0"}, From: ms(150)}
	a, b := hold("p0g0#1", "p0c0.1", 0, 200), hold("p1g0#1", "p1c0.1", 140, 300)
	wait := tortureEvent{Kind: evWait, Lock: 0, Who: "p2g0", Client: "p2c0.1", From: ms(100), To: ms(2000), Note: "acquired"}
	waiter := hold("p2g0#1", "p2c0.1", 100, 2600)
	waiter.Got, waiter.Token = ms(2000), 3
	reentry := tortureEvent{Kind: evBad, Inv: invReentry, Lock: 0, Hold: "p0g0#1", Client: "p0c0.1", From: ms(10), To: ms(2010)}

	cases := []struct {
		name   string
		evs    []tortureEvent
		finals []int
		want   []string // the invariants broken, in order
	}{
		{"clean", []tortureEvent{a, hold("p1g0#1", "p1c0.1", 200, 300)}, nil, nil},
		{"overlap", []tortureEvent{a, b, overlap}, nil, []string{invExclusion}},
		{"overlap during a kill", []tortureEvent{a, b, overlap, kill(100)}, nil, nil},
		{"overlap after the holder was told", []tortureEvent{lost(a, 120, 0), b, overlap, kill(60)}, nil, nil},
		{"overlap past a lease", []tortureEvent{lost(a, 120, 100*time.Millisecond), b, overlap}, nil, nil},
		{"kill after the overlap", []tortureEvent{a, b, overlap, kill(250)}, nil, []string{invExclusion}},
		{"lost with no cause", []tortureEvent{lost(a, 120, 0)}, nil, []string{invLost}},
		{"lost early in a lease", []tortureEvent{lost(a, 10, 100*time.Millisecond)}, nil, []string{invLost}},
		{"lost update", []tortureEvent{a, {Kind: evSum, Lock: 0, Acked: 5}}, []int{4}, []string{invExclusion}},
		{"phantom update", []tortureEvent{a, {Kind: evSum, Lock: 0, Acked: 5, Unsure: 1}}, []int{7}, []string{invExclusion}},
		{"unknown write", []tortureEvent{a, {Kind: evSum, Lock: 0, Acked: 5, Unsure: 1}}, []int{6}, nil},
		{"waiting while free", []tortureEvent{a, waiter, wait}, nil, []string{invWaitFree}},
		{"waiting while held", []tortureEvent{a, hold("p1g0#1", "p1c0.1", 150, 1950), waiter, wait}, nil, nil},
		{"wake-up lost to a kill", []tortureEvent{a, waiter, wait, kill(100)}, nil, nil},
		{"kill amid a free stretch", []tortureEvent{a, waiter, wait, kill(500)}, nil, []string{invWaitFree}},
		{"re-entry stalls", []tortureEvent{a, reentry}, nil, []string{invReentry}},
		{"re-entry stalls past a kill", []tortureEvent{a, reentry, kill(100)}, nil, []string{invReentry}},
		{"re-entry slowed by a kill", []tortureEvent{a, reentry, kill(1500)}, nil, nil},
		{"connection error long after a kill", []tortureEvent{kill(5), {Kind: evBad, Inv: invError, Lock: 0, Client: "p0c0.1", From: ms(2000), To: ms(2001), Note: "Lock: EOF"}}, nil, nil},
		{"other error long after a kill", []tortureEvent{kill(5), {Kind: evBad, Inv: invError, Lock: 0, Client: "p0c0.1", From: ms(2000), To: ms(2001), Note: "Lock: bad reply"}}, nil, []string{invError}},
		{"hard", []tortureEvent{a, {Kind: evBad, Inv: invUnlock, Lock: 0, Hold: "p0g0#1", Hard: true, From: ms(50)}, kill(50)}, nil, []string{invUnlock}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range judgeTorture(tc.evs, tc.finals, ms(3000)) {
				got = append(got, v.inv)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestTortureLongestFree pins the interval arithmetic the wait-free check
// rests on.
func TestTortureLongestFree(t *testing.T) {
	spans := mergeSpans([][2]int64{{20, 30}, {0, 10}, {25, 40}, {60, 70}})
	require.Equal(t, [][2]int64{{0, 10}, {20, 40}, {60, 70}}, spans)
	for _, tc := range []struct{ from, to, a, b int64 }{
		{5, 25, 10, 20},
		{0, 100, 70, 100},
		{41, 59, 41, 59},
		{21, 39, 21, 21},
	} {
		a, b := longestFree(spans, tc.from, tc.to)
		require.Equal(t, [2]int64{tc.a, tc.b}, [2]int64{a, b}, "[%d, %d]", tc.from, tc.to)
	}
}
