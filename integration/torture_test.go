package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/childproc"
)

// TestTorture is the torture suite (issue 9, section 3): three processes
// (this one and two re-executed children) × goroutines × three locks, each
// goroutine drawing, from its own seeded generator, Lock, re-entry through
// the lock context, TryLock with and without WithWait, Lock cancelled while
// it waits, fixed leases held past their end, stray and repeated Unlocks,
// and Client.Close and reopen. Two of each process's goroutines share
// their *rlock.Mutex per client and lock (new semantics). A controller
// goroutine injects CLIENT KILL (normal and pubsub), ForceUnlock and, on
// standalone, reply delays through a proxy that half the clients go through.
// The invariants are listed in torture_check_test.go.
//
//	TORTURE_SEED=n    replay the schedule of seed n (printed by every run)
//	TORTURE_DUR=10m   each topology's workload time (default 8s: make test)
//	TORTURE_HISTORY=dir  write each topology's history there, one JSON event a line
//	TORTURE_COMPAT=1  only operations that mean the same under the old
//	                  handle-is-owner semantics (no shared handles, no stray
//	                  or repeated Unlock), to probe an old core
//
// The schedule (every plan a goroutine draws, every fault the controller
// draws) is a function of the seed; which operation wins a race is not.
func TestTorture(t *testing.T) {
	run := tortureSettings(t)
	t.Logf("torture: seed %d (TORTURE_SEED=%d replays it), %v per topology, compat=%v", run.seed, run.seed, run.dur, run.compat)
	forEachTopology(t, func(t *testing.T, tp topology) { runTorture(t, tp, run) })
}

type tortureRun struct {
	seed   uint64
	dur    time.Duration
	compat bool
}

const (
	tortureChildren   = 2
	tortureGoroutines = 3
	tortureLockCount  = 3
	tortureShortDur   = 8 * time.Second
	// tortureProcTimeout bounds a child's start-up and its shutdown.
	tortureProcTimeout = 60 * time.Second
	// tortureQuiesce is how long keys may outlive the run: every hold was
	// unlocked and every client closed, so only an Unlock that failed can
	// leave a lock, for at most one lease (the watchdog's is the longest).
	tortureQuiesce = tortureWatchdog + tortureMaxLease + time.Second
)

func tortureSettings(t *testing.T) tortureRun {
	run := tortureRun{dur: tortureShortDur, compat: os.Getenv("TORTURE_COMPAT") == "1"}
	if s := os.Getenv("TORTURE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "TORTURE_SEED")
		run.seed = seed
	} else {
		run.seed = uint64(time.Now().UnixNano())
	}
	if s := os.Getenv("TORTURE_DUR"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "TORTURE_DUR")
		require.Positive(t, d, "TORTURE_DUR")
		run.dur = d
	}
	if deadline, ok := t.Deadline(); ok {
		need := 2 * (run.dur + 2*tortureProcTimeout)
		require.True(t, time.Until(deadline) > need, "TORTURE_DUR=%v needs -timeout above %v", run.dur, need)
	}
	return run
}

// tortureServers returns where a torture run's locks live: on standalone a
// server of its own (CLIENT KILL then hits nothing but the locks) with a
// delaying proxy in front, on the Cluster the Cluster; and a key prefix of
// its own, starting with kind.
func tortureServers(t *testing.T, tp topology, kind string) (lockAddrs []string, proxy *netProxy, prefix string) {
	lockAddrs = tp.addrs
	if !tp.cluster {
		lockAddrs = []string{ownServer(t).Addr}
		proxy = startProxy(t, lockAddrs[0])
	}
	var raw [6]byte
	_, err := rand.Read(raw[:])
	require.NoError(t, err)
	return lockAddrs, proxy, kind + "-" + hex.EncodeToString(raw[:])
}

