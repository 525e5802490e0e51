// Package locks puts the Redis lock libraries lockbench compares behind one
// small interface, each configured the same way: the same lease, and the
// acquire bounded only by the caller's context.
package locks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Library names, as the -libs flag spells them.
const (
	Latchkey     = "latchkey"
	LatchkeySpin = "latchkey-spin"
	Redsync      = "redsync"
	Redislock    = "redislock"
	Rueidislock  = "rueidislock"
)

// All lists every library, latchkey's first.
var All = []string{Latchkey, LatchkeySpin, Redsync, Redislock, Rueidislock}

// Counting lists the libraries whose tries to take a lock Options.OnAttempt
// sees: latchkey's two locks through rlock's OnAttempt hook, redsync through
// a go-redis hook on its SET commands, and redislock through its retry
// strategy. rueidislock's API shows none of its tries.
var Counting = []string{Latchkey, LatchkeySpin, Redsync, Redislock}

// CountsAttempts tells whether lib calls Options.OnAttempt.
func CountsAttempts(lib string) bool { return slices.Contains(Counting, lib) }

// Peers are the other projects' libraries latchkey's targets are set against.
var Peers = []string{Redsync, Redislock, Rueidislock}

// ErrUnknownLib reports a library name that is not in All.
var ErrUnknownLib = errors.New("locks: unknown library")

// DefaultLease is the lease every library gets unless Options says
// otherwise: long enough that no lock expires during a run, so renewal is
// never on the measured path.
const DefaultLease = 10 * time.Second

// Options configures a library the same way for all of them.
type Options struct {
	// Addr is the Redis to use, host:port.
	Addr string
	// Lease is each lock's time to live. Default DefaultLease.
	Lease time.Duration
	// Conns is how many goroutines will lock at once, so that a library
	// with a connection pool gets a pool that big rather than queueing for
	// connections. Default 1.
	Conns int
	// Backoff is the retry setting of a library whose waiters poll (see
	// Polling): latchkey-spin's and redislock's backoff cap, redsync's
	// fixed retry delay. 0 keeps the library's default (DefaultBackoff);
	// any other value for a library without a retry setting is an error.
	Backoff time.Duration
	// OnAttempt, when set, is called once per try to take a lock by the
	// libraries that can tell (CountsAttempts); the others never call it.
	// It runs on the locking goroutine and must be fast.
	OnAttempt func()
}

func (o Options) withDefaults() Options {
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	o.Conns = max(o.Conns, 1)
	return o
}

// Lib is one library connected to Redis.
type Lib interface {
	// Locker returns a handle on the lock called key for one goroutine:
	// handles of the same key exclude each other, in this process and others.
	Locker(key string) Locker
	// Close releases the library's connections and goroutines.
	Close() error
}

// Locker takes one lock.
type Locker interface {
	// Lock blocks until it holds the lock or ctx ends, and returns the
	// function that releases it. The caller must not cancel ctx before it
	// has called unlock: some libraries tie the hold to ctx.
	Lock(ctx context.Context) (unlock func() error, err error)
}

// Open connects the library called name.
func Open(name string, opts Options) (Lib, error) {
	opts = opts.withDefaults()
	if slices.Contains(All, name) {
		if err := checkBackoff(name, opts); err != nil {
			return nil, err
		}
	}
	switch name {
	case Latchkey, LatchkeySpin:
		return openLatchkey(opts, name == LatchkeySpin)
	case Redsync:
		return openRedsync(opts)
	case Redislock:
		return openRedislock(opts)
	case Rueidislock:
		return openRueidislock(opts)
	case GrantProto:
		return openGrantProto(opts)
	}
	return nil, fmt.Errorf("%w %q: choose from %s", ErrUnknownLib, name, strings.Join(All, ", "))
}

// ParseList splits a comma-separated list of library names and checks each.
func ParseList(s string) ([]string, error) {
	var libs []string
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(All, name) && name != GrantProto {
			return nil, fmt.Errorf("%w %q: choose from %s", ErrUnknownLib, name, strings.Join(All, ", "))
		}
		if !slices.Contains(libs, name) {
			libs = append(libs, name)
		}
	}
	if len(libs) == 0 {
		return nil, fmt.Errorf("%w: the list %q names none; choose from %s", ErrUnknownLib, s, strings.Join(All, ", "))
	}
	return libs, nil
}
