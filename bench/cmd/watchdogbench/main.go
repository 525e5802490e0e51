// Command watchdogbench holds many watchdog locks in one latchkey client
// beside CPU-burning processes and checks that the watchdog keeps every one
// of them (issue 21, defect 12): no lock context may end, every renewal must
// be confirmed before its local deadline. Per renewal tick it reports Redis'
// CPU (INFO cpu), this process's CPU (getrusage) and the tick's duration
// (watchdog.Stats.LastTick).
//
//	go run ./cmd/watchdogbench -n 1000000 -ticks 3
//
// It starts redis-server on 127.0.0.1 (or uses a loopback -addr, which it
// flushes) and two copies of itself that spin (-burners). It exits 1 when a
// lock was lost or a tick did not renew every lock in time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/bench/internal/benchredis"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

// burnEnv, set in a child's environment, makes the child spin forever.
const burnEnv = "WATCHDOGBENCH_BURN"

// poll is how often the watchdog's tick count is read: short against any
// interval, and cheap (one mutex).
const poll = 10 * time.Millisecond

type options struct {
	n, ticks, burners, lockers, batch int
	timeout, interval                 time.Duration
	addr, cpuprofile                  string
}

func main() {
	if os.Getenv(burnEnv) != "" {
		burn()
	}
	var o options
	flag.IntVar(&o.n, "n", 1_000_000, "watchdog locks to hold")
	flag.IntVar(&o.ticks, "ticks", 3, "renewal ticks to measure once every lock is held")
	flag.IntVar(&o.burners, "burners", 2, "CPU-burning processes to run beside the benchmark")
	flag.IntVar(&o.lockers, "lockers", 256, "goroutines taking the locks")
	flag.IntVar(&o.batch, "batch", watchdog.DefaultBatchSize, "RenewBatchSize: locks per renew call")
	flag.DurationVar(&o.timeout, "timeout", watchdog.DefaultTimeout, "WatchdogTimeout")
	flag.DurationVar(&o.interval, "interval", 0, "WatchdogInterval (default timeout/3)")
	flag.StringVar(&o.addr, "addr", "", "a loopback Redis to use (flushed) instead of starting redis-server")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write this process's CPU profile over the measured ticks to this file")
	flag.Parse()
	if o.interval == 0 {
		o.interval = o.timeout / 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "watchdogbench:", err)
		os.Exit(1)
	}
}

// burn is a burning child: one thread kept busy until it is killed.
func burn() {
	for x := uint64(1); ; x = x*6364136223846793005 + 1 {
		_ = x
	}
}

// startBurners starts n copies of this program that spin, and returns how
// to kill them.
func startBurners(n int) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var cmds []*exec.Cmd
	kill := func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command(self)
		c.Env = append(os.Environ(), burnEnv+"=1")
		c.SysProcAttr = dieWithParent()
		if err := c.Start(); err != nil {
			kill()
			return nil, fmt.Errorf("starting a burner: %w", err)
		}
		cmds = append(cmds, c)
	}
	return kill, nil
}

// tickRow is one measured tick.
type tickRow struct {
	took                         time.Duration
	renewed, lost, late, errs    uint64
	calls                        uint64
	redisCPU, clientCPU, elapsed time.Duration
}

func run(ctx context.Context, o options) (err error) {
	addr, desc, closeRedis, err := benchredis.Get(ctx, o.addr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeRedis()) }()
	admin, err := benchredis.Connect(addr)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := benchredis.Flush(ctx, admin); err != nil {
		return err
	}
	rc, err := benchredis.Connect(addr)
	if err != nil {
		return err
	}
	defer rc.Close()
	c, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: o.timeout, WatchdogInterval: o.interval, RenewBatchSize: o.batch})
	if err != nil {
		return err
	}
	defer c.Close()

	killBurners, err := startBurners(o.burners)
	if err != nil {
		return err
	}
	defer killBurners()
	fmt.Printf("watchdogbench: %s; %d burning processes; %d CPUs; watchdog timeout %v, interval %v, %d locks per call\n",
		desc, o.burners, runtime.NumCPU(), o.timeout, o.interval, o.batch)

	start := time.Now()
	lctxs, err := acquire(ctx, c, o.n, o.lockers)
	if err != nil {
		return err
	}
	fmt.Printf("took %d locks in %v with %d goroutines\n", o.n, time.Since(start).Round(time.Millisecond), o.lockers)

	stopProfile, err := startProfile(o.cpuprofile)
	if err != nil {
		return err
	}
	rows, err := measure(ctx, c, admin, o)
	stopProfile()
	if err != nil {
		return err
	}
	lost := 0
	for _, l := range lctxs {
		if l.Err() != nil {
			lost++
		}
	}
	return report(ctx, c, admin, o, rows, lost)
}

