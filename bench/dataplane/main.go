// Command dataplane measures the latency the inference plane's /v1 proxy adds over calling
// an OpenAI-compatible upstream directly: p50/p99 of non-streamed chat completions and of
// the time to the first streamed chunk, at several client concurrencies. Everything runs on
// loopback in this process: a scripted upstream, the data plane (the real echo stack with
// its middleware and access log), and the clients.
//
//	go run ./bench/dataplane -n 3000 -c 1,16,64
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/svc-dev/svc/modules/dataplane"
	"github.com/svc-dev/svc/modules/dataplane/dataplanetest"
	"github.com/svc-dev/svc/platform/httpx"
)

func main() {
	n := flag.Int("n", 3000, "requests per (concurrency, kind, path) cell")
	conc := flag.String("c", "1,16,64", "comma-separated client concurrencies")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(n int, concList string) error {
	var levels []int
	for _, s := range strings.Split(concList, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 || c > 1024 {
			return fmt.Errorf("bad concurrency %q", s)
		}
		levels = append(levels, c)
	}
	if n < 10 || n > 1_000_000 {
		return errors.New("-n must be from 10 to 1000000")
	}

	up := dataplanetest.New(dataplanetest.Script{})
	defer up.Close()
	models := dataplanetest.NewModels(dataplane.Target{LogicalID: "chat", BaseURL: up.BaseURL(), Model: "provider-chat-1", MaxTokens: 256, CredentialRef: "secret://KEY"})
	m, err := dataplane.New(dataplane.Options{Models: models, Credentials: dataplanetest.Credentials{"secret://KEY": "sk-bench"}})
	if err != nil {
		return err
	}
	// The production echo setup, with the access log formatted as in production.
	e := httpx.NewEcho(httpx.Options{Logger: zerolog.New(io.Discard), OpenAIPrefix: "/v1/", BodyLimitSkip: dataplane.SkipBodyLimit})
	m.Register(e.Group(""))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: e}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	plane := "http://" + ln.Addr().String() + "/v1"

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2048, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	targets := []struct{ name, base, model string }{
		{"direct", up.BaseURL(), "provider-chat-1"},
		{"via svc", plane, "chat"},
	}
	kinds := []struct {
		name   string
		stream bool
	}{{"non-streamed", false}, {"first chunk", true}}

	// Warm up connections and code paths.
	for _, tg := range targets {
		for _, k := range kinds {
			if _, err := measure(client, tg.base, tg.model, k.stream, 200, 8); err != nil {
				return err
			}
		}
	}

	fmt.Printf("machine: %s/%s, %d CPUs (GOMAXPROCS %d), %s; %d requests per cell\n\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n)
	fmt.Println("| clients | measure | direct p50 | direct p99 | via svc p50 | via svc p99 | added p50 | added p99 |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, c := range levels {
		for _, k := range kinds {
			var res [2][]time.Duration
			for i, tg := range targets {
				d, err := measure(client, tg.base, tg.model, k.stream, n, c)
				if err != nil {
					return fmt.Errorf("%s %s c=%d: %w", tg.name, k.name, c, err)
				}
				res[i] = d
			}
			dp50, dp99 := pct(res[0], 50), pct(res[0], 99)
			pp50, pp99 := pct(res[1], 50), pct(res[1], 99)
			fmt.Printf("| %d | %s | %s | %s | %s | %s | %s | %s |\n", c, k.name, ms(dp50), ms(dp99), ms(pp50), ms(pp99), ms(pp50-dp50), ms(pp99-dp99))
		}
	}
	return nil
}

// measure sends n requests from c concurrent clients and returns each one's latency: the
// whole answer for non-streamed requests, the first data line for streamed ones (the
// stream is then drained so the connection is reused).
func measure(client *http.Client, base, model string, stream bool, n, c int) ([]time.Duration, error) {
	body := []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"Say something short about latency."}],"max_tokens":64,"stream":` + strconv.FormatBool(stream) + `}`)
	out := make([]time.Duration, n)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int, n)
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := one(client, base, body, stream)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				out[i] = d
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

func one(client *http.Client, base string, body []byte, stream bool) (time.Duration, error) {
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-bench")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	if !stream {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("stream ended before a chunk: %w", err)
		}
		if strings.HasPrefix(line, "data: ") {
			d := time.Since(start)
			_, err := io.Copy(io.Discard, rd)
			return d, err
		}
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
