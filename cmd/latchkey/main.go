// Command latchkey is a command-line front end to latchkey's locks: a
// distributed flock(1) that runs a command while it holds a lock in Redis,
// and a way to break a lock whose holder is gone.
//
// Usage:
//
//	latchkey run [--wait D] [--conflict-exit-code N] [--shared | --permits N --size S] [--lease D] [--grace D]
//	             [--watchdog-timeout D] [--client-name N] [--redis URL] [--prefix P] [--pubsub M] NAME [--] CMD [ARG...]
//	latchkey force-unlock [--kind K] [--yes] [--redis URL] [--prefix P] [--pubsub M] NAME
//	latchkey status [--json] [--kind K] [--redis URL] [--prefix P] [--pubsub M] NAME
//	latchkey list [--json] [--redis URL] [--prefix P] [--pubsub M] [PATTERN]
//	latchkey leader [--json] [--watch] [--redis URL] [--prefix P] [--pubsub M] NAME
//	latchkey --version
//
// Flags take one dash or two; -h after a subcommand describes its flags.
// A duration D is a number of seconds (10, 0.5) or a Go duration (1m30s).
// --redis takes a rueidis URL (redis://[user:password@]host:port/db,
// rediss:// for TLS); its default is $LATCHKEY_REDIS_URL, else $REDIS_URL,
// else redis://127.0.0.1:6379. --prefix is the key prefix of the locks
// (rlock.Options.Prefix, default "latchkey"). --pubsub M (auto, classic or
// sharded) must match the rlock.Options.PubSub of the applications sharing
// the locks, since a client of another mode neither hears their releases
// nor wakes their waiters; auto, the default, is theirs. --version prints
// the version of the module latchkey was built from ("(devel)" when
// unknown).
//
// # run
//
// run takes the lock NAME, runs CMD with the lock's fencing token in
// LATCHKEY_TOKEN and the lock's name in LATCHKEY_NAME, releases the lock
// when CMD exits and exits with CMD's status. CMD shares latchkey's stdin,
// stdout and stderr. Flags go before NAME: everything after it is CMD.
//
// NAME is a Mutex. With --shared it is an RWMutex whose read side run
// takes (shared with other readers, excluded by its writers); with
// --permits N --size S, N permits (default 1) of a Semaphore of S. Neither
// has fencing tokens, so CMD gets no LATCHKEY_TOKEN.
//
// Without --wait, run waits for the lock as long as it takes; with --wait D
// it gives up after D and exits 1 (or --conflict-exit-code's N), and
// --wait 0 tries once (like flock -n). Without --lease the watchdog keeps
// the lock for as long as CMD runs; --lease D holds it for D at most. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to
// latchkey are passed on to CMD, and latchkey exits when CMD does (a Ctrl-C
// in a terminal reaches CMD directly too, so CMD may see it twice). A
// signal that comes while latchkey still waits for the lock ends the wait.
//
// A signal latchkey cannot catch (SIGKILL, the OOM killer) cannot be passed
// on. On Linux the kernel then sends CMD SIGTERM (its parent-death signal),
// so that CMD does not run on without the lock; a CMD that ignores SIGTERM,
// and CMD's own children, may. On other systems CMD runs on unlocked, and
// the lock expires within --watchdog-timeout (or its --lease) while CMD may
// still run: there, kill latchkey's process group rather than latchkey alone.
//
// If the lock is lost while CMD runs (it was force-unlocked, its lease ran
// out, or Redis stayed unreachable past the watchdog's lease), latchkey
// says so on stderr, sends CMD SIGTERM, then SIGKILL after --grace (default
// 10s), and exits 75. The signals go to CMD's process only: a shell script
// that starts children should pass them on, or exec its last command.
//
// Exit status of run:
//
//	CMD's      CMD ran with the lock held throughout and exited
//	128+N      CMD was killed by signal N (as shells report it), or latchkey
//	           got signal N while it still waited for the lock
//	75         the lock was lost while CMD ran (EX_TEMPFAIL: try again)
//	1          the lock was busy (--wait ran out; --conflict-exit-code
//	           changes it), or an error not listed here
//	69         Redis could not be reached, or refused the credentials
//	           (EX_UNAVAILABLE); also a --wait that ran out after its
//	           last try failed to reach Redis, whatever
//	           --conflict-exit-code says
//	2          a usage error: bad flags or flag values (--lease out of
//	           1ms..8760h, --watchdog-timeout out of 30ms..8760h, a
//	           --prefix with a brace), NAME or CMD missing, a bad Redis URL
//	           or lock name, a Semaphore used with another --size
//	126, 127   CMD could not be started, or was not found (as timeout(1))
//
// # force-unlock
//
// force-unlock deletes the lock NAME whoever holds it, and wakes its
// waiters as a release would; a Mutex is the leader's of the election NAME,
// whose observers it tells as a resignation does. NAME is a Mutex (what
// run takes) unless --kind says rwmutex or semaphore. It asks for confirmation on stdin
// first unless given --yes; an answer other than y or yes leaves the lock
// alone and exits 1, as does --yes on a lock status shows damaged. A key
// that is not latchkey's (another type, or a hash not of a lock's shape:
// an application's key behind a wrong --prefix) is never deleted: exit 1.
// It exits 0 once the lock is gone, whether or not
// there was one, 69 when Redis cannot be reached, 2 on a usage error. A
// holder run by latchkey notices the loss at its next watchdog renewal,
// within half of its --watchdog-timeout (renewals come every third of it,
// but one due less than half an interval after the last, or the grant,
// waits a tick), and stops its command; a holder with a --lease does not
// notice until its lease ends.
//
// # status, list
//
// status prints who holds the lock NAME (client name, host, pid, hold
// count, fencing token, how long it has been held, the lease left) and the
// clients queued for it, oldest first; a free lock prints as "(free)".
// NAME is a Mutex, the kind run takes, unless --kind says rwmutex (holds
// and waiters then have a mode, read or write) or semaphore (holders show
// their permits, waiters what they wait for). list prints the same for
// every held lock of every kind whose name matches PATTERN (Redis glob
// syntax, default "*"; no braces), found with SCAN on the server or every
// Cluster master. Both print a table (names, client names and hosts with
// an unprintable rune quoted as Go strings), or JSON with --json, and exit
// 0, 1 on an error, 69 when Redis cannot be reached, or 2 on a usage error
// (a bad PATTERN too). A holder or waiter started by `latchkey run` is
// named after its command's base name ("latchkey run backup.sh"), never its
// arguments, or by run's --client-name.
//
// # leader
//
// leader prints the current leader of the election NAME (rlock.Election):
// its value, fencing token, client, host, pid and since when it leads, or
// "(no leader)"; JSON with --json. With --watch it prints the leader, then
// each change as it is announced, until SIGINT or SIGTERM (exit 0); errors
// that may clear (Redis out of reach) are said on stderr once each and
// retried, one that cannot (Redis refusing the user: NOPERM) ends it. A
// holder of the Mutex NAME (`latchkey run NAME`) leads with an empty
// value. It exits 1 on an error, 69 when Redis cannot be reached, 2 on a
// usage error.
//
// # Bad input and time limits
//
// Every command checks its NAME or PATTERN and its flags' values before it
// connects, so a bad one exits 2 whether Redis is up or not; a call that
// runs out of the command's own time exits 1, not 69, unless it also failed
// to reach Redis.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/rlock"
	"github.com/latchkey/latchkey/watchdog"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

