package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// pick chooses a random listing among the window cheapest. ok is false
// when the market is empty.
func (w *worker) pick(ctx context.Context, window int) (o offer, ok bool, err error) {
	zs, err := w.conn.Do(ctx, w.conn.B().Zrange().Key(marketKey).Min("0").Max(fmt.Sprint(window-1)).Withscores().Build()).AsZScores()
	if err != nil {
		return offer{}, false, fmt.Errorf("ZRANGE %s: %w", marketKey, err)
	}
	if len(zs) == 0 {
		return offer{}, false, nil
	}
	z := zs[rand.IntN(len(zs))]
	o, ok = offerFrom(z)
	if !ok {
		return offer{}, false, fmt.Errorf("%w: market member %q is not <item>.<seller>", errInvariant, z.Member)
	}
	return o, true, nil
}

// buyWatched is the book's purchase_item: WATCH the market and the buyer,
// check, then move money and item in MULTI/EXEC; an aborted EXEC (anything
// in the market or the buyer's hash changed) is retried from the top.
// bought is false when the listing was gone: someone else bought it.
func (w *worker) buyWatched(ctx context.Context, o offer, retries *atomic.Int64) (bought bool, err error) {
	for {
		if err := w.conn.Do(ctx, w.conn.B().Watch().Key(marketKey, userKey(w.id)).Build()).Error(); err != nil {
			return false, fmt.Errorf("WATCH %s %s: %w", marketKey, userKey(w.id), err)
		}
		ok, err := w.readOffer(ctx, o)
		if err != nil || !ok {
			return false, w.unwatch(ctx, err)
		}
		done, err := w.exec(ctx, w.buyCmds(o)...)
		if done || err != nil {
			return done, err
		}
		retries.Add(1)
	}
}

// buyLocked is the book's purchase_item_with_lock body: the lock replaces
// the WATCH, so the checks and the transfer cannot be interleaved.
func (w *worker) buyLocked(ctx context.Context, o offer) (bought bool, err error) {
	ok, err := w.readOffer(ctx, o)
	if err != nil || !ok {
		return false, err
	}
	return true, w.execUnwatched(ctx, w.buyCmds(o)...)
}

// readOffer reports whether the listing is still in the market at the
// price the buyer saw. A buyer that cannot pay is an error, since buyers
// start with more money than a run can spend.
func (w *worker) readOffer(ctx context.Context, o offer) (bool, error) {
	price, err := w.conn.Do(ctx, w.conn.B().Zscore().Key(marketKey).Member(o.member).Build()).AsFloat64()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ZSCORE %s %s: %w", marketKey, o.member, err)
	}
	funds, err := w.conn.Do(ctx, w.conn.B().Hget().Key(userKey(w.id)).Field("funds").Build()).AsInt64()
	if err != nil {
		return false, fmt.Errorf("HGET %s funds: %w", userKey(w.id), err)
	}
	if int64(price) != o.price {
		return false, nil
	}
	if o.price > funds {
		return false, fmt.Errorf("%w: %s has %d for %s at %d; raise the buyers' starting funds", errInsufficientFunds, w.id, funds, o.member, o.price)
	}
	return true, nil
}

func (w *worker) buyCmds(o offer) rueidis.Commands {
	return rueidis.Commands{
		w.conn.B().Hincrby().Key(userKey(o.seller)).Field("funds").Increment(o.price).Build(),
		w.conn.B().Hincrby().Key(userKey(w.id)).Field("funds").Increment(-o.price).Build(),
		w.conn.B().Sadd().Key(inventoryKey(w.id)).Member(o.item).Build(),
		w.conn.B().Zrem().Key(marketKey).Member(o.member).Build(),
	}
}
