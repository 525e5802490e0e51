// Package luascripts holds latchkey's Lua scripts and the thin layer that runs
// them over rueidis.
//
// Every change to a lock goes through one of these scripts, so a lock's state
// moves only in single atomic steps on the server. Each .lua file starts with a
// header that states its KEYS, its ARGV and what it returns; the Parse
// functions in reply.go turn those returns into Go values.
package luascripts

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

var (
	//go:embed queue.lua
	queueSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed reenter.lua
	reenterSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed leave.lua
	leaveSrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed leases.lua
	leasesSrc string
	//go:embed forceunlock.lua
	forceUnlockSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed record.lua
	recordSrc string
	//go:embed describe.lua
	describeSrc string
	//go:embed latchset.lua
	latchSetSrc string
	//go:embed latchcountdown.lua
	latchCountDownSrc string
	//go:embed latchread.lua
	latchReadSrc string
)

// The scripts. They are safe for concurrent use. Those that queue or wake
// clients start with the queue.lua prelude, those that grant a Mutex with
// record.lua's, renew and the scripts of sides that share keys among their
// holders with leases.lua's.
var (
	Acquire     = New("acquire", queueSrc+recordSrc+acquireSrc)
	Reenter     = New("reenter", reenterSrc)
	Release     = New("release", queueSrc+recordSrc+releaseSrc)
	Leave       = New("leave", queueSrc+leaveSrc)
	Renew       = New("renew", leasesSrc+renewSrc)
	ForceUnlock = New("forceunlock", queueSrc+forceUnlockSrc)
	Inspect     = New("inspect", inspectSrc)
	Describe    = New("describe", queueSrc+describeSrc)

	// The count-down latch's scripts (latch.go).
	LatchSet       = New("latchset", latchSetSrc)
	LatchCountDown = New("latchcountdown", latchCountDownSrc)
	LatchRead      = New("latchread", latchReadSrc)
)

// All returns every script latchkey runs: the ACL test checks that the
// commands they call are in the documented grant.
func All() []*Script {
	return []*Script{Acquire, Reenter, Release, Leave, Renew, ForceUnlock, Inspect, Describe,
		RWRead, RWWrite, RWReenter, RWUnlock, RWLeave, RWDescribe,
		LatchSet, LatchCountDown, LatchRead,
		SemAcquire, SemRelease, SemLeave, SemAvailable, SemDescribe}
}

// Script is one Lua script with its SHA-1 computed once.
type Script struct {
	name string
	src  string
	sha  string
	lua  *rueidis.Lua
}

// New wraps src. Exported so tests can run scripts of their own through the
// same path.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha: hex.EncodeToString(sum[:]), lua: rueidis.NewLuaScript(src)}
}

// Name is the script's file name without .lua, for errors and logs.
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text.
func (s *Script) Source() string { return s.src }

// Exec runs the script once: EVALSHA, then EVAL when the server answers
// NOSCRIPT (a restarted or flushed Redis). On Cluster every key must share a
// slot, which latchkey's hash-tagged names guarantee. While that slot is
// being migrated, a call refused with TRYAGAIN is sent again until the
// migration ends or ctx does (see tryagain.go).
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	return untilNotTryAgain(ctx, func() rueidis.RedisResult { return s.lua.Exec(ctx, c, keys, args) }, rueidis.RedisResult.Error)
}

// Call is one execution in a pipelined ExecMulti.
type Call struct {
	Keys []string
	Args []string
}

// ExecMulti sends every call in one pipeline (rueidis splits it per node on
// Cluster) and returns the replies in order. Calls answered NOSCRIPT are sent
// again with EVAL in a second pipeline. rueidis' own Lua.ExecMulti loads the
// script on every node on each call, which would double the watchdog's round
// trips; NOSCRIPT is rare, so paying for it only when it happens is cheaper.
func (s *Script) ExecMulti(ctx context.Context, c rueidis.Client, calls []Call) []rueidis.RedisResult {
	if len(calls) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, len(calls))
	for i, call := range calls {
		cmds[i] = s.build(c, call, false)
	}
	out := c.DoMulti(ctx, cmds...)
	var retry []int
	for i, r := range out {
		if err, ok := rueidis.IsRedisErr(r.Error()); ok && err.IsNoScript() {
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 {
		return out
	}
	cmds = cmds[:0]
	for _, i := range retry {
		cmds = append(cmds, s.build(c, calls[i], true))
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		out[retry[j]] = r
	}
	return out
}

// Millis formats d as a whole number of milliseconds for a script argument,
// rounding up so that a sub-millisecond lease is never sent as 0 (which
// PEXPIRE would take as "expire now").
func Millis(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatInt(int64(ms), 10)
}
