package rlock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// WaitError is the error of a Lock (RLock, Acquire, ...) whose context
// ended while it waited, with who blocked it then. It wraps the context's
// error (errors.Is(err, context.DeadlineExceeded) holds).
//
// A Client's goroutines that wait alike for a lock (through a Mutex, or a
// SpinMutex, ...) take turns: one at a time contends in Redis, the others
// wait behind it locally, and a Mutex hold keeps the turn. So a call that
// gave up behind a hold of its own Client names that hold (this Client,
// since its grant, its lease left), whichever handles the two used; any
// other names the holder Redis reported at the last refused try of the
// Client's contender (this call's own, or that of the goroutine it waited
// behind). A refusal made before a later grant to those goroutines is
// never reported: its holder may be long gone.
type WaitError struct {
	Name   string        // the lock's name
	Waited time.Duration // from the call to its end
	// Holder is who blocked the wait at its end, as above; nil when
	// unknown (no try was refused since the last grant, the free lock was
	// kept for clients woken earlier, or the holder left no record: a
	// Redisson holder).
	Holder *Holder
	// Position is this Client's place in line then: 1 + the clients queued
	// before it that it waits for, so 1 = next; 0 when unknown or not
	// queued (a hold of this Client's own blocked the call: its grant took
	// the Client out of the queue). An RWMutex writer waits for the readers
	// and writers queued before it, a reader for the writers alone (the
	// readers before it are admitted with it).
	Position int
	Err      error // the context's error, with what else ended the wait
}

// waitError wraps err, the error of a wait that ended with its context, in
// a WaitError with what blocked it then (r, nil: nothing known).
func (sd *side) waitError(start time.Time, err error, r *refusal) error {
	we := &WaitError{Name: sd.name, Waited: time.Since(start), Err: err}
	if r == nil {
		return we
	}
	we.Position = int(r.Place)
	if rec := r.Holder; rec.Owner != "" {
		h := &Holder{Owner: rec.Owner, Token: rec.Token, Since: rec.Since, LeaseLeft: r.leaseLeft()}
		_ = json.Unmarshal([]byte(rec.About), &h.Client) // best effort, as Inspect's
		we.Holder = h
	}
	return we
}

// refusal is what blocks a turn (turn.last): a refused try's reply and when
// it came, or, with hold set, the record of that hold of the client's own,
// in the same shape (ownHold).
type refusal struct {
	reply
	at   time.Time
	hold *hold
}

// ownHold is the record of h, the hold that grant t made, as a refusal
// naming it would carry it (record.lua's fields), with t's lease from when
// it was sent until the hold's keeper says more (leaseLeft).
func (c *Client) ownHold(h *hold, t try) *refusal {
	rec := luascripts.Record{Owner: h.owner, Token: h.token, Since: t.sent, About: c.about}
	return &refusal{reply: reply{AcquireReply: luascripts.AcquireReply{Holder: rec, HolderPTTL: h.ttl}}, at: t.sent, hold: h}
}

// leaseLeft is the refusing hold's lease left now: an own hold's as its
// keeper counts it, else what the refusal said less the time since (not
// PTTL, the wait, which a woken client's window may cut short); -1 for a
// hold without expiry.
func (r *refusal) leaseLeft() time.Duration {
	if r.hold != nil {
		if end, ok := r.hold.leaseEnd(); ok {
			return max(time.Until(end), 0)
		}
	}
	if r.HolderPTTL < 0 {
		return -1
	}
	return max(r.HolderPTTL-time.Since(r.at), 0)
}

// Error reads, for example, "latchkey: waited 5s for lock orders: held by
// worker-7 (host a, pid 12) for 41s, lease left 28s; 3rd in line: context
// deadline exceeded".
func (e *WaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "latchkey: waited %v for lock %s", e.Waited.Round(time.Millisecond), e.Name)
	if h := e.Holder; h != nil {
		b.WriteString(": held by ")
		switch {
		case h.Client.Name != "":
			fmt.Fprintf(&b, "%s (host %s, pid %d)", printable(h.Client.Name), printable(h.Client.Host), h.Client.PID)
		case h.Client.Host != "":
			fmt.Fprintf(&b, "host %s, pid %d", printable(h.Client.Host), h.Client.PID)
		default:
			b.WriteString(printable(h.Owner))
		}
		if !h.Since.IsZero() {
			fmt.Fprintf(&b, " for %v", time.Since(h.Since).Round(time.Second))
		}
		if h.LeaseLeft >= 0 {
			fmt.Fprintf(&b, ", lease left %v", h.LeaseLeft.Round(time.Millisecond))
		}
	}
	if e.Position > 0 {
		fmt.Fprintf(&b, "; %s in line", ordinal(e.Position))
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// printable is s as it is when every rune is printable, else quoted as a Go
// string: the holder's names come from Redis, whose writers could otherwise
// put escape sequences or newlines in a message printed on a terminal or a
// log line. A leading quote is quoted too, so a quoted name is unambiguous
// (the CLI's tables follow the same rule).
func printable(s string) string {
	if !utf8.ValidString(s) || strings.HasPrefix(s, `"`) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// Unwrap returns the context's error (and what else ended the wait).
func (e *WaitError) Unwrap() error { return e.Err }

// ordinal is 1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st, ...
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
