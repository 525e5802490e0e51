package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/latchkey/latchkey/rlock"
)

// A worker takes the lock, does its work under the context Lock returned,
// and unlocks, checking Unlock's error too. Without a lease, the watchdog
// keeps the lock alive for as long as the work takes.
func Example() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	work := func(ctx context.Context) (err error) {
		m := locks.Mutex("invoice:42")
		lctx, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, m.Unlock(lctx)) }()

		// lctx is cancelled, with cause rlock.ErrLockLost, if the lock is
		// lost: pass it to everything the lock protects.
		fmt.Println("holding", m.Name())
		return nil
	}
	fmt.Println(work(context.Background()))
	// Output:
	// holding invoice:42
	// <nil>
}

// One handle, kept in a struct and shared by goroutines, excludes them from
// each other as a sync.Mutex would: each Lock is an owner of its own.
func ExampleMutex_shared() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	type account struct {
		mu      *rlock.Mutex
		balance int // stands for state kept elsewhere, behind the lock
	}
	acct := &account{mu: locks.Mutex("account:1")}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				lctx, err := acct.mu.Lock(context.Background())
				if err != nil {
					log.Fatal(err)
				}
				b := acct.balance // a read-modify-write that needs exclusion
				acct.balance = b + 1
				if err := acct.mu.Unlock(lctx); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("balance:", acct.balance)
	// Output: balance: 100
}

// Goroutines started with a context derived from a lock context belong to
// that owner: their Locks re-enter rather than wait, so they do not exclude
// each other. Give them the context from before Lock if they must.
func ExampleMutex_Lock_sharedOwner() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	m := locks.Mutex("batch:9")
	lctx, _ := m.Lock(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			inner, err := m.Lock(lctx) // re-enters at once: same owner
			if err != nil {
				log.Fatal(err)
			}
			defer m.Unlock(inner)
		})
	}
	wg.Wait()
	n, _ := m.HoldCount(lctx)
	fmt.Println("holds after the goroutines:", n)
	fmt.Println(m.Unlock(lctx))
	// Output:
	// holds after the goroutines: 1
	// <nil>
}

// TryLock reports a busy lock with false rather than an error. With WithWait
// it waits a bounded time; a Lock elsewhere holds the lock meanwhile.
func ExampleMutex_TryLock() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()

	m := locks.Mutex("report")
	hctx, _ := m.Lock(ctx)

	// ctx carries no hold, so these are other owners, refused.
	_, ok, err := m.TryLock(ctx)
	fmt.Println("free now:", ok, err)
	_, ok, err = m.TryLock(ctx, rlock.WithWait(50*time.Millisecond))
	fmt.Println("free within 50ms:", ok, err)

	m.Unlock(hctx)
	octx, ok, err := m.TryLock(ctx)
	fmt.Println("free after Unlock:", ok, err)
	m.Unlock(octx)
	// Output:
	// free now: false <nil>
	// free within 50ms: false <nil>
	// free after Unlock: true <nil>
}

// A Lock whose context ends while it waits says who blocked it: a
// *WaitError with the holder (the one Redis named at the client's last
// refused try, or a hold of the client's own that the call waited behind)
// and this client's place in line, wrapping the context's error.
func ExampleWaitError() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	worker, _ := rlock.NewClient(rc, rlock.Options{ClientName: "worker-7"})
	defer worker.Close()
	other, _ := rlock.NewClient(rc, rlock.Options{})
	defer other.Close()
	ctx := context.Background()

	hctx, _ := worker.Mutex("orders").Lock(ctx)
	defer worker.Mutex("orders").Unlock(hctx)

	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := other.Mutex("orders").Lock(wctx)
	var we *rlock.WaitError
	if errors.As(err, &we) {
		fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded))
		fmt.Println("held by:", we.Holder.Client.Name)
		fmt.Println("place in line:", we.Position)
	}
	// Output:
	// deadline: true
	// held by: worker-7
	// place in line: 1
}

