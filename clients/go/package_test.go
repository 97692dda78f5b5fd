package rlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestC22_Package: a fresh module outside the repository requires the client through a
// replace line, builds, vets and uses it, with nothing but the module cache (GOPROXY=off).
func TestC22_Package(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
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

	"github.com/redis/go-redis/v9"
	rlock "github.com/rlock-dev/rlock/clients/go/v4"
)

func main() {
	locks := rlock.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	defer locks.Close()
	_, err := locks.Lock("").Acquire(context.Background())
	fmt.Println(rlock.Version, errors.Is(err, rlock.ErrInvalidArgument))
}
`)
	run := func(args ...string) string {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	run("vet", "./...")
	if out := run("run", "."); out != "4.1.0 true\n" {
		t.Fatalf("the app printed %q", out)
	}
}