// Exit statuses of latchkey's own making (see the package comment).
const (
	exitError       = 1
	exitUsage       = 2
	exitUnavailable = 69 // EX_UNAVAILABLE: Redis unreachable, or it refused the credentials
	exitLost        = 75 // EX_TEMPFAIL
	exitNoExec      = 126
	exitNotFound    = 127
)

const usage = `Usage:
  latchkey run [flags] NAME [--] CMD [ARG...]
                             run CMD while holding the lock NAME
  latchkey status [--json] [--kind K] [flags] NAME
                             who holds the lock NAME, and who waits
  latchkey list [--json] [flags] [PATTERN]
                             the held locks whose names match PATTERN
  latchkey force-unlock [--kind K] [--yes] [flags] NAME
                             delete the lock NAME whoever holds it
  latchkey leader [--json] [--watch] [flags] NAME
                             the leader of the election NAME (--watch: each change)
  latchkey SUBCOMMAND -h     describe a subcommand's flags
  latchkey --version         print latchkey's version

Redis: --redis URL, else $LATCHKEY_REDIS_URL, else $REDIS_URL, else
redis://127.0.0.1:6379.
`

// run is latchkey with its arguments (without the program name), its
// environment (as os.Environ) and its standard streams; it returns the
// exit status.
func run(args, env []string, std stdio) int {
	if len(args) == 0 {
		fmt.Fprint(std.err, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(args[1:], env, std)
	case "force-unlock":
		return forceUnlock(args[1:], env, std)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(std.out, usage)
		return 0
	case "-version", "--version", "version":
		fmt.Fprintf(std.out, "latchkey %s\n", version())
		return 0
	case "status", "list":
		return status(args[1:], env, std, args[0] == "list")
	case "leader":
		return leader(args[1:], env, std)
	default:
		fmt.Fprintf(std.err, "latchkey: unknown subcommand %q\n%s", args[0], usage)
		return exitUsage
	}
}

// version is the version of latchkey's module this binary was built from:
// its tag with go install …@version, "(devel)" when the build knew none.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// common are the flags every subcommand takes.
type common struct {
	redis    string
	envRedis string // $REDIS_URL
	prefix   string
	pubsub   pubsubFlag
}

// pubsubFlag is --pubsub: the rlock.PubSubMode the applications sharing the
// locks use, since a client of another mode neither hears their releases
// nor wakes their waiters.
type pubsubFlag rlock.PubSubMode

var pubsubModes = map[string]rlock.PubSubMode{"auto": rlock.PubSubAuto, "classic": rlock.PubSubClassic, "sharded": rlock.PubSubSharded}

func (f *pubsubFlag) String() string {
	for name, m := range pubsubModes {
		if m == rlock.PubSubMode(*f) {
			return name
		}
	}
	return ""
}

func (f *pubsubFlag) Set(s string) error {
	m, ok := pubsubModes[s]
	if !ok {
		return errors.New("want auto, classic or sharded")
	}
	*f = pubsubFlag(m)
	return nil
}

// newFlags returns the flag set of a subcommand, with the common flags
// bound to c. Its errors go to std.err; parse handles -h.
func newFlags(name, synopsis string, env []string, std stdio, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("latchkey "+name, flag.ContinueOnError)
	fs.SetOutput(std.err)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: latchkey %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	// The default is resolved in connect, so that -h never shows a password.
	// latchkey's own variable first, as one Redis may not serve all.
	c.envRedis = lookup(env, "LATCHKEY_REDIS_URL")
	if c.envRedis == "" {
		c.envRedis = lookup(env, "REDIS_URL")
	}
	fs.StringVar(&c.redis, "redis", "", "Redis `URL`: redis://[user:password@]host:port[/db], rediss:// for TLS (default $LATCHKEY_REDIS_URL, else $REDIS_URL, else "+defaultRedis+")")
	fs.StringVar(&c.prefix, "prefix", rlock.DefaultPrefix, "key `prefix` of the locks")
	fs.Var(&c.pubsub, "pubsub", "pub/sub `mode` of the applications sharing the locks: auto (sharded on a Cluster, else classic), classic or sharded (rlock.Options.PubSub)")
	return fs
}

const defaultRedis = "redis://127.0.0.1:6379"

// parse parses args into fs. It returns -1 to go on, or the exit status:
// 0 after -h (the usage went to stdout), exitUsage after a bad flag (the
// message and the usage went to stderr).
func parse(fs *flag.FlagSet, args []string, std stdio) int {
	var msg bytes.Buffer
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(std.err)
	switch {
	case err == nil:
		return -1
	case errors.Is(err, flag.ErrHelp):
		_, _ = msg.WriteTo(std.out)
		return 0
	default:
		_, _ = msg.WriteTo(std.err)
		return exitUsage
	}
}

// usageError reports a bad command line, with fs's usage, and returns
// exitUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.Usage()
	return exitUsage
}

