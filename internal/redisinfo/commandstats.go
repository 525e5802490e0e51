package redisinfo

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// CommandCalls maps each command in an INFO commandstats reply (lower case,
// subcommands as "config|resetstat") to its calls since the last CONFIG
// RESETSTAT. Redis counts the commands a Lua script runs as well as the
// EVALSHA that ran it.
func CommandCalls(info map[string]string) map[string]int64 {
	calls := make(map[string]int64)
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(v, ",") {
			if n, ok := strings.CutPrefix(field, "calls="); ok {
				if c, err := strconv.ParseInt(n, 10, 64); err == nil {
					calls[name] = c
				}
			}
		}
	}
	return calls
}

// Commands runs INFO commandstats and returns CommandCalls of it.
func Commands(ctx context.Context, rc rueidis.Client) (map[string]int64, error) {
	info, err := Get(ctx, rc, "commandstats")
	if err != nil {
		return nil, err
	}
	return CommandCalls(info), nil
}

// OverheadCommands are the commands (subcommands included) that are not a
// lock's work: the harness's own (INFO, CONFIG RESETSTAT, FLUSHALL) and the
// handshake and keep-alive of client connections (HELLO, CLIENT ..., PING,
// AUTH, SELECT, COMMAND ...), which depend on connection counts and timers
// rather than on acquisitions.
var OverheadCommands = []string{"info", "config", "flushall", "hello", "client", "ping", "auth", "select", "command"}

// Overhead tells whether cmd, as CommandCalls names it, is one of
// OverheadCommands.
func Overhead(cmd string) bool {
	base, _, _ := strings.Cut(cmd, "|")
	return slices.Contains(OverheadCommands, base)
}

// LockCommands sums the calls of every command that is not Overhead.
func LockCommands(calls map[string]int64) int64 {
	var n int64
	for cmd, c := range calls {
		if !Overhead(cmd) {
			n += c
		}
	}
	return n
}

// SubscribeCommands are the commands that join a pub/sub channel, classic
// and sharded, and UnsubscribeCommands those that leave one, as
// CommandCalls names them. A waiter that subscribes for each wait pays one
// of each per wait; a poller none.
var (
	SubscribeCommands   = []string{"subscribe", "ssubscribe"}
	UnsubscribeCommands = []string{"unsubscribe", "sunsubscribe"}
)

// Sum adds up the calls of the commands named.
func Sum(calls map[string]int64, names []string) int64 {
	var n int64
	for _, name := range names {
		n += calls[name]
	}
	return n
}
