// yamux_peer: HashiCorp's yamux on one side of the interop test
// (tests/yamux_interop/yamux_interop_test.cpp drives it).
//
//	yamux_peer server          listen on 127.0.0.1:0, print the port, serve one session
//	yamux_peer client ADDR     dial ADDR, run the client-side checks, exit 0 on success
//
// Server side, each stream starts with a command byte from the opener:
//
//	'E'           echo everything until EOF, then half-close
//	'S'           read until EOF, reply with the hex SHA-256, half-close
//	'G' + u64 N   write N pattern bytes (seed N), half-close
//	'N'           do not read for 1 s (flow control), then as 'S'
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

func pattern(n int, seed uint32) []byte {
	out := make([]byte, n)
	x := seed
	for i := range out {
		x = x*1103515245 + 12345
		out[i] = byte(x >> 16)
	}
	return out
}

func config() *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = os.Stderr
	return c
}

func fatal(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "yamux_peer: "+format+"\n", args...)
	os.Exit(1)
}

func sinkHash(s *yamux.Stream) {
	h := sha256.New()
	if _, err := io.Copy(h, s); err != nil {
		fatal("read: %v", err)
	}
	if _, err := s.Write([]byte(hex.EncodeToString(h.Sum(nil)))); err != nil {
		fatal("write: %v", err)
	}
	s.Close()
}

func serveStream(s *yamux.Stream) {
	defer s.Close()
	cmd := make([]byte, 1)
	if _, err := io.ReadFull(s, cmd); err != nil {
		fatal("read command: %v", err)
	}
	switch cmd[0] {
	case 'E':
		if _, err := io.Copy(s, s); err != nil {
			fatal("echo: %v", err)
		}
	case 'S':
		sinkHash(s)
	case 'G':
		var n uint64
		if err := binary.Read(s, binary.BigEndian, &n); err != nil {
			fatal("read length: %v", err)
		}
		if _, err := s.Write(pattern(int(n), uint32(n))); err != nil {
			fatal("generate: %v", err)
		}
	case 'N':
		time.Sleep(time.Second)
		sinkHash(s)
	default:
		fatal("unknown command %q", cmd[0])
	}
}

func server() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatal("listen: %v", err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	conn, err := ln.Accept()
	if err != nil {
		fatal("accept: %v", err)
	}
	session, err := yamux.Server(conn, config())
	if err != nil {
		fatal("session: %v", err)
	}
	for {
		s, err := session.AcceptStream()
		if err != nil {
			return // the C++ side closed the session
		}
		go serveStream(s)
	}
}

// Client side: echo streams through the C++ server, and one stream we do not
// read for a while ('P': the C++ side pushes 4 MiB and must block).
func client(addr string) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		fatal("dial: %v", err)
	}
	session, err := yamux.Client(conn, config())
	if err != nil {
		fatal("session: %v", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			s, err := session.OpenStream()
			if err != nil {
				fatal("open: %v", err)
			}
			data := pattern(300000+i*77777, uint32(i))
			go func() {
				s.Write([]byte{'E'})
				if _, err := s.Write(data); err != nil {
					fatal("write: %v", err)
				}
			}()
			// This yamux snapshot (2019) ends reads at our own Close, so
			// read the whole echo first, then half-close.
			got := make([]byte, len(data))
			if _, err := io.ReadFull(s, got); err != nil {
				fatal("read echo: %v", err)
			}
			if !bytes.Equal(got, data) {
				fatal("echo mismatch on stream %d", s.StreamID())
			}
			s.Close() // FIN: the C++ side sees end of stream and closes its half
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := session.OpenStream()
		if err != nil {
			fatal("open: %v", err)
		}
		s.Write([]byte{'P'})
		time.Sleep(time.Second)
		got, err := io.ReadAll(bufio.NewReader(s))
		if err != nil {
			fatal("read push: %v", err)
		}
		want := pattern(4<<20, 4<<20)
		if !bytes.Equal(got, want) {
			fatal("push mismatch: %d bytes", len(got))
		}
		s.Close()
	}()
	wg.Wait()
	session.Close()
	fmt.Println("ok")
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "server" {
		server()
		return
	}
	if len(os.Args) >= 3 && os.Args[1] == "client" {
		client(os.Args[2])
		return
	}
	fatal("usage: yamux_peer server | client ADDR")
}
