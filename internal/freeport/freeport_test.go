package freeport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Processes that pick at the same time pick from slots of their own: each
// child below picks its ports and holds its slot until this process lets
// it go, so all of them hold one at once.
func TestProcessesPickApart(t *testing.T) {
	if os.Getenv("FREEPORT_CHILD") == "1" {
		for range 50 {
			p, err := Pick()
			if err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			fmt.Println(p)
		}
		fmt.Println("done")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	if ephemeralLow() <= minPort+slots*100 {
		t.Skip("no ephemeral range to pick below (not Linux)")
	}
	mine, err := Pick()
	if err != nil {
		t.Fatal(err)
	}
	if picker.lock == nil {
		t.Fatal("this process holds no slot")
	}
	span := (ephemeralLow() - minPort) / slots
	slotOf := func(p int) int { return (p - minPort) / span }
	holder := map[int]string{slotOf(mine): "this process"}
	for i := range 3 {
		who := fmt.Sprintf("child %d", i)
		cmd := exec.Command(os.Args[0], "-test.run=^TestProcessesPickApart$")
		cmd.Env = append(os.Environ(), "FREEPORT_CHILD=1")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Released when the test ends, after every child picked.
		t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
		slot := -1
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "done" {
			p, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("%s: %s", who, sc.Text())
			}
			if slot == -1 {
				slot = slotOf(p)
			}
			if slotOf(p) != slot {
				t.Fatalf("%s picked %d outside its slot %d", who, p, slot)
			}
		}
		if prev, ok := holder[slot]; ok {
			t.Fatalf("%s picked from slot %d, which %s holds", who, slot, prev)
		}
		holder[slot] = who
	}
	// A port picked is free to listen on.
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", mine))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
}
