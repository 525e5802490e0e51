package main

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/latchkey/latchkey/bench/internal/results"
)

// machine describes this computer and Go.
func machine() results.Meta {
	m := results.Meta{CPUModel: "unknown", Cores: runtime.NumCPU(), Kernel: "unknown", GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	return m
}

// libModules are the modules whose versions the report names.
var libModules = []string{
	"github.com/redis/rueidis",
	"github.com/go-redsync/redsync/v4",
	"github.com/bsm/redislock",
	"github.com/redis/go-redis/v9",
}

// moduleVersions reads the versions of libModules this binary was built
// with; latchkey itself is the working tree (a replace directive).
func moduleVersions() map[string]string {
	v := map[string]string{"github.com/latchkey/latchkey": "this tree"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, d := range bi.Deps {
		for _, m := range libModules {
			if d.Path == m {
				v[m] = d.Version
			}
		}
	}
	return v
}
