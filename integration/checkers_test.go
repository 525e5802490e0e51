package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/rlock/fenced"
)

// lockSet is the checker every fault test runs, Jepsen style. Workers take
// the lock and add an element of their own to a set kept as one string, by a
// read-modify-write that is not atomic on purpose: read the set, append,
// write it back. Two holders overlapping would lose an element. An element
// whose write was acknowledged must be in the final set; one that is missing
// is a violation.
//
// The set lives in a fenced.Store, read with Claim and written with Write,
// both carrying the worker's fencing token. That is what makes it safe even
// when the lock is not: a holder paused past its lease is turned away at the
// store instead of overwriting its successor. The store is on the shared
// standalone Redis, reached directly, so that the faults under test hit the
// lock and not the checker.
//
// Workers deliberately ignore the loss signal inside their critical section
// (it runs on a context of its own): the checker must hold even for a holder
// that carries on regardless.
type lockSet struct {
	name   string // the fenced store's name, for workers in child processes
	store  *fenced.Store
	inside atomic.Int32 // workers of this process between Lock and Unlock

	mu       sync.Mutex
	acked    []string
	workers  int
	stats    lockSetStats
	progress []acquisitionsWant
}

// lockSetStats are the workload's counts.
type lockSetStats struct {
	Acquisitions  int
	StaleRejected int           // claims and writes the fence turned away
	Overlaps      int           // a worker entered while another of this process was inside
	LostHolds     int           // Unlock said ErrNotHeld: the lock was lost before it
	MaxWait       time.Duration // longest single Lock call that succeeded
	FirstAcquired time.Time
	LockErrors    []error
	StoreErrors   []error // claims and writes that failed for another reason than the fence
	UnlockErrors  []error // Unlock errors other than ErrNotHeld
}

// auditLogLimit is the fenced log a checker keeps: more than any test run
// writes, so that Audit sees every accepted write, not the default window.
const auditLogLimit = 1 << 20

// lockSetSectionTimeout bounds one critical section's store calls.
const lockSetSectionTimeout = 10 * time.Second

// newLockSet returns an empty set in a fenced store named after the test,
// deleted when the test ends.
func newLockSet(t *testing.T) *lockSet {
	t.Helper()
	name := lockName(t)
	// The whole run's writes in the log, so that Audit checks them all.
	s := fenced.New(redisClient(t, topologies()[0]), name, fenced.WithLogLimit(auditLogLimit))
	t.Cleanup(func() { require.NoError(t, s.Delete(context.Background())) })
	return &lockSet{name: name, store: s}
}

// run has every handle do k critical sections, all at once, and returns
// when they are done. ctx bounds the Lock calls.
func (s *lockSet) run(ctx context.Context, handles []*rlock.Mutex, k int, opts ...rlock.LockOption) {
	var wg sync.WaitGroup
	for _, m := range handles {
		s.mu.Lock()
		s.workers++
		worker := fmt.Sprintf("w%d", s.workers)
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < k; i++ {
				s.cycle(ctx, m, fmt.Sprintf("%s.%d", worker, i), opts...)
			}
		}()
	}
	wg.Wait()
}

// start runs run in the background; the channel is closed when it is done.
func (s *lockSet) start(ctx context.Context, handles []*rlock.Mutex, k int, opts ...rlock.LockOption) <-chan struct{} {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s.run(ctx, handles, k, opts...)
	}()
	return finished
}

// whileRunning injects a fault again and again, every period, until
// finished is closed, and returns how many times it did.
func whileRunning(finished <-chan struct{}, period time.Duration, fault func()) int {
	for n := 1; ; n++ {
		fault()
		select {
		case <-finished:
			return n
		case <-time.After(period): // the fault's rate, not a synchronisation
		}
	}
}

// cycle is one critical section adding elem.
func (s *lockSet) cycle(ctx context.Context, m *rlock.Mutex, elem string, opts ...rlock.LockOption) {
	start := time.Now()
	lctx, err := m.Lock(ctx, opts...)
	if err != nil {
		s.record(func(st *lockSetStats) { st.LockErrors = append(st.LockErrors, err) })
		return
	}
	s.acquired(time.Since(start))
	if s.inside.Add(1) > 1 {
		s.record(func(st *lockSetStats) { st.Overlaps++ })
	}
	// The token is read at once, as a worker would before its first write;
	// after a loss the handle no longer knows it.
	if token, err := m.Token(lctx); err == nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lockSetSectionTimeout)
		s.add(sctx, token, elem)
		cancel()
	}
	s.inside.Add(-1)
	switch err := m.Unlock(lctx); {
	case errors.Is(err, rlock.ErrNotHeld):
		s.record(func(st *lockSetStats) { st.LostHolds++ })
	case err != nil:
		s.record(func(st *lockSetStats) { st.UnlockErrors = append(st.UnlockErrors, err) })
	}
}

// add is the read-modify-write: claim and read, append, write.
func (s *lockSet) add(ctx context.Context, token int64, elem string) {
	set, err := s.store.Claim(ctx, token)
	if err == nil {
		err = s.store.Write(ctx, token, strings.TrimSpace(set+" "+elem))
	}
	switch {
	case err == nil:
		s.ack(elem)
	case errors.Is(err, fenced.ErrStale):
		s.record(func(st *lockSetStats) { st.StaleRejected++ })
	default:
		s.record(func(st *lockSetStats) { st.StoreErrors = append(st.StoreErrors, err) })
	}
}

// ack records an element whose write the store acknowledged, for workers in
// child processes too.
func (s *lockSet) ack(elem string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = append(s.acked, elem)
}

func (s *lockSet) record(f func(*lockSetStats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

func (s *lockSet) acquired(wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats.Acquisitions == 0 {
		s.stats.FirstAcquired = time.Now()
	}
	s.stats.Acquisitions++
	s.stats.MaxWait = max(s.stats.MaxWait, wait)
	kept := s.progress[:0]
	for _, w := range s.progress {
		if s.stats.Acquisitions >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	s.progress = kept
}

// acquisitionsWant is a pending afterAcquisitions.
type acquisitionsWant struct {
	n  int
	ch chan struct{}
}

// afterAcquisitions returns a channel closed once n acquisitions succeeded.
func (s *lockSet) afterAcquisitions(n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.stats.Acquisitions >= n {
		close(ch)
	} else {
		s.progress = append(s.progress, acquisitionsWant{n, ch})
	}
	return ch
}

// snapshot returns the counts so far.
func (s *lockSet) snapshot() lockSetStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// verdict reads the final set and the store's audit log.
func (s *lockSet) verdict(t *testing.T) (lost []string, staleAccepted int) {
	t.Helper()
	ctx := context.Background()
	value, _, err := s.store.Read(ctx)
	require.NoError(t, err)
	in := strings.Fields(value)
	s.mu.Lock()
	for _, e := range s.acked {
		if !slices.Contains(in, e) {
			lost = append(lost, e)
		}
	}
	s.mu.Unlock()
	_, staleAccepted, err = s.store.Audit(ctx)
	require.NoError(t, err)
	return lost, staleAccepted
}

// contenders opens two latchkey clients on tp, as two processes would
// have, and returns the first and the lock-set workers: two handles on name
// from each client.
func contenders(t *testing.T, tp topology, name string, opts rlock.Options) (*rlock.Client, []*rlock.Mutex) {
	t.Helper()
	c1, c2 := lockClient(t, tp, opts), lockClient(t, tp, opts)
	return c1, []*rlock.Mutex{c1.Mutex(name), c1.Mutex(name), c2.Mutex(name), c2.Mutex(name)}
}
