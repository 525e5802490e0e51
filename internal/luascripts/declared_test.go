package luascripts_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/latchkey/latchkey/internal/luascripts"
)

// TestDeclaredKeys: every key a script reads or writes is one of the KEYS
// its caller passed. Redis' scripting rules require it: Dragonfly refuses
// a script that touches an undeclared key, and a proxy that routes by the
// declared keys sends it to the wrong place. Built key names ("<key>:d",
// "<key>:<owner>") are the way to break the rule without noticing, so this
// watches the server rather than reading the scripts: the package's own
// tests run under MONITOR, which shows each EVALSHA (with its KEYS) and then
// every command its script issues (the "[0 lua]" lines); the server itself
// says which arguments of each command are keys (COMMAND GETKEYSANDFLAGS).
// Channels are not keys: a script that publishes on one of its KEYS is
// reported too, since Redis checks declared KEYS against an ACL user's key
// patterns, which need not cover the channels. It also checks that every
// script of All() ran, so a new script cannot escape it.
func TestDeclaredKeys(t *testing.T) {
	c := standaloneClient(t)
	audit := startAudit(t, standaloneAddr)
	// The other tests of the package make the situations: grants,
	// refusals, queueing, releases that wake or hand over, leaves, dead
	// holders, describes, renewals (with followers and lease sets), the
	// latch's rounds. Those on a Cluster run there too, unwatched.
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Acquire", TestAcquire}, {"AcquireWaitQueue", TestAcquireWaitQueue}, {"FencingToken", TestFencingToken},
		{"Reenter", TestReenter}, {"Release", TestRelease}, {"ReleaseRetry", TestReleaseRetry},
		{"Leave", TestLeave}, {"ForceUnlock", TestForceUnlock}, {"FamilyForceUnlock", TestFamilyForceUnlock}, {"ForceUnlockShape", TestForceUnlockShape}, {"Inspect", TestInspect},
		{"Renew", TestRenew}, {"RenewLeaseSet", TestRenewLeaseSet}, {"HolderRecordLivesWithTheLock", TestHolderRecordLivesWithTheLock}, {"RenewOne", TestRenewOne},
		{"QueueDescriptions", TestQueueDescriptions},
		{"SemAcquireRelease", TestSemAcquireRelease}, {"SemSizeMismatch", TestSemSizeMismatch},
		{"SemFairness", TestSemFairness}, {"SemDeadHolder", TestSemDeadHolder},
		{"SemDeadQueueHead", TestSemDeadQueueHead}, {"SemLeave", TestSemLeave}, {"SemSmallerWant", TestSemSmallerWant},
		{"RWReadersAndWriters", TestRWReadersAndWriters}, {"RWDeadReader", TestRWDeadReader},
		{"LatchSet", TestLatchSet}, {"LatchCountDown", TestLatchCountDown},
		{"Election", TestElection},
		{"RedissonLock", TestRedissonLock},
	} {
		t.Run(tc.name, tc.run)
	}
	calls := audit.stop(t, c)

	names := make(map[string]string) // SHA-1 -> script name
	for _, s := range luascripts.All() {
		names[sha(s.Source())] = s.Name()
	}
	ran := make(map[string]bool)
	// One report per script and command: the keys it touched undeclared
	// (with their hash tags elided: every test has its own) and the KEYS
	// of a call that did.
	type finding struct {
		keys    []string
		touched map[string]bool
	}
	found := make(map[string]*finding)
	channels := make(map[string][]string) // script name -> the channels it was given as KEYS
	for _, call := range calls {
		name, ok := names[call.sha]
		if !ok {
			continue // a test's own script
		}
		if len(call.cmds) > 0 { // not an EVALSHA answered NOSCRIPT
			ran[name] = true
		}
		for _, cmd := range call.cmds {
			// Channels are not keys (docs/design.md): Redis checks the
			// declared KEYS against a user's key patterns, so a channel
			// declared as one needs a key grant too, which an ACL that
			// grants it as a channel (&pattern) does not give.
			if pub := strings.ToLower(cmd[0]); (pub == "publish" || pub == "spublish") && len(cmd) > 1 && slices.Contains(call.keys, cmd[1]) {
				channels[name] = append(channels[name], untagged(cmd[1]))
			}
			for _, key := range commandKeys(t, c, cmd) {
				if slices.Contains(call.keys, key) {
					continue
				}
				where := name + ": " + strings.ToUpper(cmd[0])
				f := found[where]
				if f == nil {
					f = &finding{keys: call.keys, touched: make(map[string]bool)}
					found[where] = f
				}
				f.touched[untagged(key)] = true
			}
		}
	}
	var bad []string
	for where, f := range found {
		touched := slices.Sorted(maps.Keys(f.touched))
		more := ""
		if len(touched) > 3 {
			touched, more = touched[:3], fmt.Sprintf(" and %d more", len(touched)-3)
		}
		keys := make([]string, len(f.keys))
		for i, k := range f.keys {
			keys[i] = untagged(k)
		}
		bad = append(bad, fmt.Sprintf("%s touches %q%s, not among its KEYS %q", where, touched, more, keys))
	}
	for name, chs := range channels {
		if name == "latchcountdown" {
			// Declares its channel, which lives under latchkey's prefix,
			// so the documented ACL (~latchkey:* &latchkey:*) grants it as
			// a key too. Still to move to ARGV.
			continue
		}
		slices.Sort(chs)
		bad = append(bad, fmt.Sprintf("%s publishes on %q, which its caller declared among its KEYS: pass channels in ARGV", name, slices.Compact(chs)))
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	for _, s := range luascripts.All() {
		if !ran[s.Name()] {
			t.Errorf("%s never ran under the audit: add a test that runs it to TestDeclaredKeys", s.Name())
		}
	}
}

