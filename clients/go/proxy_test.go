package rlock_test

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// proxy forwards TCP to a server, records the commands sent through it, and can cut a
// connection right after the server answered a command (the command applied, its reply lost).
type proxy struct {
	ln       net.Listener
	target   string
	mu       sync.Mutex
	cmds     []string
	cutAfter string // the next command of this name gets its reply cut off
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// cutNextReply cuts the connection of the next RLOCK.* command once the server replies.
func (p *proxy) cutNextReply() {
	p.mu.Lock()
	p.cutAfter = "RLOCK."
	p.mu.Unlock()
}

// sent are the recorded commands whose name is name, as raw RESP.
func (p *proxy) sent(name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.cmds {
		if strings.EqualFold(commandName(c), name) {
			out = append(out, c)
		}
	}
	return out
}

func commandName(raw string) string {
	parts := strings.Split(raw, "\r\n")
	if len(parts) > 2 {
		return parts[2]
	}
	return ""
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go p.pair(c, s)
	}
}

func (p *proxy) pair(c, s net.Conn) {
	var mu sync.Mutex
	cut := false
	go func() {
		r := bufio.NewReader(c)
		for {
			raw, err := readCommand(r)
			if err != nil {
				s.Close()
				return
			}
			p.mu.Lock()
			p.cmds = append(p.cmds, raw)
			if p.cutAfter != "" && strings.HasPrefix(strings.ToUpper(commandName(raw)), p.cutAfter) {
				p.cutAfter = ""
				mu.Lock()
				cut = true
				mu.Unlock()
			}
			p.mu.Unlock()
			if _, err := s.Write([]byte(raw)); err != nil {
				c.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64*1024)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			mu.Lock()
			drop := cut
			mu.Unlock()
			if drop {
				c.Close()
				s.Close()
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				s.Close()
				return
			}
		}
		if err != nil {
			c.Close()
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings, returned raw.
func readCommand(r *bufio.Reader) (string, error) {
	var b strings.Builder
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	b.WriteString(line)
	if !strings.HasPrefix(line, "*") {
		return b.String(), nil
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	for i := 0; i < n; i++ {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		b.WriteString(hdr)
		size, _ := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return "", err
		}
		b.Write(body)
	}
	return b.String(), nil
}