func runTorture(t *testing.T, tp topology, run tortureRun) {
	lockAddrs, proxy, prefix := tortureServers(t, tp, "torture")
	proxyAddr := ""
	if proxy != nil {
		proxyAddr = proxy.Addr
	}
	cfg := tortureConfig{
		Seed: run.seed, LockAddrs: lockAddrs, ProxyAddr: proxyAddr, StoreAddr: standalone.Addr,
		Prefix: prefix, Goroutines: tortureGoroutines, Shared: true, Compat: run.compat,
	}
	for i := 0; i < tortureLockCount; i++ {
		cfg.Locks = append(cfg.Locks, fmt.Sprintf("lock%d", i))
	}
	store := redisClient(t, topologies()[0])
	admins := nodeClients(t, lockAddrs)
	t.Cleanup(func() { tortureCleanup(t, cfg, store, admins) })

	hist := &history{}
	var procs []*tortureProc
	for p := 1; p <= tortureChildren; p++ {
		c := cfg
		c.Proc = p
		procs = append(procs, startTortureProc(t, c, hist))
	}
	for _, p := range procs {
		p.await(t, p.ready, "ready")
	}

	// Go: the children, this process's workload, and the fault controller.
	start := time.Now()
	for _, p := range procs {
		_, err := io.WriteString(p.proc.Stdin, "go\n")
		require.NoError(t, err)
	}
	ctrl, err := newController(cfg, admins, proxy, hist.add)
	require.NoError(t, err)
	runCtx, stopRun := context.WithCancel(context.Background())
	ctrlCtx, stopCtrl := context.WithCancel(context.Background())
	defer stopRun()
	defer stopCtrl()
	var wg sync.WaitGroup
	var localErr, ctrlErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		localErr = runTortureProcess(runCtx, cfg, hist.add)
	}()
	go func() {
		defer wg.Done()
		ctrlErr = ctrl.loop(ctrlCtx)
	}()

	think(context.Background(), run.dur) // the workload's length, not a synchronisation
	// Faults stop first (the proxy's delay is lifted), then the workers.
	stopCtrl()
	var stopErrs []error
	for _, p := range procs {
		_, err := io.WriteString(p.proc.Stdin, "stop\n")
		stopErrs = append(stopErrs, err)
	}
	stopRun()
	wg.Wait()
	require.NoError(t, errors.Join(stopErrs...), "telling the children to stop")
	require.NoError(t, localErr)
	require.NoError(t, ctrlErr)
	for _, p := range procs {
		p.await(t, p.done, "done")
		p.wait(t)
	}
	end := time.Now()

	left := awaitQuiet(t, admins, cfg.Prefix)
	finals := make([]int, len(cfg.Locks))
	for i, name := range cfg.Locks {
		v, _, err := newChecker(store, cfg.Prefix, name).store.Read(context.Background())
		require.NoError(t, err)
		finals[i], _ = strconv.Atoi(v)
	}
	evs := hist.all()
	if dir := os.Getenv("TORTURE_HISTORY"); dir != "" {
		dumpHistory(t, fmt.Sprintf("%s/torture-%s-%d.jsonl", dir, tp.name, run.seed), evs)
	}
	vs := judgeTorture(evs, finals, end.UnixNano())
	for _, l := range left {
		vs = append(vs, violation{inv: invQuiet, lock: -1, at: end.UnixNano(), msg: "left behind after every client closed: " + l})
	}
	t.Logf("torture %s: %s", tp.name, summarize(evs, finals, end.Sub(start)))
	reportTorture(t, run, start, evs, vs)
}

// history is the run's events from every process.
type history struct {
	mu  sync.Mutex
	evs []tortureEvent
}

func (h *history) add(ev tortureEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.evs = append(h.evs, ev)
}

func (h *history) all() []tortureEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]tortureEvent(nil), h.evs...)
}

// tortureProc is a torture child seen from the test.
type tortureProc struct {
	proc        *childproc.Proc
	ready, done chan struct{}
	read        chan struct{} // its stdout is drained
}

func startTortureProc(t *testing.T, cfg tortureConfig, hist *history) *tortureProc {
	t.Helper()
	p := &tortureProc{ready: make(chan struct{}), done: make(chan struct{}), read: make(chan struct{})}
	p.proc = startChild(t, tortureRole, fmt.Sprintf("torture child p%d", cfg.Proc), cfg, fmt.Sprintf("%s/p%d.stderr", t.TempDir(), cfg.Proc))
	go func() {
		defer close(p.read)
		lines := bufio.NewScanner(p.proc.Stdout)
		lines.Buffer(make([]byte, 64<<10), 4<<20)
		for lines.Scan() {
			var ev tortureEvent
			if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
				hist.add(tortureEvent{Kind: evBad, Inv: invError, Lock: -1, Hard: true, From: time.Now().UnixNano(),
					Note: fmt.Sprintf("p%d wrote %q: %v", cfg.Proc, lines.Text(), err)})
				continue
			}
			switch ev.Kind {
			case evReady:
				close(p.ready)
			case evDone:
				close(p.done)
			default:
				hist.add(ev)
			}
		}
	}()
	t.Cleanup(func() {
		p.proc.Kill()
		<-p.read
	})
	return p
}

