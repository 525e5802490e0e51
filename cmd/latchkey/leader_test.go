package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLeader: `latchkey leader` prints "(no leader)" (leading false in
// JSON) until someone campaigns, then the leader's value, token and client.
func TestLeader(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	var out leaderOut
	r := latchkey(t, "", "leader", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || out.Leading || out.Name != name {
		t.Fatalf("leader --json with nobody leading: exit %d, %v, %+v (stderr %q)", r.code, err, out, r.stderr)
	}
	if r = latchkey(t, "", "leader", name); r.code != 0 || r.stdout != "(no leader)\n" {
		t.Fatalf("leader with nobody leading: exit %d, %q", r.code, r.stdout)
	}

	e := c.Election(name)
	lctx, err := e.Campaign(context.Background(), "10.0.0.7:80")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Resign(lctx); err != nil {
			t.Error(err)
		}
	}()
	token, _ := e.Token(lctx)
	r = latchkey(t, "", "leader", "--json", name)
	out = leaderOut{}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || !out.Leading || out.Value != "10.0.0.7:80" ||
		out.Token != token || out.Client == nil || out.Client.ID != c.ID() || out.Client.PID != os.Getpid() || out.Since == nil {
		t.Fatalf("leader --json: exit %d, %v, %+v", r.code, err, out)
	}
	r = latchkey(t, "", "leader", name)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "10.0.0.7:80\ttoken "+strconv.FormatInt(token, 10)+"\tclient "+c.ID()) {
		t.Fatalf("leader: exit %d, %q", r.code, r.stdout)
	}
	if r = latchkey(t, "", "leader"); r.code != exitUsage {
		t.Errorf("leader without NAME: exit %d, want %d", r.code, exitUsage)
	}
}

// TestLeaderWatch: `latchkey leader --watch --json` prints the leader at
// once, then a line per change, and exits 0 on SIGINT.
func TestLeaderWatch(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	cmd := exec.Command(binary, "leader", "--watch", "--json", name)
	cmd.Env = append(append(os.Environ(), childEnv...), "REDIS_URL="+redisURL)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan leaderOut)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var out leaderOut
			if json.Unmarshal(sc.Bytes(), &out) == nil {
				lines <- out
			}
		}
	}()
	next := func(what string) leaderOut {
		t.Helper()
		select {
		case out, ok := <-lines:
			if !ok {
				t.Fatalf("stdout ended waiting for %s", what)
			}
			return out
		case <-time.After(20 * time.Second):
			t.Fatalf("no line for %s", what)
		}
		return leaderOut{}
	}
	if out := next("the first leader"); out.Leading {
		t.Fatalf("first line %+v: nobody leads", out)
	}
	e := c.Election(name)
	lctx, err := e.Campaign(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if out := next("a leading"); !out.Leading || out.Value != "a" {
		t.Fatalf("after the campaign: %+v", out)
	}
	if err := e.Resign(lctx); err != nil {
		t.Fatal(err)
	}
	if out := next("nobody leading"); out.Leading {
		t.Fatalf("after the resignation: %+v", out)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // to the end of stdout, before Wait closes the pipe
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGINT: %v", err)
	}
}

// TestLeaderInvalidName: an invalid NAME is a usage error with --watch as
// without it, not a watch that ends at once (Observe only closes its channel).
func TestLeaderInvalidName(t *testing.T) {
	for _, name := range []string{"", "a{b}"} {
		want := latchkey(t, "", "leader", name)
		cmd, out, errOut := command(t, "", "leader", "--watch", name)
		// A watch that wrongly starts would run until interrupted.
		timer := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
		r := finish(t, cmd, cmd.Run(), out, errOut)
		timer.Stop()
		if want.code != exitUsage || r.code != exitUsage || r.stderr != want.stderr || !strings.Contains(r.stderr, "invalid lock name") {
			t.Errorf("leader %q: exit %d, stderr %q; with --watch: exit %d, stderr %q; want exit %d and the same error",
				name, want.code, want.stderr, r.code, r.stderr, exitUsage)
		}
	}
}