// lookup returns the value of key in env (as os.Environ), or "".
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last one wins, as with getenv
		}
	}
	return v
}

// checkInput reports err, rlock's verdict on a NAME or PATTERN, as a usage
// error (and returns -1 for nil). The commands ask before they connect, so
// that bad input exits 2 whether or not Redis can be reached.
func checkInput(std stdio, err error) int {
	if err == nil {
		return -1
	}
	fmt.Fprintf(std.err, "latchkey: %s\n", errText(err))
	return exitUsage
}

// connect opens a rueidis client on c.redis and a latchkey client on it
// with opts (c.prefix as its Prefix). close closes both.
func connect(c common, opts rlock.Options) (locks *rlock.Client, close func(), err error) {
	opts.Prefix, opts.PubSub = c.prefix, rlock.PubSubMode(c.pubsub)
	if err := checkOptions(opts); err != nil {
		return nil, nil, err
	}
	u := c.redis
	switch {
	case u != "":
	case c.envRedis != "":
		u = c.envRedis
	default:
		u = defaultRedis
	}
	ro, err := parseRedisURL(u)
	if err != nil {
		return nil, nil, err
	}
	// latchkey needs no client-side caching, and a minimal ACL user may not
	// run the CLIENT TRACKING it would send.
	ro.DisableCache = true
	rc, err := rueidis.NewClient(ro)
	if err != nil {
		return nil, nil, fmt.Errorf("%w at %s: %w (check the URL, its credentials, and that Redis runs there)", errUnavailable, redact(u), err)
	}
	locks, err = rlock.NewClient(rc, opts)
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return locks, func() { locks.Close(); rc.Close() }, nil
}

