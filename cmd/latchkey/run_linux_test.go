package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledHolderStopsCmd: latchkey killed by SIGKILL (or the OOM killer)
// cannot pass anything on, so CMD gets its parent-death signal, SIGTERM,
// from the kernel and does not run on without the lock.
func TestKilledHolderStopsCmd(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// exec: the sleep is CMD itself, whose pid the file holds.
	cmd, out, errOut := command(t, "", "run", lockName(t), "--",
		"sh", "-c", `echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 300`, "sh", pidFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, pidFile)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, cmd.Wait(), out, errOut)
	if r.code != -1 {
		t.Fatalf("latchkey: exit %d, stderr %q; want killed", r.code, r.stderr)
	}
	// CMD is init's child now, or a subreaper's, which may never reap it:
	// a zombie counts as gone.
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("CMD (pid %d) still runs 10s after latchkey was killed", pid)
		}
		time.Sleep(5 * time.Millisecond) // polling: the process is no child of ours to wait for
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
