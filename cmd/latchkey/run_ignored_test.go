package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRegressRunKeepsIgnoredSignals: a signal latchkey run was started
// ignoring (nohup's SIGHUP) stays ignored for CMD. run caught every
// forwarded signal, which undid the ignore for CMD too: a child starts with
// the default action for every signal Go handles, so `nohup latchkey run`
// no longer kept CMD alive at a hangup.
func TestRegressRunKeepsIgnoredSignals(t *testing.T) {
	script := `trap "" HUP; exec "$0" run "$1" -- sh -c 'kill -HUP $$; echo alive'`
	cmd := exec.Command("sh", "-c", script, binary, "run-ignored-"+strings.ReplaceAll(t.Name(), "/", "-"))
	cmd.Env = append(append(os.Environ(), childEnv...), "REDIS_URL="+redisURL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil || out.String() != "alive\n" {
		t.Fatalf("CMD under nohup's ignored SIGHUP: %v, stdout %q, stderr %q; want exit 0 and \"alive\"", err, out.String(), errOut.String())
	}
}
