package luascripts

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Sync asks a script call to be acknowledged by replicas: WAIT right after
// it on the connection that ran it, whose writes alone WAIT counts.
type Sync struct {
	Replicas int64         // 0: no WAIT
	Timeout  time.Duration // > 0 when Replicas > 0
	// Routes, when set, remembers which Cluster node served each slot, so
	// that a batch over many slots need not learn them from -MOVED each time.
	Routes *Routes
	// By, when set, is the caller's deadline for a call awaited past it
	// (its ctx has none): its WAITs end before it, as before ctx's.
	By time.Time
	// ReturnTryAgain, when set, hands a call refused with TRYAGAIN back at
	// once, with that error, where it would otherwise be sent again until
	// the migration or ctx ends. The watchdog sets it: a call of several
	// leases that a half-moved slot refuses is its to split (each lease's
	// key alone can be renewed), and a wait here would hold back the
	// replies of every other call in its request.
	ReturnTryAgain bool
}

// NotReplicatedError is a call that ran but was not acknowledged by as
// many replicas as asked: WAIT counted Got within Timeout, or failed (Err).
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

// Routes maps Cluster slots to the address of the master that last served
// them; see Sync.Routes. The zero value is not usable: use NewRoutes.
type Routes struct {
	mu   sync.Mutex
	addr map[uint16]string
}

// NewRoutes returns an empty Routes.
func NewRoutes() *Routes { return &Routes{addr: make(map[uint16]string)} }

func (r *Routes) get(slot uint16) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr[slot]
}

func (r *Routes) set(slot uint16, addr string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if addr == "" {
		delete(r.addr, slot)
	} else {
		r.addr[slot] = addr
	}
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

// ExecSync is Exec followed, when y asks for replicas, by WAIT. It returns
// the script's result and, separately, a *NotReplicatedError when the
// replicas did not acknowledge it (it ran if its result has no error).
func (s *Script) ExecSync(ctx context.Context, c rueidis.Client, keys, args []string, y Sync) (rueidis.RedisResult, error) {
	if y.Replicas <= 0 {
		return s.Exec(ctx, c, keys, args), nil
	}
	out, acks := s.execSynced(ctx, c, []Call{{Keys: keys, Args: args}}, y)
	return out[0], acks[0]
}

// ExecMultiSync is ExecMulti with a WAIT on every connection that ran
// calls: the second slice says, per call, why its replicas did not
// acknowledge it (nil when they did, the call failed, or y asks for none).
func (s *Script) ExecMultiSync(ctx context.Context, c rueidis.Client, calls []Call, y Sync) ([]rueidis.RedisResult, []error) {
	if y.Replicas <= 0 {
		return s.ExecMulti(ctx, c, calls), make([]error, len(calls))
	}
	return s.execSynced(ctx, c, calls, y)
}

// hop is where a group of calls goes: by rueidis' slot map (addr ""), or
// to the node at addr, after ASKING when ask.
type hop struct {
	addr string
	ask  bool
}

// maxRedirects bounds the rounds of -MOVED and -ASK a synced call follows,
// as rueidis bounds its own; TRYAGAIN is retried until ctx ends (unless
// Sync.ReturnTryAgain).
const maxRedirects = 16

// execSynced runs calls, each group followed by WAIT on the same
// connection. rueidis would redirect a -MOVED or -ASK command alone, leaving
// the WAIT on the old node, so on a Cluster the calls go where rueidis
// cannot redirect them (a dedicated connection, or the node a redirect
// names), and a redirected call is resent with a WAIT of its own. Elsewhere
// rueidis sends a pipeline with a blocking command on one connection.
// A WRONGTYPE comes back as a *WrongTypeError, as from Exec.
func (s *Script) execSynced(ctx context.Context, c rueidis.Client, calls []Call, y Sync) ([]rueidis.RedisResult, []error) {
	out := make([]rueidis.RedisResult, len(calls))
	acks := make([]error, len(calls))
	eval := make([]bool, len(calls))
	cluster := c.Mode() == rueidis.ClientModeCluster
	slots := make([]uint16, len(calls))
	pending := make(map[hop][]int)
	for i, call := range calls {
		h := hop{}
		if cluster {
			probe := c.B().Get().Key(call.Keys[0]).Build()
			slots[i] = probe.Slot()
			if len(calls) > 1 {
				h.addr = y.Routes.get(slots[i])
			}
		}
		pending[h] = append(pending[h], i)
	}
	nodes := sync.OnceValue(c.Nodes)
	backoff := Backoff{Min: tryAgainMin, Max: tryAgainMax}
	for redirects := 0; len(pending) > 0; {
		var (
			mu       sync.Mutex
			wg       sync.WaitGroup
			next     = make(map[hop][]int)
			tryAgain bool
			moved    bool
		)
		ry := y
		ry.Timeout = waitBudget(ctx, y)
		for h, idx := range pending {
			wg.Go(func() {
				res, wait := s.sendSynced(ctx, c, cluster, nodes, h, calls, idx, eval, ry)
				mu.Lock()
				defer mu.Unlock()
				for j, i := range idx {
					out[i] = res[j]
					e, isRedis := rueidis.IsRedisErr(res[j].Error())
					if !isRedis {
						if res[j].Error() == nil {
							acks[i] = ry.check(wait)
							if h.addr != "" && !h.ask {
								y.Routes.set(slots[i], h.addr)
							}
						} else if h.addr != "" {
							y.Routes.set(slots[i], "") // a dead node: back to rueidis' map
						}
						continue
					}
					if addr, ok := e.IsMoved(); ok {
						moved = true
						y.Routes.set(slots[i], addr)
						next[hop{addr: addr}] = append(next[hop{addr: addr}], i)
					} else if addr, ok := e.IsAsk(); ok {
						moved = true
						next[hop{addr: addr, ask: true}] = append(next[hop{addr: addr, ask: true}], i)
					} else if e.IsTryAgain() {
						if !y.ReturnTryAgain {
							tryAgain = true
							next[hop{}] = append(next[hop{}], i)
						}
					} else if e.IsNoScript() && !eval[i] {
						eval[i] = true
						next[h] = append(next[h], i)
					}
				}
			})
		}
		wg.Wait()
		if moved {
			if redirects++; redirects > maxRedirects {
				break
			}
		}
		pending = next
		if tryAgain && !backoff.Sleep(ctx) {
			break
		}
	}
	return refusedAll(out, calls), acks
}

// waitBudget is a round's WAIT timeout: y.Timeout, cut to what is left of
// ctx (and until y.By) less waitLate. A round whose calls come back NOSCRIPT or redirected
// waits too, and the next must still end, with the replicas' verdict,
// before ctx does. WAIT 0 would block for ever: 1 ms at least.
func waitBudget(ctx context.Context, y Sync) time.Duration {
	timeout := y.Timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-waitLate)
	}
	if !y.By.IsZero() {
		timeout = min(timeout, time.Until(y.By)-waitLate)
	}
	return max(timeout, time.Millisecond)
}

