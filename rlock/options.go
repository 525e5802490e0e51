package rlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/watchdog"
)

// Defaults for Options' zero values.
const (
	DefaultPrefix         = "latchkey"
	DefaultSpinBackoffMin = time.Millisecond
	DefaultSpinBackoffMax = 128 * time.Millisecond
	DefaultReleaseTimeout = 5 * time.Second
	DefaultHandoffWindow  = 50 * time.Millisecond
	// DefaultMaxLocalHandovers bounds a client's handovers in a row.
	DefaultMaxLocalHandovers = 8
	// DefaultNoExpiryWait bounds a wait on a lock that has no expiry (a key
	// written by something other than latchkey), which gives no TTL to wait for.
	DefaultNoExpiryWait = time.Second
)

// Limits on names and durations, checked before any I/O.
const (
	// MaxNameLen is the longest lock name accepted, in bytes.
	MaxNameLen = 1024
	// MaxClientNameLen is the longest Options.ClientName accepted, in
	// bytes: it is stored with every grant.
	MaxClientNameLen = 256
	// MaxLease is the longest explicit lease accepted, and the longest
	// WatchdogTimeout and SpinBackoffMax. Longer durations are almost always
	// a unit mistake, and far enough out they overflow the arithmetic done on
	// them (milliseconds for Redis, doubling backoffs).
	MaxLease = 365 * 24 * time.Hour
	// MinLease is the shortest explicit lease accepted: Redis counts
	// expiries in milliseconds.
	MinLease = time.Millisecond
	// MaxPrefixLen is the longest Options.Prefix accepted, in bytes: it
	// starts every key and channel.
	MaxPrefixLen = 256
	// MinReleaseTimeout is the shortest ReleaseTimeout accepted: below it
	// a release cannot get its round trip in, and every Unlock fails.
	MinReleaseTimeout = 10 * time.Millisecond
	// MaxHandoffWindow is the longest HandoffWindow accepted: a woken
	// client that stops keeps the free lock from everyone else that long.
	MaxHandoffWindow = 5 * time.Second
)

// PubSubMode selects how unlocks are announced and waited for.
type PubSubMode int

const (
	// PubSubAuto uses sharded pub/sub on a Cluster client and classic pub/sub
	// otherwise.
	PubSubAuto PubSubMode = iota
	// PubSubClassic uses PUBLISH/SUBSCRIBE. Standalone Redis only: on a
	// Cluster, PUBLISH cannot tell whether the woken client listens (use
	// SpinMutex on a Redis 6 Cluster, which has no sharded pub/sub).
	PubSubClassic
	// PubSubSharded uses SPUBLISH/SSUBSCRIBE (Redis 7+).
	PubSubSharded
)

