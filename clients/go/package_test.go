package rlock_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestC22_Package: a fresh module outside the repository requires the client through a
// replace line (as a user does until the module is tagged), tidies, vets and builds with the
// module proxy the environment names, and the program it builds takes and releases a fenced
// lock on each server.
func TestC22_Package(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("no go command on the PATH")
	}
	here, _ := os.Getwd()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo 1.22\n\nrequire github.com/rlock-dev/rlock/clients/go/v4 v4.1.0\n\nreplace github.com/rlock-dev/rlock/clients/go/v4 => "+here+"\n")
	write("main.go", `package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"
	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

func main() {
	ctx := context.Background()
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: os.Args[1]}))
	defer locks.Close()
	if _, err := locks.Lock("").Acquire(ctx); !errors.Is(err, rlock.ErrInvalidArgument) {
		fmt.Println("an empty name was not refused:", err)
		os.Exit(1)
	}
	hold, err := locks.Lock(os.Args[2], rlock.Fenced()).Acquire(ctx)
	if err != nil {
		fmt.Println("acquire:", err)
		os.Exit(1)
	}
	if _, err := hold.Release(ctx); err != nil {
		fmt.Println("release:", err)
		os.Exit(1)
	}
	fmt.Println(rlock.Version, hold.Token())
}
`)
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run(gobin, "mod", "tidy")
	run(gobin, "vet", "./...")
	run(gobin, "build", "-o", "app", ".")
	onEachServer(t, func(t *testing.T, s *server) {
		name := key(t, "c22")
		out := strings.TrimSpace(run(filepath.Join(dir, "app"), s.addr(), name))
		var version string
		var token int64
		if _, err := fmt.Sscanf(out, "%s %d", &version, &token); err != nil || version != "4.1.0" || token < 1 {
			t.Fatalf("the app printed %q", out)
		}
		c := s.client(t)
		if n, err := c.Exists(bg(), name).Result(); err != nil || n != 0 {
			t.Fatalf("the lock is still there after the app released it (%d, %v)", n, err)
		}
		if got, err := c.Get(bg(), "redisson_lock_token:{"+name+"}").Int64(); err != nil || got != token {
			t.Fatalf("the server's fencing counter is %d (%v), the app's hold had %d", got, err, token)
		}
	})
}