// await waits for one of the child's protocol events.
func (p *tortureProc) await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-p.read:
		select {
		case <-ch: // the event was the stream's last line
		default:
			t.Fatal(p.proc.Fail(fmt.Sprintf("waiting for %q", what), errors.New("its stdout ended")))
		}
	case <-time.After(tortureProcTimeout):
		t.Fatal(p.proc.Fail(fmt.Sprintf("waiting for %q", what), fmt.Errorf("nothing within %v", tortureProcTimeout)))
	}
}

// wait reaps the child, which must exit 0.
func (p *tortureProc) wait(t *testing.T) {
	t.Helper()
	<-p.read
	if err := p.proc.Wait(); err != nil {
		t.Fatal(err)
	}
}

// nodeClients opens one single-node client per address: the controller's
// CLIENT KILL and the quiescence scan must reach every node.
func nodeClients(t *testing.T, addrs []string) []rueidis.Client {
	t.Helper()
	var cs []rueidis.Client
	for _, addr := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		cs = append(cs, c)
	}
	return cs
}

// leftovers lists the keys (fencing counters aside: they must never go
// back, so they stay) and channels under prefix on every node.
func leftovers(ctx context.Context, admins []rueidis.Client, prefix string) ([]string, error) {
	var out []string
	for _, c := range admins {
		keys, err := scanKeys(ctx, c, prefix+":*")
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if !isFenceCounter(k) && !isLatchZero(ctx, c, k) {
				out = append(out, "key "+k)
			}
		}
		for _, cmd := range []rueidis.Completed{
			c.B().PubsubChannels().Pattern(prefix + ":*").Build(),
			c.B().PubsubShardchannels().Pattern(prefix + ":*").Build(),
		} {
			chs, err := c.Do(ctx, cmd).AsStrSlice()
			if err != nil {
				return nil, err
			}
			for _, ch := range chs {
				out = append(out, "channel "+ch)
			}
		}
	}
	return out, nil
}

// scanKeys is SCAN MATCH pattern to the end, on one node.
func scanKeys(ctx context.Context, c rueidis.Client, pattern string) ([]string, error) {
	var keys []string
	cursor := uint64(0)
	for i := 0; i < 100000; i++ { // a bound far above any key count here
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return keys, nil
		}
	}
	return nil, fmt.Errorf("SCAN %s did not end", pattern)
}

// awaitQuiet polls until nothing but fencing counters is left under prefix
// (there is no event to wait for: keys expire on the server), and returns
// what is still there after tortureQuiesce.
func awaitQuiet(t *testing.T, admins []rueidis.Client, prefix string) []string {
	t.Helper()
	deadline := time.Now().Add(tortureQuiesce)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		left, err := leftovers(ctx, admins, prefix)
		cancel()
		require.NoError(t, err)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond) // polling the server: no event to wait for
	}
}

// tortureCleanup deletes everything the run wrote: the checkers' keys and,
// on the lock servers, every key under the run's prefix, fences included.
func tortureCleanup(t *testing.T, cfg tortureConfig, store rueidis.Client, admins []rueidis.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range cfg.Locks {
		chk := newChecker(store, cfg.Prefix, name)
		require.NoError(t, chk.store.Delete(ctx))
		require.NoError(t, store.Do(ctx, store.B().Del().Key(chk.marker).Build()).Error())
	}
	for _, c := range admins {
		keys, err := scanKeys(ctx, c, cfg.Prefix+":*")
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, c.Do(ctx, c.B().Del().Key(k).Build()).Error())
		}
	}
}

// summarize is one line of what the run did.
func summarize(evs []tortureEvent, finals []int, took time.Duration) string {
	count := map[string]int{}
	for _, ev := range evs {
		switch ev.Kind {
		case evFault:
			count[ev.Fault]++
		case evHold:
			count["holds"]++
			if ev.LostAt != 0 {
				count["lost"]++
			}
		default:
			count[ev.Kind]++
		}
	}
	total := 0
	for _, f := range finals {
		total += f
	}
	keys := make([]string, 0, len(count))
	for k, n := range count {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(keys)
	return fmt.Sprintf("%v, %d increments; %s", took.Round(time.Millisecond), total, strings.Join(keys, " "))
}

func dumpHistory(t *testing.T, path string, evs []tortureEvent) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, ev := range evs {
		require.NoError(t, enc.Encode(ev))
	}
	t.Logf("history written to %s", path)
}
