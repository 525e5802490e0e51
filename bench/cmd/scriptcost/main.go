// Command scriptcost measures what Redis spends on one uncontended lock and
// unlock, script by script: latchkey's acquire and release scripts, and
// stripped-down pairs that each drop one of latchkey's features, down to the
// SET NX PX / GET+DEL pair the simplest Redis locks use. It is the
// measurement behind docs/benchmarks.md's account of where latchkey's Redis
// CPU per acquisition goes in scenarios (a) and (b).
//
// Usage:
//
//	scriptcost [-addr host:port] [-g 32] [-dur 2s] [-reps 5]
//
// Each of g goroutines locks and unlocks a key of its own in a loop, over
// one rueidis client (whose pipelining batches their calls, as in lockbench's
// scenario b). The variants run interleaved, reps times, each run preceded
// by FLUSHALL and CONFIG RESETSTAT; the report gives, per variant, the
// median and range of Redis CPU per cycle (INFO cpu, all threads) and of
// the time inside the scripts per cycle (commandstats' usec of EVALSHA),
// and cycles per second. Without -addr it starts a redis-server process on
// 127.0.0.1, as lockbench does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/latency"
	"github.com/latchkey/latchkey/internal/luascripts"
	"github.com/latchkey/latchkey/internal/redisinfo"
	"github.com/latchkey/latchkey/internal/redistest"
)

// variant is one lock+unlock implementation: cycle takes and releases key
// i's lock once, as owner number n.
type variant struct {
	name  string
	what  string
	cycle func(ctx context.Context, rc rueidis.Client, i, n int) error
}

// about is a holder description as long as a typical client's
// (rlock.ClientInfo as JSON).
const about = `{"id":"0b3c1f0e-8e7a-4c57-9f7e-2a1d5c6b7e80","name":"billing-worker","host":"worker-17.example.internal","pid":123456}`

// clientID is a client id as long as latchkey's (a UUID).
const clientID = "0b6c2a1e-5d1f-4c3e-9a8b-7f6e5d4c3b2a"

