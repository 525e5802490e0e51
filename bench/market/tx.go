package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// exec runs cmds in MULTI/EXEC on the worker's connection. done is false
// when EXEC was aborted because a WATCHed key changed.
func (w *worker) exec(ctx context.Context, cmds ...rueidis.Completed) (done bool, err error) {
	multi := make(rueidis.Commands, 0, len(cmds)+2)
	multi = append(multi, w.conn.B().Multi().Build())
	multi = append(multi, cmds...)
	multi = append(multi, w.conn.B().Exec().Build())
	resps := w.conn.DoMulti(ctx, multi...)
	for _, r := range resps[:len(resps)-1] {
		if err := r.Error(); err != nil {
			return false, fmt.Errorf("queueing a transaction: %w", err)
		}
	}
	replies, err := resps[len(resps)-1].ToArray()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("EXEC: %w", err)
	}
	for _, r := range replies {
		if err := r.Error(); err != nil {
			return false, fmt.Errorf("EXEC: a command failed inside the transaction: %w", err)
		}
	}
	return true, nil
}

// execUnwatched is exec where nothing is WATCHed, so EXEC cannot abort.
func (w *worker) execUnwatched(ctx context.Context, cmds ...rueidis.Completed) error {
	done, err := w.exec(ctx, cmds...)
	if err == nil && !done {
		err = errors.New("EXEC aborted although nothing was WATCHed: is another client sharing this connection?")
	}
	return err
}

// unwatch ends a WATCH that will not be followed by EXEC and returns err,
// joined with UNWATCH's own error if it failed.
func (w *worker) unwatch(ctx context.Context, err error) error {
	if uerr := w.conn.Do(ctx, w.conn.B().Unwatch().Build()).Error(); uerr != nil {
		return errors.Join(err, fmt.Errorf("UNWATCH: %w", uerr))
	}
	return err
}
