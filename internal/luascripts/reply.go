package luascripts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// ErrUnexpectedReply means a script answered with something its header does
// not allow (another version under the same SHA-1, or a proxy in the way).
var ErrUnexpectedReply = errors.New("latchkey: unexpected script reply")

func unexpected(script string, v any) error {
	return fmt.Errorf("%w from %s: %v", ErrUnexpectedReply, script, v)
}

// AcquireReply is every acquire script's answer (acquire, rwread, rwwrite,
// semacquire).
type AcquireReply struct {
	Acquired bool  // the caller holds now, with a hold count of 1
	Token    int64 // the grant's fencing token; 0 for a side without
	// PTTL, refused: how long to wait without a message (a hold's lease, or
	// the wake window of a client queued before the caller); < 0 for no bound.
	PTTL time.Duration
	// Place is a queued caller's place in line, 1 next (1 + the clients
	// queued before it that it waits for: an RWMutex reader's counts
	// writers alone); 0: not queued.
	Place int64
	// Holder is the record of the hold that refused the caller; zero when
	// there is none (earlier queued clients were woken) or it is damaged.
	Holder Record
	// HolderPTTL is Holder's lease left (< 0: no expiry), with a Holder: it
	// exceeds PTTL when a woken client's window ends first.
	HolderPTTL time.Duration
	Size       int64 // a Semaphore in use with this size, not the caller's (nothing done); else 0
}

// ParseAcquire decodes an acquire reply's integers: {1, token} (granted),
// {0, pttl, place} (refused; the holder's record and lease left that follow
// them are DecodeAcquire's) and {-1, size} (a Semaphore's size mismatch).
func ParseAcquire(v []int64) (AcquireReply, error) {
	switch {
	case len(v) == 2 && v[0] == 1 && v[1] >= 0:
		return AcquireReply{Acquired: true, Token: v[1]}, nil
	case len(v) == 3 && v[0] == 0 && v[1] >= -2 && v[2] >= 0:
		// -1: no expiry; -2 (a key gone within one script) cannot happen.
		return AcquireReply{PTTL: pttl(v[1]), Place: v[2]}, nil
	case len(v) == 2 && v[0] == -1 && v[1] > 0:
		return AcquireReply{Size: v[1]}, nil
	}
	return AcquireReply{}, unexpected("acquire", v)
}

// DecodeAcquire decodes an acquire reply: its integers, and a refusal's
// holder record and that holder's lease left after them (queue.lua's
// refused; Redisson's refusal has the record alone, always "").
func DecodeAcquire(res rueidis.RedisResult) (AcquireReply, error) {
	msgs, err := res.ToArray()
	if err != nil {
		return AcquireReply{}, err
	}
	var record string
	var left int64 = -1
	if len(msgs) == 5 {
		if left, err = msgs[4].AsInt64(); err != nil || left < -1 {
			return AcquireReply{}, unexpected("acquire", msgs[4])
		}
		msgs = msgs[:4]
	}
	if len(msgs) == 4 {
		if record, err = msgs[3].ToString(); err != nil {
			return AcquireReply{}, unexpected("acquire", err)
		}
		msgs = msgs[:3]
	}
	v := make([]int64, len(msgs))
	for i, m := range msgs {
		if v[i], err = m.AsInt64(); err != nil {
			return AcquireReply{}, unexpected("acquire", err)
		}
	}
	r, err := ParseAcquire(v)
	if err == nil && !r.Acquired && record != "" {
		// A damaged record costs the waiter its description, not the try.
		r.Holder, _ = parseRecord(record)
		r.HolderPTTL = pttl(left)
	}
	return r, err
}

// ReleaseReply is every release script's answer (release, rwunlock,
// semrelease).
type ReleaseReply struct {
	Left   int64 // holds left (0: released); -1 when the owner did not hold with that count
	Woken  int64 // queued clients woken
	Handed bool  // the heir holds the lock now (release's handover)
	Token  int64 // the heir's fencing token, when Handed
}

// ParseRelease decodes {left, woken}, or {-3, token} for a handover.
func ParseRelease(v []int64) (ReleaseReply, error) {
	switch {
	case len(v) != 2:
	case v[0] == -3 && v[1] >= 0:
		return ReleaseReply{Handed: true, Token: v[1]}, nil
	case v[0] >= -1 && v[1] >= 0:
		return ReleaseReply{Left: v[0], Woken: v[1]}, nil
	}
	return ReleaseReply{}, unexpected("release", v)
}

// runAcquire runs an acquire script; a grant that y's replicas did not
// acknowledge comes with a *NotReplicatedError, and stands until undone.
func runAcquire(ctx context.Context, c rueidis.Client, s *Script, keys, args []string, y Sync) (AcquireReply, error) {
	return runParsed(ctx, c, s, keys, args, y, DecodeAcquire, func(r AcquireReply) bool { return r.Acquired })
}

// runRelease runs a release script; one that y's replicas did not
// acknowledge comes with a *NotReplicatedError beside it: it ran.
func runRelease(ctx context.Context, c rueidis.Client, s *Script, keys, args []string, y Sync) (ReleaseReply, error) {
	return runParsed(ctx, c, s, keys, args, y, decodeRelease, func(ReleaseReply) bool { return true })
}

func decodeRelease(res rueidis.RedisResult) (ReleaseReply, error) {
	v, err := res.AsIntSlice()
	if err != nil {
		return ReleaseReply{}, err
	}
	return ParseRelease(v)
}

// runParsed runs s and decodes its reply, with the replicas' refusal
// when changed says the call changed something.
func runParsed[R any](ctx context.Context, c rueidis.Client, s *Script, keys, args []string, y Sync, decode func(rueidis.RedisResult) (R, error), changed func(R) bool) (R, error) {
	res, notSynced := s.ExecSync(ctx, c, keys, args, y)
	r, err := decode(res)
	if err == nil && changed(r) {
		return r, notSynced
	}
	return r, err
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

// MaxPTTL caps the TTLs the decoders return: Redis accepts expiries
// centuries away, past time.Duration's 292 years, and waiters add to the
// TTL; without the cap such a key's TTL would wrap to a short or negative one.
const MaxPTTL = time.Duration(1 << 62) // about 146 years

// pttl converts a PTTL reply in milliseconds, saturating at MaxPTTL.
func pttl(ms int64) time.Duration {
	if ms > int64(MaxPTTL/time.Millisecond) {
		return MaxPTTL
	}
	return time.Duration(ms) * time.Millisecond
}
