package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// topology is one kind of Redis deployment a test runs against.
type topology struct {
	name    string
	addrs   []string
	cluster bool

	// How clients connect, when not in plain text as the default user
	// (the TLS and ACL tests).
	tls            *tls.Config
	user, password string

	// masterSet, when set, makes addrs Sentinels and clients Sentinel
	// clients of the master known by that name (see ha_helpers_test.go).
	masterSet string
}

func topologies() []topology {
	return []topology{
		{name: "standalone", addrs: []string{standalone.Addr}},
		{name: "cluster", addrs: cluster.Addrs, cluster: true},
	}
}

// forEachTopology runs f as a subtest on standalone Redis and on the Cluster.
func forEachTopology(t *testing.T, f func(t *testing.T, tp topology)) {
	for _, tp := range topologies() {
		t.Run(tp.name, func(t *testing.T) { f(t, tp) })
	}
}

// redisClient opens a rueidis client on tp, closed when the test ends.
func redisClient(t testing.TB, tp topology) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: tp.addrs, DisableCache: true,
		TLSConfig: tp.tls, Username: tp.user, Password: tp.password,
		Sentinel: rueidis.SentinelOption{MasterSet: tp.masterSet},
	})
	require.NoError(t, err)
	t.Cleanup(rc.Close)
	return rc
}

// lockClient opens a latchkey client (over a rueidis client of its own, as
// a separate process would have), closed when the test ends.
func lockClient(t testing.TB, tp topology, opts rlock.Options) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(redisClient(t, tp), opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

var nameSeq atomic.Int64

// lockName returns a lock name no other test uses.
func lockName(t testing.TB) string {
	n := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return fmt.Sprintf("%s-%d", n, nameSeq.Add(1))
}

// attempts counts acquire attempts per lock name through Options.OnAttempt
// and lets a test await a count.
type attempts struct {
	mu    sync.Mutex
	n     map[string]int
	wants []want
}

type want struct {
	name string
	n    int
	ch   chan struct{}
}

func newAttempts() *attempts { return &attempts{n: make(map[string]int)} }

// options returns opts with both hooks set: attempts count under the lock's
// name, waits under "wait:" + name.
func (a *attempts) options(opts rlock.Options) rlock.Options {
	opts.OnAttempt = a.hook
	opts.OnWait = func(name string) { a.hook(waitKey(name), false) }
	return opts
}

func waitKey(name string) string { return "wait:" + name }

func (a *attempts) hook(name string, _ bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n[name]++
	kept := a.wants[:0]
	for _, w := range a.wants {
		if a.n[w.name] >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	a.wants = kept
}

func (a *attempts) count(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[name]
}

// reached returns a channel closed once name has had n attempts.
func (a *attempts) reached(name string, n int) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	if a.n[name] >= n {
		close(ch)
	} else {
		a.wants = append(a.wants, want{name, n, ch})
	}
	return ch
}

// await fails the test if ch is not closed within d.
func await(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// rawSubscriber listens on a lock's channel with a plain rueidis Receive, the
// way an outside observer would, to check what the scripts publish.
type rawSubscriber struct {
	msgs chan string
	stop func()
}

func subscribeRaw(t *testing.T, tp topology, channel string) *rawSubscriber {
	t.Helper()
	rc := redisClient(t, tp)
	cmd := rc.B().Subscribe().Channel(channel).Build()
	if tp.cluster {
		cmd = rc.B().Ssubscribe().Channel(channel).Build()
	}
	confirmed := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	ctx = rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" || s.Kind == "ssubscribe" {
			once.Do(func() { close(confirmed) })
		}
	})
	s := &rawSubscriber{msgs: make(chan string, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rc.Receive(ctx, cmd, func(m rueidis.PubSubMessage) { s.msgs <- m.Message })
	}()
	s.stop = func() {
		cancel()
		<-done
		unsub := rc.B().Unsubscribe().Channel(channel).Build()
		if tp.cluster {
			unsub = rc.B().Sunsubscribe().Channel(channel).Build()
		}
		_ = rc.Do(context.Background(), unsub).Error()
	}
	t.Cleanup(s.stop)
	await(t, confirmed, 10*time.Second, "raw subscription confirmed")
	return s
}

