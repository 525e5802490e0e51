// Package watchdog keeps hash-owner leases alive for as long as their holders
// want them, with one goroutine per Watchdog however many leases it keeps,
// and a few more while a tick's calls are out.
//
// A lease here is a Redis hash key whose field is the owner's id, as latchkey's
// locks are. Every Interval the watchdog extends its leases that are due
// (every one, while Redis keeps up) to Timeout in pipelined calls, earliest
// deadline first: leases that share a Cluster slot go into multi-key calls
// of up to BatchSize keys, sent in chunks, one request per Cluster master,
// whose results count as each request's replies come in: a master that
// does not answer holds back only its own leases. A lease whose renewal is
// still out is not sent again. The
// renew script extends a key only while the owner's field is still there, so
// a renewal racing with a release cannot bring the released lock back.
//
// A lease is lost when a renewal finds the owner gone, or when no renewal's
// reply confirms it before the local deadline: Timeout less
// DriftMargin(Timeout) after the send time of the last renewal confirmed, on
// this process's monotonic clock. A renewal counts however long Redis took
// to answer, as long as the answer came before that deadline. Either way the
// entry's onLost callback runs once, on the watchdog goroutine, which stays
// free to give leases up at their deadlines while calls are out.
package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/metric"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// Defaults for Options' zero values.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultBatchSize = 100
)

// Bounds on Options, checked by New.
const (
	// MinInterval is the shortest Interval accepted: a shorter one turns
	// the watchdog into a busy loop whose calls cannot even reach Redis.
	MinInterval = 10 * time.Millisecond
	// MaxBatchSize is the largest BatchSize accepted: one renew call is one
	// script, and Redis serves nobody else while it runs.
	MaxBatchSize = 10000
)

// The local deadline of a lease comes DriftMargin before its nominal end.
const (
	// DriftFactor is the share of a lease allowed for the server's clock
	// running fast against ours (Redlock allows the same 1%).
	DriftFactor = 0.01
	// TimerSlack is allowed for the loss signal itself to fire late: a timer
	// and the goroutines it wakes on a loaded machine. The partition test
	// measured up to 10ms of it under -race on 2 cores.
	TimerSlack = 20 * time.Millisecond
)

// DriftMargin is how long before a lease of the given length can lapse on
// the server its holder is told it has lost it: DriftFactor of the lease
// plus TimerSlack, but never more than a quarter of the lease. The local
// deadline starts when the request was sent, which is already no later than
// the server's start; the margin covers what that cannot: clocks that drift
// and a signal that arrives late. A next holder can still get in before the
// old one looks at its context, which is why writes need fencing tokens.
func DriftMargin(lease time.Duration) time.Duration {
	return min(time.Duration(float64(lease)*DriftFactor)+TimerSlack, lease/4)
}

// Options configures a Watchdog.
type Options struct {
	// Timeout is the lease every renewal sets. The watchdog gives a lease up
	// when Timeout less DriftMargin(Timeout) has passed since the last
	// successful renewal was sent. Default 30s.
	Timeout time.Duration
	// Interval is the time between renewal ticks. Default Timeout/3, which
	// leaves two more ticks to get through before a lease can lapse.
	// It must be at least MinInterval and shorter than Timeout less
	// DriftMargin(Timeout).
	Interval time.Duration
	// BatchSize is the most keys one renew call carries. Default 100; at
	// most MaxBatchSize.
	BatchSize int
	// Logger, when set, hears of renew calls that failed (Warn: they are
	// retried) and of leases given up (Error). Nil is silent.
	Logger *slog.Logger
	// Sync, when it asks for replicas, follows every renew call with WAIT
	// on its connection; a call its replicas did not acknowledge in time
	// counts as a failed renewal. Its Timeout must be below Interval.
	// Default: no WAIT.
	Sync Sync
	// Meter, when set, records the watchdog's metrics (renewals, failures,
	// leases kept, keys per renew call). Nil records nothing.
	Meter metric.Meter
}

// Sync asks for replica acknowledgement of every renew call.
type Sync struct {
	Replicas int           // replicas that must acknowledge; 0: no WAIT
	Timeout  time.Duration // bounds each WAIT; > 0 when Replicas > 0
}

// Errors for bad options and for the cause handed to onLost. Match with errors.Is.
var (
	ErrInvalidOptions = errors.New("latchkey/watchdog: invalid options")
	// ErrGone: a renewal found that the owner no longer holds the key
	// (it expired, was deleted, or was taken over).
	ErrGone = errors.New("latchkey/watchdog: lease gone at renewal")
	// ErrExpired: no renewal succeeded before the local deadline; the lease
	// may have lapsed on the server, so the holder must assume it has.
	ErrExpired = errors.New("latchkey/watchdog: renewals failed until the lease ran out")
)

