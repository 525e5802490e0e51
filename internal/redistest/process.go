package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Binary returns the path of the redis-server executable: $REDIS_SERVER when
// set (to test against a locally built Redis), else "redis-server" on PATH.
//
// The path is returned unresolved on purpose: Debian ships redis-server as a
// symlink to redis-check-rdb and picks its mode from argv[0], so executing
// the resolved target would run the RDB checker instead of a server.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("redistest: REDIS_SERVER=%q is not usable: %w; point it at a redis-server executable or unset it", p, err)
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("redistest: REDIS_SERVER=%q is not an executable file; point it at a redis-server executable or unset it", p)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redistest: redis-server not found on PATH (%w); install it with `apt-get install redis-server`, set REDIS_SERVER to its path, or set REDIS_ADDR to a running loopback Redis", err)
	}
	return p, nil
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
// Another process may grab it before the caller binds it, so callers that
// start servers on it must be ready to retry.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: cannot find a free loopback port (is the loopback interface up?): %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// maxPortAttempts bounds retries when a port picked by FreePort is taken by
// someone else before redis-server binds it.
const maxPortAttempts = 5

// StartProcess starts a redis-server child process on 127.0.0.1 at a free
// port, without persistence, using a fresh temporary directory as its working
// dir. extraArgs are appended to the command line (as "--name", "value"
// pairs), so they override the defaults.
//
// ctx only bounds start-up: the server keeps running after ctx is cancelled
// until Close, so a TestMain may use a short start-up deadline.
//
// The child is killed by the kernel (Pdeathsig) if the test binary dies
// without calling Close, so aborted test runs do not leave servers behind.
func StartProcess(ctx context.Context, extraArgs ...string) (*Server, error) {
	return startProcess(ctx, nil, extraArgs)
}

// StartTLSProcess is StartProcess for a server that speaks only TLS, with
// files' certificate: the plain port is off (--port 0), Server.Addr is the
// TLS port, and readiness is probed over TLS with files.ClientConfig().
func StartTLSProcess(ctx context.Context, files *TLSFiles, extraArgs ...string) (*Server, error) {
	return startProcess(ctx, files.ClientConfig(), append(files.ServerArgs(), extraArgs...))
}

// startProcess starts a server that listens with TLS when conf is set.
func startProcess(ctx context.Context, conf *tls.Config, extraArgs []string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	p, err := startOnFreePort(ctx, bin, procSetup{tls: conf}, extraArgs)
	if err != nil {
		return nil, err
	}
	return p.server(), nil
}

