package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Defaults for config's zero values.
const (
	// defaultDur is one run. The book ran each load for 60 s.
	defaultDur = 5 * time.Second
	// defaultPickWindow: a buyer buys a random one of the cheapest this many
	// listings, so that several buyers do not all chase the same item.
	defaultPickWindow = 10
	// defaultRestock is how many new items a seller adds to its inventory
	// whenever it has listed everything, so that it never runs out.
	defaultRestock = 1000
	// defaultBuyerFunds is each buyer's starting money: at most
	// defaultMaxPrice per purchase, no buyer can spend it in any sane run,
	// so funds never block a purchase and need no refill.
	defaultBuyerFunds = int64(1) << 40
	// defaultMaxPrice bounds item prices, which run from 1 to it.
	defaultMaxPrice = 100
	// defaultAcquireTimeout is how long a purchase or listing waits for its
	// lock before it fails (the seed's acquire timeout, 10 000 ms).
	defaultAcquireTimeout = 10 * time.Second
	// defaultRetrySleep is the pause between failed SETNX tries (the book's
	// Python sleeps 1 ms; the seed's Java port sleeps 1 s, see README).
	defaultRetrySleep = time.Millisecond
	// defaultLease is the latchkey lock's fixed lease, far longer than any
	// purchase, so it only matters if a buyer hangs.
	defaultLease = 10 * time.Second
)

// load is one row of the book's tables: how many sellers and buyers run
// at once.
type load struct{ sellers, buyers int }

func (l load) String() string {
	return fmt.Sprintf("%d %s, %d %s", l.sellers, plural(l.sellers, "seller"), l.buyers, plural(l.buyers, "buyer"))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// defaultLoads are the book's three loads: 1/1, 5/1 and 5/5.
var defaultLoads = []load{{1, 1}, {5, 1}, {5, 5}}

// config is one invocation of the simulation. The zero value of every
// field but addr means its default.
type config struct {
	// addr is an existing Redis to use (it is FLUSHALLed, so it must be on
	// loopback); empty starts a throw-away redis-server.
	addr string
	// dur is the length of each run.
	dur time.Duration
	// variants are the names of the purchase variants to run, in order.
	// Default: all of them.
	variants []string
	// loads to run each variant under. Default defaultLoads.
	loads []load

	pickWindow     int
	restock        int
	buyerFunds     int64
	maxPrice       int
	acquireTimeout time.Duration
	retrySleep     time.Duration
	lease          time.Duration
}

func (c config) withDefaults() (config, error) {
	if c.dur == 0 {
		c.dur = defaultDur
	}
	if len(c.variants) == 0 {
		c.variants = variantNames()
	}
	if len(c.loads) == 0 {
		c.loads = defaultLoads
	}
	c.pickWindow = orDefault(c.pickWindow, defaultPickWindow)
	c.restock = orDefault(c.restock, defaultRestock)
	c.buyerFunds = orDefault(c.buyerFunds, defaultBuyerFunds)
	c.maxPrice = orDefault(c.maxPrice, defaultMaxPrice)
	c.acquireTimeout = orDefault(c.acquireTimeout, defaultAcquireTimeout)
	c.retrySleep = orDefault(c.retrySleep, defaultRetrySleep)
	c.lease = orDefault(c.lease, defaultLease)

	for _, v := range c.variants {
		if _, ok := variantByName(v); !ok {
			return c, fmt.Errorf("%w: unknown variant %q; choose from %s", errConfig, v, strings.Join(variantNames(), ", "))
		}
	}
	for _, l := range c.loads {
		if l.sellers < 1 || l.buyers < 1 {
			return c, fmt.Errorf("%w: load %d/%d needs at least one seller and one buyer", errConfig, l.sellers, l.buyers)
		}
	}
	switch {
	case c.dur < 0 || c.pickWindow < 0 || c.restock < 0 || c.buyerFunds < 0 || c.maxPrice < 0:
		return c, fmt.Errorf("%w: durations, counts and money must not be negative", errConfig)
	case c.acquireTimeout < 0 || c.retrySleep < 0 || c.lease < time.Millisecond:
		return c, fmt.Errorf("%w: need acquire timeout >= 0, retry sleep >= 0 and lease >= 1ms", errConfig)
	}
	return c, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// parseVariants reads the -variants flag: "all" or a comma-separated list.
func parseVariants(s string) ([]string, error) {
	if s == "" || s == "all" {
		return variantNames(), nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if _, ok := variantByName(v); !ok {
			return nil, fmt.Errorf("%w: unknown variant %q in -variants; choose from all, %s", errConfig, v, strings.Join(variantNames(), ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
