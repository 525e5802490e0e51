package main

import (
	"strings"
	"testing"
)

// TestURLPasswordNeverShown: whatever the Redis URL looks like (here,
// passwords with characters that should have been percent-encoded, so that
// Go's URL parser cuts them into host, port and path), no subcommand prints
// the password or a piece of it, whether the URL came from --redis or
// $REDIS_URL. The user name is 127.0.0.1 so that a misparse never sends the
// CLI to another address.
func TestURLPasswordNeverShown(t *testing.T) {
	const secret = "hunter" // every password below holds it, in each piece
	urls := []string{
		"redis://127.0.0.1:hunterA/hunterB@127.0.0.1:1",   // invalid port "hunterA"
		"redis://127.0.0.1:1/hunterB@127.0.0.1:1",         // parses: db "hunterB@…"
		"redis://127.0.0.1:1/hunterB/x@127.0.0.1:1",       // parses: path "/hunterB/x@…"
		"redis://127.0.0.1:hunterA?hunterB@127.0.0.1:1",   // the query takes the rest
		"redis://127.0.0.1:hunterA#hunterB@127.0.0.1:1",   // the fragment takes the rest
		"redis://127.0.0.1:hunterA%zzhunterB@127.0.0.1:1", // a bad escape
		"redis://127.0.0.1:hunter A@127.0.0.1:1",          // a space
		"redis://127.0.0.1:hunterA@hunterB@127.0.0.1:1",   // an @ in the password
		"redis://127.0.0.1:hunterAB@127.0.0.1:1",          // well formed, nobody listening
		"redis://127.0.0.1:hunterAB@127.0.0.1:1/nodb",     // a bad database
		"redsi://127.0.0.1:hunterAB@127.0.0.1:1",          // a bad scheme
		"127.0.0.1:hunterA/hunterB@127.0.0.1:1",           // no scheme
	}
	for _, u := range urls {
		for _, args := range [][]string{
			{"run", "--wait", "0", "--redis", u, "name", "true"},
			{"status", "--redis", u, "name"},
			{"list", "--redis", u},
			{"force-unlock", "--yes", "--redis", u, "name"},
		} {
			r := latchkey(t, "", args...)
			if r.code == 0 || strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q: want a failure that shows no password", args, r.code, r.stdout, r.stderr)
			}
		}
		r := latchkeyEnv(t, []string{"REDIS_URL=" + u}, "", "status", "name")
		if r.code == 0 || strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("REDIS_URL=%q status: exit %d, stdout %q, stderr %q: want a failure that shows no password", u, r.code, r.stdout, r.stderr)
		}
	}
}

// TestParseRedisURLAccepts: the check on the user info refuses none of the
// URLs that say what they mean: percent-encoded passwords, IPv6 hosts with
// a zone, unix sockets, no user info at all.
func TestParseRedisURLAccepts(t *testing.T) {
	for _, tc := range []struct{ url, user, password, addr string }{
		{"redis://app:pa%2Fss%40x@127.0.0.1:6380/2", "app", "pa/ss@x", "127.0.0.1:6380"},
		{"rediss://:secret@[fe80::1%25eth0]:6379", "", "secret", "[fe80::1%eth0]:6379"},
		{"unix://app:secret@/run/redis.sock", "app", "secret", "/run/redis.sock"},
		{"redis://127.0.0.1:6379?client_name=a%40b", "", "", "127.0.0.1:6379"},
	} {
		ro, err := parseRedisURL(tc.url)
		if err != nil || ro.Username != tc.user || ro.Password != tc.password || len(ro.InitAddress) != 1 || ro.InitAddress[0] != tc.addr {
			t.Errorf("%s: %v, user %q, password %q, addresses %q; want %q, %q, %q", redact(tc.url), err, ro.Username, ro.Password, ro.InitAddress, tc.user, tc.password, tc.addr)
		}
	}
}
