// Package luascripts holds latchkey's Lua scripts and the thin layer that runs
// them over rueidis. Every change to a lock is one of these scripts, so a
// lock's state moves only in atomic steps on the server. Each .lua file's
// header states its KEYS, ARGV and reply; reply.go parses the replies.
package luascripts

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

//go:embed *.lua
var sources embed.FS

// script is name.lua after the preludes (library .lua files) it needs, all
// after clock.lua and oom.lua. It registers the script for All.
func script(name string, preludes ...string) *Script {
	var src strings.Builder
	for _, f := range append(library(preludes), name) {
		src.WriteString(source(f))
	}
	return register(New(name, src.String()))
}

// register adds s to All.
func register(s *Script) *Script {
	all = append(all, s)
	return s
}

var all []*Script // every script made by script, in declaration order

// The scripts. They are safe for concurrent use.
var (
	Acquire     = script("acquire", "queue", "record")
	Reenter     = script("reenter", "oom")
	Release     = script("release", "queue", "record")
	Leave       = script("leave", "queue")
	Renew       = script("renew", "leases")
	ForceUnlock = script("forceunlock", "queue", "force", "announce")
	Describe    = script("describe", "queue", "inspect")

	RWRead        = script("rwread", "queue", "record", "leases", "rwqueue")
	RWWrite       = script("rwwrite", "queue", "record", "leases", "rwqueue")
	RWReenter     = script("rwreenter", "leases")
	RWUnlock      = script("rwunlock", "queue", "record", "leases", "rwqueue")
	RWLeave       = script("rwleave", "queue", "leases", "rwqueue")
	RWDescribe    = script("rwdescribe", "queue", "leases", "rwqueue", "inspect")
	RWForceUnlock = script("rwforceunlock", "queue", "leases", "rwqueue", "force")

	SemAcquire     = script("semacquire", "queue", "record", "leases", "semqueue")
	SemRelease     = script("semrelease", "queue", "leases", "semqueue")
	SemLeave       = script("semleave", "queue", "leases", "semqueue")
	SemAvailable   = script("semavailable", "queue", "leases", "semqueue")
	SemDescribe    = script("semdescribe", "queue", "leases", "semqueue", "inspect")
	SemForceUnlock = script("semforceunlock", "queue", "leases", "semqueue", "force")

	// The count-down latch's scripts (latch.go).
	LatchSet       = script("latchset")
	LatchCountDown = script("latchcountdown", "oom")
	LatchRead      = script("latchread")

	// The election's (election.go): the Mutex's acquire and release inside.
	Elect       = composed("elect", "acquire", "queue", "record", "announce")
	ElectResign = composed("electresign", "release", "queue", "record", "announce")
	ElectRead   = script("electread")

	// Redisson's RLock format (redisson.go).
	RedissonAcquire     = script("redissonacquire")
	RedissonReenter     = script("redissonreenter", "oom")
	RedissonRelease     = script("redissonrelease", "record")
	RedissonForceUnlock = script("redissonforceunlock", "queue", "force")
	RedissonDescribe    = script("redissondescribe", "queue", "inspect")
)

// library puts clock.lua and oom.lua before any other prelude, each once:
// the library reads the server's time, and writes first where a count goes
// down (oom.lua). A script without preludes gets neither.
func library(preludes []string) []string {
	if len(preludes) == 0 {
		return nil
	}
	out := []string{"clock", "oom"}
	for _, p := range preludes {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// All returns every script latchkey runs: the ACL test checks that the
// commands they call are in the documented grant.
func All() []*Script { return slices.Clone(all) }

// Script is one Lua script with its SHA-1 computed once.
type Script struct {
	name string
	src  string
	sha  string
	lua  *rueidis.Lua
}

// New wraps src; tests run scripts of their own through it.
func New(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{name: name, src: src, sha: hex.EncodeToString(sum[:]), lua: rueidis.NewLuaScript(src)}
}

// Name is the script's file name without .lua, for errors and logs.
func (s *Script) Name() string { return s.name }

// Source is the script's Lua text.
func (s *Script) Source() string { return s.src }

// Exec runs the script once: EVALSHA, then EVAL on NOSCRIPT (a restarted or
// flushed Redis). Every key must share a Cluster slot (latchkey's names are
// hash-tagged); a call refused with TRYAGAIN while that slot migrates is
// sent again until the migration or ctx ends (tryagain.go). A WRONGTYPE
// comes back as a *WrongTypeError, as from every way of running a script.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	backoff := Backoff{Min: tryAgainMin, Max: tryAgainMax}
	for {
		out := s.lua.Exec(ctx, c, keys, args)
		if !IsTryAgain(out.Error()) || !backoff.Sleep(ctx) {
			return refused(out, keys)
		}
	}
}

// Call is one execution in a pipelined ExecMulti.
type Call struct {
	Keys []string
	Args []string
}

// ExecMulti sends every call in one pipeline (split per node on Cluster) and
// returns the replies in order; calls answered NOSCRIPT go again with EVAL
// in a second pipeline. Not rueidis' Lua.ExecMulti: it loads the script on
// every node each call, doubling the watchdog's round trips for a rare case.
// A WRONGTYPE comes back as a *WrongTypeError, as from Exec.
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
	if len(retry) > 0 {
		cmds = cmds[:0]
		for _, i := range retry {
			cmds = append(cmds, s.build(c, calls[i], true))
		}
		for j, r := range c.DoMulti(ctx, cmds...) {
			out[retry[j]] = r
		}
	}
	return refusedAll(out, calls)
}

// refusedAll is refused for each of calls' replies.
func refusedAll(out []rueidis.RedisResult, calls []Call) []rueidis.RedisResult {
	for i := range out {
		out[i] = refused(out[i], calls[i].Keys)
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