// Validate reports what New would refuse in o, as ErrInvalidOptions,
// without a client: New runs the same checks. Options are checked with
// their defaults filled in (an Interval left zero is Timeout/3).
func (o Options) Validate() error {
	_, err := o.withDefaults()
	return err
}

func (o Options) withDefaults() (Options, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Interval == 0 {
		o.Interval = o.Timeout / 3
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	switch {
	case o.Timeout < time.Millisecond:
		return o, fmt.Errorf("%w: Timeout %v must be at least 1ms", ErrInvalidOptions, o.Timeout)
	case o.Interval < MinInterval || o.Interval >= o.Timeout-DriftMargin(o.Timeout):
		return o, fmt.Errorf("%w: Interval %v must be at least MinInterval (%v) and shorter than Timeout %v less its drift margin %v", ErrInvalidOptions, o.Interval, MinInterval, o.Timeout, DriftMargin(o.Timeout))
	case o.BatchSize < 1 || o.BatchSize > MaxBatchSize:
		return o, fmt.Errorf("%w: BatchSize %d must be between 1 and MaxBatchSize (%d)", ErrInvalidOptions, o.BatchSize, MaxBatchSize)
	case o.Sync.Replicas > 0 && (o.Sync.Timeout <= 0 || o.Sync.Timeout >= o.Interval):
		return o, fmt.Errorf("%w: the replica sync timeout %v must be positive and shorter than Interval %v", ErrInvalidOptions, o.Sync.Timeout, o.Interval)
	}
	return o, nil
}

// Stats are running totals since New. A tick's calls, renewals and errors
// are added when its last call has returned.
type Stats struct {
	Ticks uint64 // renewal ticks that sent something, counted as they end
	// CatchUps counts the renewals sent again as soon as their reply came
	// in, a tick having passed while they were out, in groups as they
	// came back: a sign that renewing takes longer than Interval.
	CatchUps uint64
	Calls    uint64 // renew script calls
	Renewed  uint64 // leases found held and extended in time
	Lost     uint64 // leases given up (onLost called)
	Errors   uint64 // renew calls that failed
	// Late counts renewals Redis ran whose reply came after the lease's
	// local deadline, too late to count: the lease was given up.
	Late uint64
	// LastTick and MaxTick are how long the last tick and the longest
	// took, from collecting the leases to applying the last call's reply.
	LastTick, MaxTick time.Duration
}

// Watchdog renews leases. Create it with New and stop it with Close.
type Watchdog struct {
	client rueidis.Client
	opts   Options
	sync   luascripts.Sync // opts.Sync, with the routes its batches learn
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// added wakes the loop when an entry is added that is due before the
	// deadline it watches (armed), so that it watches the new deadline even
	// when that comes before the next tick.
	added chan struct{}
	// ticks are the ticks under way; each reports to the loop on tickEnded
	// whether a renewal failed, and sends the leases it found gone on gone,
	// so that every onLost runs on the loop's goroutine.
	ticks     sync.WaitGroup
	tickEnded chan bool
	gone      chan []*Entry
	// sending holds a token for each chunk of renew calls out (see
	// chunkParallel).
	sending chan struct{}
	// dispatched closes when the last regular tick started has sent all
	// its calls (see tickOrder); guarded by mu.
	dispatched chan struct{}
	// masters groups a chunk's calls by the Cluster master serving them.
	masters masters

	mu      sync.Mutex
	entries map[*Entry]struct{}
	stats   Stats
	// armed is the earliest deadline the last scan of entries found (zero
	// when it found none): the loop's expiry timer fires by then. Add
	// wakes the loop only for an entry due before it, so that adding a
	// lease does not cost a scan of all the others.
	armed  time.Time
	meters *meters // nil without Options.Meter
}

// New starts a watchdog goroutine that renews through client.
func New(client rueidis.Client, opts Options) (*Watchdog, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", ErrInvalidOptions)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	w := newWatchdog(client, opts)
	if opts.Meter != nil {
		if w.meters, err = newMeters(w, opts.Meter); err != nil {
			return nil, err
		}
	}
	go w.loop()
	return w, nil
}

// newWatchdog is a Watchdog whose loop has not started.
func newWatchdog(client rueidis.Client, opts Options) *Watchdog {
	ctx, cancel := context.WithCancel(context.Background())
	var sync luascripts.Sync
	if opts.Sync.Replicas > 0 {
		// Each tick's batch spans many slots; remembering their nodes sends
		// it to each node at once (see luascripts.Sync.Routes).
		// A call refused with TRYAGAIN comes back at once, for
		// renewGroup to split (see splitRefused).
		sync = luascripts.Sync{Replicas: int64(opts.Sync.Replicas), Timeout: opts.Sync.Timeout, Routes: luascripts.NewRoutes(), ReturnTryAgain: true}
	}
	dispatched := make(chan struct{})
	close(dispatched)
	return &Watchdog{client: client, opts: opts, sync: sync, ctx: ctx, cancel: cancel, done: make(chan struct{}), added: make(chan struct{}, 1),
		tickEnded: make(chan bool), gone: make(chan []*Entry), sending: make(chan struct{}, chunkParallel), dispatched: dispatched, entries: make(map[*Entry]struct{})}
}

// Options returns the options in force, defaults filled in.
func (w *Watchdog) Options() Options { return w.opts }

// Close stops renewing and returns once the watchdog goroutine has ended.
// Leases still registered are not released; they run out within Timeout and
// their onLost callbacks are not called. Close is idempotent.
func (w *Watchdog) Close() {
	w.cancel()
	<-w.done
	w.meters.close()
}

// Len is the number of leases being kept.
func (w *Watchdog) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.entries)
}

