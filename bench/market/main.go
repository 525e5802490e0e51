// Command market is the game-market simulation of Redis in Action §6.2
// ("distributed locking"), run against latchkey.
//
// Sellers list items from their inventories into the market: a sorted set
// of "<item>.<seller>" scored by price. Buyers buy listings: money goes
// from buyer to seller, the item from the market to the buyer's inventory.
// Each purchase variant makes that safe its own way:
//
//	watch          WATCH/MULTI/EXEC, retried when EXEC aborts      (table 6-1)
//	coarse-lock    the book's SETNX lock on the whole market       (table 6-2)
//	setnx-item     the book's SETNX lock on each item              (table 6-3)
//	latchkey-item  a latchkey lock on each item, pub/sub waits     (table 6-3)
//
// Each variant runs under the book's three loads (1 seller and 1 buyer, 5
// and 1, 5 and 5), on a flushed Redis, and every run ends with a check of
// the market's invariants (money conserved, every item in exactly one
// place, no purchase applied twice, no lock left behind).
//
// Usage:
//
//	cd bench && go run ./market [-addr 127.0.0.1:6379] [-dur 5s] [-variants all] [-json]
//
// Without -addr it starts a redis-server process on a free 127.0.0.1 port
// and kills it at exit. A Redis given with -addr is FLUSHALLed, so it must
// be on loopback. -json prints the results as a JSON array (the format of
// bench/results/market.json) instead of tables; progress goes to stderr.
// The exit status is 1 when any run had errors.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/rueidis"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, so that deferred clean-up (the Redis it
// started) runs. It returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("market", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	var variantsFlag string
	var asJSON bool
	fs.StringVar(&cfg.addr, "addr", "", "use this Redis (host:port on loopback; it is FLUSHALLed) instead of starting a redis-server")
	fs.DurationVar(&cfg.dur, "dur", defaultDur, "length of each run (the book used 60s)")
	fs.StringVar(&variantsFlag, "variants", "all", "comma-separated purchase variants to run: all, watch, coarse-lock, setnx-item, latchkey-item")
	fs.BoolVar(&asJSON, "json", false, "print the results as a JSON array instead of tables")
	fs.IntVar(&cfg.pickWindow, "pick", defaultPickWindow, "buyers buy a random one of this many cheapest listings")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	variants, err := parseVariants(variantsFlag)
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("%w: unexpected arguments %q", errConfig, fs.Args())
	}
	if err == nil && cfg.dur <= 0 {
		err = fmt.Errorf("%w: -dur must be positive", errConfig)
	}
	if err == nil && cfg.pickWindow < 1 {
		err = fmt.Errorf("%w: -pick must be at least 1", errConfig)
	}
	cfg.variants = variants
	if err == nil {
		cfg, err = cfg.withDefaults()
	}
	if err != nil {
		fmt.Fprintln(stderr, "market:", err)
		fs.Usage()
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr, closeRedis, err := getRedis(ctx, cfg.addr)
	if err != nil {
		fmt.Fprintln(stderr, "market:", err)
		return 1
	}
	defer closeRedis(stderr)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		fmt.Fprintf(stderr, "market: connecting to Redis at %s: %v\n", addr, err)
		return 1
	}
	defer rc.Close()

	fmt.Fprintf(stderr, "market: Redis at %s, %v per run, %d variants × %d loads\n", addr, cfg.dur, len(cfg.variants), len(cfg.loads))
	results, err := runAll(ctx, rc, cfg, func(r result) {
		fmt.Fprintf(stderr, "market: %-13s %-19s listed %d, bought %d, retries %d, errors %d\n",
			r.Variant, load{r.Sellers, r.Buyers}, r.Listed, r.Bought, r.Retries, r.Errors)
	})
	if err != nil {
		fmt.Fprintln(stderr, "market:", err)
		return 1
	}
	if asJSON {
		if err := writeJSON(stdout, results); err != nil {
			fmt.Fprintln(stderr, "market: writing JSON:", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "Market simulation (Redis in Action §6.2), %v per run, buyers pick 1 of the %d cheapest listings\n", cfg.dur, cfg.pickWindow)
		writeTables(stdout, cfg.variants, results)
	}
	for _, r := range results {
		if r.Errors > 0 {
			fmt.Fprintln(stderr, "market: some runs had errors or broke invariants (see above)")
			return 1
		}
	}
	return 0
}

// runAll runs every variant under every load, in order, and calls done
// after each run.
func runAll(ctx context.Context, rc rueidis.Client, cfg config, done func(result)) ([]result, error) {
	var results []result
	for _, name := range cfg.variants {
		v, _ := variantByName(name)
		for _, l := range cfg.loads {
			r, err := runOnce(ctx, rc, cfg, v, l)
			if err != nil {
				return results, fmt.Errorf("%s with %v: %w", v.name, l, err)
			}
			done(r)
			results = append(results, r)
		}
	}
	return results, nil
}

// getRedis returns the address of the Redis to use and how to let go of it.
func getRedis(ctx context.Context, addr string) (string, func(io.Writer), error) {
	if addr != "" {
		return addr, func(io.Writer) {}, checkLoopback(addr)
	}
	srv, err := startRedis(ctx)
	if err != nil {
		return "", nil, err
	}
	return srv.addr, func(stderr io.Writer) {
		if err := srv.close(); err != nil {
			fmt.Fprintln(stderr, "market: stopping redis-server:", err)
		}
	}, nil
}
