package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// forceUnlockTimeout bounds force-unlock's one call to Redis.
const forceUnlockTimeout = 10 * time.Second

// forceUnlock is `latchkey force-unlock`.
func forceUnlock(args, env []string, std stdio) int {
	var c common
	fs := newFlags("force-unlock", "[flags] NAME", env, std, &c)
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	switch fs.NArg() {
	case 0:
		return usageError(fs, "missing NAME")
	case 1:
	default:
		return usageError(fs, "one NAME only, and flags before it")
	}
	name := fs.Arg(0)
	if !*yes {
		fmt.Fprintf(std.err, "Delete the lock %q whoever holds it? [y/N] ", name)
		answer, _ := bufio.NewReader(std.in).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			fmt.Fprintln(std.err, "latchkey: not confirmed; the lock is left alone (--yes skips the question)")
			return exitError
		}
	}
	locks, closeLocks, err := connect(c, rlock.Options{})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		return exitFor(err)
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(context.Background(), forceUnlockTimeout)
	defer cancel()
	existed, err := locks.ForceUnlock(ctx, name)
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %v\n", err)
		return exitFor(err)
	}
	if existed {
		fmt.Fprintf(std.out, "deleted the lock %q\n", name)
	} else {
		fmt.Fprintf(std.out, "there was no lock %q\n", name)
	}
	return 0
}
