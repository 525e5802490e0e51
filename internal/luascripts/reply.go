package luascripts

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnexpectedReply means a script answered with something its header does
// not allow: a script of another version under the same SHA-1, or a proxy in
// the way. It is wrapped with the details.
var ErrUnexpectedReply = errors.New("latchkey: unexpected script reply")

func unexpected(script string, v any) error {
	return fmt.Errorf("%w from %s: %v", ErrUnexpectedReply, script, v)
}

// AcquireReply is the acquire script's answer.
type AcquireReply struct {
	Acquired bool          // the caller holds the lock now
	Count    int64         // the caller's hold count, when Acquired
	PTTL     time.Duration // the holder's remaining lease, when not Acquired; < 0 when it has no expiry
}

// ParseAcquire decodes the acquire script's {1, count} / {0, pttl} reply.
func ParseAcquire(v []int64) (AcquireReply, error) {
	if len(v) != 2 {
		return AcquireReply{}, unexpected("acquire", v)
	}
	switch v[0] {
	case 1:
		if v[1] < 1 {
			return AcquireReply{}, unexpected("acquire", v)
		}
		return AcquireReply{Acquired: true, Count: v[1]}, nil
	case 0:
		// PTTL is -1 for a key without expiry and -2 when the key vanished
		// between the EXISTS and the PTTL (it cannot inside one script, but a
		// decoder should not trust that).
		if v[1] < -2 {
			return AcquireReply{}, unexpected("acquire", v)
		}
		return AcquireReply{PTTL: time.Duration(v[1]) * time.Millisecond}, nil
	}
	return AcquireReply{}, unexpected("acquire", v)
}

// ReleaseStatus is the release script's answer.
type ReleaseStatus int

// Release outcomes; a positive value is the number of holds left.
const (
	ReleaseNotHeld       ReleaseStatus = -1
	ReleaseCountMismatch ReleaseStatus = -2
	Released             ReleaseStatus = 0
)

// ParseRelease decodes the release script's integer reply.
func ParseRelease(n int64) (ReleaseStatus, error) {
	if n < -2 {
		return 0, unexpected("release", n)
	}
	return ReleaseStatus(n), nil
}

// ParseRenew decodes the renew script's per-key 0/1 array for a batch of n keys.
func ParseRenew(v []int64, n int) ([]bool, error) {
	if len(v) != n {
		return nil, unexpected("renew", v)
	}
	held := make([]bool, n)
	for i, x := range v {
		switch x {
		case 1:
			held[i] = true
		case 0:
		default:
			return nil, unexpected("renew", v)
		}
	}
	return held, nil
}

// InspectReply is the inspect script's answer.
type InspectReply struct {
	Held  bool          // anyone holds the lock
	Count int64         // the asked owner's hold count
	PTTL  time.Duration // remaining lease; -2 ms when no lock, -1 ms without expiry
}

// ParseInspect decodes the inspect script's {held, count, pttl} reply.
func ParseInspect(v []int64) (InspectReply, error) {
	if len(v) != 3 || v[0] < 0 || v[0] > 1 || v[1] < 0 || v[2] < -2 || (v[0] == 0 && v[1] != 0) {
		return InspectReply{}, unexpected("inspect", v)
	}
	return InspectReply{Held: v[0] == 1, Count: v[1], PTTL: time.Duration(v[2]) * time.Millisecond}, nil
}
