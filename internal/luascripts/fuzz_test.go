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
// the input says, accepting exactly the replies the script headers allow.
// Seed corpora: testdata/fuzz, plus the f.Add seeds below.

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

// words encodes v as ints decodes it.
func words(v ...int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func FuzzParseAcquire(f *testing.F) {
	f.Add(words(1, 0))        // a grant without a token (a reader, permits)
	f.Add(words(1, 1, 7))     // the old three-word grant
	f.Add(words(1, 7))        // a grant
	f.Add(words(0, -2))       // refused, too short
	f.Add(words(0, 50, 3))    // refused, third in line
	f.Add(words(0, 50, 0, 3)) // the old refusal, with its reservation flag
	f.Add(words(-1, 3))       // a size mismatch
	f.Fuzz(func(t *testing.T, data []byte) {
		v := ints(data)
		r, err := luascripts.ParseAcquire(v)
		granted := len(v) == 2 && v[0] == 1 && v[1] >= 0
		refused := len(v) == 3 && v[0] == 0 && v[1] >= -2 && v[2] >= 0
		mismatch := len(v) == 2 && v[0] == -1 && v[1] > 0
		if err != nil {
			requireUnexpected(t, v, err, r == luascripts.AcquireReply{})
			if granted || refused || mismatch {
				t.Fatalf("%v: a valid reply rejected: %v", v, err)
			}
			return
		}
		var want luascripts.AcquireReply
		switch {
		case granted:
			want = luascripts.AcquireReply{Acquired: true, Token: v[1]}
		case refused:
			want = luascripts.AcquireReply{PTTL: pttlOf(v[1]), Place: v[2]}
		case mismatch:
			want = luascripts.AcquireReply{Size: v[1]}
		default:
			t.Fatalf("%v: accepted as %+v", v, r)
		}
		if r != want {
			t.Fatalf("%v: decoded as %+v, want %+v", v, r, want)
		}
	})
}

func FuzzParseRelease(f *testing.F) {
	f.Add(int64(-3), int64(0)) // a handover retried after the counter was lost
	f.Add(int64(-1), int64(3))
	f.Fuzz(func(t *testing.T, status, second int64) {
		v := []int64{status, second}
		r, err := luascripts.ParseRelease(v)
		handed := status == -3 && second >= 0
		valid := handed || (status >= -1 && second >= 0)
		if err != nil {
			requireUnexpected(t, v, err, r == luascripts.ReleaseReply{})
			if valid {
				t.Fatalf("%v: a valid reply rejected: %v", v, err)
			}
			return
		}
		switch {
		case !valid:
			t.Fatalf("%v: accepted as %+v", v, r)
		case handed && r != (luascripts.ReleaseReply{Handed: true, Token: second}):
			t.Fatalf("%v decoded as %+v", v, r)
		case !handed && r != (luascripts.ReleaseReply{Left: status, Woken: second}):
			t.Fatalf("%v decoded as %+v", v, r)
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

func TestHugePTTL(t *testing.T) {
	for _, ms := range []int64{1 << 62, 9223372036854775807, int64(luascripts.MaxPTTL/time.Millisecond) + 1} {
		a, err := luascripts.ParseAcquire([]int64{0, ms, 0})
		if err != nil || a.PTTL != luascripts.MaxPTTL {
			t.Errorf("acquire PTTL %d ms: %v, %v", ms, a.PTTL, err)
		}
	}
	a, err := luascripts.ParseAcquire([]int64{0, int64(luascripts.MaxPTTL / time.Millisecond), 0})
	if err != nil || a.PTTL != luascripts.MaxPTTL/time.Millisecond*time.Millisecond {
		t.Errorf("the largest exact PTTL: %v, %v", a.PTTL, err)
	}
}
