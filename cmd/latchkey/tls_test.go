package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/latchkey/latchkey/internal/redistest"
)

// TestTLSAndACL: run, status, list and force-unlock reach a TLS-only Redis
// through a rediss:// URL, as the minimal ACL user of docs/operations.md's line,
// trusting the test CA through SSL_CERT_FILE.
func TestTLSAndACL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files, err := redistest.NewTLSFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redistest.StartTLSProcess(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, TLSConfig: files.ClientConfig(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Do(ctx, admin.B().Arbitrary(readmeACL(t)...).Build()).Error(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}

	url := "rediss://latchkey:secret@" + srv.Addr
	env := []string{"SSL_CERT_FILE=" + files.CAFile}
	r := latchkeyEnv(t, env, "", "run", "--redis", url, "tls", "--", "sh", "-c", `echo "$LATCHKEY_TOKEN"`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q; want 0 and token 1", r.code, r.stdout, r.stderr)
	}
	// A hold without a holder record (not latchkey's grant) shows its owner,
	// an owner id as force-unlock requires ("<UUID>:<n>").
	const someone = "0b8e2f3c-1d4a-4b5c-8d6e-7f8091a2b3c4:1"
	if err := admin.Do(ctx, admin.B().Hset().Key("latchkey:{tls}").FieldValue().FieldValue(someone, "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r := latchkeyEnv(t, env, "", "status", "--redis", url, "tls"); r.code != 0 || !strings.Contains(r.stdout, someone) {
		t.Errorf("status: exit %d, stdout %q, stderr %q; want 0, someone", r.code, r.stdout, r.stderr)
	}
	if r := latchkeyEnv(t, env, "", "list", "--redis", url); r.code != 0 || !strings.Contains(r.stdout, "tls") || !strings.Contains(r.stdout, someone) {
		t.Errorf("list: exit %d, stdout %q, stderr %q; want 0, tls held by someone", r.code, r.stdout, r.stderr)
	}
	if r := latchkeyEnv(t, env, "", "force-unlock", "--yes", "--redis", url, "tls"); r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Errorf("force-unlock: exit %d, stdout %q, stderr %q; want 0, deleted", r.code, r.stdout, r.stderr)
	}
	// Without the CA, the server's certificate is refused.
	if r := latchkey(t, "", "run", "--redis", url, "tls", "true"); r.code != exitUnavailable || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("no CA: exit %d, stderr %q; want %d and a certificate error", r.code, r.stderr, exitUnavailable)
	}
}

// readmeACL returns the ACL SETUSER line of docs/operations.md (README.md
// links it), as command arguments.
func readmeACL(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "ACL SETUSER latchkey ") {
			return strings.Fields(line)
		}
	}
	t.Fatal("docs/operations.md has no ACL SETUSER line")
	return nil
}
