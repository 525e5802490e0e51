package luascripts

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// A Cluster slot being migrated (MIGRATING on its old master, IMPORTING on
// the new one) refuses a script whose keys are not all on one node with
// -TRYAGAIN: the old master sends -ASK as soon as one declared key is
// missing there, and the new master, asked with ASKING, answers TRYAGAIN
// unless it has every declared key. latchkey's scripts declare keys that
// often do not exist (a lock's queue, its reservation), so during a
// migration most of them get TRYAGAIN until CLUSTER SETSLOT NODE ends it.
// The server refused before running anything, so sending the same call
// again is always safe; rueidis retries TRYAGAIN only for read-only
// commands, so Exec and ExecSync do it here, with a backoff, until the
// migration ends or ctx does. (Renew has one key, which the old master
// answers with -ASK and the new one serves: renewals never see TRYAGAIN.)

// Backoff between TRYAGAIN retries: a migration moves a lock's few keys in
// milliseconds, and then waits for the operator's SETSLOT NODE.
const (
	tryAgainMin = 2 * time.Millisecond
	tryAgainMax = 50 * time.Millisecond
)

// IsTryAgain reports whether err is a Redis TRYAGAIN error.
func IsTryAgain(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	return ok && e.IsTryAgain()
}

// untilNotTryAgain calls send until its first result is something other
// than TRYAGAIN or ctx ends, and returns its last results.
func untilNotTryAgain[T any](ctx context.Context, send func() T, first func(T) error) T {
	backoff := Backoff{Min: tryAgainMin, Max: tryAgainMax}
	for {
		out := send()
		if !IsTryAgain(first(out)) || !backoff.Sleep(ctx) {
			return out
		}
	}
}
