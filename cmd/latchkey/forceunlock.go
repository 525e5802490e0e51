package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// forceUnlockTimeout bounds each of force-unlock's calls to Redis (the
// question in between is not timed).
const forceUnlockTimeout = 10 * time.Second

// forceUnlock is `latchkey force-unlock`: it shows who holds the lock,
// asks, and deletes it. With --yes it refuses a lock Inspect finds
// damaged.
func forceUnlock(args, env []string, std stdio) int {
	var c common
	fs := newFlags("force-unlock", "[--kind K] [--yes] [flags] NAME", env, std, &c)
	yes := fs.Bool("yes", false, "do not ask for confirmation (a damaged lock is refused)")
	kind := fs.String("kind", string(rlock.KindMutex), "the kind of lock NAME is: mutex (what run takes), rwmutex or semaphore")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	ops, known := kinds[rlock.Kind(*kind)]
	switch {
	case fs.NArg() == 0:
		return usageError(fs, "missing NAME")
	case fs.NArg() > 1:
		return usageError(fs, "one NAME only, and flags before it")
	case !known:
		return usageError(fs, "--kind %q: want mutex, rwmutex or semaphore", *kind)
	}
	name := fs.Arg(0)
	if code := checkInput(std, rlock.ValidateName(name)); code >= 0 {
		return code
	}
	locks, closeLocks, err := connect(c, rlock.Options{})
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	defer closeLocks()
	ctx, cancel := context.WithTimeout(context.Background(), forceUnlockTimeout)
	info, err := ops.inspect(locks, ctx, name)
	cancel()
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	if *yes && info.Damaged != "" {
		// What is not latchkey's may be an application's key (a wrong
		// --prefix or name): a person decides, seeing it, not a script.
		if err := writeTable(std.err, []rlock.LockInfo{info}, true); err != nil {
			fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
			return exitError
		}
		fmt.Fprintf(std.err, "latchkey: the %s %q is damaged (see above): not deleted with --yes; check the name, --kind and --prefix, and run force-unlock without --yes to decide\n", *kind, name)
		return exitError
	}
	if !*yes {
		// Who would lose the lock, before the question: the operator may
		// be about to break a job that is still working.
		if err := writeTable(std.err, []rlock.LockInfo{info}, true); err != nil {
			fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
			return exitError
		}
		fmt.Fprintf(std.err, "Delete the %s %q whoever holds it? [y/N] ", *kind, name)
		answer, _ := bufio.NewReader(std.in).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "y", "yes":
		default:
			fmt.Fprintln(std.err, "latchkey: not confirmed; the lock is left alone (--yes skips the question)")
			return exitError
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), forceUnlockTimeout)
	defer cancel()
	existed, err := ops.forceUnlock(locks, ctx, name)
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	if existed {
		fmt.Fprintf(std.out, "deleted the lock %q (%s)%s\n", name, *kind, heldBy(info))
	} else {
		fmt.Fprintf(std.out, "there was no lock %q (%s)\n", name, *kind)
	}
	return 0
}

// heldBy names the holders info found, for the record of what was deleted,
// as the table shows them: Redis' writers choose the names (shown).
func heldBy(info rlock.LockInfo) string {
	var held []string
	for _, h := range info.Holders {
		held = append(held, fmt.Sprintf("%s (host %q, pid %d)", shown(who(h.Client, h.Owner)), h.Client.Host, h.Client.PID))
	}
	if len(held) == 0 {
		return ""
	}
	return ", held by " + strings.Join(held, ", ")
}
