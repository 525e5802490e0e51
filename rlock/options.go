package rlock

import (
	"cmp"
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
	DefaultPrefix            = "latchkey"
	DefaultSpinBackoffMin    = time.Millisecond
	DefaultSpinBackoffMax    = 128 * time.Millisecond
	DefaultReleaseTimeout    = 5 * time.Second
	DefaultHandoffWindow     = 50 * time.Millisecond
	DefaultMaxLocalHandovers = 8 // a client's handovers in a row
	// DefaultNoExpiryWait bounds a wait on a lock with no expiry (a key
	// written by something other than latchkey): there is no TTL to wait for.
	DefaultNoExpiryWait = time.Second
	DefaultSyncTimeout  = time.Second // SyncReplicas.Timeout's
)

// Limits on names and durations, checked before any I/O.
const (
	MaxNameLen = 1024 // the longest lock name, in bytes
	// MaxClientNameLen is the longest Options.ClientName, in bytes: it is
	// stored with every grant.
	MaxClientNameLen = 256
	// MaxLease is the longest explicit lease, WatchdogTimeout and
	// SpinBackoffMax: longer is almost always a unit mistake, and far enough
	// out it overflows (a negative PEXPIRE, a doubling backoff).
	MaxLease = 365 * 24 * time.Hour
	MinLease = time.Millisecond // the shortest explicit lease: Redis counts in ms
	// MaxPrefixLen is the longest Options.Prefix, in bytes: it starts every
	// key and channel.
	MaxPrefixLen = 256
	// MinReleaseTimeout is the shortest ReleaseTimeout: below it a release
	// cannot get its round trip in.
	MinReleaseTimeout = 10 * time.Millisecond
	// MaxHandoffWindow is the longest HandoffWindow: a woken client that
	// stopped keeps the free lock from everyone else that long.
	MaxHandoffWindow = 5 * time.Second
)

// PubSubMode selects how unlocks are announced and waited for.
type PubSubMode int

const (
	// PubSubAuto picks sharded pub/sub on a Cluster client, classic
	// otherwise. Every client of a lock must wait and wake in the same mode.
	PubSubAuto PubSubMode = iota
	// PubSubClassic uses PUBLISH/SUBSCRIBE; standalone Redis only (on a
	// Redis 6 Cluster, which has no sharded pub/sub, use SpinMutex).
	PubSubClassic
	// PubSubSharded uses SPUBLISH/SSUBSCRIBE (Redis 7+), on a Cluster or a
	// standalone server.
	PubSubSharded
)