// waitLate is how late Redis may end a WAIT past its timeout: its event
// loop checks blocked clients' timeouts when it wakes, at least every
// 1/hz (100 ms at the default hz of 10).
const waitLate = 100 * time.Millisecond

// sendSynced sends calls[idx] to h and then WAIT, all on one connection,
// and returns the calls' replies and WAIT's.
func (s *Script) sendSynced(ctx context.Context, c rueidis.Client, cluster bool, nodes func() map[string]rueidis.Client, h hop, calls []Call, idx []int, eval []bool, y Sync) ([]rueidis.RedisResult, rueidis.RedisResult) {
	cmds := make(rueidis.Commands, 0, 2*len(idx)+1)
	for _, i := range idx {
		if h.ask {
			cmds = append(cmds, c.B().Asking().Build())
		}
		cmds = append(cmds, s.build(c, calls[i], eval[i]))
	}
	cmds = append(cmds, c.B().Wait().Numreplicas(y.Replicas).Timeout(int64((y.Timeout+time.Millisecond-1)/time.Millisecond)).Build())
	var res []rueidis.RedisResult
	switch {
	case !cluster:
		res = c.DoMulti(ctx, cmds...)
	case h.addr == "":
		// A dedicated connection serves one slot: route every command by
		// the first call's, and let calls of other slots come back -MOVED.
		key := calls[idx[0]].Keys[0]
		for k := range cmds {
			cmds[k] = cmds[k].SetSlot(key)
		}
		_ = c.Dedicated(func(dc rueidis.DedicatedClient) error {
			res = dc.DoMulti(ctx, cmds...)
			return nil
		})
	default:
		n, ok := nodes()[h.addr]
		if !ok {
			// A node rueidis does not know yet: its slot map refresh is
			// under way (a -MOVED started it); go by the map.
			return s.sendSynced(ctx, c, cluster, nodes, hop{}, calls, idx, eval, y)
		}
		res = n.DoMulti(ctx, cmds...)
	}
	replies := make([]rueidis.RedisResult, 0, len(idx))
	for k, r := range res[:len(res)-1] {
		if h.ask && k%2 == 0 {
			continue // ASKING's +OK
		}
		replies = append(replies, r)
	}
	return replies, res[len(res)-1]
}

// build is call's EVALSHA, or its EVAL when the server lacked the script.
func (s *Script) build(c rueidis.Client, call Call, eval bool) rueidis.Completed {
	if eval {
		return c.B().Eval().Script(s.src).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build()
	}
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(call.Keys))).Key(call.Keys...).Arg(call.Args...).Build()
}
