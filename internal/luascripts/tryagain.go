package luascripts

import (
	"time"

	"github.com/redis/rueidis"
)

// A Cluster slot being migrated refuses a script whose declared keys are
// not all on one node with -TRYAGAIN, and latchkey's scripts declare keys
// that often do not exist (a queue and its descriptions), so during a migration
// most of them get it until CLUSTER SETSLOT NODE. The server refused before
// running anything, so resending is always safe; rueidis does it only for
// read-only commands, so Exec and execSynced do, with a backoff. The
// watchdog's batched renewals without SyncReplicas (ExecMulti) do not: a
// call refused so counts as a failed renewal, which the watchdog retries
// after its own backoff.

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