// rawWaiterID is the client id under which rawWaiter queues.
const rawWaiterID = "raw-waiter"

// rawWaiter queues a pretend client in the wait queue of the lock at key and
// subscribes to its channel, so that the next release wakes it: a way to
// watch what releases publish.
func rawWaiter(t *testing.T, tp topology, rc rueidis.Client, key string) *rawSubscriber {
	t.Helper()
	sub := subscribeRaw(t, tp, key+":ch:"+rawWaiterID)
	queueRawWaiter(t, rc, key)
	t.Cleanup(func() {
		// Not every test releases the lock that would pop it.
		_ = rc.Do(context.Background(), rc.B().Zrem().Key(key+":q").Member(rawWaiterID).Build()).Error()
	})
	return sub
}

// queueRawWaiter queues rawWaiter's pretend client again: each release that
// wakes it takes it off the queue.
func queueRawWaiter(t *testing.T, rc rueidis.Client, key string) {
	t.Helper()
	err := rc.Do(context.Background(), rc.B().Zadd().Key(key+":q").ScoreMember().ScoreMember(0, rawWaiterID).Build()).Error()
	require.NoError(t, err)
}

// publish sends a message on a lock's channel the way the scripts would.
func publish(t *testing.T, rc rueidis.Client, tp topology, channel, msg string) {
	t.Helper()
	cmd := rc.B().Publish().Channel(channel).Message(msg).Build()
	if tp.cluster {
		cmd = rc.B().Spublish().Channel(channel).Message(msg).Build()
	}
	require.NoError(t, rc.Do(context.Background(), cmd).Error())
}

// mustLock takes m with a bounded wait, failing the test on error.
func mustLock(t testing.TB, ctx context.Context, m *rlock.Mutex, opts ...rlock.LockOption) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	t.Cleanup(cancel)
	lctx, err := m.Lock(ctx, opts...)
	require.NoError(t, err)
	keepHeld(t, lctx)
	return lctx
}

// keepHeld keeps the lock context lctx reachable until the test ends: a
// test may hold a lock it never unlocks, and rlock unlocks a hold whose
// context the garbage collector finds dropped.
func keepHeld(t testing.TB, lctx context.Context) {
	t.Cleanup(func() { runtime.KeepAlive(lctx) })
}

func holdCount(t testing.TB, ctx context.Context, m *rlock.Mutex) int {
	t.Helper()
	n, err := m.HoldCount(ctx)
	require.NoError(t, err)
	return n
}

func exists(t testing.TB, rc rueidis.Client, key string) bool {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Exists().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// leaseLive reports whether owner holds a lease that has not run out in
// leases, the lease set of an RWMutex's readers ("<lock>:rw:rd:e") or a
// Semaphore's holders ("<lock>:sem:h:e"): its score is the end of its
// lease, by the server's clock.
func leaseLive(t testing.TB, rc rueidis.Client, leases, owner string) bool {
	t.Helper()
	ctx := context.Background()
	end, err := rc.Do(ctx, rc.B().Zscore().Key(leases).Member(owner).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return false
	}
	require.NoError(t, err)
	// Any node's TIME: the test's servers share this machine's clock.
	now, err := redistest.ServerMillis(ctx, rc)
	require.NoError(t, err)
	return int64(end) >= now
}

// endLease makes owner's lease in leases (see leaseLive) run out now, as
// if its holder had stopped renewing it long ago; it reports whether
// owner had one.
func endLease(t testing.TB, rc rueidis.Client, leases, owner string) bool {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Zadd().Key(leases).Xx().Ch().ScoreMember().ScoreMember(1, owner).Build()).AsInt64()
	require.NoError(t, err)
	return n == 1
}