// Stats returns the running totals.
func (w *Watchdog) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Entry is one kept lease.
type Entry struct {
	w      *Watchdog
	key    string
	owner  string
	follow []string // keys whose expiry follows key's (same slot)
	slot   uint16

	// deadline, lastErr and inflight are guarded by w.mu.
	deadline time.Time
	lastErr  error
	inflight bool // a renewal is out; the next tick leaves e out
	missed   bool // a tick left e out: renew it again once its reply is in

	// mu serialises the loss callback with Stop, so that once Stop returns
	// the callback has either run to completion or will never run.
	mu      sync.Mutex
	stopped bool
	onLost  func(cause error)
}

// Add keeps key's lease for owner alive until Stop. sentAt is when the
// request that last set the lease to Timeout was sent (the acquire): the
// local deadline is Timeout less DriftMargin(Timeout) after it. onLost runs at most once, on the watchdog
// goroutine, with an error matching ErrGone or ErrExpired; it must not block
// and must not call Stop. The keys in follow, in key's slot, are renewed
// with key while owner holds it, whatever they hold (a side's records,
// which must expire with it). A follow key marked as a lease set
// (luascripts.LeaseSet: a sorted set of lease ends, as the holders of an
// RWMutex's read side share) is part of the check: the lease counts as
// held only while owner's score there has not passed, and each renewal
// moves that score out. Owner ids must not be "" or "#lease", which the
// renew script reads as marks.
func (w *Watchdog) Add(key, owner string, sentAt time.Time, onLost func(cause error), follow ...string) *Entry {
	// On Cluster, keys batch by slot. Any other client talks to one server,
	// so all its keys batch together: slot stays 0. (A standalone client's
	// builder still stamps each command with NoSlot|slot(key), so its Slot()
	// cannot be used for grouping.)
	var slot uint16
	if w.client.Mode() == rueidis.ClientModeCluster {
		probe := w.client.B().Exists().Key(key).Build()
		slot = probe.Slot()
	}
	e := &Entry{w: w, key: key, owner: owner, follow: follow, onLost: onLost, slot: slot, deadline: sentAt.Add(w.validity())}
	w.mu.Lock()
	w.entries[e] = struct{}{}
	wake := w.armed.IsZero() || e.deadline.Before(w.armed)
	w.mu.Unlock()
	if wake {
		select {
		case w.added <- struct{}{}:
		default: // the loop has a wake-up pending already
		}
	}
	return e
}

// validity is how long after a renewal's send time its lease counts as held.
func (w *Watchdog) validity() time.Duration {
	return w.opts.Timeout - DriftMargin(w.opts.Timeout)
}

// Stop ends the renewals of e. Once it returns, onLost will not be called.
// Stop is idempotent.
func (e *Entry) Stop() {
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
	e.w.mu.Lock()
	delete(e.w.entries, e)
	e.w.mu.Unlock()
}

// Deadline is the local time after which the lease must be taken as lapsed if
// no renewal succeeds before it.
func (e *Entry) Deadline() time.Time {
	e.w.mu.Lock()
	defer e.w.mu.Unlock()
	return e.deadline
}

// lose ends e unless it was stopped: no longer kept, its onLost hears
// cause. It reports whether it ended e (loseAll logs it).
func (e *Entry) lose(cause error) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return false
	}
	e.stopped = true
	e.w.mu.Lock()
	delete(e.w.entries, e)
	e.w.stats.Lost++
	e.w.mu.Unlock()
	if e.onLost != nil {
		e.onLost(fmt.Errorf("%w: %s", cause, e.key))
	}
	return true
}

// loseAll ends entries, each with its cause, in order, then logs the
// losses: every holder hears first, however slow the Logger.
func (w *Watchdog) loseAll(entries []*Entry, causes []error) {
	lost := make([]bool, len(entries))
	for i, e := range entries {
		lost[i] = e.lose(causes[i])
	}
	if l := w.opts.Logger; l != nil {
		for i, e := range entries {
			if lost[i] {
				l.Error("latchkey: lease lost", "key", e.key, "owner", e.owner, "cause", causes[i])
			}
		}
	}
}
