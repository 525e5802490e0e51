package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
)

// maxSamples is how many findings of one kind a run keeps the text of.
const maxSamples = 5

// problems counts findings and keeps the first few.
type problems struct {
	n       int
	samples []string
}

func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.samples) < maxSamples {
		p.samples = append(p.samples, fmt.Sprintf(format, args...))
	}
}

// world is what a run knows it did, to check the data against.
type world struct {
	made       map[string]int // seller id → items created (ids <seller>-0 … -n-1)
	buyers     []string
	buyerFunds int64
	maxPrice   int
	listed     int64 // successful listings counted by the sellers
	bought     int64 // successful purchases counted by the buyers
}

// snapshot is the market as Redis holds it after a run.
type snapshot struct {
	funds     map[string]int64    // user id → funds
	inventory map[string][]string // user id → items
	market    []rueidis.ZScore
	locks     []string // lock keys still present
}

// checkInvariants reads the market back and reports every way it breaks
// the invariants:
//
//   - money is conserved: all funds add up to what the buyers started with;
//   - every item created exists exactly once, in an inventory or the
//     market, and the market lists it under its own seller at its price;
//   - the ledger: each buyer paid exactly the prices of the items it holds
//     and each seller received exactly the prices of its items buyers hold.
//     A purchase applied twice (or half) moves money without moving an
//     item and breaks this even though money is conserved;
//   - the counts: the buyers hold as many items as they counted purchases,
//     and those plus the market are what the sellers counted as listed;
//   - no lock is left behind.
func checkInvariants(ctx context.Context, rc rueidis.Client, w world) (problems, error) {
	snap, err := readSnapshot(ctx, rc, w)
	if err != nil {
		return problems{}, err
	}
	var p problems
	checkMoney(&p, w, snap)
	checkItems(&p, w, snap)
	checkLedger(&p, w, snap)
	held := 0
	for _, b := range w.buyers {
		held += len(snap.inventory[b])
	}
	if int64(held) != w.bought {
		p.add("buyers hold %d items but counted %d purchases", held, w.bought)
	}
	if int64(len(snap.market)+held) != w.listed {
		p.add("%d items in the market plus %d bought, but sellers counted %d listings", len(snap.market), held, w.listed)
	}
	for _, k := range snap.locks {
		p.add("lock %s is still held after the run", k)
	}
	return p, nil
}

func checkMoney(p *problems, w world, snap snapshot) {
	var total int64
	for _, f := range snap.funds {
		total += f
	}
	if want := w.buyerFunds * int64(len(w.buyers)); total != want {
		p.add("money not conserved: users hold %d in all, %d was handed out", total, want)
	}
}

func checkItems(p *problems, w world, snap snapshot) {
	seen := make(map[string]int)
	for id, items := range snap.inventory {
		for _, item := range items {
			seen[item]++
			if _, isSeller := w.made[id]; isSeller && sellerOfItem(item) != id {
				p.add("seller %s holds %s, made by someone else", id, item)
			}
		}
	}
	for _, z := range snap.market {
		item, seller, ok := splitMember(z.Member)
		if !ok || sellerOfItem(item) != seller {
			p.add("market member %q is not <item>.<its seller>", z.Member)
			continue
		}
		seen[item]++
		if int64(z.Score) != priceOf(item, w.maxPrice) {
			p.add("market lists %s at %v, its price is %d", z.Member, z.Score, priceOf(item, w.maxPrice))
		}
	}
	for seller, n := range w.made {
		for i := range n {
			item := itemID(seller, i)
			if c := seen[item]; c != 1 {
				p.add("item %s exists %d times across inventories and market", item, c)
			}
			delete(seen, item)
		}
	}
	for _, item := range slices.Sorted(maps.Keys(seen)) {
		p.add("item %s was never created but exists %d times", item, seen[item])
	}
}

func checkLedger(p *problems, w world, snap snapshot) {
	earned := make(map[string]int64)
	for _, b := range w.buyers {
		var spent int64
		for _, item := range snap.inventory[b] {
			price := priceOf(item, w.maxPrice)
			spent += price
			earned[sellerOfItem(item)] += price
		}
		if got, want := snap.funds[b], w.buyerFunds-spent; got != want {
			p.add("buyer %s has %d, but paid for its items leaves %d: a purchase was applied twice or partly", b, got, want)
		}
	}
	for seller := range w.made {
		if got, want := snap.funds[seller], earned[seller]; got != want {
			p.add("seller %s has %d, but its sold items are worth %d: a purchase was applied twice or partly", seller, got, want)
		}
	}
}

func readSnapshot(ctx context.Context, rc rueidis.Client, w world) (snapshot, error) {
	users := append(slices.Sorted(maps.Keys(w.made)), w.buyers...)
	snap := snapshot{funds: make(map[string]int64), inventory: make(map[string][]string)}
	cmds := make(rueidis.Commands, 0, 2*len(users))
	for _, id := range users {
		cmds = append(cmds,
			rc.B().Hget().Key(userKey(id)).Field("funds").Build(),
			rc.B().Smembers().Key(inventoryKey(id)).Build())
	}
	resps := rc.DoMulti(ctx, cmds...)
	for i, id := range users {
		funds, err := resps[2*i].AsInt64()
		if err != nil {
			return snap, fmt.Errorf("HGET %s funds: %w", userKey(id), err)
		}
		items, err := resps[2*i+1].AsStrSlice()
		if err != nil {
			return snap, fmt.Errorf("SMEMBERS %s: %w", inventoryKey(id), err)
		}
		snap.funds[id], snap.inventory[id] = funds, items
	}
	var err error
	if snap.market, err = rc.Do(ctx, rc.B().Zrange().Key(marketKey).Min("0").Max("-1").Withscores().Build()).AsZScores(); err != nil {
		return snap, fmt.Errorf("ZRANGE %s: %w", marketKey, err)
	}
	for _, pattern := range []string{setnxPrefix + "*", rlock.DefaultPrefix + ":*"} {
		keys, err := scanKeys(ctx, rc, pattern)
		if err != nil {
			return snap, err
		}
		for _, k := range keys {
			// A latchkey lock's fencing counter stays by design, and its
			// wait queue and a handoff (a key reserved for a woken client
			// for a few ms) expire on their own: only a held lock counts.
			if strings.HasSuffix(k, ":fence") || strings.HasSuffix(k, ":q") {
				continue
			}
			if fields, err := rc.Do(ctx, rc.B().Hkeys().Key(k).Build()).AsStrSlice(); err == nil && slices.Equal(fields, []string{"#handoff"}) {
				continue
			}
			snap.locks = append(snap.locks, k)
		}
	}
	return snap, nil
}

func scanKeys(ctx context.Context, rc rueidis.Client, pattern string) ([]string, error) {
	var keys []string
	var cursor uint64
	for {
		e, err := rc.Do(ctx, rc.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, fmt.Errorf("SCAN MATCH %s: %w", pattern, err)
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return keys, nil
		}
	}
}