// blockWaiters starts n goroutines running lock (each should call Lock on
// a handle of one client made with att.options) and returns once all of
// them wait. The first waiter contends for the client: it tries,
// subscribes, tries again and waits; the others wait behind it in the
// client's gate, making no attempt. Each waiter's first sleep is counted
// (OnWait), so n waits mean "everyone waits".
func blockWaiters(t *testing.T, att *attempts, name string, n int, wg *sync.WaitGroup, lock func()) {
	t.Helper()
	base := att.count(waitKey(name))
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock()
		}()
		if i == 0 {
			await(t, att.reached(waitKey(name), base+1), 20*time.Second, "the first waiter to block")
		}
	}
	await(t, att.reached(waitKey(name), base+n), 20*time.Second, "all waiters to block")
}

// startWaiter runs m.Lock then m.Unlock in a goroutine and returns once the
// waiter blocks (its try, then its try after subscribing, were counted by
// att). The goroutine's error arrives on the returned channel.
func startWaiter(t *testing.T, ctx context.Context, m *rlock.Mutex, att *attempts) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		lctx, err := m.Lock(ctx)
		if err == nil {
			err = m.Unlock(lctx)
		}
		done <- err
	}()
	await(t, att.reached(m.Name(), 2), 10*time.Second, "the waiter to block")
	return done
}

// requireAcquired fails the test unless the waiter from startWaiter
// succeeded within d.
func requireAcquired(t *testing.T, done <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
	}
}

// ownServer starts a standalone Redis process for one test, which may then
// reconfigure it (ACL users, freezing it) without disturbing the others.
func ownServer(t *testing.T) *redistest.Server {
	t.Helper()
	srv, err := redistest.StartProcess(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// requireLost fails the test unless lctx ends with ErrLockLost within d.
func requireLost(t *testing.T, lctx context.Context, d time.Duration, what string) {
	t.Helper()
	select {
	case <-lctx.Done():
		require.ErrorIs(t, context.Cause(lctx), rlock.ErrLockLost)
	case <-time.After(d):
		t.Fatalf("after %v: %s", d, what)
	}
}

// requireNotQueued fails the test if the client with id is in the wait
// queue of the lock at key: a client whose waiters all returned, or that
// was closed, must have left it.
func requireNotQueued(t testing.TB, rc rueidis.Client, key, id string) {
	t.Helper()
	require.NotContains(t, queuedIDs(t, rc, key), id, "client %s is still in the wait queue of %s", id, key)
}

// requireQueued fails the test unless the client with id is in the wait
// queue of the lock at key.
func requireQueued(t testing.TB, rc rueidis.Client, key, id string) {
	t.Helper()
	require.Contains(t, queuedIDs(t, rc, key), id, "client %s is not in the wait queue of %s", id, key)
}

// queuedIDs are the ids of the clients in the wait queue of the lock at
// key, oldest first: each entry is "<client id>|<description>".
func queuedIDs(t testing.TB, rc rueidis.Client, key string) []string {
	t.Helper()
	ids := queueMembers(t, rc, key)
	for i, e := range ids {
		ids[i], _, _ = strings.Cut(e, "|")
	}
	return ids
}

// recvErr returns the error that arrives on ch, failing the test if none
// arrives within d.
func recvErr(t testing.TB, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	return nil
}

// startChild re-executes this test binary in role (see runChild) with cfg
// as its parameters, named name in errors, its stderr going to the file
// stderrPath (a file needs no copier goroutine) or, if that is "", kept in
// memory. The caller reads its stdout and may Wait for it; it is killed and
// reaped when the test ends, and killed with the test binary even if that
// dies before its cleanups run.
func startChild(t *testing.T, role, name string, cfg any, stderrPath string) *childproc.Proc {
	t.Helper()
	p, err := childproc.Start(t.Context(), childproc.Config{Role: role, Params: cfg, Name: name,
		Args: []string{"-test.run=^$"}, StderrFile: stderrPath})
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	return p
}
