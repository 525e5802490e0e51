package main

import (
	"context"
	"encoding/json"
	"os"
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
// it; a free lock is "(free)"; a bad pattern is an error.
func TestStatusAndList(t *testing.T) {
	c := locks(t)
	name := lockName(t)
	started := filepath.Join(t.TempDir(), "started")
	// The holder: runs until its stdin closes.
	holder, _, holderErr := command(t, "", "run", name, "--", "sh", "-c", `touch "$1"; cat >/dev/null`, "sh", started)
	holder.Stdin = nil
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
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
		!strings.HasPrefix(st.Holders[0].Client.Name, "latchkey run sh -c") || st.Holders[0].Token <= 0 || st.Holders[0].Count != 1 ||
		st.LeaseLeftMS <= 0 || len(st.Waiters) != 1 || st.Waiters[0].Client.ID != c.ID() {
		t.Errorf("status --json: %+v", st)
	}

	r = latchkey(t, "", "status", name)
	if r.code != 0 || !strings.Contains(r.stdout, "latchkey run sh -c") || !strings.Contains(r.stdout, strconv.Itoa(holder.Process.Pid)) || !strings.Contains(r.stdout, c.ID()) {
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

	stdin.Close()
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v, stderr %q", err, holderErr)
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
	if r := latchkey(t, "", "list", "a{b"); r.code != exitError || !strings.Contains(r.stderr, "brace") {
		t.Errorf("list a{b: exit %d, stderr %q; want 1", r.code, r.stderr)
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
