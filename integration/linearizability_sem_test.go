package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// The Semaphore's contract for porcupine. The state is the permits each
// client holds (one acquisition at a time per client here). A grant of n
// needs n free permits; a release succeeds only for a holder. Refusals
// (TryAcquire false) are legal in any state, since a client queued before
// the caller may be owed the free permits, which the model does not see.

const linSemSize = 3

type semState [linClients]int64

// semOp is a call's input; its output is a bool, as lockOp's.
type semOp struct {
	client int
	kind   opKind // opLock (Acquire), opTryLock (TryAcquire), opUnlock (Release)
	n      int64
}

var semaphoreModel = porcupine.Model{
	Init: func() any { return semState{} },
	Step: func(state, input, output any) (bool, any) {
		s, op, ok := state.(semState), input.(semOp), output.(bool)
		switch {
		case !ok && op.kind != opUnlock:
			return op.kind == opTryLock, s
		case op.kind == opUnlock:
			held := s[op.client] > 0
			if ok {
				s[op.client] = 0
			}
			return held == ok, s
		}
		var used int64
		for _, p := range s {
			used += p
		}
		free := used+op.n <= linSemSize && s[op.client] == 0
		s[op.client] = op.n
		return free, s
	},
	DescribeOperation: func(input, output any) string {
		op := input.(semOp)
		return fmt.Sprintf("%v(%d) by %d -> %v", op.kind, op.n, op.client, output)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("permits held %v of %d", state, linSemSize) },
}

// TestSemaphoreLinearizability: five clients acquire 1 to 3 permits of a
// 3-permit Semaphore, sometimes with TryAcquire; the history must be
// linearizable with respect to semaphoreModel.
func TestSemaphoreLinearizability(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		checkLinearizable(t, semaphoreModel, rand.Uint64(), func(seed uint64) []porcupine.Operation { return semHistory(t, tp, seed) })
	})
}

func semHistory(t *testing.T, tp topology, seed uint64) []porcupine.Operation {
	return linWorkload(t, tp, seed, func(c *rlock.Client, name string, id int, rng *rand.Rand) linRound {
		sem := c.Semaphore(name, linSemSize)
		op := semOp{client: id, kind: opLock, n: 1 + rng.Int64N(linSemSize)}
		if rng.IntN(4) == 0 {
			op.kind = opTryLock
		}
		return linRound{in: op, out: semOp{client: id, kind: opUnlock}, release: sem.Release,
			acquire: func(ctx context.Context) (context.Context, bool, error) {
				if op.kind == opTryLock {
					return sem.TryAcquire(ctx, op.n)
				}
				pctx, err := sem.Acquire(ctx, op.n)
				return pctx, err == nil, err
			}}
	})
}

// TestSemaphoreModel: the model accepts what a correct Semaphore may show
// and rejects the violations, so TestSemaphoreLinearizability can fail.
func TestSemaphoreModel(t *testing.T) {
	op := func(client int, kind opKind, n, call, ret int64, ok bool) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: semOp{client, kind, n}, Call: call, Output: ok, Return: ret}
	}
	for name, tc := range map[string]struct {
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		"holders within the size": {[]porcupine.Operation{
			op(0, opLock, 2, 0, 1, true), op(1, opLock, 1, 2, 3, true), op(0, opUnlock, 0, 4, 5, true), op(1, opUnlock, 0, 6, 7, true),
		}, porcupine.Ok},
		"a waiter granted after a release": {[]porcupine.Operation{
			op(0, opLock, 3, 0, 1, true), op(1, opLock, 1, 2, 10, true), op(0, opUnlock, 0, 4, 5, true),
		}, porcupine.Ok},
		"more permits than the size": {[]porcupine.Operation{
			op(0, opLock, 2, 0, 1, true), op(1, opLock, 2, 2, 3, true),
		}, porcupine.Illegal},
		"a release by a non-holder": {[]porcupine.Operation{
			op(0, opUnlock, 0, 0, 1, true),
		}, porcupine.Illegal},
		"a holder's release fails": {[]porcupine.Operation{
			op(0, opLock, 1, 0, 1, true), op(0, opUnlock, 0, 2, 3, false),
		}, porcupine.Illegal},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperationsTimeout(semaphoreModel, tc.history, 10*time.Second))
		})
	}
}
