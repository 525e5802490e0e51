package rlock

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/notify"
	"github.com/latchkey/latchkey/watchdog"
)

// Client hands out lock handles that coordinate through one rueidis client.
// It owns this process's wake-up subscriptions and one watchdog goroutine
// renewing every lock taken without a lease. A Client is safe for concurrent
// use; create one per process and Close it when done.
type Client struct {
	rc    rueidis.Client
	opts  Options
	id    string
	about string // the JSON ClientInfo that each grant records
	entry string // how it stands in wait queues (luascripts.QueueEntry)
	// spinEntry is its spin variants' entry: never queued, and not entry, so
	// that a spin try counts the client's own queued waiters as ahead of it
	// (and cannot use, or end, their place) as it would another client's.
	spinEntry string
	obs       *observer // metrics and traces; nil when off
	wake      luascripts.Wake
	hub       *notify.Hub
	wd        *watchdog.Watchdog
	seq       atomic.Uint64 // owner ids

	closing context.Context // ends (cause ErrClosed) at Close: waits and contenders' calls watch it
	close   context.CancelCauseFunc
	// closeDone is closed once the first Close has finished: a second Close
	// waits for it, lest its caller close the rueidis client under the
	// first Close's leaves and releases.
	closeDone chan struct{}
	// contenders hold a turn's baton without the lock, or make a try
	// outside the turn (tryAside): Close waits for them to take the client
	// off the queues, or to turn a grant into a hold (and release one that
	// Close cut short).
	contenders sync.WaitGroup
	leaks      sync.WaitGroup // background releases: of dropped lock contexts (leaked), of expired holds (releaseLost)

	mu     sync.Mutex
	closed bool
	turns  map[turnKey]*turn  // by side (turn.go)
	holds  map[*hold]struct{} // live holds, whose contexts Close ends
}

// NewClient returns a Client over rc, which stays the caller's: Close does not
// close it, and it must outlive the Client. With Options.Logger set it reads
// maxmemory-policy (CONFIG GET, where allowed) and warns if Redis may evict.
// It refuses, as ErrInvalidOptions, what opts.Validate does, and what
// does not fit rc's mode (see Options.PubSub).
func NewClient(rc rueidis.Client, opts Options) (*Client, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults() // Validate's checks
	if err != nil {
		return nil, err
	}
	cluster := rc.Mode() == rueidis.ClientModeCluster
	if cluster && opts.PubSub == PubSubClassic {
		// A classic PUBLISH on a Cluster counts only its node's subscribers,
		// so a release could not tell a listening client from a gone one.
		return nil, fmt.Errorf("%w: PubSubClassic cannot wake waiters correctly on Redis Cluster; use PubSubSharded (Redis 7+), or SpinMutex on Redis 6", ErrInvalidOptions)
	}
	if !cluster && opts.Protocol == ProtocolRedisson && opts.PubSub == PubSubSharded {
		// Refused here, not at each call: no lock of this Client could work.
		return nil, fmt.Errorf("%w: ProtocolRedisson with PubSubSharded off a Cluster: Redisson publishes with PUBLISH there (leave PubSub at PubSubAuto)", ErrInvalidOptions)
	}
	id, err := uuid.NewRandom() // random: no two clients anywhere share owner ids
	if err != nil {
		return nil, fmt.Errorf("latchkey: generating the client id: %w", err)
	}
	obs, err := newObserver(opts)
	if err != nil {
		return nil, err
	}
	wd, err := watchdog.New(rc, opts.watchdogOptions(obs.subMeter()))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	mode := notify.Classic
	if opts.PubSub == PubSubSharded || (opts.PubSub == PubSubAuto && cluster) {
		mode = notify.Sharded
	}
	warnIfEvicting(rc, opts.Logger)
	closing, cancel := context.WithCancelCause(context.Background())
	about := describeClient(id.String(), opts.ClientName)
	return &Client{
		rc:        rc,
		opts:      opts,
		id:        id.String(),
		about:     about,
		entry:     luascripts.QueueEntry(id.String(), about),
		spinEntry: luascripts.QueueEntry(id.String()+":spin", about),
		obs:       obs,
		wake:      luascripts.Wake{Sharded: mode == notify.Sharded, Window: opts.HandoffWindow},
		hub:       notify.NewHub(rc, notify.Options{Mode: mode, Logger: opts.Logger, Meter: obs.subMeter()}),
		wd:        wd,
		closing:   closing,
		close:     cancel,
		closeDone: make(chan struct{}),
		turns:     make(map[turnKey]*turn),
		holds:     make(map[*hold]struct{}),
	}, nil
}

// ID is this client's random id (a UUID), which its owner ids start with.
func (c *Client) ID() string { return c.id }

// newOwner returns an owner id never used before, which is what lets the
// release script recognise its own retries.
func (c *Client) newOwner() string {
	return c.id + ":" + strconv.FormatUint(c.seq.Add(1), 10)
}

// WatchdogStats returns the watchdog's running totals.
func (c *Client) WatchdogStats() watchdog.Stats { return c.wd.Stats() }

// Close makes every waiter return ErrClosed, takes this client off the wait
// queues of the locks it waited for (best effort, one round trip bounded by
// a second), stops the watchdog and the notify hub, and returns once their
// goroutines have ended. Locks still held are not released: they expire
// within their lease, and their contexts end with ErrClosed as cause. A
// Lock that Close cuts short returns ErrClosed, and a grant it got
// meanwhile is released before Close returns. A hold lost shortly before,
// which is released once its drift margin has passed (the holder's head
// start), is awaited: up to the margin longer.
// Unlock still works after Close. Close is idempotent and always returns
// nil: a second call (a signal handler's and a deferred one, say) returns
// once the first has finished, so that the rueidis client can be closed
// after either.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.closeDone
		return nil
	}
	c.closed = true
	holds := c.holds
	c.holds = make(map[*hold]struct{})
	c.mu.Unlock()

	c.close(ErrClosed)
	c.contenders.Wait()
	c.leaks.Wait()
	c.wd.Close()
	c.hub.Close()
	for h := range holds {
		h.endLevels(ErrClosed)
	}
	close(c.closeDone)
	return nil
}

// Mutex returns a handle on the lock called name. Handles are cheap and safe
// for concurrent use: like a sync.Mutex, one handle can be shared by any
// number of goroutines, and they exclude each other.
//
// A name is 1 to MaxNameLen bytes, used verbatim, any bytes but '{' and '}'
// (they would change the Redis Cluster hash tag; ProtocolRedisson allows
// them, as Redisson does). The handle's methods report an invalid name as
// ErrInvalidName, before any I/O.
func (c *Client) Mutex(name string) *Mutex {
	return c.newMutex(name, false)
}

// SpinMutex returns a handle on the lock called name that waits by polling
// (Options.SpinBackoffMin doubling to SpinBackoffMax, with jitter) instead
// of pub/sub; it shares Mutex's semantics, scripts and keys. It is for
// comparison and for setups without pub/sub: its waiters sleep through
// releases, so waits have a long tail and a waiter can starve.
func (c *Client) SpinMutex(name string) *Mutex {
	return c.newMutex(name, true)
}

func (c *Client) isClosed() bool { return c.closing.Err() != nil }