// The context that Lock returns carries the hold: a nested function that
// locks the same name with it re-enters, whatever handle it uses. Every
// Lock needs its Unlock; the lock is released at the last one.
func ExampleMutex_Lock_reentrant() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	nested := func(ctx context.Context) {
		m := locks.Mutex("account:7") // a fresh handle, as a library function would make
		lctx, err := m.Lock(ctx)
		if err != nil {
			log.Fatal(err)
		}
		n, _ := m.HoldCount(lctx)
		fmt.Println("nested hold count:", n)
		m.Unlock(lctx)
	}

	m := locks.Mutex("account:7")
	lctx, _ := m.Lock(context.Background())
	nested(lctx)
	n, _ := m.HoldCount(lctx)
	fmt.Println("outer hold count:", n)
	m.Unlock(lctx)
	locked, _ := m.IsLocked(context.Background())
	fmt.Println("locked after the last Unlock:", locked)
	// Output:
	// nested hold count: 2
	// outer hold count: 1
	// locked after the last Unlock: false
}

// With a fixed lease there is no watchdog: the lock expires, and the
// context Lock returned says why. The context ends on the local clock
// measured from when the acquire was sent, so it ends no later than the
// lock does on the server.
func ExampleWithLease() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()

	m := locks.Mutex("short-job")
	lctx, _ := m.Lock(ctx, rlock.WithLease(100*time.Millisecond))
	<-lctx.Done() // the job overran its lease
	fmt.Println("lost:", errors.Is(context.Cause(lctx), rlock.ErrLockLost))

	nctx, ok, _ := m.TryLock(ctx, rlock.WithWait(time.Second))
	fmt.Println("next owner got it:", ok)
	m.Unlock(nctx)
	// Output:
	// lost: true
	// next owner got it: true
}

// The spin variant has the same API and semantics, and polls instead of
// listening for unlocks. It is there to measure pub/sub against.
func ExampleClient_SpinMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{SpinBackoffMin: time.Millisecond, SpinBackoffMax: 64 * time.Millisecond})
	defer locks.Close()

	m := locks.SpinMutex("batch")
	lctx, err := m.Lock(context.Background())
	fmt.Println(err)
	fmt.Println(m.Unlock(lctx))
	// Output:
	// <nil>
	// <nil>
}

// Leader election: every candidate calls Lock; the one that gets the lock
// leads until its context ends (the lock was lost, or the process stops)
// or it resigns with Unlock, and then the next waiting candidate leads.
// The waiters cost Redis nothing while they wait: they are woken by the
// release. Here candidate a resigns once b is waiting.
func ExampleMutex_leaderElection() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	bWaits := make(chan struct{}, 1)
	a, _ := rlock.NewClient(rc, rlock.Options{})
	defer a.Close()
	// Two clients stand for two processes; OnWait tells us b is waiting.
	b, _ := rlock.NewClient(rc, rlock.Options{OnWait: func(string) {
		select {
		case bWaits <- struct{}{}:
		default:
		}
	}})
	defer b.Close()

	// campaign waits for the lead, then leads until the lock is lost or
	// resign is closed, and gives the lead up.
	campaign := func(c *rlock.Client, name string, resign <-chan struct{}, leading chan<- struct{}) error {
		m := c.Mutex("leader")
		lctx, err := m.Lock(context.Background())
		if err != nil {
			return err
		}
		fmt.Println(name, "leads")
		close(leading)
		select {
		case <-lctx.Done():
			fmt.Println(name, "lost the lead:", context.Cause(lctx))
		case <-resign:
			fmt.Println(name, "resigns")
		}
		return m.Unlock(lctx)
	}

	aResigns, bResigns := make(chan struct{}), make(chan struct{})
	aLeads, bLeads := make(chan struct{}), make(chan struct{})
	close(bResigns) // b resigns at once, to end the example
	var wg sync.WaitGroup
	for _, cand := range []struct {
		c              *rlock.Client
		name           string
		resign         chan struct{}
		leads, waitFor chan struct{}
	}{{a, "a", aResigns, aLeads, nil}, {b, "b", bResigns, bLeads, aLeads}} {
		if cand.waitFor != nil {
			<-cand.waitFor // start b only once a leads
		}
		wg.Go(func() {
			if err := campaign(cand.c, cand.name, cand.resign, cand.leads); err != nil {
				log.Fatal(err)
			}
		})
	}
	<-bWaits
	close(aResigns)
	wg.Wait()
	// Output:
	// a leads
	// a resigns
	// b leads
	// b resigns
}

