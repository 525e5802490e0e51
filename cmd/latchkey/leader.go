package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// leaderOut is one leader as `latchkey leader --json` prints it: Leading
// false (and nothing else) when nobody leads.
type leaderOut struct {
	Name    string            `json:"name"`
	Leading bool              `json:"leading"`
	Value   string            `json:"value,omitempty"`
	Token   int64             `json:"token,omitempty"`
	Since   *time.Time        `json:"since,omitempty"`
	Client  *rlock.ClientInfo `json:"client,omitempty"`
}

// leader is `latchkey leader NAME`: the election NAME's current leader,
// or with --watch each change until SIGINT, SIGTERM or an error that no
// retry cures.
func leader(args, env []string, std stdio) int {
	var c common
	fs := newFlags("leader", "[--json] [--watch] [flags] NAME", env, std, &c)
	asJSON := fs.Bool("json", false, "print JSON (with --watch, one object per line) instead of text")
	watch := fs.Bool("watch", false, "print the leader, then each change, until interrupted")
	if code := parse(fs, args, std); code >= 0 {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, "want one NAME, after the flags")
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
	e := locks.Election(name)
	print := func(l rlock.Leadership) error { return writeLeader(std.out, name, l, *asJSON, *watch) }
	// Read once with --watch too: a Redis that cannot be reached at the
	// start exits 69 as without --watch, where the watch would retry it.
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	l, err := e.Leader(ctx)
	cancel()
	if errors.Is(err, rlock.ErrNoLeader) {
		err = nil
	}
	if err == nil && !*watch {
		err = print(l) // Observe prints the leader first when watching
	}
	if err != nil {
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
		return exitFor(err)
	}
	if !*watch {
		return 0
	}
	// Watching ends normally with a signal. Errors that may clear (Redis
	// out of reach) are retried, said once each; one that cannot (Redis
	// refusing the user, NOPERM) ends it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var printErr error
	err = e.Watch(ctx, func(l rlock.Leadership) error {
		printErr = print(l)
		return printErr
	}, func(err error) {
		if err != nil {
			fmt.Fprintf(std.err, "latchkey: %s; retrying\n", errText(err))
		} else {
			fmt.Fprintf(std.err, "latchkey: watching %q again\n", name)
		}
	})
	switch {
	case ctx.Err() != nil:
		return 0
	case printErr != nil:
		fmt.Fprintf(std.err, "latchkey: %s\n", errText(printErr))
		return exitError
	}
	fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
	return exitFor(err)
}

// writeLeader prints l: a line "VALUE token T client C host H pid P
// since S" or "(no leader)", or JSON, one line of it when watching.
func writeLeader(w io.Writer, name string, l rlock.Leadership, asJSON, oneLine bool) error {
	out := leaderOut{Name: name, Leading: l != rlock.Leadership{}}
	if out.Leading {
		out.Value, out.Token, out.Since, out.Client = l.Value, l.Token, &l.Since, &l.Client
	}
	switch {
	case asJSON && oneLine:
		return json.NewEncoder(w).Encode(out)
	case asJSON:
		return writeJSON(w, out)
	case !out.Leading:
		_, err := fmt.Fprintln(w, "(no leader)")
		return err
	}
	value := shown(l.Value)
	if value == "" {
		value = `""` // a holder of the Mutex (latchkey run) leads with no value
	}
	_, err := fmt.Fprintf(w, "%s\ttoken %d\tclient %s\thost %s\tpid %d\tsince %s\n", value, l.Token,
		shown(who(l.Client, l.Client.ID)), shown(l.Client.Host), l.Client.PID, l.Since.Format(time.RFC3339Nano))
	return err
}
