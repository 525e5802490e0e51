// Package redisinfo reads the figures the demo and the benchmarks take from
// Redis' INFO: the server's CPU time and its per-command call counts.
package redisinfo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// ErrMalformed reports an INFO reply without a field the caller needs; the
// server is probably not Redis (or a very old one): use Redis 7.
var ErrMalformed = errors.New("redisinfo: malformed INFO reply")

// Parse splits an INFO reply into its "field:value" lines; section headers
// and blank lines are skipped.
func Parse(info string) map[string]string {
	m := make(map[string]string)
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// Get runs INFO section and parses it.
func Get(ctx context.Context, rc rueidis.Client, section string) (map[string]string, error) {
	s, err := rc.Do(ctx, rc.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, fmt.Errorf("redisinfo: INFO %s: %w", section, err)
	}
	return Parse(s), nil
}

// CPUSeconds is used_cpu_sys + used_cpu_user from an INFO cpu reply: all the
// CPU time the server process has used, every thread included.
func CPUSeconds(info map[string]string) (float64, error) {
	var total float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(info[f], 64)
		if err != nil {
			return 0, fmt.Errorf("%w: field %s = %q", ErrMalformed, f, info[f])
		}
		total += v
	}
	return total, nil
}

// CPU runs INFO cpu and returns CPUSeconds of it.
func CPU(ctx context.Context, rc rueidis.Client) (float64, error) {
	info, err := Get(ctx, rc, "cpu")
	if err != nil {
		return 0, err
	}
	return CPUSeconds(info)
}

// Version is redis_version from INFO server.
func Version(ctx context.Context, rc rueidis.Client) (string, error) {
	info, err := Get(ctx, rc, "server")
	if err != nil {
		return "", err
	}
	v, ok := info["redis_version"]
	if !ok {
		return "", fmt.Errorf("%w: no redis_version", ErrMalformed)
	}
	return v, nil
}