// Options configures a Client. The zero value is ready to use.
type Options struct {
	// Prefix starts every key and channel ("<Prefix>:{<name>}" is the
	// lock). Default "latchkey"; valid UTF-8 without braces, at most
	// MaxPrefixLen bytes.
	Prefix string

	// WatchdogTimeout is the lease of a lock taken without WithLease,
	// renewed while it is held. Default 30s; at most MaxLease, and at least
	// 3 × watchdog.MinInterval (30ms) unless WatchdogInterval is set.
	WatchdogTimeout time.Duration
	// WatchdogInterval is the renewal period. Default WatchdogTimeout/3; at
	// least watchdog.MinInterval and shorter than WatchdogTimeout less
	// watchdog.DriftMargin(WatchdogTimeout).
	WatchdogInterval time.Duration
	// RenewBatchSize is the most locks one renewal call carries. Default
	// 100; at most watchdog.MaxBatchSize.
	RenewBatchSize int

	// PubSub selects the pub/sub flavour. Default PubSubAuto; PubSubClassic
	// on a Cluster client, and PubSubSharded with ProtocolRedisson off one,
	// are ErrInvalidOptions.
	PubSub PubSubMode

	// SpinBackoffMin and SpinBackoffMax bound the spin variants' jittered
	// exponential backoff. Defaults 1ms and 128ms; the max is at most
	// MaxLease.
	SpinBackoffMin time.Duration
	SpinBackoffMax time.Duration

	// HandoffWindow is how long a woken client keeps its place without
	// coming; others are refused meanwhile so the wake-up can arrive
	// (docs/design.md, "Fairness"). Default 50ms, at most MaxHandoffWindow;
	// negative means no window: woken clients keep their place until they
	// come or leave.
	HandoffWindow time.Duration

	// MaxLocalHandovers bounds how many times in a row a release hands the
	// lock straight to a waiting goroutine of the same Client before it goes
	// back to Redis and the oldest queued client. Default 8; negative turns
	// handovers off.
	MaxLocalHandovers int

	// ReleaseTimeout bounds Unlock's release and the undo of an acquisition
	// of unknown outcome, each retried while Redis cannot be reached. Both
	// ignore the caller's cancellation (`defer m.Unlock(lctx)` releases
	// after lctx ended), so a Lock whose ctx ended mid-call may return up to
	// twice ReleaseTimeout later. Leaving a wait queue is bounded by the
	// smaller of it and one second. Default 5s; at least MinReleaseTimeout.
	ReleaseTimeout time.Duration

	// SyncReplicas, when its Replicas is above 0, makes every grant, renewal
	// and release WAIT for that many replicas. An acquire not acknowledged
	// in time fails with ErrNotReplicated (and is released), as does an
	// Unlock (which did release); a renewal counts as failed (a lock lost
	// that way has ErrNotReplicated in its context's cause). Off by
	// default; see docs/safety.md.
	SyncReplicas SyncReplicas

	// Logger, when set, hears what no returned error tells (failed renewals,
	// lost subscriptions, undone calls: docs/operations.md). Nil, the
	// default, is silent.
	Logger *slog.Logger

	// MeterProvider, when set, receives latchkey's metrics
	// (docs/operations.md lists them). Nil, the default, costs nothing.
	MeterProvider metric.MeterProvider
	// TracerProvider, when set, makes every Lock, TryLock or Await that
	// waits a span "latchkey.lock.wait". Nil, the default, traces nothing.
	TracerProvider trace.TracerProvider
	// MetricsLockName adds the lock's name to the metrics' attributes. Off
	// by default: each name would be a time series of its own.
	MetricsLockName bool

	// ClientName names this client in its grants' and waits' ClientInfo.
	// Default "": none. At most MaxClientNameLen bytes.
	ClientName string

	// Protocol is the locks' format in Redis: ProtocolLatchkey (default) or
	// ProtocolRedisson, to share Mutex locks with Redisson (docs/redisson.md).
	// Prefix and HandoffWindow do not apply to ProtocolRedisson. Make one
	// ProtocolRedisson Client per rueidis client: two on one share
	// Redisson's per-name channel on one connection and unsubscribe each
	// other (false "subscription lost" warnings and needless wake-ups,
	// though no lost ones).
	Protocol Protocol

	// OnAttempt, when set, is called after every run of an acquire script,
	// and of a re-entry script (a Lock or RLock whose context carries a
	// hold of the lock), with the lock's name and whether it acquired (or
	// re-entered); OnWait each time a waiter (or a latch's Await) goes to
	// sleep. For metrics and tests: they run on the caller's goroutine and
	// must be fast.
	OnAttempt func(name string, acquired bool)
	OnWait    func(name string)
}

// SyncReplicas is Options.SyncReplicas.
type SyncReplicas struct {
	// Replicas is how many replicas must acknowledge each change (0: off).
	// Ask for every replica that may be promoted.
	Replicas int
	// Timeout bounds each WAIT. Default the shortest of DefaultSyncTimeout,
	// half the watchdog's interval and half ReleaseTimeout. It must be
	// shorter than the interval and than ReleaseTimeout, which bounds a
	// release and its WAIT together: a WAIT cut short by it hides that the
	// release ran (Unlock fails with the context's error, not
	// ErrNotReplicated). Keep it well under: Redis ends a WAIT up to a
	// server tick late (100ms at the default hz), and a call may take
	// more than one round (NOSCRIPT on a server's first, a redirect), each
	// with its WAIT; a WAIT is cut to end 100ms before the call's own
	// deadline, so that the verdict comes back in time.
	Timeout time.Duration
}

// Validate reports what NewClient would refuse in o, as ErrInvalidOptions,
// without a rueidis client: NewClient runs the same checks (the watchdog's
// included), so a program can tell a bad setting from a Redis out of reach
// before it connects. Left to NewClient are the checks that depend on the
// client's mode (PubSubClassic on a Cluster client, ProtocolRedisson with
// PubSubSharded off one) and the creation of the instruments of
// MeterProvider and TracerProvider, which may fail too.
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

