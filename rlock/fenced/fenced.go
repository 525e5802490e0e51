// Package fenced is a small Redis-backed resource that checks fencing tokens:
// the other half of a safe lock. It is an example to copy as much as a
// library to use.
//
// A lock lease can run out while its holder is paused (a GC pause, SIGSTOP, a
// slow disk): another client then takes the lock, and the paused one wakes
// up still believing it holds it. No lock service can stop that write; the
// resource can, if every write carries the writer's fencing token
// (rlock.Mutex.Token) and the resource rejects any token below the highest
// it has accepted. Store does exactly that, atomically, in one Lua script,
// for tokens from 1 to MaxToken.
//
// A read-modify-write needs the fence at both ends: Claim before reading,
// Write after. Checking writes alone lets an old holder's late write land
// between the new holder's read and write, and the new holder then
// overwrites it although the store acknowledged it.
package fenced

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// ErrStale is returned by Write and Claim when a newer token has already
// written or claimed (a claim alone raises the fence): the caller's lock was
// lost (its lease ran out) and someone else holds it now. Stop working on
// the resource; take the lock again if there is still work.
var ErrStale = errors.New("fenced: stale fencing token")

// ErrInvalidToken is returned, before any I/O, for a token below 1 (tokens
// from rlock start at 1) or above MaxToken.
var ErrInvalidToken = errors.New("fenced: invalid fencing token")

// MaxToken is the highest token Write and Claim accept, 2^53-1. The scripts
// compare tokens as Lua numbers (doubles), which are exact only up to it:
// above, a lower token could compare equal to the highest and be accepted.
// rlock's tokens, one per acquisition, take centuries to get there.
const MaxToken = 1<<53 - 1

// ErrInvalidName is returned, before any I/O, by every method of a Store
// whose name contains a brace, as rlock does for lock names under its
// default ProtocolLatchkey: a brace would change the keys' Redis Cluster
// hash tag. (Under ProtocolRedisson rlock takes braces, as Redisson does;
// a Store's name need not be the lock's.)
var ErrInvalidName = errors.New("fenced: invalid name")

// ErrInvalidArgument is returned, before any I/O, for a nil context.
var ErrInvalidArgument = errors.New("fenced: invalid argument")

var (
	//go:embed write.lua
	writeSrc string
	//go:embed claim.lua
	claimSrc string
)

var (
	writeScript = rueidis.NewLuaScript(writeSrc)
	claimScript = rueidis.NewLuaScript(claimSrc)
)

// DefaultLogLimit is how many accepted tokens the audit log keeps unless
// WithLogLimit says otherwise: enough for Audit to check a burst of
// writers, a few kilobytes per Store however long it lives.
const DefaultLogLimit = 1000

// Store is one fenced value in Redis: a hash "fenced:{<name>}" holding the
// value, the highest token that wrote it and the highest that claimed it,
// plus an audit log "fenced:{<name>}:log" of the last accepted tokens
// (DefaultLogLimit of them unless WithLogLimit says otherwise). Neither key
// expires: the hash is the fence. Safe for concurrent use.
type Store struct {
	rc       rueidis.Client
	key, log string
	limit    string // the log's length bound, as the write script's argument
	err      error  // ErrInvalidName for a name with a brace, returned by every method
}

// Option configures a Store.
type Option func(*Store)

// WithLogLimit keeps the last n accepted tokens in the audit log (each
// accepted Write appends its token and trims the list to n, in the same
// script). n <= 0 keeps no log at all: Write then costs one HSET, and Audit
// reports 0 accepted.
func WithLogLimit(n int) Option {
	return func(s *Store) { s.limit = strconv.Itoa(max(n, 0)) }
}

// New returns the Store called name ("" means "default"). Both keys carry
// name as their hash tag, so on Redis Cluster they share a slot; it need
// not be the lock's slot. A name with a brace ('{' or '}') would break that
// tag (and the pair's shared slot), so every method of its Store returns
// ErrInvalidName before any I/O.
func New(rc rueidis.Client, name string, opts ...Option) *Store {
	if name == "" {
		name = "default"
	}
	key := "fenced:{" + name + "}"
	s := &Store{rc: rc, key: key, log: key + ":log", limit: strconv.Itoa(DefaultLogLimit)}
	if strings.ContainsAny(name, "{}") {
		s.err = fmt.Errorf("%w: %q contains a brace, which would change its Redis Cluster hash tag", ErrInvalidName, name)
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// ready refuses a nil context (ErrInvalidArgument), an ended one (its
// error and cause) or a name with a brace (ErrInvalidName) before any I/O,
// as rlock's methods do.
func (s *Store) ready(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		if cause := context.Cause(ctx); cause != err {
			return fmt.Errorf("fenced: %w: %w", err, cause)
		}
		return fmt.Errorf("fenced: %w", err)
	}
	return s.err
}

// readyFor is ready plus the token's range check, for Write and Claim.
func (s *Store) readyFor(ctx context.Context, token int64) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if token < 1 || token > MaxToken {
		return fmt.Errorf("%w: %d, want 1 to %d", ErrInvalidToken, token, int64(MaxToken))
	}
	return nil
}

