package main

import (
	"fmt"

	"github.com/latchkey/latchkey/rlock"
)

// variant is one way of keeping purchases (and, for the lock variants,
// listings) correct under concurrency.
type variant struct {
	name  string
	table string // the book's table this variant's rows belong to
	about string
	// lockName is the lock that guards the listing or purchase of member;
	// nil for the WATCH variant, which takes no lock.
	lockName func(member string) string
	// newGuard makes the variant's lock for one run; free releases it.
	newGuard func(s *sim) (g guard, free func(), err error)
}

// variants, in the order the book presents them.
var variants = []variant{
	{
		name: "watch", table: "6-1",
		about: "WATCH market: and the buyer's hash, check, MULTI/EXEC; a nil EXEC is a retry",
	},
	{
		name: "coarse-lock", table: "6-2",
		about:    "the seed's SETNX lock on the whole market, taken by sellers and buyers alike",
		lockName: func(string) string { return "market" },
		newGuard: newSetnx,
	},
	{
		name: "setnx-item", table: "6-3",
		about:    "the seed's SETNX lock on each listed item",
		lockName: itemLock,
		newGuard: newSetnx,
	},
	{
		name: "latchkey-item", table: "6-3",
		about:    "a latchkey lock on each listed item, waiting on pub/sub",
		lockName: itemLock,
		newGuard: newLatchkey,
	},
}

// itemLock names the fine-grained lock of one listing ("lock:" or
// "latchkey:{…}" is put in front by the lock itself).
func itemLock(member string) string { return marketKey + member }

func variantNames() []string {
	names := make([]string, len(variants))
	for i, v := range variants {
		names[i] = v.name
	}
	return names
}

func variantByName(name string) (variant, bool) {
	for _, v := range variants {
		if v.name == name {
			return v, true
		}
	}
	return variant{}, false
}

func newSetnx(s *sim) (guard, func(), error) {
	return setnxGuard{timeout: s.cfg.acquireTimeout, sleep: s.cfg.retrySleep}, func() {}, nil
}

// newLatchkey makes one rlock.Client for the run. Every acquire attempt
// that fails is a buyer's retry: a seller locks a listing before its ZADD,
// so no buyer can know the name yet and the seller's single attempt always
// succeeds; the failures all come from buyers.
func newLatchkey(s *sim) (guard, func(), error) {
	locks, err := rlock.NewClient(s.rc, rlock.Options{
		OnAttempt: func(_ string, acquired bool) {
			if !acquired {
				s.retries.Add(1)
			}
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the latchkey client: %w", err)
	}
	return latchkeyGuard{locks: locks, wait: s.cfg.acquireTimeout, lease: s.cfg.lease}, func() { locks.Close() }, nil
}