// withDefaults is o with its zero values defaulted, or Validate's error.
func (o Options) withDefaults() (Options, error) {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	o.SpinBackoffMin = cmp.Or(o.SpinBackoffMin, DefaultSpinBackoffMin)
	o.SpinBackoffMax = cmp.Or(o.SpinBackoffMax, DefaultSpinBackoffMax)
	o.ReleaseTimeout = cmp.Or(o.ReleaseTimeout, DefaultReleaseTimeout)
	o.MaxLocalHandovers = cmp.Or(o.MaxLocalHandovers, DefaultMaxLocalHandovers)
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
		return o, fmt.Errorf("%w: WatchdogTimeout %v exceeds MaxLease (%v)", ErrInvalidOptions, o.WatchdogTimeout, MaxLease)
	case o.WatchdogTimeout > 0 && o.WatchdogInterval == 0 && o.WatchdogTimeout/3 < watchdog.MinInterval:
		// Said here: the watchdog would name the default interval, which
		// the caller never set.
		return o, fmt.Errorf("%w: WatchdogTimeout %v is below %v (3 × watchdog.MinInterval) unless WatchdogInterval is set", ErrInvalidOptions, o.WatchdogTimeout, 3*watchdog.MinInterval)
	case o.SpinBackoffMin < 0 || o.SpinBackoffMax < o.SpinBackoffMin:
		return o, fmt.Errorf("%w: need 0 < SpinBackoffMin (%v) <= SpinBackoffMax (%v)", ErrInvalidOptions, o.SpinBackoffMin, o.SpinBackoffMax)
	case o.SpinBackoffMax > MaxLease:
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
	case o.SyncReplicas.Replicas > 0 && o.SyncReplicas.Timeout >= o.ReleaseTimeout:
		// A release and its WAIT share ReleaseTimeout: a WAIT it cut short
		// fails the release's reply with it (ErrNotReplicated unsaid).
		return o, fmt.Errorf("%w: SyncReplicas.Timeout %v must be shorter than ReleaseTimeout %v, which bounds a release and its WAIT together; shorten the one or lengthen the other", ErrInvalidOptions, o.SyncReplicas.Timeout, o.ReleaseTimeout)
	}
	if o.SyncReplicas.Replicas > 0 && o.SyncReplicas.Timeout == 0 {
		// Shorter than the interval and ReleaseTimeout, as it must be,
		// whatever they are.
		interval := cmp.Or(o.WatchdogInterval, cmp.Or(o.WatchdogTimeout, watchdog.DefaultTimeout)/3)
		o.SyncReplicas.Timeout = min(DefaultSyncTimeout, interval/2, o.ReleaseTimeout/2)
	}
	// The watchdog's own bounds (Interval against Timeout, RenewBatchSize),
	// which watchdog.New checks again: asked here, Validate covers them.
	if err := o.watchdogOptions(nil).Validate(); err != nil {
		return o, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return o, nil
}

// sync is the luascripts form of SyncReplicas.
func (o Options) sync() luascripts.Sync {
	return luascripts.Sync{Replicas: int64(o.SyncReplicas.Replicas), Timeout: o.SyncReplicas.Timeout}
}

func (o Options) watchdogOptions(meter metric.Meter) watchdog.Options {
	return watchdog.Options{Timeout: o.WatchdogTimeout, Interval: o.WatchdogInterval, BatchSize: o.RenewBatchSize, Sync: watchdog.Sync(o.SyncReplicas), Logger: o.Logger, Meter: meter}
}

// LockOption adjusts one Lock or TryLock call.
type LockOption func(*lockOptions)

type lockOptions struct {
	lease    time.Duration // 0: watchdog
	leaseSet bool
	wait     time.Duration // TryLock only
	hasWait  bool
	obs      *acquireObs // metrics and the wait span; nil when off (set by a MultiMutex for its members: recordedBy)
}

// WithLease gives the lock a fixed lease instead of the watchdog's: it
// expires lease after the acquire was sent unless unlocked first. Its
// context ends with ErrLockLost watchdog.DriftMargin(lease) earlier
// (LeaseEnd tells when), before a fast clock or a late timer could let another in. A
// re-entry keeps the lease of the Lock it re-enters: WithLease given to it
// is checked but not applied.
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
