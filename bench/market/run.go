package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/latency"
)

// sim is one run: one variant under one load.
type sim struct {
	cfg   config
	v     variant
	rc    rueidis.Client
	guard guard // nil for the WATCH variant
	stop  atomic.Bool

	listed, bought, missed atomic.Int64
	retries                atomic.Int64 // buyers' failed tries: aborted EXECs, busy locks
	sellerRetries          atomic.Int64 // the same for sellers (not in the book's tables)

	mu        sync.Mutex
	errs      problems
	latencies latency.Histogram // one sample per purchase
	made      map[string]int    // items each seller created
}

// worker is one seller or buyer: a goroutine with a connection of its own,
// as each of the book's sellers and buyers was a process with one.
type worker struct {
	id       string
	conn     rueidis.DedicatedClient
	maxPrice int

	stock []string          // seller: items in its inventory, not yet listed
	made  int               // seller: items created so far
	lat   latency.Histogram // buyer: how long each purchase took
}

// runOnce runs variant v under load l for cfg.dur on a flushed Redis and
// checks the market afterwards. It fails only when the run could not be
// set up or was interrupted; errors of the workers and broken invariants
// are counted in the result.
func runOnce(ctx context.Context, rc rueidis.Client, cfg config, v variant, l load) (result, error) {
	if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil {
		return result{}, fmt.Errorf("FLUSHALL: %w", err)
	}
	sellers, buyers := ids(l.sellers, sellerID), ids(l.buyers, buyerID)
	if err := createUsers(ctx, rc, sellers, buyers, cfg.buyerFunds); err != nil {
		return result{}, err
	}
	s := &sim{cfg: cfg, v: v, rc: rc, made: make(map[string]int)}
	if v.newGuard != nil {
		g, free, err := v.newGuard(s)
		if err != nil {
			return result{}, err
		}
		defer free()
		s.guard = g
	}

	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range sellers {
		wg.Go(func() { s.runSeller(ctx, id) })
	}
	for _, id := range buyers {
		wg.Go(func() { s.runBuyer(ctx, id) })
	}
	select {
	case <-time.After(cfg.dur):
	case <-ctx.Done():
	}
	// Workers finish the listing or purchase they are in, so the market is
	// consistent when it is checked.
	s.stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}

	w := world{made: s.made, buyers: buyers, buyerFunds: cfg.buyerFunds, maxPrice: cfg.maxPrice,
		listed: s.listed.Load(), bought: s.bought.Load()}
	found, err := checkInvariants(ctx, rc, w)
	if err != nil {
		return result{}, fmt.Errorf("reading the market back: %w", err)
	}
	return s.result(l, elapsed, found), nil
}

func (s *sim) newWorker(id string) (*worker, func()) {
	conn, release := s.rc.Dedicate()
	return &worker{id: id, conn: conn, maxPrice: s.cfg.maxPrice}, release
}

func (s *sim) runSeller(ctx context.Context, id string) {
	w, release := s.newWorker(id)
	defer release()
	defer func() {
		s.mu.Lock()
		s.made[id] = w.made
		s.mu.Unlock()
	}()
	for !s.stop.Load() {
		item, err := w.nextItem(ctx, s.cfg.restock)
		if err == nil {
			err = s.list(ctx, w, item)
		}
		if err != nil {
			s.fail(id, err)
			return
		}
		s.listed.Add(1)
	}
}

func (s *sim) runBuyer(ctx context.Context, id string) {
	w, release := s.newWorker(id)
	defer release()
	defer func() {
		s.mu.Lock()
		s.latencies.Merge(&w.lat)
		s.mu.Unlock()
	}()
	for !s.stop.Load() {
		o, ok, err := w.pick(ctx, s.cfg.pickWindow)
		if err != nil {
			s.fail(id, err)
			return
		}
		if !ok {
			continue // the market is empty: look again, as the book's buyers do
		}
		start := time.Now()
		bought, err := s.purchase(ctx, w, o)
		if err != nil {
			s.fail(id, err)
			return
		}
		if bought {
			s.bought.Add(1)
			w.lat.Record(time.Since(start))
		} else {
			s.missed.Add(1)
		}
	}
}

func (s *sim) list(ctx context.Context, w *worker, item string) error {
	if s.guard == nil {
		return w.listWatched(ctx, item, &s.sellerRetries)
	}
	return s.locked(ctx, w, s.v.lockName(marketMember(item, w.id)), &s.sellerRetries, func(ctx context.Context) error {
		return w.listLocked(ctx, item)
	})
}

func (s *sim) purchase(ctx context.Context, w *worker, o offer) (bought bool, err error) {
	if s.guard == nil {
		return w.buyWatched(ctx, o, &s.retries)
	}
	err = s.locked(ctx, w, s.v.lockName(o.member), &s.retries, func(ctx context.Context) (err error) {
		bought, err = w.buyLocked(ctx, o)
		return err
	})
	return bought, err
}

// locked runs work under the variant's lock called name, adding the failed
// tries to retries.
func (s *sim) locked(ctx context.Context, w *worker, name string, retries *atomic.Int64, work func(context.Context) error) error {
	h, failed, err := s.guard.acquire(ctx, w, name)
	retries.Add(failed)
	if err != nil {
		return err
	}
	err = work(h.ctx)
	if rerr := h.release(); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// fail records the error that stopped worker id.
func (s *sim) fail(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs.add("%s: %v", id, err)
}