// Key is the Redis key of the value hash.
func (s *Store) Key() string { return s.key }

// Write stores value if token is at least the highest token that has
// written or claimed so far, and returns ErrStale (wrapped, with both
// tokens) if it is not. A token outside 1 to MaxToken is ErrInvalidToken.
func (s *Store) Write(ctx context.Context, token int64, value string) error {
	if err := s.readyFor(ctx, token); err != nil {
		return err
	}
	highest, err := writeScript.Exec(ctx, s.rc, []string{s.key, s.log}, []string{strconv.FormatInt(token, 10), value, s.limit}).AsInt64()
	if err != nil {
		return fmt.Errorf("fenced: write %q: %w", s.key, err)
	}
	if highest > token {
		return fmt.Errorf("%w: token %d, but %d has written or claimed %q", ErrStale, token, highest, s.key)
	}
	return nil
}

// Claim is the read of a read-modify-write: it raises the fence to token
// and returns the current value ("" when nothing was written), or ErrStale
// when a higher token has written or claimed. From then on a Write with a
// lower token is rejected, so a holder that paused past its lease cannot
// slip a write in between this read and the Write that follows it. A token
// outside 1 to MaxToken is ErrInvalidToken.
func (s *Store) Claim(ctx context.Context, token int64) (string, error) {
	if err := s.readyFor(ctx, token); err != nil {
		return "", err
	}
	reply, err := claimScript.Exec(ctx, s.rc, []string{s.key}, []string{strconv.FormatInt(token, 10)}).ToArray()
	if err != nil {
		return "", fmt.Errorf("fenced: claim %q: %w", s.key, err)
	}
	if len(reply) != 2 {
		return "", fmt.Errorf("fenced: claim %q: unexpected reply of %d elements", s.key, len(reply))
	}
	highest, err := reply[0].AsInt64()
	if err != nil {
		return "", fmt.Errorf("fenced: claim %q: %w", s.key, err)
	}
	if highest > token {
		return "", fmt.Errorf("%w: token %d, but %d has written or claimed %q", ErrStale, token, highest, s.key)
	}
	value, err := reply[1].ToString()
	if err != nil {
		return "", fmt.Errorf("fenced: claim %q: %w", s.key, err)
	}
	return value, nil
}

// Read returns the current value and the token that wrote it (0 and "" when
// nothing has been written).
func (s *Store) Read(ctx context.Context) (value string, token int64, err error) {
	if err := s.ready(ctx); err != nil {
		return "", 0, err
	}
	m, err := s.rc.Do(ctx, s.rc.B().Hgetall().Key(s.key).Build()).AsStrMap()
	if err != nil {
		return "", 0, fmt.Errorf("fenced: read %q: %w", s.key, err)
	}
	if t, ok := m["token"]; ok {
		if token, err = strconv.ParseInt(t, 10, 64); err != nil {
			return "", 0, fmt.Errorf("fenced: read %q: bad token %q: %w", s.key, t, err)
		}
	}
	return m["value"], token, nil
}

// Audit reads the log of accepted writes and counts those whose token was
// below one accepted before it: writes the fence should have rejected. It
// is the checker the fault tests use; it must always report 0 stale. It
// sees only what the log keeps: the last DefaultLogLimit (or WithLogLimit)
// accepted writes.
func (s *Store) Audit(ctx context.Context) (accepted, stale int, err error) {
	if err := s.ready(ctx); err != nil {
		return 0, 0, err
	}
	log, err := s.rc.Do(ctx, s.rc.B().Lrange().Key(s.log).Start(0).Stop(-1).Build()).AsIntSlice()
	if err != nil {
		return 0, 0, fmt.Errorf("fenced: audit %q: %w", s.key, err)
	}
	var highest int64
	for _, t := range log {
		if t < highest {
			stale++
		}
		highest = max(highest, t)
	}
	return len(log), stale, nil
}

// Delete removes the value and its log, and with them the highest token
// seen: a write with any token is accepted after it, a stale one too.
// Delete only when no holder of an earlier token can still write.
func (s *Store) Delete(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.rc.Do(ctx, s.rc.B().Del().Key(s.key, s.log).Build()).Error()
}