// Do is the shortest correct use of a lock: it unlocks whatever fn does,
// and reports a lock lost while fn ran.
func ExampleClient_Do() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	err := locks.Do(context.Background(), "report:daily", func(lctx context.Context) error {
		fmt.Println("writing the report")
		return nil // pass lctx to the work: it ends if the lock is lost
	})
	fmt.Println(err)
	// Output:
	// writing the report
	// <nil>
}

// A job that takes a short lease and extends it while it makes progress,
// as redsync's and redislock's users do, instead of relying on the
// watchdog.
func ExampleMutex_Extend() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	m := locks.Mutex("import:batch-7")
	lctx, err := m.Lock(context.Background(), rlock.WithLease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	for step := range 3 {
		// ... one step of the work, under lctx ...
		if err := m.Extend(lctx, 10*time.Second); err != nil {
			log.Fatal(err) // ErrNotHeld: stop working, the lock is gone
		}
		fmt.Println("step", step+1, "done, lease extended")
	}
	fmt.Println(m.Unlock(lctx))
	// Output:
	// step 1 done, lease extended
	// step 2 done, lease extended
	// step 3 done, lease extended
	// <nil>
}

// LeaseEnd tells how long a WithLease hold has left, and follows Extend;
// the lock context's own Deadline stays its parent's, so that a timeout
// derived from it keeps its timer.
func ExampleLeaseEnd() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	m := locks.Mutex("report:daily")
	lctx, err := m.Lock(context.Background(), rlock.WithLease(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	end, _ := rlock.LeaseEnd(lctx)
	fmt.Println("ends within 10s:", time.Until(end) <= 10*time.Second)
	if err := m.Extend(lctx, time.Minute); err != nil {
		log.Fatal(err)
	}
	end, _ = rlock.LeaseEnd(lctx)
	fmt.Println("extended past 50s:", time.Until(end) > 50*time.Second)
	_, hasDeadline := lctx.Deadline()
	fmt.Println("context deadline:", hasDeadline)
	fmt.Println(m.Unlock(lctx))
	// Output:
	// ends within 10s: true
	// extended past 50s: true
	// context deadline: false
	// <nil>
}

// Locker adapts a lock to code that takes a sync.Locker, here a sync.Cond.
func ExampleLocker() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	l := rlock.Locker(context.Background(), locks.Mutex("queue:ready"))
	ready := false
	cond := sync.NewCond(l)
	go func() {
		l.Lock()
		ready = true
		l.Unlock()
		cond.Broadcast()
	}()
	l.Lock()
	for !ready {
		cond.Wait()
	}
	l.Unlock()
	fmt.Println("ready")
	// Output:
	// ready
}

// An RWMutex lets many readers in at once, or one writer. A writer may
// also read, and keep reading after its write Unlock: a downgrade.
func ExampleRWMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()
	config := locks.RWMutex("config")

	r1, _ := config.RLock(ctx)
	r2, _ := config.RLock(ctx) // another reader: readers share
	_, ok, _ := config.TryLock(ctx)
	fmt.Println("writer while two read:", ok)
	_, err := config.Lock(r1) // a reader cannot upgrade
	fmt.Println(errors.Is(err, rlock.ErrUpgrade))
	_ = config.RUnlock(r1)
	_ = config.RUnlock(r2)

	w, _ := config.Lock(ctx)
	token, _ := config.Token(w) // writers fence their writes
	read, _ := config.RLock(w)  // the writer reads too...
	_ = config.Unlock(w)        // ...and keeps reading: downgraded
	fmt.Println(token > 0, read.Err() == nil)
	_ = config.RUnlock(read)
	// Output:
	// writer while two read: false
	// true
	// true true
}

