package redistest

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		Logf = func(string, ...any) {}
	}
	code := m.Run()
	// A cluster test's rueidis client may leave a delayed topology refresh
	// behind for up to a second after Close (see leakGrace), which outlasts
	// goleak.VerifyTestMain's retries.
	if err := findLeaks(); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// newClient connects rueidis without client-side caching, which is not what
// these tests are about and would add tracking traffic.
func newClient(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	require.NoError(t, err)
	return c
}

// requirePong checks the server answers through a real client library, not
// only through this package's own RESP code.
func requirePong(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	c := newClient(t, addr)
	defer c.Close()
	got, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "PONG", got)
}

// redisChildren lists redis-server processes whose parent is this test
// binary, so tests can prove Close reaped them.
func redisChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	me := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// Format: pid (comm) state ppid ...; comm may contain spaces.
		s := string(stat)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		if ppid == me && strings.HasPrefix(s[open+1:close], "redis-") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func requireProcessGone(t *testing.T, pid int) {
	t.Helper()
	err := syscall.Kill(pid, 0)
	require.ErrorIs(t, err, syscall.ESRCH, "redis-server pid %d still exists after Close", pid)
}

func TestStartProcessWhenDockerDisabled(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("LATCHKEY_NO_DOCKER", "1")
	ctx := context.Background()

	start := time.Now()
	s, err := Start(ctx)
	require.NoError(t, err)
	t.Logf("Start (process) took %s", time.Since(start))
	defer s.Close()

	require.Equal(t, KindProcess, s.Kind)
	host, _, err := net.SplitHostPort(s.Addr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	requirePong(t, ctx, s.Addr)
	require.Contains(t, redisChildren(t), s.pid)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close must be idempotent")
	requireProcessGone(t, s.pid)
	require.Empty(t, redisChildren(t))
}

func TestStartProcessExtraArgsAndCleanup(t *testing.T) {
	ctx := context.Background()
	s, err := StartProcess(ctx, "--maxmemory", "12345678")
	require.NoError(t, err)
	defer s.Close()

	v, err := command(ctx, s.Addr, "CONFIG", "GET", "maxmemory")
	require.NoError(t, err)
	require.Equal(t, []any{"maxmemory", "12345678"}, v)
	v, err = command(ctx, s.Addr, "CONFIG", "GET", "save")
	require.NoError(t, err)
	require.Equal(t, []any{"save", ""}, v, "persistence must be off")

	v, err = command(ctx, s.Addr, "CONFIG", "GET", "dir")
	require.NoError(t, err)
	dir := v.([]any)[1].(string)
	require.DirExists(t, dir)

	require.NoError(t, s.Close())
	requireProcessGone(t, s.pid)
	require.NoDirExists(t, dir)
}

// A restart in place: the new server answers on the old address, has none
// of the old data (no persistence), and a taken port is reported as such.
func TestStartProcessOnPort(t *testing.T) {
	ctx := context.Background()
	first, err := StartProcess(ctx)
	require.NoError(t, err)
	defer first.Close()
	_, portStr, err := net.SplitHostPort(first.Addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)
	_, err = command(ctx, first.Addr, "SET", "before-restart", "1")
	require.NoError(t, err)

	_, err = StartProcessOnPort(ctx, port)
	require.ErrorIs(t, err, ErrPortInUse)
	require.Equal(t, []int{first.pid}, redisChildren(t), "the failed start left nothing running")

	require.NoError(t, first.Close())
	second, err := StartProcessOnPort(ctx, port)
	require.NoError(t, err)
	defer second.Close()
	require.Equal(t, first.Addr, second.Addr)
	require.NotEqual(t, first.pid, second.pid)
	v, err := command(ctx, second.Addr, "EXISTS", "before-restart")
	require.NoError(t, err)
	require.Equal(t, int64(0), v, "a restart without persistence starts empty")
	require.NoError(t, second.Close())
	requireProcessGone(t, second.pid)
}

func TestStartProcessReportsEarlyExit(t *testing.T) {
	start := time.Now()
	_, err := StartProcess(context.Background(), "--no-such-option", "x")
	require.ErrorContains(t, err, "exited during start-up")
	require.ErrorContains(t, err, "no-such-option", "the server log should be quoted")
	require.True(t, time.Since(start) < readyTimeout/2, "a crashed server must fail fast, took %s", time.Since(start))
	require.Empty(t, redisChildren(t))
}

// Callers such as the integration suite run goleak while their shared servers
// are still up, so a running server must not own any goroutine. (The
// Docker starter's own check is in integration/dockerredis.)
func TestNoGoroutinesWhileServersRun(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	ctx := context.Background()
	var closers []func() error

	p, err := StartProcess(ctx)
	require.NoError(t, err)
	closers = append(closers, p.Close)
	cl, err := StartCluster(ctx, 2)
	require.NoError(t, err)
	closers = append(closers, cl.Close)
	defer func() {
		for _, c := range closers {
			c()
		}
	}()

	require.NoError(t, findLeaks())
}

func TestStartFromEnv(t *testing.T) {
	ctx := context.Background()
	backing, err := StartProcess(ctx)
	require.NoError(t, err)
	defer backing.Close()

	_, port, _ := net.SplitHostPort(backing.Addr)
	for _, addr := range []string{backing.Addr, "localhost:" + port} {
		t.Setenv("REDIS_ADDR", addr)
		s, err := Start(ctx)
		require.NoError(t, err)
		require.Equal(t, KindEnv, s.Kind)
		require.Equal(t, addr, s.Addr)
		require.NoError(t, s.Close())
		// Close must not stop a server we do not own.
		requirePong(t, ctx, backing.Addr)
	}

	for _, bad := range []string{"10.1.2.3:6379", "redis.example.com:6379"} {
		t.Setenv("REDIS_ADDR", bad)
		_, err := Start(ctx)
		require.ErrorContains(t, err, "loopback")
	}
	t.Setenv("REDIS_ADDR", "no-port")
	_, err = Start(ctx)
	require.ErrorContains(t, err, "host:port")
}

func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	start := time.Now()
	cl, err := StartCluster(ctx, 3)
	require.NoError(t, err)
	t.Logf("StartCluster(3) took %s", time.Since(start))
	defer cl.Close()
	require.Len(t, cl.Addrs, 3)

	c := newClient(t, cl.Addrs...)
	defer c.Close()

	// Enough keys that every master gets some; proves routing by slot.
	const keys = 60
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		require.NoError(t, c.Do(ctx, c.B().Set().Key(k).Value(k).Build()).Error())
	}
	for i := range keys {
		k := fmt.Sprintf("key-%d", i)
		got, err := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, k, got)
	}
	for _, addr := range cl.Addrs {
		n, err := command(ctx, addr, "DBSIZE")
		require.NoError(t, err)
		require.Greater(t, n.(int64), int64(0), "node %s got no keys", addr)
	}

	// Sharded pub/sub on channels hashing to different nodes.
	for _, ch := range []string{"{a}chan", "{b}chan", "{c}chan"} {
		testShardedPubSub(t, ctx, c, ch)
	}

	pids := make([]int, 0, len(cl.procs))
	for _, p := range cl.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	c.Close()
	require.NoError(t, cl.Close())
	for _, pid := range pids {
		requireProcessGone(t, pid)
	}
	require.Empty(t, redisChildren(t))
}

