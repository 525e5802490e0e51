package main

import "runtime/debug"

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
