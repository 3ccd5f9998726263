package emulator

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Swift is OpenStack Swift from Debian's packages (a proxy, account,
// container and object server and memcached, run by tools/swift/run.sh),
// with tempauth: Endpoint is its /auth/v1.0, AccessKey and SecretKey the
// user and key of account AUTH_test.
const Swift Kind = "swift"

// Swift's tempauth users of tools/swift/run.sh; test data, no secrets.
const (
	SwiftUser = "test:tester"
	SwiftKey  = "testing"
)

// swiftProgram is the launcher, present when Debian's Swift is.
func swiftProgram(tools string) (string, error) {
	for _, p := range []string{"swift-proxy-server", "swift-object-server", "swift-ring-builder", "memcached"} {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%s: %w: %s is missing (Debian: apt-get install swift-proxy swift-account swift-container swift-object memcached)", Swift, ErrNotInstalled, p)
		}
	}
	return filepath.Join(tools, "swift", "run.sh"), nil
}

// swiftArgs gives the launcher its directory and ports: the proxy's, then
// the account, container and object servers' and memcached's, picked once
// (the rings hold them).
func (s *Server) swiftArgs() ([]string, error) {
	if s.swiftPorts[0] == 0 {
		for i := range s.swiftPorts {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			s.swiftPorts[i] = p
		}
	}
	s.AccessKey, s.SecretKey = SwiftUser, SwiftKey
	s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d/auth/v1.0", s.Port)
	args := []string{s.dir, fmt.Sprint(s.Port)}
	for _, p := range s.swiftPorts {
		args = append(args, fmt.Sprint(p))
	}
	return args, nil
}

// swiftReady: the proxy authenticates and the account, container and
// object servers take a write, so a test's first request finds them all.
func (s *Server) swiftReady() bool {
	if err := s.CreateSwiftContainer("etcdkit-ready"); err != nil {
		return false
	}
	token, account, err := s.swiftAuth()
	if err != nil {
		return false
	}
	_, err = swiftDo(http.MethodPut, account+"/etcdkit-ready/ready", token, "ready")
	return err == nil
}

// CreateSwiftContainer creates a container in the Swift emulator's
// account.
func (s *Server) CreateSwiftContainer(name string) error {
	token, account, err := s.swiftAuth()
	if err != nil {
		return err
	}
	_, err = swiftDo(http.MethodPut, account+"/"+name, token, "")
	return err
}

// swiftAuth returns a tempauth token and the account's storage URL.
func (s *Server) swiftAuth() (token, account string, err error) {
	h, err := swiftDo(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/auth/v1.0", s.Port), "", "")
	if err != nil {
		return "", "", err
	}
	return h.Get("X-Auth-Token"), h.Get("X-Storage-Url"), nil
}

// swiftDo sends a request as tempauth's user (token "") or with a token,
// and wants a 2xx answer.
func swiftDo(method, url, token, body string) (http.Header, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token == "" {
		req.Header.Set("X-Auth-User", SwiftUser)
		req.Header.Set("X-Auth-Key", SwiftKey)
	} else {
		req.Header.Set("X-Auth-Token", token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("emulator swift: %s %s: %s", method, url, resp.Status)
	}
	return resp.Header, nil
}

// killSwift kills the servers tools/swift/run.sh started: Swift's leave
// the process group killGroup kills.
func (s *Server) killSwift() {
	b, err := os.ReadFile(filepath.Join(s.dir, "run", "pids"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
			_, _ = p.Wait()
		}
	}
}
