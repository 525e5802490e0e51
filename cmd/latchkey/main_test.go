package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/latchkey/latchkey/internal/redistest"
	"github.com/latchkey/latchkey/rlock"
)

// The tests run the built binary against a private redis-server.
var (
	binary   string // the latchkey binary, built by TestMain
	redisURL string // the server's redis:// URL

	buildFlags []string // more flags for go build (race_test.go)
	childEnv   []string // more environment for the binary (race_test.go)
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "latchkey-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "latchkey")
	args := append([]string{"build", "-o", binary}, buildFlags...)
	if out, err := exec.Command(goCommand(), append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building latchkey: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := redistest.StartProcess(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting redis-server: %v\n", err)
		return 1
	}
	defer srv.Close()
	redisURL = "redis://" + srv.Addr
	code := m.Run()
	if err := srv.Close(); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "closing redis-server: %v\n", err)
		code = 1
	}
	if err := goleak.Find(redistest.GoleakIgnores...); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
		code = 1
	}
	return code
}

// goCommand is the go command running this test, when it can be found.
func goCommand() string {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		return "go"
	}
	return gobin
}

// result is how a latchkey process ended.
type result struct {
	code           int
	stdout, stderr string
}

// command returns latchkey with args, on the test's Redis (through
// REDIS_URL), with its output captured into the buffers.
func command(t *testing.T, stdin string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), childEnv...), "REDIS_URL="+redisURL)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// A grandchild left behind must not keep the test waiting on its pipes.
	cmd.WaitDelay = 5 * time.Second
	return cmd, &out, &errOut
}

// latchkey runs latchkey with args to its end.
func latchkey(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return latchkeyEnv(t, nil, stdin, args...)
}

// latchkeyEnv is latchkey with env added to the environment.
func latchkeyEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd, out, errOut := command(t, stdin, args...)
	cmd.Env = append(cmd.Env, env...)
	return finish(t, cmd, cmd.Run(), out, errOut)
}

// finish turns the end of a latchkey process into a result.
func finish(t *testing.T, cmd *exec.Cmd, err error, out, errOut *bytes.Buffer) result {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %v: %v\nstderr: %s", cmd.Args, err, errOut)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// locks returns a library client on the test's Redis.
func locks(t *testing.T) *rlock.Client {
	t.Helper()
	_, c := clients(t)
	return c
}

// clients returns a rueidis client on the test's Redis and a library
// client over it.
func clients(t *testing.T) (rueidis.Client, *rlock.Client) {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{strings.TrimPrefix(redisURL, "redis://")}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rlock.NewClient(rc, rlock.Options{})
	if err != nil {
		rc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); rc.Close() })
	return rc, c
}

// lockName is a lock name of the test's own.
func lockName(t *testing.T) string { return "cli-" + t.Name() }

// waitFile waits until path exists, for a CMD to say it started.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// held reports whether the lock name is held, by trying it once.
func held(t *testing.T, c *rlock.Client, name string) bool {
	t.Helper()
	m := c.Mutex(name)
	lctx, ok, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		if err := m.Unlock(lctx); err != nil {
			t.Fatal(err)
		}
	}
	return !ok
}

// TestCounter: eight latchkey processes at once, each running a few
// non-atomic read-increment-writes of one file under the lock, lose no
// increment.
func TestCounter(t *testing.T) {
	const procs, rounds = 8, 5
	f := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(f, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `n=$(cat "$1"); sleep 0.01; echo $((n+1)) > "$1"`
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			for range rounds {
				if r := latchkey(t, "", "run", lockName(t), "--", "sh", "-c", script, "sh", f); r.code != 0 {
					t.Errorf("exit %d, stderr: %s", r.code, r.stderr)
				}
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(procs*rounds) {
		t.Errorf("counter = %s, want %d", got, procs*rounds)
	}
}

// TestExitStatus: run exits with CMD's status, 128+N when a signal killed
// it, and 127/126 when CMD cannot be run; the lock is free after each.
func TestExitStatus(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	for _, tc := range []struct {
		cmd  []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{[]string{"latchkey-no-such-command"}, 127},
		{[]string{"/"}, 126},
	} {
		r := latchkey(t, "", append([]string{"run", name, "--"}, tc.cmd...)...)
		if r.code != tc.want {
			t.Errorf("%v: exit %d, want %d; stderr: %s", tc.cmd, r.code, tc.want, r.stderr)
		}
		if held(t, c, name) {
			t.Errorf("%v: the lock is still held after run", tc.cmd)
		}
	}
}

// TestToken: CMD gets the lock's name and its fencing token, which rises
// from run to run.
func TestToken(t *testing.T) {
	name := lockName(t)
	prev := int64(0)
	for range 3 {
		r := latchkey(t, "", "run", name, "sh", "-c", `echo "$LATCHKEY_NAME $LATCHKEY_TOKEN"`)
		if r.code != 0 {
			t.Fatalf("exit %d, stderr: %s", r.code, r.stderr)
		}
		gotName, tok, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
		n, err := strconv.ParseInt(tok, 10, 64)
		if gotName != name || err != nil || n <= prev {
			t.Fatalf("CMD saw %q; want %q and a token above %d", r.stdout, name, prev)
		}
		prev = n
	}
}

// holdLock holds name through the library until the test ends.
func holdLock(t *testing.T, c *rlock.Client, name string) {
	t.Helper()
	m := c.Mutex(name)
	lctx, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unlock(lctx) })
}
