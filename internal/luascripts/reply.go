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
	Acquired bool          // the caller holds the lock now, with a hold count of 1
	Token    int64         // the grant's fencing token, when Acquired
	PTTL     time.Duration // how long to wait, when not Acquired; < 0 when the holder has no expiry
	// Reserved: refused because the free lock is reserved for another
	// client, for PTTL. Whether that client took it, a PTTL of the lock
	// tells more cheaply than another try.
	Reserved bool
}

// ParseAcquire decodes the acquire script's {1, 1, token} / {0, pttl} reply.
func ParseAcquire(v []int64) (AcquireReply, error) {
	switch {
	case len(v) == 3 && v[0] == 1 && v[1] == 1 && v[2] > 0:
		return AcquireReply{Acquired: true, Token: v[2]}, nil
	case len(v) == 2 && v[0] == 0 && v[1] >= -2:
		// PTTL is -1 for a key without expiry; -2 (a key that vanished
		// between two calls of one script) cannot happen, but a decoder
		// should not trust that.
		return AcquireReply{PTTL: pttl(v[1])}, nil
	case len(v) == 3 && v[0] == 0 && v[1] >= 0 && v[2] == 1:
		return AcquireReply{PTTL: pttl(v[1]), Reserved: true}, nil
	}
	return AcquireReply{}, unexpected("acquire", v)
}

// ReleaseStatus is the release script's answer.
type ReleaseStatus int

// Release outcomes; a positive value is the number of holds left.
const (
	ReleaseNotHeld    ReleaseStatus = -1
	ReleaseHandedOver ReleaseStatus = -3 // the heir holds the lock now
	Released          ReleaseStatus = 0
)

// ReleaseReply is the release script's answer.
type ReleaseReply struct {
	Status ReleaseStatus
	Token  int64 // the heir's fencing token, when Status is ReleaseHandedOver
	Woke   bool  // freed, and a wake-up went to a queued client
}

// ParseRelease decodes the release script's {status, token} reply.
func ParseRelease(v []int64) (ReleaseReply, error) {
	switch {
	case len(v) != 2:
	case v[0] == -3 && v[1] >= 0, (v[0] == -1 || v[0] >= 0) && v[1] == 0:
		return ReleaseReply{Status: ReleaseStatus(v[0]), Token: v[1]}, nil
	case v[0] == 0 && v[1] == 1:
		return ReleaseReply{Status: Released, Woke: true}, nil
	}
	return ReleaseReply{}, unexpected("release", v)
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

// MaxPTTL caps the TTLs the decoders return. Redis accepts expiries
// centuries away, but time.Duration ends at 292 years and waiters add to the
// TTL they are given; without the cap a key written by something else with
// such an expiry would wrap to a short or negative TTL.
const MaxPTTL = time.Duration(1 << 62) // about 146 years

// pttl converts a PTTL reply in milliseconds, saturating at MaxPTTL.
func pttl(ms int64) time.Duration {
	if ms > int64(MaxPTTL/time.Millisecond) {
		return MaxPTTL
	}
	return time.Duration(ms) * time.Millisecond
}
