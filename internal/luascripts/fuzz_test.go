package luascripts_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// The decoders get whatever a server (or something posing as one) sends.
// For any input they must not panic, and must return either an error
// wrapping ErrUnexpectedReply with a zero value, or a value that says what
// the input says. The invariants hold for the acquire script's {1, count} and
// for a longer reply such as {1, count, token}. Seed corpora: testdata/fuzz.

// ints decodes data as little-endian int64s (a trailing partial word is
// dropped), so the fuzzer can grow and shrink replies freely.
func ints(data []byte) []int64 {
	v := make([]int64, len(data)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
	}
	return v
}

// pttlOf is the TTL a decoder must report for ms milliseconds.
func pttlOf(ms int64) time.Duration {
	if ms > int64(luascripts.MaxPTTL/time.Millisecond) {
		return luascripts.MaxPTTL
	}
	return time.Duration(ms) * time.Millisecond
}

func requireUnexpected(t *testing.T, in any, err error, zero bool) {
	t.Helper()
	if !errors.Is(err, luascripts.ErrUnexpectedReply) {
		t.Fatalf("%v: error %v does not wrap ErrUnexpectedReply", in, err)
	}
	if !zero {
		t.Fatalf("%v: rejected, yet returned a value", in)
	}
}

func FuzzParseAcquire(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		v := ints(data)
		r, err := luascripts.ParseAcquire(v)
		if err != nil {
			requireUnexpected(t, v, err, r == luascripts.AcquireReply{})
			return
		}
		switch {
		case len(v) < 2:
			t.Fatalf("%v: accepted a reply of %d elements", v, len(v))
		case r.Acquired != (v[0] == 1):
			t.Fatalf("%v: Acquired %v", v, r.Acquired)
		case r.Acquired && (r.Count < 1 || r.Count != v[1] || r.PTTL != 0):
			t.Fatalf("%v: acquired with count %d, PTTL %v", v, r.Count, r.PTTL)
		case !r.Acquired && (v[0] != 0 || v[1] < -2 || r.Count != 0 || r.PTTL != pttlOf(v[1])):
			t.Fatalf("%v: refused with count %d, PTTL %v", v, r.Count, r.PTTL)
		}
	})
}

func FuzzParseRelease(f *testing.F) {
	f.Fuzz(func(t *testing.T, status, token int64) {
		v := []int64{status, token}
		r, err := luascripts.ParseRelease(v)
		if err != nil {
			requireUnexpected(t, v, err, r == luascripts.ReleaseReply{})
			if status >= 0 && token == 0 {
				t.Fatalf("%v: %d holds left rejected: %v", v, status, err)
			}
			return
		}
		switch {
		case int64(r.Status) != status || r.Token != token:
			t.Fatalf("%v decoded as %+v", v, r)
		case status < -3:
			t.Fatalf("%v: unknown status accepted", v)
		case token != 0 && r.Status != luascripts.ReleaseHandedOver:
			t.Fatalf("%v: a token without a handover accepted", v)
		}
	})
}

func FuzzParseRenew(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		v := ints(data)
		held, err := luascripts.ParseRenew(v, n)
		if err != nil {
			requireUnexpected(t, v, err, held == nil)
			return
		}
		if len(v) != n || len(held) != n {
			t.Fatalf("%v for %d keys: %d results", v, n, len(held))
		}
		for i, x := range v {
			if (x != 0 && x != 1) || held[i] != (x == 1) {
				t.Fatalf("%v: key %d decoded as held=%v", v, i, held[i])
			}
		}
	})
}

func FuzzParseInspect(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		v := ints(data)
		r, err := luascripts.ParseInspect(v)
		if err != nil {
			requireUnexpected(t, v, err, r == luascripts.InspectReply{})
			return
		}
		switch {
		case len(v) < 3:
			t.Fatalf("%v: accepted a reply of %d elements", v, len(v))
		case r.Held != (v[0] == 1) || (v[0] != 0 && v[0] != 1):
			t.Fatalf("%v: Held %v", v, r.Held)
		case r.Count != v[1] || r.Count < 0 || (!r.Held && r.Count != 0):
			t.Fatalf("%v: Count %d", v, r.Count)
		case v[2] < -2 || r.PTTL != pttlOf(v[2]):
			t.Fatalf("%v: PTTL %v", v, r.PTTL)
		}
	})
}

// TestHugePTTL: a TTL past what time.Duration holds (a key given an expiry
// centuries away by something else) saturates instead of wrapping around to
// a short or negative wait.
func TestHugePTTL(t *testing.T) {
	for _, ms := range []int64{1 << 62, 9223372036854775807, int64(luascripts.MaxPTTL/time.Millisecond) + 1} {
		a, err := luascripts.ParseAcquire([]int64{0, ms})
		if err != nil || a.PTTL != luascripts.MaxPTTL {
			t.Errorf("acquire PTTL %d ms: %v, %v", ms, a.PTTL, err)
		}
		i, err := luascripts.ParseInspect([]int64{1, 0, ms})
		if err != nil || i.PTTL != luascripts.MaxPTTL {
			t.Errorf("inspect PTTL %d ms: %v, %v", ms, i.PTTL, err)
		}
	}
	a, err := luascripts.ParseAcquire([]int64{0, int64(luascripts.MaxPTTL / time.Millisecond)})
	if err != nil || a.PTTL != luascripts.MaxPTTL/time.Millisecond*time.Millisecond {
		t.Errorf("the largest exact PTTL: %v, %v", a.PTTL, err)
	}
}
