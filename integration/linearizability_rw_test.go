package integration

import (
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/rlock"
)

// The RWMutex's contract for porcupine. The state is who holds it: a
// writer (or nobody) and a set of readers. A grant of the write lock needs
// no holder at all; a read grant needs no writer; a release succeeds only
// for a holder of that side. Refusals (TryLock, TryRLock false) are legal
// in any state: writers come first and clients keep their queue places,
// so a call may be refused because of a waiter, which the model does not
// see. What the check proves is the exclusion and the releases.

type rwState struct {
	writer  int    // nobody or a client
	readers uint64 // bit i: client i holds a read hold
}

// rwOp is a call's input; its output is a bool, as lockOp's. Its kind
// uses opLock, opTryLock and opUnlock for both sides.
type rwOp struct {
	client int
	read   bool
	kind   opKind
}

var rwMutexModel = porcupine.Model{
	Init: func() any { return rwState{writer: nobody} },
	Step: func(state, input, output any) (bool, any) {
		s, op, ok := state.(rwState), input.(rwOp), output.(bool)
		bit := uint64(1) << op.client
		switch {
		case !ok && op.kind != opUnlock:
			return op.kind == opTryLock, s
		case op.kind == opUnlock && op.read:
			held := s.readers&bit != 0
			if ok {
				s.readers &^= bit
			}
			return held == ok, s
		case op.kind == opUnlock:
			held := s.writer == op.client
			if ok {
				s.writer = nobody
			}
			return held == ok, s
		case op.read:
			free := s.writer == nobody && s.readers&bit == 0
			s.readers |= bit
			return free, s
		default:
			free := s.writer == nobody && s.readers == 0
			s.writer = op.client
			return free, s
		}
	},
	DescribeOperation: func(input, output any) string {
		op := input.(rwOp)
		side := "write"
		if op.read {
			side = "read"
		}
		return fmt.Sprintf("%v (%s) by %d -> %v", op.kind, side, op.client, output)
	},
	DescribeState: func(state any) string {
		s := state.(rwState)
		if s.writer != nobody {
			return fmt.Sprintf("written by %d", s.writer)
		}
		return fmt.Sprintf("%d readers (%b)", bits.OnesCount64(s.readers), s.readers)
	},
}

// TestRWMutexLinearizability: five clients take read holds (four times in
// five) and write holds of one RWMutex, sometimes with TryRLock or
// TryLock; the history must be linearizable with respect to rwMutexModel.
func TestRWMutexLinearizability(t *testing.T) {
	forEachTopology(t, func(t *testing.T, tp topology) {
		checkLinearizable(t, rwMutexModel, rand.Uint64(), func(seed uint64) []porcupine.Operation { return rwHistory(t, tp, seed) })
	})
}

func rwHistory(t *testing.T, tp topology, seed uint64) []porcupine.Operation {
	return linWorkload(t, tp, seed, func(c *rlock.Client, name string, id int, rng *rand.Rand) linRound {
		rw := c.RWMutex(name)
		op := rwOp{client: id, read: rng.IntN(5) != 0, kind: opLock}
		if rng.IntN(4) == 0 {
			op.kind = opTryLock
		}
		release := rw.Unlock
		if op.read {
			release = rw.RUnlock
		}
		return linRound{in: op, out: rwOp{client: id, read: op.read, kind: opUnlock}, release: release,
			acquire: func(ctx context.Context) (context.Context, bool, error) { return rwAcquire(ctx, rw, op) }}
	})
}

func rwAcquire(ctx context.Context, rw *rlock.RWMutex, op rwOp) (context.Context, bool, error) {
	switch {
	case op.read && op.kind == opTryLock:
		return rw.TryRLock(ctx)
	case op.read:
		lctx, err := rw.RLock(ctx)
		return lctx, err == nil, err
	case op.kind == opTryLock:
		return rw.TryLock(ctx)
	}
	lctx, err := rw.Lock(ctx)
	return lctx, err == nil, err
}

// TestRWMutexModel: the model accepts what a correct RWMutex may show and
// rejects the violations, so TestRWMutexLinearizability can fail.
func TestRWMutexModel(t *testing.T) {
	op := func(client int, read bool, kind opKind, call, ret int64, ok bool) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: rwOp{client, read, kind}, Call: call, Output: ok, Return: ret}
	}
	for name, tc := range map[string]struct {
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		"readers share": {[]porcupine.Operation{
			op(0, true, opLock, 0, 1, true), op(1, true, opLock, 2, 3, true), op(0, true, opUnlock, 4, 5, true), op(1, true, opUnlock, 6, 7, true),
		}, porcupine.Ok},
		"a writer after the readers": {[]porcupine.Operation{
			op(0, true, opLock, 0, 1, true), op(1, false, opLock, 2, 10, true), op(0, true, opUnlock, 4, 5, true), op(1, false, opUnlock, 11, 12, true),
		}, porcupine.Ok},
		"a writer beside a reader": {[]porcupine.Operation{
			op(0, true, opLock, 0, 1, true), op(1, false, opLock, 2, 3, true), op(0, true, opUnlock, 4, 5, true),
		}, porcupine.Illegal},
		"a reader beside a writer": {[]porcupine.Operation{
			op(0, false, opLock, 0, 1, true), op(1, true, opLock, 2, 3, true), op(0, false, opUnlock, 4, 5, true),
		}, porcupine.Illegal},
		"two writers": {[]porcupine.Operation{
			op(0, false, opLock, 0, 1, true), op(1, false, opLock, 2, 3, true),
		}, porcupine.Illegal},
		"a read release by a non-reader": {[]porcupine.Operation{
			op(0, true, opUnlock, 0, 1, true),
		}, porcupine.Illegal},
		"the writer's release fails": {[]porcupine.Operation{
			op(0, false, opLock, 0, 1, true), op(0, false, opUnlock, 2, 3, false),
		}, porcupine.Illegal},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperationsTimeout(rwMutexModel, tc.history, 10*time.Second))
		})
	}
}
