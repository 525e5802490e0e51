package luascripts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Outcome is what a failed call to Redis tells its caller to do: every
// retry loop asks Classify, so "is this worth retrying?" has one answer.
type Outcome int

const (
	// Done: no error.
	Done Outcome = iota
	// Permanent: Redis answered with an error, or with a reply no script
	// of this version gives; sending it again would get the same answer.
	Permanent
	// Closing: the rueidis client is closing; nothing more will be sent.
	Closing
	// Unknown: the connection failed or the context ended after the call
	// may have been written. It may have run: undo it before trying again.
	Unknown
)

// Classify sorts a call's error into an Outcome.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return Done
	case errors.Is(err, ErrUnexpectedReply), errors.Is(err, ErrWrongType):
		// A WRONGTYPE: a retry would meet the same key, and the script
		// stopped before it changed the lock, so no undo is owed.
		return Permanent
	case errors.Is(err, rueidis.ErrClosing):
		return Closing
	}
	if _, isRedis := rueidis.IsRedisErr(err); isRedis {
		return Permanent
	}
	return Unknown
}

// ErrWrongType is matched by every WrongTypeError.
var ErrWrongType = errors.New("latchkey: a key of the lock holds another type")

// WrongTypeError is a script that Redis stopped with WRONGTYPE: one of the
// call's keys holds another type than latchkey keeps there (an
// application's key under the prefix, say). Every way of running a script
// returns it in place of Redis' error (refused), so that every call of
// every primitive matches ErrWrongType and says what to check.
type WrongTypeError struct {
	Keys []string            // the call's keys: one of them is not latchkey's
	Err  *rueidis.RedisError // Redis' WRONGTYPE
}

func (e *WrongTypeError) Error() string {
	// Not "latchkey: ": the callers' messages start with it.
	return fmt.Sprintf("a key of the lock holds another type (one of %s; check the lock's name, its kind and Options.Prefix, the CLI's --prefix): %v",
		strings.Join(e.Keys, ", "), e.Err)
}

// Unwrap gives ErrWrongType and Redis' error, for errors.Is and errors.As.
func (e *WrongTypeError) Unwrap() []error { return []error{ErrWrongType, e.Err} }

// isWrongType reports whether re is Redis' WRONGTYPE, as Redis 7 replies
// it to a script, or as Redis 6 wraps it ("ERR Error running script (...):
// @user_script:<line>: WRONGTYPE ...").
func isWrongType(re *rueidis.RedisError) bool {
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGTYPE ") || strings.Contains(msg, ": WRONGTYPE ")
}

// refused is res, or a *WrongTypeError in place of Redis' WRONGTYPE for a
// call with keys: every reply of a script passes here on its way out.
func refused(res rueidis.RedisResult, keys []string) rueidis.RedisResult {
	if re, ok := rueidis.IsRedisErr(res.Error()); ok && isWrongType(re) {
		return rueidis.NewErrorResult(&WrongTypeError{Keys: keys, Err: re})
	}
	return res
}

// Passing reports whether err is Redis refusing a call for a state it
// passes through (loading its data, busy with a script, a failover or
// migration under way, too few replicas): the call did not run, and a
// caller that can wait, such as an election's observer, tries again where
// a lock call returns the error.
func Passing(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.TrimPrefix(re.Error(), "ERR ") // rueidis drops ERR
	word, _, _ := strings.Cut(msg, " ")
	// Redis 6.2 wraps a script's refusals: "ERR Error running script
	// (call to f_...): @user_script:1: -READONLY You can't write ...".
	if _, inner, ok := strings.Cut(msg, ": -"); ok && strings.HasPrefix(msg, "Error running script") {
		word, _, _ = strings.Cut(inner, " ")
	}
	switch word {
	case "LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS":
		return true
	}
	return false
}

// Backoff is a doubling pause: Min, 2·Min, … up to Max.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the pause to take now and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	if b.next < b.Min {
		b.next = b.Min
	}
	d := b.next
	b.next = min(b.next*2, b.Max)
	return d
}

// Reset makes the next pause Min again.
func (b *Backoff) Reset() { b.next = b.Min }

// Sleep waits the next pause, or until ctx ends; it reports whether it passed.
func (b *Backoff) Sleep(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// A Cluster slot being migrated refuses a script whose declared keys are
// not all on one node with -TRYAGAIN (latchkey's scripts declare keys that
// often do not exist) until CLUSTER SETSLOT NODE. Nothing ran, so resending
// is safe; rueidis does it only for read-only commands, so Exec and
// execSynced do, with a backoff: a migration moves a lock's few keys in
// milliseconds. The watchdog's batched renewals (ExecMulti, or execSynced
// with Sync.ReturnTryAgain) do not wait: a call of several leases is sent
// again as one call per lease at once (a lease of one key is never
// refused), and one lease's keys still refused count as a failed renewal,
// retried later.
const (
	tryAgainMin = 2 * time.Millisecond
	tryAgainMax = 50 * time.Millisecond
)

// IsTryAgain reports whether err is a Redis TRYAGAIN error.
func IsTryAgain(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsTryAgain()
}