// startOnFreePort starts a process on a free port, moving to another one
// when the port was taken in the meantime.
func startOnFreePort(ctx context.Context, bin string, set procSetup, args []string) (*redisProcess, error) {
	var lastErr error
	for range maxPortAttempts {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		p, err := startRedisProcessIn(ctx, bin, port, set, args)
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !errors.Is(err, ErrPortInUse) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// StartProcessOnPort is StartProcess on a port the caller chose. It exists
// to restart a server in place: Close one, start another on its port, and
// clients that know only the address reconnect to an empty server, as after
// a crash without persistence. It does not retry: a port that someone else
// took fails with ErrPortInUse.
func StartProcessOnPort(ctx context.Context, port int, extraArgs ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	p, err := startRedisProcess(ctx, bin, port, nil, extraArgs)
	if err != nil {
		return nil, err
	}
	return p.server(), nil
}

// ErrPortInUse marks a start-up that failed because the port was taken.
// StartProcess retries on another port; with StartProcessOnPort, pick
// another port or stop whatever holds it.
var ErrPortInUse = errors.New("port already in use")

func (p *redisProcess) server() *Server {
	return &Server{Addr: p.addr, Kind: KindProcess, pid: p.cmd.Process.Pid, stop: p.close}
}

// redisProcess is one running redis-server child.
//
// No goroutine waits on the child in the background: callers (like the
// integration suite) run goleak while servers are still up, and a
// cmd.Wait goroutine per server would show up as a leak there. Liveness is
// read from /proc instead, and the child is reaped synchronously in close.
type redisProcess struct {
	addr     string
	dir      string
	logPath  string // redis's own log (--logfile)
	outPath  string // stdout/stderr, where config errors go before the log is open
	cmd      *exec.Cmd
	waitOnce sync.Once
	waitErr  error
}

// startRedisProcess starts redis-server on 127.0.0.1:port and waits until it
// answers PING. With conf, port is a TLS port, the only one the server
// listens on, and PING goes over TLS. On failure nothing is left running and
// the temp dir is gone.
func startRedisProcess(ctx context.Context, bin string, port int, conf *tls.Config, extraArgs []string) (*redisProcess, error) {
	return startRedisProcessIn(ctx, bin, port, procSetup{tls: conf}, extraArgs)
}

// procSetup is what the replica, failover and Sentinel topologies need
// besides startRedisProcess's defaults.
type procSetup struct {
	tls *tls.Config
	// dir, when set, is an existing directory to run in (a node restarted
	// with the state a killed one left there); it is still removed by close
	// or a failed start. Empty means a fresh temp dir.
	dir string
	// prepare, when set, runs in the directory before the server starts
	// and returns arguments to put first on the command line, before the
	// options (redis-server takes a config file only there, e.g. a
	// Sentinel's, which must be a writable file).
	prepare func(dir string) ([]string, error)
}

// startRedisProcessIn is startRedisProcess with the extras of set.
func startRedisProcessIn(ctx context.Context, bin string, port int, set procSetup, extraArgs []string) (*redisProcess, error) {
	conf := set.tls
	dir := set.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "latchkey-redis-*"); err != nil {
			return nil, fmt.Errorf("redistest: cannot create a temp dir for redis-server (check $TMPDIR): %w", err)
		}
	}
	var lead []string
	if set.prepare != nil {
		var err error
		if lead, err = set.prepare(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	p := &redisProcess{
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		outPath: filepath.Join(dir, "output.log"),
	}
	listen := []string{"--port", strconv.Itoa(port)}
	if conf != nil {
		listen = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
	}
	args := append(lead, listen...)
	args = append(args,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		// Files instead of pipes: pipes would need copier goroutines, and
		// files survive for the error message if start-up fails.
		"--logfile", p.logPath,
		"--daemonize", "no",
	)
	args = append(args, extraArgs...)
	// exec.Command, not CommandContext: ctx bounds start-up only and must
	// not kill a server the caller keeps using.
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.SysProcAttr = serverSysProcAttr()
	out, err := os.Create(p.outPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: cannot create %s (check $TMPDIR): %w", p.outPath, err)
	}
	// An *os.File is handed to the child as is, without a copier goroutine.
	p.cmd.Stdout, p.cmd.Stderr = out, out
	err = p.cmd.Start()
	out.Close() // the child holds its own descriptor
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: cannot start %s: %w; install redis-server (`apt-get install redis-server`) or set REDIS_SERVER", bin, err)
	}

	alive := func() error {
		if p.exited() {
			return p.exitError()
		}
		return nil
	}
	err = waitPingTLS(ctx, p.addr, conf, alive)
	if err == nil && conf == nil {
		// Another server already listening there answers the PING while
		// ours fails to bind and exits: only our own pid counts as ready.
		var pid int
		if pid, err = serverPID(ctx, p.addr); err == nil && pid != p.cmd.Process.Pid {
			p.close()
			return nil, fmt.Errorf("redistest: %s is served by another process (pid %d): %w", p.addr, pid, ErrPortInUse)
		}
	}
	if err != nil {
		tail := p.logTail()
		p.close()
		if strings.Contains(tail, "Address already in use") {
			return nil, fmt.Errorf("redistest: redis-server could not bind %s: %w", p.addr, ErrPortInUse)
		}
		return nil, fmt.Errorf("redistest: redis-server on %s did not become ready: %w\nredis-server output:\n%s", p.addr, err, tail)
	}
	return p, nil
}

// serverPID asks the server at addr for its process id.
func serverPID(ctx context.Context, addr string) (int, error) {
	v, err := command(ctx, addr, "INFO", "server")
	if err != nil {
		return 0, err
	}
	info, _ := v.(string)
	return parseProcessID(info)
}

// exited reports whether the child has terminated (it is then a zombie
// until reaped). It peeks at /proc rather than waiting, to avoid reaping the
// child behind exec.Cmd's back.
func (p *redisProcess) exited() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain spaces or parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	switch s[i+2] {
	case 'Z', 'X':
		return true
	}
	return false
}

// wait reaps the child once and remembers how it ended.
func (p *redisProcess) wait() error {
	p.waitOnce.Do(func() { p.waitErr = p.cmd.Wait() })
	return p.waitErr
}

// exitError reaps a child that died during start-up and describes how.
func (p *redisProcess) exitError() error {
	return fmt.Errorf("redis-server exited during start-up (%v); its output is below", p.wait())
}

// logTail returns the end of the server's output and log, which is where
// start-up errors such as "Address already in use" or a bad option appear.
func (p *redisProcess) logTail() string {
	var b []byte
	for _, path := range []string{p.outPath, p.logPath} {
		if c, err := os.ReadFile(path); err == nil {
			b = append(b, c...)
		}
	}
	if len(b) == 0 {
		return "(no output)"
	}
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// close kills the server, reaps it and removes its directory. SIGKILL is
// fine because nothing is persisted, and a wedged server cannot ignore it.
// It is safe to call more than once.
func (p *redisProcess) close() error {
	var errs []error
	if err := p.kill(); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		errs = append(errs, fmt.Errorf("redistest: remove %s: %w", p.dir, err))
	}
	return errors.Join(errs...)
}

// kill SIGKILLs the server (kill -9: no shutdown, no goodbye to replicas or
// the cluster bus) and reaps it, keeping its directory, and with it a
// cluster node's nodes.conf, for a restart. It is safe to call more than
// once.
func (p *redisProcess) kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: kill redis-server pid %d: %w", p.cmd.Process.Pid, err)
	}
	// The error only reports the SIGKILL we just sent.
	p.wait()
	return nil
}
