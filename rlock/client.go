package rlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
	"github.com/latchkey/latchkey/watchdog"
)

// Client hands out lock handles that coordinate through one rueidis client.
// It owns one notify hub (one subscription per contended lock, shared by all
// local waiters) and one watchdog (one goroutine renewing every lock taken
// without a lease). A Client is safe for concurrent use; create one per
// process and Close it when done.
type Client struct {
	rc         rueidis.Client
	opts       Options
	id         string
	notifyArg  string
	handoffArg string // Options.HandoffWindow in ms, for the scripts
	hub        *notify.Hub
	wd         *watchdog.Watchdog
	bg         sync.WaitGroup // passUnclaimed calls
	seq        atomic.Uint64  // owner ids
	rid        atomic.Uint64  // release ids
	done       chan struct{}

	mu     sync.Mutex
	closed bool
	holds  map[holdKey]*hold
	heirs  map[string]*heirLine // by lock key
}

// NewClient returns a Client over rc, which stays the caller's: Close does not
// close it, and it must outlive the Client.
func NewClient(rc rueidis.Client, opts Options) (*Client, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// 128 random bits from crypto/rand, so that no two clients anywhere
	// share owner ids; each handle adds a sequence number.
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("latchkey: generating the client id: %w", err)
	}
	wd, err := watchdog.New(rc, opts.watchdogOptions())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	mode := notify.Classic
	if opts.PubSub == PubSubSharded || (opts.PubSub == PubSubAuto && rc.Mode() == rueidis.ClientModeCluster) {
		mode = notify.Sharded
	}
	c := &Client{
		rc:         rc,
		opts:       opts,
		id:         hex.EncodeToString(raw[:]),
		notifyArg:  luascripts.NotifyClassic,
		handoffArg: strconv.FormatInt(opts.HandoffWindow.Milliseconds(), 10),
		hub:        nil, // below: its OnUnclaimed needs c
		wd:         wd,
		done:       make(chan struct{}),
		holds:      make(map[holdKey]*hold),
		heirs:      make(map[string]*heirLine),
	}
	if mode == notify.Sharded {
		c.notifyArg = luascripts.NotifySharded
	}
	c.hub = notify.NewHub(rc, notify.Options{Mode: mode, OnUnclaimed: c.passUnclaimed})
	return c, nil
}

// ID is the random id (32 hex digits) this client's owner ids start with.
func (c *Client) ID() string { return c.id }

// WatchdogStats returns the watchdog's running totals.
func (c *Client) WatchdogStats() watchdog.Stats { return c.wd.Stats() }

// Close stops the watchdog and the notify hub and returns once their
// goroutines have ended. Waiters return ErrClosed. Locks still held are not
// released (Close does no I/O): they expire within their lease, and their
// contexts are cancelled with ErrClosed as cause. Unlock still works after
// Close. Close is idempotent and always returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	holds := c.holds
	c.holds = make(map[holdKey]*hold)
	c.mu.Unlock()

	c.wd.Close()
	c.hub.Close()
	c.bg.Wait()
	for _, h := range holds {
		for _, lv := range h.levels {
			lv.cancel(ErrClosed)
		}
	}
	return nil
}

// Mutex returns a handle on the lock called name. Handles are cheap; make
// one per goroutine that must be excluded from the others. A handle is one
// owner: a second Lock through the same handle re-enters instead of
// waiting, exactly as a second Lock with a context returned by Lock does.
//
// A name is 1 to MaxNameLen bytes, any bytes but '{' and '}' (they would
// change the Redis Cluster hash tag). Names are binary-safe and used
// verbatim: NUL bytes and invalid UTF-8 are kept as they are, never
// normalised, and glob characters such as *?[] are literal, so "a*" and "ab"
// are different locks. An invalid name is reported by the handle's methods
// as ErrInvalidName, before any I/O.
func (c *Client) Mutex(name string) *Mutex {
	return c.newMutex(name, false)
}

// SpinMutex returns a handle on the lock called name that waits by polling
// with exponential backoff and jitter (Options.SpinBackoffMin doubling to
// SpinBackoffMax) instead of pub/sub. It has the same semantics and
// scripts as Mutex and interoperates with it on the same name. It exists to
// compare against. Its waiters sleep through releases, so whoever asks right
// after a release (often the goroutine that just released) takes the lock:
// raw throughput can be higher than Mutex's, but waits have a long tail and
// a waiter can starve (make demo shows both). Mutex's waiters are woken by
// the release itself.
func (c *Client) SpinMutex(name string) *Mutex {
	return c.newMutex(name, true)
}

func (c *Client) newMutex(name string, spin bool) *Mutex {
	key, channel, err := lockKeys(c.opts.Prefix, name)
	return &Mutex{
		c: c, name: name, key: key, channel: channel, err: err, spin: spin,
		fence: fenceKey(key), queue: queueKey(key), inbox: channel + ":" + c.id,
		owner: c.id + ":" + strconv.FormatUint(c.seq.Add(1), 10),
	}
}

// ForceUnlock deletes the lock called name whoever holds it and wakes a
// waiter. It reports whether there was a lock. The former holder learns of
// it at its next watchdog renewal (ErrLockLost), or not at all if it holds
// a fixed lease: use it for recovery, not for normal release.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if ctx == nil {
		return false, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	key, channel, err := lockKeys(c.opts.Prefix, name)
	if err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return false, ctxErr(ctx)
	}
	n, err := luascripts.ForceUnlock.Exec(ctx, c.rc, []string{key, channel, queueKey(key)}, []string{c.notifyArg}).AsInt64()
	if err != nil {
		return false, fmt.Errorf("latchkey: force-unlock %q: %w", name, err)
	}
	return n == 1, nil
}

// passUnclaimed passes on a wake-up that reached this client when none of
// its waiters could take it (they had all left): the lock was handed off to
// this client, and without this the next client would wait out its TTL.
// It runs on rueidis' goroutine or under the hub's mutex, so the I/O is
// done in a goroutine that Close waits for.
func (c *Client) passUnclaimed(channel string) {
	key, ok := strings.CutSuffix(channel, ":ch:"+c.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok || c.closed {
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReleaseTimeout)
		defer cancel()
		keys := []string{key, key + ":ch", queueKey(key)}
		_ = luascripts.Pass.Exec(ctx, c.rc, keys, []string{c.notifyArg, c.id, c.handoffArg}).Error()
	}()
}

func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