// Options configures a Client. The zero value is ready to use.
type Options struct {
	// Prefix starts every key and channel: "<Prefix>:{<name>}" is the lock
	// and "<Prefix>:{<name>}:ch" its channel. Default "latchkey". It must
	// be valid UTF-8 without braces, at most MaxPrefixLen bytes.
	Prefix string

	// WatchdogTimeout is the lease of a lock taken without WithLease, renewed
	// for as long as it is held. Default 30s; at most MaxLease.
	WatchdogTimeout time.Duration
	// WatchdogInterval is the renewal period. Default WatchdogTimeout/3. It
	// must be at least watchdog.MinInterval and shorter than WatchdogTimeout
	// less watchdog.DriftMargin(WatchdogTimeout), the local deadline by
	// which a renewal must have succeeded.
	WatchdogInterval time.Duration
	// RenewBatchSize is the most locks one renewal call carries. Default
	// 100; at most watchdog.MaxBatchSize.
	RenewBatchSize int

	// PubSub selects the pub/sub flavour. Default PubSubAuto. PubSubClassic
	// is refused on a Cluster client (ErrInvalidOptions).
	PubSub PubSubMode

	// SpinBackoffMin and SpinBackoffMax bound the spin variant's exponential
	// backoff (with jitter). Defaults 1ms and 128ms; SpinBackoffMax is at
	// most MaxLease.
	SpinBackoffMin time.Duration
	SpinBackoffMax time.Duration

	// HandoffWindow is the wake window of every kind: how long a queued
	// client that was woken (a release, or the lock's admission rule, let
	// it in) keeps its place without coming. Clients queued behind it, and
	// newcomers (typically the goroutine that just released, asking again
	// at once), are refused meanwhile, so the wake-up has time to arrive:
	// pub/sub waiters are served first come, first served across clients. A
	// woken client that does not come within the window (a process that
	// stopped while still subscribed) loses its place to the next.
	// Default 50ms, at most MaxHandoffWindow; a negative value gives woken
	// clients no window: they keep their place until they come or leave.
	HandoffWindow time.Duration

	// MaxLocalHandovers bounds how many times in a row a release may hand
	// the lock straight to the next waiting goroutine of the same Client
	// (one round trip: no message, no acquire); then the lock goes back to
	// Redis, which wakes the oldest queued client, and the local waiter
	// queues behind it. Handovers make a contended lock cheaper and faster;
	// the bound keeps other processes from starving. Default 8; negative
	// turns handovers off (every turn goes through Redis, first come, first
	// served across clients).
	MaxLocalHandovers int

	// ReleaseTimeout bounds Unlock's release and the undo of an acquisition
	// whose outcome is unknown; each is retried while its reply is lost or
	// Redis cannot be reached. Both ignore the caller's cancellation, so
	// that `defer m.Unlock(lctx)` releases even after lctx ended, and a Lock
	// whose ctx ended mid-call awaits that call's reply (lest the undo
	// overtake it) and may return up to twice ReleaseTimeout later when
	// Redis does not answer. Taking a client that stops waiting off the wait queue (a
	// waiter giving up, Close) is bounded by the smaller of ReleaseTimeout
	// and one second. Default 5s; at least MinReleaseTimeout.
	ReleaseTimeout time.Duration

	// SyncReplicas, when its Replicas is above 0, makes every grant,
	// watchdog renewal and release wait until that many replicas have
	// acknowledged it (WAIT, on the same connection, for at most its
	// Timeout). A grant not acknowledged in time is released and its
	// acquire fails with ErrNotReplicated; a renewal not acknowledged counts
	// as a failed renewal; a release not acknowledged still released, and
	// its Unlock reports ErrNotReplicated. Off by default. See
	// docs/safety.md for what it does and does not guarantee.
	SyncReplicas SyncReplicas

	// Logger, when set, hears what a user must know about and cannot see
	// in a returned error: watchdog renewals that failed (Warn, retried)
	// and leases given up (Error), pub/sub subscriptions lost under
	// waiters and made again (Warn), calls of unknown outcome undone (Warn)
	// or not (Error). Nil, the default, is silent.
	Logger *slog.Logger

	// MeterProvider, when set, receives latchkey's metrics: lock waits and
	// CountDownLatch Awaits by outcome, hold times, acquisitions and re-entries, contention, locks
	// lost by cause, force-unlocks, watchdog renewals, failures and batch
	// sizes, wake-ups sent, received and unclaimed, subscriptions open
	// (docs/operations.md lists them). Nil, the default, records nothing
	// and costs nothing.
	MeterProvider metric.MeterProvider
	// TracerProvider, when set, makes every Lock, TryLock or Await that
	// waits a span ("latchkey.lock.wait", from the call to its outcome). Nil, the
	// default, traces nothing.
	TracerProvider trace.TracerProvider
	// MetricsLockName adds the lock's name to the metrics' attributes.
	// Off by default: names are often unbounded (one per order, per
	// user), and each name would be a time series of its own.
	MetricsLockName bool

	// ClientName names this client in what each grant records about its
	// holder, and each queue entry about its waiter (ClientInfo, read by
	// Inspect, List and `latchkey status`), beside the host name and the
	// process id. Default "": none. At most MaxClientNameLen bytes.
	ClientName string

	// Protocol is the format of the locks in Redis: ProtocolLatchkey (the
	// default) or ProtocolRedisson, to share Mutex locks with Java
	// services that use Redisson (see Protocol and docs/redisson.md).
	// Prefix and HandoffWindow do not apply to ProtocolRedisson.
	Protocol Protocol

	// OnAttempt, when set, is called after every run of the acquire script
	// with the lock's name and whether it acquired. It is for metrics and
	// tests; it runs on the caller's goroutine and must be fast.
	OnAttempt func(name string, acquired bool)
	// OnWait, when set, is called each time a waiter goes to sleep until a
	// wake-up, the holder's TTL or its next poll, with the lock's name, and
	// each time a CountDownLatch's Await goes to sleep, with the latch's
	// name. Like OnAttempt it is for metrics and tests, runs on the caller's
	// goroutine and must be fast.
	OnWait func(name string)
}

