package luascripts

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"
)

// Outcome is what a failed call to Redis tells its caller to do. Every
// retry loop of the lock, the watchdog and this package asks Classify, so
// "is this worth retrying?" has one answer.
type Outcome int

const (
	// Done: no error.
	Done Outcome = iota
	// Permanent: Redis answered with an error, or with a reply no script
	// of this version gives. The call ran (or was refused) and sending it
	// again would get the same answer.
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
	case errors.Is(err, ErrUnexpectedReply):
		return Permanent
	case errors.Is(err, rueidis.ErrClosing):
		return Closing
	}
	if _, isRedis := rueidis.IsRedisErr(err); isRedis {
		return Permanent
	}
	return Unknown
}

// Backoff is a doubling pause: Min, 2·Min, … up to Max. The zero value is
// unusable; Reset starts it over.
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

// Sleep waits the next pause, or until ctx ends; it reports whether the
// whole pause passed.
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