// RLocker gives the read side to code that takes a sync.Locker.
func ExampleRLocker() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	var l sync.Locker = rlock.RLocker(context.Background(), locks.RWMutex("catalog"))
	l.Lock()
	l.Lock() // a second reader, at once
	fmt.Println("two readers")
	l.Unlock()
	l.Unlock()
	// Output:
	// two readers
}

// A count-down latch: the coordinator sets the count, each worker counts
// down when done, and Await returns, in every process that waits, once the
// count reaches zero. Zero deletes the latch, so the next batch can set it
// again.
func ExampleClient_CountDownLatch() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()
	ctx := context.Background()

	const workers = 3
	batch := locks.CountDownLatch("batch:17")
	ok, err := batch.TrySetCount(ctx, workers)
	fmt.Println("set:", ok, err)

	var done atomic.Int32
	for range workers {
		go func() { // in practice, other processes with latches of the same name
			done.Add(1)
			if err := batch.CountDown(ctx); err != nil {
				log.Fatal(err)
			}
		}()
	}
	if err := batch.Await(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("workers done:", done.Load())
	n, _ := batch.Count(ctx)
	fmt.Println("count after zero:", n)
	ok, _ = batch.TrySetCount(ctx, 1)
	fmt.Println("set again:", ok)
	batch.CountDown(ctx)
	// Output:
	// set: true <nil>
	// workers done: 3
	// count after zero: 0
	// set again: true
}

// A transfer needs both accounts: MultiMutex takes both locks or neither,
// in a fixed order, so a transfer the other way round cannot deadlock with
// it. The context it returns carries every member's hold.
func ExampleClient_MultiMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	transfer := func(ctx context.Context, from, to string) (err error) {
		mm := locks.MultiMutex("account:"+from, "account:"+to)
		lctx, err := mm.Lock(ctx)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, mm.Unlock(lctx)) }()

		// lctx ends, with cause rlock.ErrLockLost, if any one lock is lost.
		fmt.Println("holding", mm.Names())
		return nil
	}
	fmt.Println(transfer(context.Background(), "b", "a"))
	// Output:
	// holding [account:a account:b]
	// <nil>
}

// A Semaphore bounds how many jobs, across every process, use a resource
// at once: here at most 3 connections' worth of a licence pool, with jobs
// taking 1 or 2. Each Acquire's permits belong to the context it returns,
// and come back when their holder crashes, within their lease.
func ExampleSemaphore() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{})
	defer locks.Close()

	pool := locks.Semaphore("licences", 3)
	var mu sync.Mutex
	inUse, most, done := int64(0), int64(0), 0
	var wg sync.WaitGroup
	for job := range 6 {
		n := int64(1 + job%2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, err := pool.Acquire(context.Background(), n)
			if err != nil {
				log.Print(err)
				return
			}
			mu.Lock()
			inUse += n
			most = max(most, inUse)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the work, under pctx
			mu.Lock()
			inUse -= n
			mu.Unlock()
			if err := pool.Release(pctx); err != nil {
				log.Print(err)
				return
			}
			mu.Lock()
			done++
			mu.Unlock()
		}()
	}
	wg.Wait()
	free, err := pool.Available(context.Background())
	fmt.Println(done, "jobs;", most >= 1 && most <= pool.Size(), free, err)
	// Output:
	// 6 jobs; true 3 <nil>
}

// With SyncReplicas every grant, renewal and release waits until that many
// replicas have it. The example's Redis has no replica, so asking for one
// makes every acquire fail with ErrNotReplicated: the grant is given back
// and nothing is held. Ask for as many replicas as may be promoted.
func ExampleSyncReplicas() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{
		SyncReplicas: rlock.SyncReplicas{Replicas: 1, Timeout: 50 * time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	m := locks.Mutex("report:daily")
	lctx, err := m.Lock(context.Background())
	if errors.Is(err, rlock.ErrNotReplicated) {
		fmt.Println("not replicated: nothing held")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(lctx)
	fmt.Println("held, and on a replica")
	// Output:
	// not replicated: nothing held
}

// On Redis Cluster, give the rueidis client a few seed nodes: latchkey
// uses sharded pub/sub there (Redis 7+), and every key of a lock shares
// the lock name's hash tag, so its scripts run on one node. (Not run: it
// needs a Cluster.)
func ExampleNewClient_cluster() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{}) // PubSubAuto: sharded on a Cluster
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
	fmt.Println(locks.Mutex("invoice:42").Key()) // latchkey:{invoice:42}, in the slot of "invoice:42"
}

