package results

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// Host is the computer and the Go a benchmark ran on.
type Host struct {
	GoVersion string `json:"go_version"`
	CPUModel  string `json:"cpu_model"`
	Cores     int    `json:"cores"`
	Kernel    string `json:"kernel"`
}

// Machine describes this computer and Go.
func Machine() Host {
	h := Host{CPUModel: "unknown", Cores: runtime.NumCPU(), Kernel: "unknown", GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	return h
}
