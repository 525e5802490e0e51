package childproc

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestParentDeathKillsChild: when a child dies, even by SIGKILL, its own
// child (started with Start) is killed with it.
func TestParentDeathKillsChild(t *testing.T) {
	p, err := Start(t.Context(), Config{Role: "spawn"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	gc, err := strconv.Atoi(firstLine(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if !running(gc) {
		t.Fatalf("the grandchild %d is not running", gc)
	}
	p.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for running(gc) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(gc, syscall.SIGKILL)
			t.Fatalf("the grandchild %d outlived its parent", gc)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running says whether pid is a live process: neither gone nor a zombie
// that no one has reaped yet.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return err != nil || i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}