// startProfile starts a CPU profile into path ("": none) and returns how
// to stop it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// acquire takes locks 0..n-1 with g goroutines and returns their contexts.
func acquire(ctx context.Context, c *rlock.Client, n, g int) ([]context.Context, error) {
	out := make([]context.Context, n)
	errs := make([]error, g)
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += g {
				lctx, err := c.Mutex("wdbench:" + strconv.Itoa(i)).Lock(ctx)
				if err != nil {
					errs[w] = fmt.Errorf("lock %d: %w", i, err)
					return
				}
				out[i] = lctx
				if d := done.Add(1); d%(max(int64(n)/10, 1)) == 0 {
					fmt.Printf("  %d locks held\n", d)
				}
			}
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// measure waits for a tick to end with every lock held, then reads each
// of the next o.ticks ticks from the end of the one before.
func measure(ctx context.Context, c *rlock.Client, admin rueidis.Client, o options) ([]tickRow, error) {
	prev, err := nextTick(ctx, c, c.WatchdogStats().Ticks, o.interval)
	if err != nil {
		return nil, err
	}
	redis0, err := redisinfo.CPU(ctx, admin)
	if err != nil {
		return nil, err
	}
	client0, at0 := clientCPU(), time.Now()
	var rows []tickRow
	for range o.ticks {
		st, err := nextTick(ctx, c, prev.Ticks, o.interval)
		if err != nil {
			return rows, err
		}
		redis1, err := redisinfo.CPU(ctx, admin)
		if err != nil {
			return rows, err
		}
		client1, at1 := clientCPU(), time.Now()
		rows = append(rows, tickRow{
			took: st.LastTick, renewed: st.Renewed - prev.Renewed, lost: st.Lost - prev.Lost,
			late: st.Late - prev.Late, errs: st.Errors - prev.Errors, calls: st.Calls - prev.Calls,
			redisCPU:  time.Duration((redis1 - redis0) * float64(time.Second)),
			clientCPU: client1 - client0, elapsed: at1.Sub(at0),
		})
		r := rows[len(rows)-1]
		fmt.Printf("tick %d: took %v, renewed %d, lost %d, late %d, failed calls %d, Redis CPU %v, client CPU %v (over %v)\n",
			len(rows), r.took.Round(time.Millisecond), r.renewed, r.lost, r.late, r.errs,
			r.redisCPU.Round(time.Millisecond), r.clientCPU.Round(time.Millisecond), r.elapsed.Round(time.Millisecond))
		prev, redis0, client0, at0 = st, redis1, client1, at1
	}
	return rows, nil
}

// ErrNoTick reports a watchdog that did not end a tick in two intervals.
var ErrNoTick = errors.New("no tick ended")

// nextTick polls the watchdog's stats until a tick after tick number from
// has ended.
func nextTick(ctx context.Context, c *rlock.Client, from uint64, interval time.Duration) (watchdog.Stats, error) {
	limit := time.Now().Add(3 * interval)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		st := c.WatchdogStats()
		if st.Ticks > from {
			return st, nil
		}
		if time.Now().After(limit) {
			return st, fmt.Errorf("%w within %v", ErrNoTick, 3*interval)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-t.C:
		}
	}
}

// clientCPU is this process's user and system CPU so far: the client's
// goroutines, the Go runtime's and the benchmark's own polling.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ErrLost reports a run in which the watchdog did not keep every lock.
var ErrLost = errors.New("the watchdog did not keep every lock")

func report(ctx context.Context, c *rlock.Client, admin rueidis.Client, o options, rows []tickRow, lost int) error {
	st := c.WatchdogStats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mem, err := redisinfo.Get(ctx, admin, "memory")
	if err != nil {
		return err
	}
	durs := make([]time.Duration, len(rows))
	rcpu := make([]time.Duration, len(rows))
	ccpu := make([]time.Duration, len(rows))
	// Late counts renewals whose reply came after the lease's local
	// deadline; Lost, leases given up. Both zero and no context ended:
	// every renewal was confirmed in time, since the start.
	ok := lost == 0 && st.Lost == 0 && st.Late == 0
	for i, r := range rows {
		durs[i], rcpu[i], ccpu[i] = r.took, r.redisCPU, r.clientCPU
	}
	fmt.Printf("\nN %d, %d ticks measured (interval %v)\n", o.n, len(rows), o.interval)
	fmt.Printf("false losses: %d lock contexts ended; watchdog lost %d, late %d, failed calls %d, catch-ups %d\n", lost, st.Lost, st.Late, st.Errors, st.CatchUps)
	fmt.Printf("tick duration: median %v, min-max %v\n", median(durs), span(durs))
	fmt.Printf("Redis CPU/tick: median %v, min-max %v\n", median(rcpu), span(rcpu))
	fmt.Printf("client CPU/tick: median %v, min-max %v\n", median(ccpu), span(ccpu))
	fmt.Printf("largest tick: %v (measured ticks), %v (every tick since the start, taking the locks included)\n",
		slices.Max(durs).Round(time.Millisecond), st.MaxTick.Round(time.Millisecond))
	fmt.Printf("memory: client heap %d MB (Go runtime total %d MB), Redis used_memory %s\n",
		ms.HeapAlloc>>20, ms.Sys>>20, mem["used_memory_human"])
	if !ok {
		return fmt.Errorf("%w: see above", ErrLost)
	}
	fmt.Println("every renewal confirmed before its local deadline: yes")
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

func span(ds []time.Duration) string {
	return fmt.Sprintf("%v-%v", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}
