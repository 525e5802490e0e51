package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/rueidis"
)

// errBadURL marks a Redis URL that cannot be used. Its messages show the
// URL redacted, never the password or a piece of it.
var errBadURL = errors.New("bad Redis URL")

// parseRedisURL parses s as rueidis does. Go's URL errors quote the URL,
// and a password holding / ? # or @ spills into the host, port or path
// that the errors quote; so the user info is checked to end at the last @
// before anything quotes s, and only the redacted URL is shown.
func parseRedisURL(s string) (rueidis.ClientOption, error) {
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		host := s[at+1:]
		if i := strings.IndexAny(host, "/?#"); i >= 0 {
			host = host[:i]
		}
		// Go unescapes the host (an IPv6 zone's %25): compare both forms.
		unescaped, _ := url.PathUnescape(host)
		u, err := url.Parse(s)
		if err != nil || u.User == nil || (u.Host != host && u.Host != unescaped) {
			return rueidis.ClientOption{}, fmt.Errorf("%w %s: the user name or password has a character that must be percent-encoded "+
				"(/ ? # @ %% and spaces as %%2F %%3F %%23 %%40 %%25 %%20), and an @ elsewhere in the URL too", errBadURL, redact(s))
		}
	}
	// The user info is where Go's parser finds it: rueidis' errors, which
	// quote the scheme, path or query, hold none of it.
	ro, err := rueidis.ParseURL(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		return ro, fmt.Errorf("%w %s: %v", errBadURL, redact(s), err)
	}
	return ro, nil
}

// redact returns s with its user info, everything between :// and the
// last @, replaced by "xxxxx"; it needs no parse, so it works on any s.
func redact(s string) string {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return s
	}
	if start := strings.Index(s, "://"); start >= 0 && start < at {
		return s[:start+3] + "xxxxx" + s[at:]
	}
	return "xxxxx" + s[at:]
}
