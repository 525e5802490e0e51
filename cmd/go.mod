module github.com/latchkey/latchkey/cmd

go 1.25.0

require (
	github.com/latchkey/latchkey v0.0.0
	github.com/latchkey/latchkey/internal/latency v0.0.0
	github.com/redis/rueidis v1.0.79
	go.uber.org/goleak v1.3.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace (
	github.com/latchkey/latchkey => ../
	github.com/latchkey/latchkey/internal/latency => ../internal/latency
)
