// Command progtest is the program the cri-fake/oci tests run in containers: one subcommand per
// behaviour a test looks at (built static, CGO_ENABLED=0, as every program image's binary is).
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: progtest print|serve|alloc|exit|status|cat|write|ls|trap|echo ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "print": // print each argument on its own line, to stdout then (with a "!") stderr, and sleep
		for _, a := range args {
			fmt.Println(a)
			fmt.Fprintln(os.Stderr, a+"!")
		}
		sleepForever()
	case "serve": // answer "hello from <hostname>" to every connection on port args[0]
		ln, err := net.Listen("tcp", ":"+args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("listening on", args[0])
		host, _ := os.Hostname()
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			fmt.Fprintf(c, "hello from %s\n", host)
			c.Close()
		}
	case "alloc": // touch args[0] MiB of memory, one MiB at a time, then sleep
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		sleepForever()
	case "exit": // exit with args[0]
		n, _ := strconv.Atoi(args[0])
		os.Exit(n)
	case "status": // the identity and security settings the process runs with
		st, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(st), "\n") {
			for _, k := range []string{"Uid:", "Gid:", "Groups:", "CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:"} {
				if strings.HasPrefix(line, k) {
					fmt.Println(line)
				}
			}
		}
		host, _ := os.Hostname()
		wd, _ := os.Getwd()
		fmt.Println("Hostname:", host)
		fmt.Println("Cwd:", wd)
		fmt.Println("Env:", os.Getenv("GREETING"))
	case "cat":
		for _, a := range args {
			f, err := os.Open(a)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			io.Copy(os.Stdout, f)
			f.Close()
		}
	case "write": // write args[1] to the file args[0]
		if err := os.WriteFile(args[0], []byte(args[1]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "link": // make the symlink args[1] → args[0]
		if err := os.Symlink(args[0], args[1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "ls":
		ents, err := os.ReadDir(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, e := range ents {
			fmt.Println(e.Name())
		}
	case "trap": // print the signal that arrives, then exit 0 after args[0] (a graceful stop)
		d, _ := time.ParseDuration(args[0])
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
		fmt.Println("trapping")
		s := <-ch
		fmt.Println("got", s)
		time.Sleep(d)
		os.Exit(0)
	case "ignore": // ignore SIGTERM and sleep (only SIGKILL ends it)
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		for {
			time.Sleep(time.Hour)
		}
	case "echo": // copy stdin to stdout, line by line
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Println(sc.Text())
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
}

func sleepForever() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	<-ch
	os.Exit(0)
}