// checkOptions is rlock's verdict on opts, which the flags set, asked
// before connect dials (rlock.NewClient would give it only once rueidis
// had connected): a bad value exits 2 whether or not Redis can be reached.
// Each flag's value is asked about alone, so that the message names the
// flag and its bounds rather than rlock.Options' fields; opts as a whole
// last, for what no one flag explains.
func checkOptions(opts rlock.Options) error {
	for _, f := range []struct {
		opts rlock.Options
		msg  func() string
	}{
		{rlock.Options{WatchdogTimeout: opts.WatchdogTimeout}, func() string {
			// rlock's floor, 3 × the watchdog's shortest interval: the CLI
			// leaves the interval at its default, a third of the timeout.
			return fmt.Sprintf("--watchdog-timeout %s: want %s to %s", shortDur(opts.WatchdogTimeout), shortDur(3*watchdog.MinInterval), shortDur(rlock.MaxLease))
		}},
		{rlock.Options{Prefix: opts.Prefix}, func() string {
			if len(opts.Prefix) > rlock.MaxPrefixLen {
				return fmt.Sprintf("--prefix is %d bytes, the limit is %d", len(opts.Prefix), rlock.MaxPrefixLen)
			}
			return fmt.Sprintf("--prefix %q: want valid UTF-8 without braces", opts.Prefix)
		}},
		{rlock.Options{ClientName: opts.ClientName}, func() string {
			return fmt.Sprintf("--client-name is %d bytes, the limit is %d", len(opts.ClientName), rlock.MaxClientNameLen)
		}},
	} {
		if err := f.opts.Validate(); err != nil {
			return &optionError{msg: f.msg(), err: err}
		}
	}
	return opts.Validate()
}

// optionError is a bad flag value, said in the CLI's terms; it wraps
// rlock's verdict (rlock.ErrInvalidOptions: exit 2).
type optionError struct {
	msg string
	err error
}

func (e *optionError) Error() string { return e.msg }
func (e *optionError) Unwrap() error { return e.err }

// shortDur is d as time.Duration says it, without its zero minutes and
// seconds: 8760h, not 8760h0m0s.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// errUnavailable marks a Redis that could not be reached or that refused
// the credentials (exit 69, not a busy lock's 1).
var errUnavailable = errors.New("cannot connect to Redis")

// exitFor is the exit status for err, from connect or a call to Redis: a
// usage error for what the command line got wrong, exitUnavailable when
// Redis cannot be reached, else exitError.
func exitFor(err error) int {
	var netErr net.Error
	switch {
	case errors.Is(err, errBadURL), errors.Is(err, rlock.ErrInvalidArgument), errors.Is(err, rlock.ErrInvalidName),
		errors.Is(err, rlock.ErrInvalidOptions), errors.Is(err, rlock.ErrSizeMismatch):
		return exitUsage
	case errors.Is(err, errUnavailable), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return exitUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		// A command's own timeout ran out, Redis answering: it is a
		// net.Error too (Timeout), which must not make it "unreachable".
		return exitError
	case errors.As(err, &netErr):
		return exitUnavailable
	}
	return exitError
}

// seconds is a duration flag that reads a plain number as seconds, as
// flock -w and timeout(1) do ("10", "0.5"), and a Go duration ("1m30s").
type seconds time.Duration

func (s *seconds) String() string { return time.Duration(*s).String() }

func (s *seconds) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q: want seconds (10, 0.5) or a duration (1m30s)", v)
		}
		*s = seconds(d)
		return nil
	}
	if math.IsNaN(f) || math.Abs(f) > math.MaxInt64/float64(time.Second) {
		return fmt.Errorf("%q seconds is out of range (%v at most)", v, time.Duration(math.MaxInt64))
	}
	*s = seconds(f * float64(time.Second))
	return nil
}

// stdio is a command's standard streams. Those of run are CMD's too: pass
// *os.File values to let CMD use them directly.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// errText is err's message without the "latchkey: " that the library's
// errors start with: a line of the CLI says it once, at its start.
func errText(err error) string { return strings.TrimPrefix(err.Error(), "latchkey: ") }
