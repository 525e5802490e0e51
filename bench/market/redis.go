package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Start-up limits of the throw-away redis-server.
const (
	redisStartTimeout = 10 * time.Second
	redisPollEvery    = 10 * time.Millisecond
	// redisStartTries: the free port we pick can be taken by another
	// process before redis-server binds it; then we try another one.
	redisStartTries = 3
)

// redisServer is a redis-server child process on 127.0.0.1 with no
// persistence, in a temporary directory of its own.
type redisServer struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the child has been reaped
}

// startRedis starts a redis-server (from $PATH) on a free loopback port and
// returns once it answers PING.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (%w): install it (apt-get install redis-server) or pass -addr", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	var errs []error
	for range redisStartTries {
		srv, err := launchRedis(ctx, bin)
		if err == nil {
			return srv, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func launchRedis(ctx context.Context, bin string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free loopback port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "market-redis-*")
	if err != nil {
		return nil, fmt.Errorf("making redis-server's directory (check $TMPDIR): %w", err)
	}
	out, err := os.Create(filepath.Join(dir, "redis.out"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("making redis-server's log: %w", err)
	}
	defer out.Close() // the child keeps its own descriptor
	srv := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	srv.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	srv.cmd.Stdout, srv.cmd.Stderr = out, out
	// The kernel kills the server if we die without stopping it.
	srv.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := srv.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		srv.cmd.Wait()
		close(srv.exited)
	}()
	if err := srv.awaitPong(ctx); err != nil {
		log, _ := os.ReadFile(out.Name())
		srv.close()
		return nil, fmt.Errorf("redis-server on %s: %w; its output:\n%s", srv.addr, err, log)
	}
	return srv, nil
}

func (s *redisServer) awaitPong(ctx context.Context) error {
	for {
		if err := ping(ctx, s.addr); err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("exited during start-up")
		case <-ctx.Done():
			return fmt.Errorf("no PONG before the start-up deadline: %w", ctx.Err())
		case <-time.After(redisPollEvery):
		}
	}
}

func ping(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// close kills the server (nothing is persisted, so SIGKILL loses nothing),
// waits until it is reaped and removes its directory.
func (s *redisServer) close() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing redis-server (pid %d): %w", s.cmd.Process.Pid, err)
	}
	<-s.exited
	return os.RemoveAll(s.dir)
}

// checkLoopback refuses an -addr that is not on this machine's loopback:
// the simulation FLUSHALLs the server. Names other than localhost are not
// resolved, since DNS could point them anywhere.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q is not host:port: %v", errNotLoopback, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%w: %q; the simulation flushes the server, so use a scratch Redis on 127.0.0.1, ::1 or localhost", errNotLoopback, addr)
	}
	return nil
}