// SyncReplicas is Options.SyncReplicas.
type SyncReplicas struct {
	// Replicas is how many replicas must acknowledge each change; 0 turns
	// syncing off. Ask for every replica that may be promoted.
	Replicas int
	// Timeout bounds each WAIT. Default DefaultSyncTimeout; it must be
	// shorter than the watchdog's interval, since a renewal tick waits for
	// it.
	Timeout time.Duration
}

// DefaultSyncTimeout is SyncReplicas.Timeout's default.
const DefaultSyncTimeout = time.Second

func (o Options) withDefaults() (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.SpinBackoffMin == 0 {
		o.SpinBackoffMin = DefaultSpinBackoffMin
	}
	if o.SpinBackoffMax == 0 {
		o.SpinBackoffMax = DefaultSpinBackoffMax
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = DefaultReleaseTimeout
	}
	if o.MaxLocalHandovers == 0 {
		o.MaxLocalHandovers = DefaultMaxLocalHandovers
	}
	switch {
	case o.HandoffWindow == 0:
		o.HandoffWindow = DefaultHandoffWindow
	case o.HandoffWindow < 0:
		o.HandoffWindow = 0
	case o.HandoffWindow < time.Millisecond || o.HandoffWindow > MaxHandoffWindow:
		return o, fmt.Errorf("%w: HandoffWindow %v must be between 1ms and MaxHandoffWindow (%v), or negative for none", ErrInvalidOptions, o.HandoffWindow, MaxHandoffWindow)
	}
	switch {
	case containsBrace(o.Prefix) || !utf8.ValidString(o.Prefix):
		return o, fmt.Errorf("%w: Prefix %q must be valid UTF-8 without braces", ErrInvalidOptions, o.Prefix)
	case len(o.Prefix) > MaxPrefixLen:
		return o, fmt.Errorf("%w: Prefix is %d bytes, the limit is MaxPrefixLen (%d)", ErrInvalidOptions, len(o.Prefix), MaxPrefixLen)
	case o.WatchdogTimeout < 0 || o.WatchdogInterval < 0 || o.RenewBatchSize < 0:
		return o, fmt.Errorf("%w: watchdog settings must not be negative", ErrInvalidOptions)
	case o.WatchdogTimeout > MaxLease:
		// Sent to Redis in milliseconds, a longer timeout can overflow into a
		// negative PEXPIRE, which deletes the lock or leaves it without expiry.
		return o, fmt.Errorf("%w: WatchdogTimeout %v exceeds MaxLease (%v)", ErrInvalidOptions, o.WatchdogTimeout, MaxLease)
	case o.SpinBackoffMin < 0 || o.SpinBackoffMax < o.SpinBackoffMin:
		return o, fmt.Errorf("%w: need 0 < SpinBackoffMin (%v) <= SpinBackoffMax (%v)", ErrInvalidOptions, o.SpinBackoffMin, o.SpinBackoffMax)
	case o.SpinBackoffMax > MaxLease:
		// The backoff doubles up to this bound; near MaxInt64 the doubling
		// overflows to a negative sleep and the jitter panics.
		return o, fmt.Errorf("%w: SpinBackoffMax %v exceeds MaxLease (%v)", ErrInvalidOptions, o.SpinBackoffMax, MaxLease)
	case o.ReleaseTimeout < MinReleaseTimeout:
		return o, fmt.Errorf("%w: ReleaseTimeout %v is below MinReleaseTimeout (%v)", ErrInvalidOptions, o.ReleaseTimeout, MinReleaseTimeout)
	case o.Protocol < ProtocolLatchkey || o.Protocol > ProtocolRedisson:
		return o, fmt.Errorf("%w: unknown Protocol %d", ErrInvalidOptions, o.Protocol)
	case o.PubSub < PubSubAuto || o.PubSub > PubSubSharded:
		return o, fmt.Errorf("%w: unknown PubSub mode %d", ErrInvalidOptions, o.PubSub)
	case len(o.ClientName) > MaxClientNameLen:
		return o, fmt.Errorf("%w: ClientName is %d bytes, the limit is %d", ErrInvalidOptions, len(o.ClientName), MaxClientNameLen)
	case o.SyncReplicas.Replicas < 0 || o.SyncReplicas.Timeout < 0:
		return o, fmt.Errorf("%w: SyncReplicas %+v must not be negative", ErrInvalidOptions, o.SyncReplicas)
	}
	if o.SyncReplicas.Replicas > 0 && o.SyncReplicas.Timeout == 0 {
		o.SyncReplicas.Timeout = DefaultSyncTimeout
	}
	return o, nil
}