// With Sentinel, rueidis asks the Sentinels for the master of the set and
// follows a failover to the new one; with SyncReplicas, grants reach the
// replicas that may be promoted before Lock returns. (Not run: it needs
// Sentinels.)
func ExampleNewClient_sentinel() {
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{"127.0.0.1:26379", "127.0.0.1:26380", "127.0.0.1:26381"},
		Sentinel:    rueidis.SentinelOption{MasterSet: "mymaster"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{
		SyncReplicas: rlock.SyncReplicas{Replicas: 2, Timeout: 200 * time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()
}

// Who holds a lock, and who waits for it: each grant records its holder's
// client (Options.ClientName, host, pid), token and grant time; Inspect
// reads them back in one round trip, List finds the held locks by pattern.
func ExampleClient_Inspect() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{ClientName: "billing-worker"})
	defer locks.Close()

	m := locks.Mutex("report:monthly")
	lctx, err := m.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(lctx)

	info, err := locks.Inspect(context.Background(), "report:monthly")
	if err != nil {
		log.Fatal(err)
	}
	h := info.Holders[0]
	fmt.Println(h.Client.Name, h.Count, h.Client.ID == locks.ID(), info.WaitersTotal)

	held, err := locks.List(context.Background(), "report:*")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range held {
		fmt.Println(l.Name, "held by", l.Holders[0].Client.Name)
	}
	// Output:
	// billing-worker 1 true 0
	// report:monthly held by billing-worker
}

// The family's holds are recorded too: InspectRWMutex gives each hold and
// each waiter its mode, InspectSemaphore each holder's permits, and List
// finds every kind, a Mutex and an RWMutex of one name apart.
func ExampleClient_InspectRWMutex() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, _ := rlock.NewClient(rc, rlock.Options{ClientName: "indexer"})
	defer locks.Close()
	ctx := context.Background()

	rw := locks.RWMutex("catalog")
	rctx, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer rw.RUnlock(rctx)
	pool := locks.Semaphore("catalog", 4)
	pctx, err := pool.Acquire(ctx, 3)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Release(pctx)

	info, err := locks.InspectRWMutex(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Kind, info.Holders[0].Mode, info.Holders[0].Client.Name)
	sem, err := locks.InspectSemaphore(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sem.Kind, sem.Holders[0].Permits, "of", sem.Size)

	held, err := locks.List(ctx, "catalog")
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range held {
		fmt.Println(l.Name, l.Kind)
	}
	// Output:
	// rwmutex read indexer
	// semaphore 3 of 4
	// catalog rwmutex
	// catalog semaphore
}

// Metrics and traces: give the client an OpenTelemetry MeterProvider and
// TracerProvider, normally the SDK's, set up in main with the exporter you
// use (sdkmetric.NewMeterProvider(sdkmetric.WithReader(prometheusExporter)),
// sdktrace.NewTracerProvider(...)). latchkey imports the API only; the
// API's no-op providers stand in for the SDK's here. Every Lock then
// records latchkey.lock.* (docs/operations.md lists the instruments), and
// a Lock that waits is a span "latchkey.lock.wait", a child of the span in
// its context.
func ExampleOptions_metrics() {
	rc, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	defer rc.Close()
	locks, err := rlock.NewClient(rc, rlock.Options{
		MeterProvider:  metricnoop.NewMeterProvider(),
		TracerProvider: tracenoop.NewTracerProvider(),
		// Off by default: a metric attribute per lock name is a time series
		// per name. Turn it on only for a few, fixed names.
		MetricsLockName: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	m := locks.Mutex("nightly-export")
	lctx, err := m.Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Unlock(lctx))
	// Output: <nil>
}