var (
	// The stripped pairs. Each keeps latchkey's key names and owner ids,
	// so that only the scripts differ.
	hashFenceAcq = luascripts.New("hash-fence-acquire", `if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}`)
	hashAcq = luascripts.New("hash-acquire", `if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, 0}
end
return {0, redis.call('pttl', KEYS[1])}`)
	hashRel = luascripts.New("hash-release", `if tonumber(redis.call('hget', KEYS[1], ARGV[1])) ~= 1 then
  return {-1, 0}
end
redis.call('del', KEYS[1])
return {0, 0}`)
	// The wide pair runs hash+fence's logic over latchkey's key and argument
	// lists, with a two-key EXISTS (as the acquire's of lock and queue) and the
	// release's ZPOPMIN:
	// what the queue costs a lock that nobody waits for.
	wideAcq = luascripts.New("wide-acquire", `if redis.call('exists', KEYS[1], KEYS[3]) == 0 then
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, 1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}`)
	wideRel = luascripts.New("wide-release", `if tonumber(redis.call('hget', KEYS[1], ARGV[1])) ~= 1 then
  return {-1, 0}
end
redis.call('del', KEYS[1])
redis.call('zpopmin', KEYS[4])
return {0, 0}`)
	// The lean pair is a redesign measured and not adopted: the reservation
	// kept as a field of the lock hash (so a plain try needs no reservation
	// key), the channel's name built in Lua, and each script with only the
	// prelude function it uses: 3 KEYS per call instead of 4 and 5.
	leanAcq = luascripts.New("lean-acquire", `local lock, fence, queue = KEYS[1], KEYS[2], KEYS[3]
local owner, lease, client, waiter = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local pttl = -2
if redis.call('exists', lock) == 1 then
  if redis.call('hget', lock, '!r') == client then
    redis.call('del', lock)
  else
    pttl = redis.call('pttl', lock)
  end
end
if pttl == -2 then
  redis.call('hset', lock, owner, 1)
  redis.call('pexpire', lock, lease)
  if waiter then
    redis.call('zrem', queue, client)
  end
  return {1, 1, redis.call('incr', fence)}
end
if waiter then
  local now = redis.call('time')
  redis.call('zadd', queue, 'NX', now[1] * 1000000 + now[2], client)
end
return {0, pttl}`)
	leanRel = luascripts.New("lean-release", `local lock, fence, queue = KEYS[1], KEYS[2], KEYS[3]
local owner, n, heir = ARGV[1], tonumber(ARGV[2]), ARGV[5] or ''
if tonumber(redis.call('hget', lock, owner)) ~= n then
  return {-1, 0}
end
if n > 1 then
  return {redis.call('hincrby', lock, owner, -1), 0}
end
redis.call('del', lock)
if heir ~= '' then
  redis.call('hset', lock, heir, 1)
  redis.call('pexpire', lock, tonumber(ARGV[6]))
  return {-3, redis.call('incr', fence)}
end
local publish = 'publish'
if string.sub(ARGV[3], 1, 1) == 's' then
  publish = 'spublish'
end
local window = tonumber(string.sub(ARGV[3], 2))
while true do
  local head = redis.call('zpopmin', queue)
  if head[1] == nil then
    return {0, 0}
  end
  if redis.call(publish, lock .. ':ch:' .. head[1], 'unlock') > 0 then
    if window > 0 then
      redis.call('hset', lock, '!r', head[1])
      redis.call('pexpire', lock, window)
    end
    return {0, 0}
  end
end`)
	stringAcq = luascripts.New("string-acquire", `if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
return {0}`)
	stringRel = luascripts.New("string-release", `if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)

	// The floor pairs run nothing: noop what two script calls with
	// latchkey's KEYS and ARGV cost, prelude what defining latchkey's Lua
	// library (clock, record and queue helpers) adds to each call.
	noopAcq    = luascripts.New("noop-acquire", "return {1, 1}")
	noopRel    = luascripts.New("noop-release", "return {0, 0}")
	preludeAcq = luascripts.New("prelude-acquire", preludeOf(luascripts.Acquire.Source(), "-- acquire:")+"return {1, 1}")
	preludeRel = luascripts.New("prelude-release", preludeOf(luascripts.Release.Source(), "-- release:")+"return {0, 0}")
)

// preludeOf is src up to its script's own header, marker: the library
// code it was linked with.
func preludeOf(src, marker string) string {
	i := strings.Index(src, marker)
	if i < 0 {
		panic("scriptcost: no " + marker + " in the script's source")
	}
	return src[:i]
}

// lease is every variant's lease, in ms.
const lease = "10000"

func keysOf(i int) luascripts.Keys {
	return luascripts.NewKeys("latchkey:{scriptcost:" + strconv.Itoa(i) + "}")
}

func owner(n int) string { return clientID + ":" + strconv.Itoa(n) }

// errRefused reports a variant that found its own key held: a bug here.
var errRefused = errors.New("scriptcost: refused a free lock")

func pair(acq, rel *luascripts.Script, fence bool) func(context.Context, rueidis.Client, int, int) error {
	return func(ctx context.Context, rc rueidis.Client, i, n int) error {
		k, o := keysOf(i), owner(n)
		keys := []string{k.Lock}
		if fence {
			keys = append(keys, k.Fence)
		}
		v, err := acq.Exec(ctx, rc, keys, []string{o, lease}).AsIntSlice()
		if err != nil {
			return err
		}
		if v[0] != 1 {
			return errRefused
		}
		return rel.Exec(ctx, rc, []string{k.Lock}, []string{o}).Error()
	}
}

var variants = []variant{
	{"latchkey", "acquire.lua + release.lua: hash {owner: count}, fencing INCR, wait queue with wake windows, holder record in the hash",
		func(ctx context.Context, rc rueidis.Client, i, n int) error {
			k, o := keysOf(i), owner(n)
			r, err := k.Acquire(ctx, rc, luascripts.AcquireArgs{Owner: o, Lease: 10 * time.Second, Client: clientID, About: about})
			if err != nil {
				return err
			}
			if !r.Acquired {
				return errRefused
			}
			_, err = k.Release(ctx, rc, luascripts.ReleaseArgs{Owner: o, Count: 1, Wake: luascripts.Wake{Window: 50 * time.Millisecond}})
			return err
		}},
	{"wide", "hash+fence with latchkey's KEYS and ARGV, a two-key EXISTS and the release's ZPOPMIN; no queue logic",
		func(ctx context.Context, rc rueidis.Client, i, n int) error {
			k, o := keysOf(i), owner(n)
			v, err := wideAcq.Exec(ctx, rc, k.AcquireKeys(), []string{o, lease, clientID, "0"}).AsIntSlice()
			if err != nil {
				return err
			}
			if v[0] != 1 {
				return errRefused
			}
			return wideRel.Exec(ctx, rc, []string{k.Lock, k.Channel, k.Fence, k.Queue}, []string{o, "1", "p50", "0"}).Error()
		}},
	{"lean", "a redesign not adopted: the reservation in the lock hash, 3 KEYS per call (see leanAcq)",
		func(ctx context.Context, rc rueidis.Client, i, n int) error {
			k, o := keysOf(i), owner(n)
			keys := []string{k.Lock, k.Fence, k.Queue}
			v, err := leanAcq.Exec(ctx, rc, keys, []string{o, lease, clientID, "0"}).AsIntSlice()
			if err != nil {
				return err
			}
			if v[0] != 1 {
				return errRefused
			}
			return leanRel.Exec(ctx, rc, keys, []string{o, "1", "p50", "0"}).Error()
		}},
	{"h+f+args", "hash+fence with one more key and two more short arguments per call: what width costs",
		func(ctx context.Context, rc rueidis.Client, i, n int) error {
			k, o := keysOf(i), owner(n)
			v, err := hashFenceAcq.Exec(ctx, rc, []string{k.Lock, k.Fence, k.Queue}, []string{o, lease, "c", "0"}).AsIntSlice()
			if err != nil {
				return err
			}
			if v[0] != 1 {
				return errRefused
			}
			return hashRel.Exec(ctx, rc, []string{k.Lock, k.Queue}, []string{o, "p50", "0"}).Error()
		}},
	{"hash+fence", "hash and fencing INCR; no queue, no reservation", pair(hashFenceAcq, hashRel, true)},
	{"hash", "hash only: EXISTS, HSET, PEXPIRE; HGET, DEL", pair(hashAcq, hashRel, false)},
	{"string", "SET NX PX; GET, DEL (the simplest Redis lock, as scripts)", pair(stringAcq, stringRel, false)},
	{"prelude", "no-op scripts after latchkey's Lua library, with latchkey's KEYS and ARGV", floor(preludeAcq, preludeRel)},
	{"noop", "no-op scripts with latchkey's KEYS and ARGV: the floor of two script calls", floor(noopAcq, noopRel)},
}

// floor runs acq and rel, which do nothing, with the latchkey pair's KEYS
// and ARGV.
func floor(acq, rel *luascripts.Script) func(context.Context, rueidis.Client, int, int) error {
	return func(ctx context.Context, rc rueidis.Client, i, n int) error {
		k, o := keysOf(i), owner(n)
		a := luascripts.AcquireArgs{Owner: o, Lease: 10 * time.Second, Client: clientID, About: about}
		if err := acq.Exec(ctx, rc, k.AcquireKeys(), k.AcquireArgv(a)).Error(); err != nil {
			return err
		}
		return rel.Exec(ctx, rc, []string{k.Lock, k.Channel, k.Fence, k.Queue}, []string{o, "1", "p50", "0"}).Error()
	}
}

type config struct {
	addr string
	g    int
	dur  time.Duration
	reps int
}

func main() {
	signal.Ignore(os.Interrupt) // the deferred shutdown of redis-server must run
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "", "use this Redis (loopback only; it is FLUSHALLed) instead of starting a redis-server process")
	flag.IntVar(&cfg.g, "g", 32, "goroutines, each on a key of its own")
	flag.DurationVar(&cfg.dur, "dur", 2*time.Second, "duration of each run")
	flag.IntVar(&cfg.reps, "reps", 5, "repetitions; the report gives medians and ranges")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	if cfg.g < 1 || cfg.reps < 1 || cfg.dur <= 0 {
		return fmt.Errorf("need -g >= 1, -reps >= 1 and a positive -dur")
	}
	addr := cfg.addr
	if addr == "" {
		srv, err := redistest.StartProcess(ctx)
		if err != nil {
			return fmt.Errorf("starting redis-server: %w", err)
		}
		defer func() { err = errors.Join(err, srv.Close()) }()
		addr = srv.Addr
	} else if !strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasPrefix(addr, "localhost:") {
		return fmt.Errorf("-addr %q: only a Redis on 127.0.0.1 or localhost (it is flushed)", addr)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rc.Close()

	type figures struct{ cpu, script, rate []float64 }
	got := make([]figures, len(variants))
	for range cfg.reps {
		for i, v := range variants {
			cpu, script, rate, err := measure(ctx, rc, cfg, v)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			got[i].cpu = append(got[i].cpu, cpu)
			got[i].script = append(got[i].script, script)
			got[i].rate = append(got[i].rate, rate)
		}
	}
	fmt.Fprintf(out, "%d goroutines on keys of their own, %d × %v per variant, interleaved; median (min–max)\n", cfg.g, cfg.reps, cfg.dur)
	fmt.Fprintf(out, "%-11s  %-24s  %-24s  %-22s  %s\n", "variant", "Redis CPU µs/cycle", "in scripts µs/cycle", "cycles/s", "what")
	for i, v := range variants {
		fmt.Fprintf(out, "%-11s  %-24s  %-24s  %-22s  %s\n", v.name, spread(got[i].cpu, 1), spread(got[i].script, 1), spread(got[i].rate, 0), v.what)
	}
	return nil
}

// spread prints the median and range of xs.
func spread(xs []float64, prec int) string {
	lo, hi := latency.MinMax(xs)
	return fmt.Sprintf("%.*f (%.*f–%.*f)", prec, latency.Median(xs), prec, lo, prec, hi)
}

// measure runs v with cfg.g goroutines for cfg.dur and returns Redis CPU and
// script time per cycle (µs) and cycles per second.
func measure(ctx context.Context, rc rueidis.Client, cfg config, v variant) (cpuUS, scriptUS, rate float64, err error) {
	if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil {
		return 0, 0, 0, err
	}
	if err := rc.Do(ctx, rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return 0, 0, 0, err
	}
	cpu0, err := redisinfo.CPU(ctx, rc)
	if err != nil {
		return 0, 0, 0, err
	}
	end := time.Now().Add(cfg.dur)
	counts := make([]int, cfg.g)
	errs := make([]error, cfg.g)
	var wg sync.WaitGroup
	for i := range cfg.g {
		wg.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				if errs[i] = v.cycle(ctx, rc, i, n); errs[i] != nil {
					return
				}
				counts[i]++
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	cpu1, err := redisinfo.CPU(ctx, rc)
	if err != nil {
		return 0, 0, 0, err
	}
	info, err := redisinfo.Get(ctx, rc, "commandstats")
	if err != nil {
		return 0, 0, 0, err
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0, 0, 0, errors.New("no cycle completed")
	}
	return (cpu1 - cpu0) * 1e6 / float64(n), evalshaUS(info) / float64(n), float64(n) / cfg.dur.Seconds(), nil
}

// evalshaUS is the usec field of EVALSHA in an INFO commandstats reply: the
// time Redis spent running the scripts, their inner commands included.
func evalshaUS(info map[string]string) float64 {
	for field := range strings.SplitSeq(info["cmdstat_evalsha"], ",") {
		if v, ok := strings.CutPrefix(field, "usec="); ok {
			us, _ := strconv.ParseFloat(v, 64)
			return us
		}
	}
	return 0
}