// sync is the luascripts form of SyncReplicas.
func (o Options) sync() luascripts.Sync {
	return luascripts.Sync{Replicas: int64(o.SyncReplicas.Replicas), Timeout: o.SyncReplicas.Timeout}
}

func (o Options) watchdogOptions() watchdog.Options {
	return watchdog.Options{Timeout: o.WatchdogTimeout, Interval: o.WatchdogInterval, BatchSize: o.RenewBatchSize, Sync: watchdog.Sync(o.SyncReplicas), Logger: o.Logger}
}

// LockOption adjusts one Lock or TryLock call.
type LockOption func(*lockOptions)

type lockOptions struct {
	lease    time.Duration // 0: watchdog
	leaseSet bool
	wait     time.Duration // TryLock only
	hasWait  bool
	obs      *acquireObs // metrics and the wait span; nil when off
}

// WithLease gives the lock a fixed lease: it expires lease after the acquire
// was sent unless unlocked first, and no watchdog renews it. The lock's
// context is cancelled with ErrLockLost watchdog.DriftMargin(lease) before
// the lease runs out (that is also its deadline), so that the holder is
// told before a clock running fast or a late timer could let someone else
// in. Without WithLease the watchdog keeps the lock for as long as it is
// held. A re-entry keeps the lease of the Lock it re-enters: WithLease
// given to it is checked but not applied.
func WithLease(lease time.Duration) LockOption {
	return func(o *lockOptions) { o.lease = lease; o.leaseSet = true }
}

// WithWait makes TryLock wait up to d for the lock instead of trying once.
func WithWait(d time.Duration) LockOption {
	return func(o *lockOptions) { o.wait = d; o.hasWait = true }
}

func buildLockOptions(opts []LockOption, try bool) (lockOptions, error) {
	var o lockOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.leaseSet && (o.lease < MinLease || o.lease > MaxLease):
		return o, fmt.Errorf("%w: lease %v must be between MinLease (%v) and MaxLease (%v) (omit WithLease to use the watchdog)", ErrInvalidArgument, o.lease, MinLease, MaxLease)
	case o.hasWait && !try:
		return o, fmt.Errorf("%w: WithWait applies to TryLock; Lock waits until its context ends", ErrInvalidArgument)
	case o.wait < 0:
		return o, fmt.Errorf("%w: wait %v is negative", ErrInvalidArgument, o.wait)
	}
	return o, nil
}

// checkCtx checks a call's context and its handle's error (an invalid
// name) before any I/O.
func checkCtx(ctx context.Context, handleErr error) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return handleErr
}

// checkCall checks a lock call's context, handle and options before any I/O.
func (c *Client) checkCall(ctx context.Context, handleErr error, opts []LockOption, try bool) (lockOptions, error) {
	if err := checkCtx(ctx, handleErr); err != nil {
		return lockOptions{}, err
	}
	lo, err := buildLockOptions(opts, try)
	switch {
	case err != nil:
		return lo, err
	case c.isClosed():
		return lo, ErrClosed
	case ctx.Err() != nil:
		return lo, ctxErr(ctx)
	}
	return lo, nil
}

// lease is the lease an acquire with lo asks for.
func (c *Client) lease(lo lockOptions) time.Duration {
	if lo.leaseSet {
		return lo.lease
	}
	return c.wd.Options().Timeout
}
