package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// watchBound is how long a `leader --watch` that should end may take: a
// watch that wrongly retries runs until it is killed.
const watchBound = 20 * time.Second

// TestLeaderWatchRefused: `leader --watch` as a user Redis refuses ends
// with the refusal on stderr and exit 1, whether the subscription or a
// later read is refused; it retried such errors silently, forever.
func TestLeaderWatchRefused(t *testing.T) {
	t.Run("subscribe", func(t *testing.T) {
		// docs/operations.md's grant without its channels: the first read
		// works, the subscription is refused (NOPERM).
		acl := slices.DeleteFunc(readmeACL(t), func(a string) bool { return strings.HasPrefix(a, "&") })
		_, url := aclUser(t, acl)
		cmd, out, errOut := command(t, "", "leader", "--watch", "--redis", url, lockName(t))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(watchBound, func() { _ = cmd.Process.Kill() })
		r := finish(t, cmd, cmd.Wait(), out, errOut)
		timer.Stop()
		requireRefused(t, r)
	})
	t.Run("read", func(t *testing.T) {
		user, url := aclUser(t, readmeACL(t))
		name := lockName(t)
		cmd, _, errOut := command(t, "", "leader", "--watch", "--redis", url, name)
		cmd.Stdout = nil
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		timer := time.AfterFunc(watchBound, func() { _ = cmd.Process.Kill() })
		defer timer.Stop()
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || lines.Text() != "(no leader)" {
			t.Fatalf("first line %q (%v), stderr %q; want (no leader)", lines.Text(), lines.Err(), errOut)
		}
		// Take the scripts away, then make the watch read: an announcement.
		admin, _ := clients(t)
		ctx := context.Background()
		if err := admin.Do(ctx, admin.B().Arbitrary("ACL", "SETUSER", user, "-evalsha", "-eval").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Do(ctx, admin.B().Publish().Channel("latchkey:{"+name+"}:leader").Message("all").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		for lines.Scan() { // to the end of stdout, before Wait closes the pipe
		}
		requireRefused(t, finish(t, cmd, cmd.Wait(), &bytes.Buffer{}, errOut))
	})
}

// requireRefused checks that a watch ended by itself with Redis' refusal.
func requireRefused(t *testing.T, r result) {
	t.Helper()
	if r.code != exitError || !strings.Contains(r.stderr, "NOPERM") {
		t.Fatalf("leader --watch refused by Redis: exit %d (-1: killed after %v), stderr %q; want exit %d and the NOPERM",
			r.code, watchBound, r.stderr, exitError)
	}
}

// aclUser makes a user of the test's Redis with acl (an ACL SETUSER
// command line, whose user it renames) and returns its name and redis:// URL.
func aclUser(t *testing.T, acl []string) (user, url string) {
	t.Helper()
	if len(acl) < 3 || !strings.EqualFold(acl[0], "ACL") || !strings.EqualFold(acl[1], "SETUSER") {
		t.Fatalf("not an ACL SETUSER line: %q", acl)
	}
	user = "watch-" + strings.ReplaceAll(t.Name(), "/", "-")
	acl = append([]string{"ACL", "SETUSER", user}, acl[3:]...)
	admin, _ := clients(t)
	ctx := context.Background()
	if err := admin.Do(ctx, admin.B().Arbitrary(acl...).Build()).Error(); err != nil {
		t.Fatalf("%q: %v", acl, err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), admin.B().AclDeluser().Username(user).Build()) })
	password := ""
	for _, a := range acl {
		if p, ok := strings.CutPrefix(a, ">"); ok {
			password = p
		}
	}
	if password == "" {
		t.Fatalf("%q sets no password", acl)
	}
	return user, "redis://" + user + ":" + password + "@" + strings.TrimPrefix(redisURL, "redis://")
}