func testShardedPubSub(t *testing.T, ctx context.Context, c rueidis.Client, channel string) {
	t.Helper()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(subCtx, c.B().Ssubscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
			select {
			case got <- m.Message:
			default:
			}
		})
	}()

	// SPUBLISH reports how many subscribers received the message, which
	// tells us when the subscription is in place without sleeping blindly.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Do(ctx, c.B().Spublish().Channel(channel).Message("hello").Build()).AsInt64()
		require.NoError(t, err)
		if n > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no subscriber on %s", channel)
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case m := <-got:
		require.Equal(t, "hello", m)
	case <-time.After(10 * time.Second):
		t.Fatalf("no message on %s", channel)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Receive on %s did not return after cancel", channel)
	}
}

func TestStartClusterRejectsBadSize(t *testing.T) {
	_, err := StartCluster(context.Background(), 0)
	require.Error(t, err)
}

func TestBinaryHonoursEnv(t *testing.T) {
	t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
	_, err := Binary()
	require.ErrorContains(t, err, "REDIS_SERVER")

	t.Setenv("REDIS_SERVER", "")
	p, err := Binary()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(p, "redis-server"), "Binary must keep the redis-server name (argv[0] picks the mode): %s", p)
}

// must is a minimal fail-fast assertion set. testify cannot be used here: its
// current release imports go.yaml.in/yaml/v3, which is not available offline.