func sha(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// untagged is key with its hash tag's contents elided.
func untagged(key string) string {
	i, j := strings.IndexByte(key, '{'), strings.IndexByte(key, '}')
	if i < 0 || j < i {
		return key
	}
	return key[:i+1] + "…" + key[j:]
}

// scriptCall is one EVAL or EVALSHA the audit saw, with the commands its
// script issued, each as its arguments.
type scriptCall struct {
	sha  string
	keys []string
	cmds [][]string
}

// audit is a MONITOR connection to one server.
type audit struct {
	conn  net.Conn
	done  chan struct{}
	mu    sync.Mutex
	lines [][]string // each monitored command: its source ("lua" or an address) and arguments
	err   error
}

func startAudit(t *testing.T, addr string) *audit {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, waitFor)
	require.NoError(t, err)
	a := &audit{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() { conn.Close(); <-a.done })
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(t, err)
	r := bufio.NewReaderSize(conn, 1<<20)
	ok, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "+OK\r\n", ok)
	go func() {
		defer close(a.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // closed
			}
			from, args, err := parseMonitor(strings.TrimSuffix(line, "\r\n"))
			a.mu.Lock()
			if err != nil && a.err == nil {
				a.err = err
			}
			a.lines = append(a.lines, append([]string{from}, args...))
			a.mu.Unlock()
		}
	}()
	return a
}

// stop sends a marker through c, waits until the monitor has shown it (so
// every command before it has been seen), and returns the script calls.
func (a *audit) stop(t *testing.T, c rueidis.Client) []scriptCall {
	t.Helper()
	marker := fmt.Sprintf("audit-end-%d", seq.Add(1))
	require.NoError(t, c.Do(t.Context(), c.B().Echo().Message(marker).Build()).Error())
	deadline := time.Now().Add(waitFor)
	for {
		a.mu.Lock()
		n := len(a.lines)
		last := []string{}
		if n > 0 {
			last = a.lines[n-1]
		}
		a.mu.Unlock()
		if len(last) == 3 && strings.EqualFold(last[1], "echo") && last[2] == marker {
			break
		}
		require.True(t, time.Now().Before(deadline), "MONITOR never showed the end marker")
		time.Sleep(10 * time.Millisecond)
	}
	a.conn.Close()
	<-a.done
	require.NoError(t, a.err)
	var calls []scriptCall
	var cur *scriptCall
	for _, l := range a.lines {
		from, args := l[0], l[1:]
		if from == "lua" {
			if cur != nil {
				cur.cmds = append(cur.cmds, args)
			}
			continue
		}
		cur = nil
		if len(args) < 3 {
			continue
		}
		var s string
		switch strings.ToLower(args[0]) {
		case "evalsha":
			s = args[1]
		case "eval":
			s = sha(args[1])
		default:
			continue
		}
		n, err := strconv.Atoi(args[2])
		require.NoError(t, err, "numkeys of %q", args)
		require.LessOrEqual(t, 3+n, len(args), "numkeys of %q", args)
		calls = append(calls, scriptCall{sha: strings.ToLower(s), keys: args[3 : 3+n]})
		cur = &calls[len(calls)-1]
	}
	return calls
}

// commandKeys asks the server which of cmd's arguments are keys. Channels
// (PUBLISH, SPUBLISH) and commands without arguments have none.
func commandKeys(t *testing.T, c rueidis.Client, cmd []string) []string {
	t.Helper()
	if len(cmd) < 2 {
		return nil
	}
	v, err := c.Do(t.Context(), c.B().Arbitrary("COMMAND", "GETKEYSANDFLAGS").Args(cmd...).Build()).ToArray()
	if err != nil && strings.Contains(err.Error(), "no key arguments") {
		return nil
	}
	require.NoError(t, err, "COMMAND GETKEYSANDFLAGS %q", cmd)
	var keys []string
	for _, e := range v {
		kf, err := e.ToArray()
		require.NoError(t, err)
		require.NotEmpty(t, kf)
		k, err := kf[0].ToString()
		require.NoError(t, err)
		keys = append(keys, k)
	}
	return keys
}

// parseMonitor splits one MONITOR line, `+<time> [<db> <source>] "arg"
// ...`, into the source ("lua" for a script's commands) and the arguments,
// unquoted as sdscatrepr quoted them.
func parseMonitor(line string) (string, []string, error) {
	lb, rb := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
	if !strings.HasPrefix(line, "+") || lb < 0 || rb < lb {
		return "", nil, fmt.Errorf("MONITOR line %q", line)
	}
	from := line[lb+1 : rb]
	if sp := strings.IndexByte(from, ' '); sp >= 0 {
		from = from[sp+1:]
	}
	var args []string
	rest := line[rb+1:]
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return from, args, nil
		}
		if rest[0] != '"' {
			return "", nil, fmt.Errorf("MONITOR line %q: argument at %q", line, rest)
		}
		var b strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] != '\\' || i+1 >= len(rest) {
				b.WriteByte(rest[i])
				continue
			}
			i++
			switch rest[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(rest) {
					return "", nil, fmt.Errorf("MONITOR line %q: short \\x", line)
				}
				n, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
				if err != nil {
					return "", nil, fmt.Errorf("MONITOR line %q: %w", line, err)
				}
				b.WriteByte(byte(n))
				i += 2
			default: // \\ and \"
				b.WriteByte(rest[i])
			}
		}
		if i >= len(rest) {
			return "", nil, fmt.Errorf("MONITOR line %q: unterminated argument", line)
		}
		args = append(args, b.String())
		rest = rest[i+1:]
	}
}