// TestLeaderWatchRetries: `leader --watch` through a Redis that goes out of
// reach for a while says so on stderr (once per error, not once per try),
// says when it reads again, and goes on watching. It said nothing.
func TestLeaderWatchRetries(t *testing.T) {
	name := lockName(t)
	proxy := startProxy(t, strings.TrimPrefix(redisURL, "redis://"))
	// A leader with a short lease: the watch reads at each lease's end,
	// so it tries Redis while the proxy is down whatever else happens.
	rc, _ := clients(t)
	leader, err := rlock.NewClient(rc, rlock.Options{WatchdogTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	e := leader.Election(name)
	lctx, err := e.Campaign(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(binary, "leader", "--watch", "--redis", "redis://"+proxy.addr(), name)
	cmd.Env = append(cmd.Environ(), childEnv...)
	cmd.WaitDelay = 5 * time.Second
	stdout := lineReader(t, cmd, cmd.StdoutPipe)
	stderr := lineReader(t, cmd, cmd.StderrPipe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	stdout.await(t, "the leader a", func(l string) bool { return strings.HasPrefix(l, "a\t") })

	proxy.setDown(true)
	stderr.await(t, "a retried error", func(l string) bool { return strings.HasSuffix(l, "; retrying") })
	// More tries fail the same way before Redis is back: said once.
	for range 5 {
		select {
		case <-proxy.refused:
		case <-time.After(watchBound):
			t.Fatalf("the watch stopped trying Redis; stderr %q", stderr.all())
		}
	}
	proxy.setDown(false)
	again := `latchkey: watching "` + name + `" again`
	stderr.await(t, "the watch reading again", func(l string) bool { return l == again })
	if err := e.Resign(lctx); err != nil {
		t.Fatal(err)
	}
	stdout.await(t, "no leader after the resignation", func(l string) bool { return l == "(no leader)" })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	stdout.drain()
	stderr.drain()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGINT: %v; stderr %q", err, stderr.all())
	}
	lines := stderr.all()
	for i := 1; i < len(lines); i++ {
		if lines[i] == lines[i-1] {
			t.Errorf("stderr says %q twice in a row; want each error once: %q", lines[i], lines)
		}
	}
}

// lines is what a pipe of a process said, line by line, as it says it.
type lines struct {
	mu    sync.Mutex
	got   []string
	more  chan struct{} // closed and replaced at each line
	ended chan struct{} // closed at the end of the pipe
}

// lineReader reads the pipe that open (cmd.StdoutPipe, cmd.StderrPipe)
// gives once cmd has started.
func lineReader(t *testing.T, cmd *exec.Cmd, open func() (io.ReadCloser, error)) *lines {
	t.Helper()
	r, err := open()
	if err != nil {
		t.Fatal(err)
	}
	ls := &lines{more: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(ls.ended)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ls.mu.Lock()
			ls.got = append(ls.got, sc.Text())
			close(ls.more)
			ls.more = make(chan struct{})
			ls.mu.Unlock()
		}
	}()
	return ls
}

// await waits until a line said since the last await satisfies ok.
func (ls *lines) await(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.After(watchBound)
	for i := 0; ; {
		ls.mu.Lock()
		got, more := ls.got, ls.more
		ls.mu.Unlock()
		for ; i < len(got); i++ {
			if ok(got[i]) {
				return
			}
		}
		select {
		case <-more:
		case <-ls.ended:
			t.Fatalf("the output ended before %s: %q", what, ls.all())
		case <-deadline:
			t.Fatalf("after %v, no line of %s: %q", watchBound, what, ls.all())
		}
	}
}

// drain waits for the end of the pipe, which must come before cmd.Wait.
func (ls *lines) drain() { <-ls.ended }

func (ls *lines) all() []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return slices.Clone(ls.got)
}

// proxy forwards TCP connections to a Redis; down, it closes them all and
// every new one at once, as a Redis out of reach would.
type proxy struct {
	ln      net.Listener
	target  string
	refused chan struct{} // a value for each connection closed at once, down
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, refused: make(chan struct{}, 1000), conns: make(map[net.Conn]bool)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.setDown(true)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			in.Close()
			out.Close()
			select {
			case p.refused <- struct{}{}:
			default: // nobody counts that many
			}
			continue
		}
		p.conns[in], p.conns[out] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies from src to dst, then closes both.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	p.mu.Unlock()
	src.Close()
	dst.Close()
}

func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}
