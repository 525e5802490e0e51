package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// nextItem is the next item the seller lists. When it has listed all it
// had, it puts restock new items into its inventory first, so it never runs
// out.
func (w *worker) nextItem(ctx context.Context, restock int) (string, error) {
	if len(w.stock) == 0 {
		batch := make([]string, restock)
		for i := range batch {
			batch[i] = itemID(w.id, w.made+i)
		}
		// Counted before the write: if its outcome is unknown the run has
		// failed anyway, and the check then looks for all of them.
		w.made += restock
		if err := w.conn.Do(ctx, w.conn.B().Sadd().Key(inventoryKey(w.id)).Member(batch...).Build()).Error(); err != nil {
			return "", fmt.Errorf("restocking %s: %w", inventoryKey(w.id), err)
		}
		w.stock = batch
	}
	item := w.stock[0]
	w.stock = w.stock[1:]
	return item, nil
}

// listWatched is the book's list_item: WATCH the seller's inventory, check
// that the item is in it, then ZADD it to the market and SREM it from the
// inventory in MULTI/EXEC, again from the top if EXEC was aborted.
func (w *worker) listWatched(ctx context.Context, item string, retries *atomic.Int64) error {
	for {
		if err := w.conn.Do(ctx, w.conn.B().Watch().Key(inventoryKey(w.id)).Build()).Error(); err != nil {
			return fmt.Errorf("WATCH %s: %w", inventoryKey(w.id), err)
		}
		if err := w.checkStock(ctx, item); err != nil {
			return w.unwatch(ctx, err)
		}
		done, err := w.exec(ctx, w.listCmds(item)...)
		if done || err != nil {
			return err
		}
		retries.Add(1)
	}
}

// listLocked is the listing done under a lock, which replaces the WATCH.
func (w *worker) listLocked(ctx context.Context, item string) error {
	if err := w.checkStock(ctx, item); err != nil {
		return err
	}
	return w.execUnwatched(ctx, w.listCmds(item)...)
}

func (w *worker) checkStock(ctx context.Context, item string) error {
	ok, err := w.conn.Do(ctx, w.conn.B().Sismember().Key(inventoryKey(w.id)).Member(item).Build()).AsBool()
	switch {
	case err != nil:
		return fmt.Errorf("SISMEMBER %s: %w", inventoryKey(w.id), err)
	case !ok:
		return fmt.Errorf("%w: %s lists %s, which %s lacks", errNotInInventory, w.id, item, inventoryKey(w.id))
	}
	return nil
}

func (w *worker) listCmds(item string) rueidis.Commands {
	price := float64(priceOf(item, w.maxPrice))
	return rueidis.Commands{
		w.conn.B().Zadd().Key(marketKey).ScoreMember().ScoreMember(price, marketMember(item, w.id)).Build(),
		w.conn.B().Srem().Key(inventoryKey(w.id)).Member(item).Build(),
	}
}
