// Command lockbench measures Redis lock libraries side by side: latchkey's
// pub/sub Mutex and its SpinMutex, redsync, bsm/redislock and rueidislock.
//
// Every library gets the same lease and the same per-acquire deadline, and
// runs the same loop: Lock, hold for the critical section, Unlock. The
// libraries run interleaved against one Redis, the order rotating from one
// repetition to the next (A B C, B C A, C A B, ...), each run preceded by
// FLUSHALL and CONFIG RESETSTAT, and the report gives the median of each
// figure over the repetitions with its range.
//
// Usage:
//
//	lockbench [-addr host:port] [-procs 1] [-g 1] [-keys 1] [-cs 0] [-dur 2s] [-reps 5] [-libs ...] [-backoff d] [-json] [-out file]
//	lockbench -suite [-dur 2s] [-reps 5] [-sweep 2ms,8ms,32ms,128ms] [-sweepdur 2s] [-idledur 4s] [-fleet 4,16,64] [-fleetdur 2s] [-fleetreps 1] [-scenarios a,b,c,d,e,f,g,watchdog] [-out results/lockbench.json]
//	lockbench -watchdog
//
// The suite runs scenarios a–e with every library at its default retry
// setting; in c, d and e the polling libraries (latchkey-spin, redsync,
// redislock) also run at each -sweep setting, interleaved with the
// defaults, for the spin frontier. Scenario f, idle waiting, measures
// Redis' load while every waiter is blocked behind a 2s hold (idle.go).
// Scenario g, the fleet, has one lock taken in turn by -fleet processes of
// one goroutine each, critical section 5ms, and adds tries and
// SUBSCRIBE/UNSUBSCRIBE calls per acquisition to the figures (fleet.go).
//
// Without -addr it starts a redis-server process on a free 127.0.0.1 port
// (--save "" --appendonly no) and kills it at the end. A Redis given with
// -addr must be on loopback, and is flushed: never point it at data you keep.
//
// -procs P re-executes this binary as P worker processes. Each connects,
// warms up (one lock and unlock per goroutine on a key of its own), says it
// is ready on stdout, and waits for a start instant on stdin; the parent
// gives all of them the same one. Each runs g goroutines until start+dur and
// reports its results as one JSON object on stdout.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchkey/latchkey/internal/childproc"
)

func main() {
	if childproc.Role() == workerRole {
		os.Exit(workerMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run is the whole tool without os.Exit, so that its deferred clean-up (the
// Redis it started, its workers) always runs.
func run(ctx context.Context, args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 2
	}
	if err := execute(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	return 0
}
