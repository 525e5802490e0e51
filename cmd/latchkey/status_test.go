package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latchkey/latchkey/rlock"
)

// TestStatusAndList: a lock held by a `latchkey run` process shows up in
// status and list, as a table and as JSON, with its holder's description
// (named after its command, this host, its pid) and a client queued for
// it; a free lock is "(free)"; a bad pattern is a usage error.
func TestStatusAndList(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	holder, stop := startHolder(t, nil, name)
	// A waiter, queued behind it.
	waiter := make(chan error, 1)
	go func() {
		lctx, err := c.Mutex(name).Lock(context.Background())
		if err == nil {
			err = c.Mutex(name).Unlock(lctx)
		}
		waiter <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.WaitersTotal == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never queued: %+v", info)
		}
		time.Sleep(10 * time.Millisecond) // polling: the queue entry is another goroutine's
	}
	var st lockOut
	r := latchkey(t, "", "status", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("status --json: exit %d, %v in %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	host, _ := os.Hostname()
	if !st.Held || len(st.Holders) != 1 || st.Holders[0].Client.PID != holder.Process.Pid || st.Holders[0].Client.Host != host ||
		st.Holders[0].Client.Name != "latchkey run sh" || st.Holders[0].Token <= 0 || st.Holders[0].Count != 1 ||
		st.LeaseLeftMS <= 0 || len(st.Waiters) != 1 || st.Waiters[0].Client.ID != c.ID() {
		t.Errorf("status --json: %+v", st)
	}

	r = latchkey(t, "", "status", name)
	if r.code != 0 || !strings.Contains(r.stdout, "latchkey run sh") || !strings.Contains(r.stdout, strconv.Itoa(holder.Process.Pid)) || !strings.Contains(r.stdout, c.ID()) {
		t.Errorf("status: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = latchkey(t, "", "list", name[:len(name)-1]+"*")
	if r.code != 0 || !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, strconv.Itoa(holder.Process.Pid)) {
		t.Errorf("list: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var all []lockOut
	r = latchkey(t, "", "list", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 || len(all) != 1 || all[0].Name != name {
		t.Errorf("list --json: exit %d, %v, %q", r.code, err, r.stdout)
	}

	if r := stop(); r.code != 0 {
		t.Fatalf("holder: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := <-waiter; err != nil {
		t.Fatal(err)
	}
	r = latchkey(t, "", "status", name)
	if r.code != 0 || !strings.Contains(r.stdout, "(free)") {
		t.Errorf("status of a free lock: exit %d, stdout %q", r.code, r.stdout)
	}
	r = latchkey(t, "", "list", "--json", name)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("list of a free lock: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := latchkey(t, "", "list", "a{b"); r.code != exitUsage || !strings.Contains(r.stderr, "brace") {
		t.Errorf("list a{b: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
}

// startHolder starts `latchkey run FLAGS NAME -- sh -c SCRIPT sh STARTED
// ARGS...`, which holds the lock name until stop closes CMD's stdin; stop
// returns how latchkey ended.
func startHolder(t *testing.T, flags []string, name string, args ...string) (holder *exec.Cmd, stop func() result) {
	t.Helper()
	started := filepath.Join(t.TempDir(), "started")
	cmdLine := append(append(flags[:len(flags):len(flags)], name, "--", "sh", "-c", `touch "$1"; cat >/dev/null`, "sh", started), args...)
	holder, out, errOut := command(t, "", append([]string{"run"}, cmdLine...)...)
	holder.Stdin = nil
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
	return holder, func() result {
		stdin.Close()
		return finish(t, holder, holder.Wait(), out, errOut)
	}
}

// TestClientName: run names its client after CMD's base name only, never
// its arguments (which may carry secrets), unless --client-name names it.
func TestClientName(t *testing.T) {
	name := lockName(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "latchkey run sh"},
		{[]string{"--client-name", "nightly backup"}, "nightly backup"},
	} {
		_, stop := startHolder(t, tc.flags, name, "--token=hunter2")
		var st lockOut
		r := latchkey(t, "", "status", "--json", name)
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || len(st.Holders) != 1 {
			t.Fatalf("status --json: exit %d, %v in %q, stderr %q", r.code, err, r.stdout, r.stderr)
		}
		if got := st.Holders[0].Client.Name; got != tc.want || strings.Contains(r.stdout, "hunter2") {
			t.Errorf("%q: client name %q, want %q and no argument of CMD; status: %s", tc.flags, got, tc.want, r.stdout)
		}
		if r := stop(); r.code != 0 {
			t.Fatalf("holder: exit %d, stderr %q", r.code, r.stderr)
		}
	}
	long := strings.Repeat("x", rlock.MaxClientNameLen+1)
	if r := latchkey(t, "", "run", "--client-name", long, name, "true"); r.code != exitUsage || !strings.Contains(r.stderr, "--client-name") {
		t.Errorf("--client-name of %d bytes: exit %d, stderr %q; want %d", len(long), r.code, r.stderr, exitUsage)
	}
}

// TestStatusKinds: status --kind inspects an RWMutex or a Semaphore, list
// shows every kind with its modes and permits, and a bad --kind is a usage
// error.
func TestStatusKinds(t *testing.T) {
	c := locks(t)
	ctx := context.Background()
	name := lockName(t)
	rctx, err := c.RWMutex(name).RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.RWMutex(name).RUnlock(rctx) }()
	pctx, err := c.Semaphore(name, 4).Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Semaphore(name, 4).Release(pctx) }()

	var st lockOut
	r := latchkey(t, "", "status", "--json", "--kind", "rwmutex", name)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
		t.Fatalf("status --kind rwmutex: exit %d, %v in %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	if st.Kind != "rwmutex" || len(st.Holders) != 1 || st.Holders[0].Mode != "read" || st.Holders[0].Client.ID != c.ID() || st.Holders[0].LeaseLeftMS <= 0 {
		t.Errorf("status --kind rwmutex: %+v", st)
	}
	r = latchkey(t, "", "status", "--kind", "semaphore", name)
	if r.code != 0 || !strings.Contains(r.stdout, "semaphore") || !strings.Contains(r.stdout, "3 permits") {
		t.Errorf("status --kind semaphore: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = latchkey(t, "", "status", name) // the Mutex of that name: free
	if r.code != 0 || !strings.Contains(r.stdout, "(free)") {
		t.Errorf("status of the free Mutex: exit %d, stdout %q", r.code, r.stdout)
	}
	var all []lockOut
	r = latchkey(t, "", "list", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
		t.Fatalf("list --json: exit %d, %v, %q", r.code, err, r.stdout)
	}
	if len(all) != 2 || all[0].Kind != "rwmutex" || all[1].Kind != "semaphore" || all[1].Size != 4 || all[1].Holders[0].Permits != 3 {
		t.Errorf("list --json: %+v", all)
	}
	r = latchkey(t, "", "list", name)
	if r.code != 0 || !strings.Contains(r.stdout, "rwmutex/read") || !strings.Contains(r.stdout, "3 permits") {
		t.Errorf("list: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := latchkey(t, "", "status", "--kind", "flock", name); r.code != exitUsage || !strings.Contains(r.stderr, "--kind") {
		t.Errorf("status --kind flock: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
	}
}

// TestStatusEscapes: names, client names and owners that anyone with write
// access to Redis can choose reach the table escaped: a newline does not
// start a row and an ANSI escape does not reach the terminal. JSON keeps
// them as they are (encoding/json escapes them).
func TestStatusEscapes(t *testing.T) {
	rc, _ := clients(t)
	ctx := context.Background()
	const evil = "\x1b[31m\nx\u202e"
	name := lockName(t) + evil
	c, err := rlock.NewClient(rc, rlock.Options{ClientName: "client" + evil})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.Mutex(name)
	lctx, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unlock(lctx) }()
	// A hold without a record, as something else may write: its owner shows.
	other := lockName(t) + "-other"
	if err := rc.Do(ctx, rc.B().Hset().Key(rlock.DefaultPrefix+":{"+other+"}").FieldValue().FieldValue("owner"+evil, "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(ctx, rc.B().Del().Key(rlock.DefaultPrefix+":{"+other+"}").Build())

	for _, tc := range []struct {
		args  []string
		lines int // the header and a line per lock
	}{
		{[]string{"status", name}, 2},
		{[]string{"status", other}, 2},
		{[]string{"list", lockName(t) + "*"}, 3},
	} {
		r := latchkey(t, "", tc.args...)
		lines := strings.Count(r.stdout, "\n")
		if r.code != 0 || strings.ContainsAny(r.stdout, "\x1b\u202e") || lines != tc.lines || !strings.Contains(r.stdout, `\x1b[31m\nx\u202e`) {
			t.Errorf("%q: exit %d, %d lines, stdout %q, stderr %q; want %d lines, every control character escaped", tc.args, r.code, lines, r.stdout, r.stderr, tc.lines)
		}
	}
	var st lockOut
	r := latchkey(t, "", "status", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Name != name || len(st.Holders) != 1 || st.Holders[0].Client.Name != "client"+evil {
		t.Errorf("status --json: exit %d, %v, %q", r.code, err, r.stdout)
	}
}

// TestListDamaged: list shows every healthy lock beside one whose state is
// not latchkey's, and says what is damaged, in the table and in JSON
// (issue 21, defect 7: one corrupt hold count made list fail for all).
func TestListDamaged(t *testing.T) {
	rc, c := clients(t)
	ctx := context.Background()
	healthy, damaged := lockName(t)+"-a", lockName(t)+"-b"
	lctx, err := c.Mutex(healthy).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Mutex(healthy).Unlock(lctx) }()
	key := rlock.DefaultPrefix + ":{" + damaged + "}"
	if err := rc.Do(ctx, rc.B().Hset().Key(key).FieldValue().FieldValue("someone", "one").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(context.Background(), rc.B().Del().Key(key).Build())

	r := latchkey(t, "", "list", lockName(t)+"-*")
	if r.code != 0 || !strings.Contains(r.stdout, healthy) || !strings.Contains(r.stdout, "damaged:") || !strings.Contains(r.stdout, "not an integer") {
		t.Errorf("list: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var all []lockOut
	r = latchkey(t, "", "list", "--json", lockName(t)+"-*")
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
		t.Fatalf("list --json: exit %d, %v, %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	if len(all) != 2 || all[0].Name != healthy || all[0].Damaged != "" || all[1].Name != damaged || !strings.Contains(all[1].Damaged, "not an integer") {
		t.Errorf("list --json: %+v", all)
	}
}

// TestListWrongType: a string where a lock's key is (an application's key
// under the prefix) shows as a damaged lock in list, as in status, and
// `latchkey run` on it fails at once saying what to check. Before, list's
// SCAN kept only hashes and printed nothing, and run printed Redis' bare
// WRONGTYPE.
func TestListWrongType(t *testing.T) {
	rc, _ := clients(t)
	ctx := context.Background()
	name := lockName(t)
	key := rlock.DefaultPrefix + ":{" + name + "}"
	if err := rc.Do(ctx, rc.B().Set().Key(key).Value("the application's").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer rc.Do(context.Background(), rc.B().Del().Key(key).Build())

	for _, args := range [][]string{{"list", name}, {"status", name}} {
		r := latchkey(t, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, "damaged:") || !strings.Contains(r.stdout, "another type") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", args[0], r.code, r.stdout, r.stderr)
		}
	}
	var all []lockOut
	r := latchkey(t, "", "list", "--json", name)
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || r.code != 0 {
		t.Fatalf("list --json: exit %d, %v, %q, stderr %q", r.code, err, r.stdout, r.stderr)
	}
	if len(all) != 1 || all[0].Name != name || !strings.Contains(all[0].Damaged, "another type") {
		t.Errorf("list --json: %+v", all)
	}
	r = latchkey(t, "", "run", "--wait", "0", name, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "another type") || !strings.Contains(r.stderr, "--prefix") {
		t.Errorf("run: exit %d, stderr %q; want 1 and what to check", r.code, r.stderr)
	}
}
