package luascripts

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"
)

// Sync asks a script call to be acknowledged by replicas: right after it,
// on the same connection, WAIT Replicas Timeout. WAIT counts the replicas
// that have received every write the connection made, so it must follow
// the script on its connection; rueidis sends a DoMulti that holds a
// blocking command (WAIT is one) on one dedicated connection, and a
// Cluster client sends it to the node of the slot given to WAIT.
type Sync struct {
	Replicas int64         // 0: no WAIT
	Timeout  time.Duration // > 0 when Replicas > 0
}

// NotReplicatedError is a call that ran but was not acknowledged by as
// many replicas as asked: WAIT counted Got of them within Timeout, or WAIT
// itself failed (Err).
type NotReplicatedError struct {
	Want, Got int64
	Timeout   time.Duration
	Err       error
}

func (e *NotReplicatedError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("WAIT for %d replicas failed: %v", e.Want, e.Err)
	}
	return fmt.Sprintf("acknowledged by %d of the %d replicas asked within %v", e.Got, e.Want, e.Timeout)
}

func (e *NotReplicatedError) Unwrap() error { return e.Err }

// wait builds the WAIT for a call on keys (routed to their slot).
func (y Sync) wait(c rueidis.Client, keys []string) rueidis.Completed {
	cmd := c.B().Wait().Numreplicas(y.Replicas).Timeout(int64((y.Timeout + time.Millisecond - 1) / time.Millisecond)).Build()
	if len(keys) > 0 {
		cmd = cmd.SetSlot(keys[0])
	}
	return cmd
}

// check reads a WAIT's reply: nil when enough replicas acknowledged, else
// a *NotReplicatedError.
func (y Sync) check(r rueidis.RedisResult) error {
	n, err := r.AsInt64()
	switch {
	case err != nil:
		return &NotReplicatedError{Want: y.Replicas, Timeout: y.Timeout, Err: err}
	case n < y.Replicas:
		return &NotReplicatedError{Want: y.Replicas, Got: n, Timeout: y.Timeout}
	}
	return nil
}

// ExecSync is Exec followed, when y asks for replicas, by WAIT on the same
// connection (both sent again after a TRYAGAIN, as Exec's call is). It returns the script's result and, separately, a
// *NotReplicatedError when the replicas did not acknowledge it; the script
// ran either way when its result has no error.
func (s *Script) ExecSync(ctx context.Context, c rueidis.Client, keys, args []string, y Sync) (rueidis.RedisResult, error) {
	if y.Replicas <= 0 {
		return s.Exec(ctx, c, keys, args), nil
	}
	out := untilNotTryAgain(ctx, func() []rueidis.RedisResult {
		cmds := []rueidis.Completed{
			c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
			y.wait(c, keys),
		}
		out := c.DoMulti(ctx, cmds...)
		if err, ok := rueidis.IsRedisErr(out[0].Error()); ok && err.IsNoScript() {
			cmds[0] = c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
			cmds[1] = y.wait(c, keys)
			out = c.DoMulti(ctx, cmds...)
		}
		return out
	}, func(out []rueidis.RedisResult) error { return out[0].Error() })
	if out[0].Error() != nil {
		return out[0], nil
	}
	return out[0], y.check(out[1])
}

// ExecMultiSync is ExecMulti with a WAIT after each call, as ExecSync
// does for one: the second slice says, per call, why its replicas did not
// acknowledge it (nil when they did, or when y asks for none).
func (s *Script) ExecMultiSync(ctx context.Context, c rueidis.Client, calls []Call, y Sync) ([]rueidis.RedisResult, []error) {
	acks := make([]error, len(calls))
	if y.Replicas <= 0 {
		return s.ExecMulti(ctx, c, calls), acks
	}
	out := make([]rueidis.RedisResult, len(calls))
	send := func(idx []int, eval bool) []int {
		cmds := make(rueidis.Commands, 0, 2*len(idx))
		for _, i := range idx {
			call := calls[i]
			if eval {
				cmds = append(cmds, c.B().Eval().Script(s.src).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build())
			} else {
				cmds = append(cmds, c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build())
			}
			cmds = append(cmds, y.wait(c, call.Keys))
		}
		var noScript []int
		for j, r := range c.DoMulti(ctx, cmds...) {
			i := idx[j/2]
			if j%2 == 0 {
				out[i] = r
				if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
					noScript = append(noScript, i)
				}
				continue
			}
			acks[i] = nil
			if out[i].Error() == nil {
				acks[i] = y.check(r)
			}
		}
		return noScript
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	if retry := send(all, false); len(retry) > 0 {
		send(retry, true)
	}
	return out, acks
}
