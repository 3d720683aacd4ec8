package httpe2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeCommands returns the shell commands of the README's indented block
// that starts with the line holding marker: continuation lines joined,
// comments dropped, up to the block's end.
func readmeCommands(t *testing.T, marker string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	in, cont := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !in {
			if in = strings.Contains(line, marker) && strings.HasPrefix(line, "    "); !in {
				continue
			}
		}
		if !strings.HasPrefix(line, "    ") {
			break
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(line, `\`); ok {
			cont += s
			continue
		}
		cmds = append(cmds, cont+line)
		cont = ""
	}
	if len(cmds) == 0 {
		t.Fatalf("README.md has no command block after %q", marker)
	}
	return cmds
}

// TestREADMEUsingItRunsAsWritten runs every command of the README's
// "Using it" blocks and its lifecycle commands, as written, against `lance-context dev` (on a free port
// instead of 8080, and the CLI on the PATH as the README says to put it):
// each must succeed (curl --fail-with-body) and answer what the comment
// above it promises, so the first thing a new user runs cannot drift from
// the server.
func TestREADMEUsingItRunsAsWritten(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl on this machine")
	}
	addr := strings.TrimPrefix(startDev(t, t.TempDir()).base, "http://")
	// The CLI as `lance-context` on the PATH, talking to this dev.
	pathDir := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(pathDir, "lance-context")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"), "LC_URL=http://"+addr)
	position, version := "", ""
	var cmds []string
	for _, marker := range []string{"# create a store", "# every row once per consumer group", "lance-context cleanup exp1"} {
		cmds = append(cmds, readmeCommands(t, marker)...)
	}
	for _, c := range cmds {
		c = strings.NewReplacer("localhost:8080", addr, "127.0.0.1:8080", addr).Replace(c)
		for ph, v := range map[string]string{"<position>": position, "<version>": version} {
			if strings.Contains(c, ph) {
				if v == "" {
					t.Fatalf("%s: no %s from a command before", c, ph)
				}
				c = strings.ReplaceAll(c, ph, v)
			}
		}
		if rest, ok := strings.CutPrefix(c, "curl "); ok {
			c = "curl -sS --fail-with-body " + rest
		}
		cmd := exec.Command("bash", "-c", c)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%v: %s", c, err, out)
		}
		text := string(out)
		switch {
		case strings.Contains(c, "/records?flush=true"):
			if !strings.Contains(text, `"flushed":true`) {
				t.Errorf("append with flush: %s", text)
			}
		case strings.HasSuffix(c, "/records'") || strings.HasSuffix(c, "/records"):
			if !strings.Contains(text, `"content":"hello"`) {
				t.Errorf("listing: %s", text)
			}
		case strings.Contains(c, "/query"):
			if !strings.Contains(text, `"rows"`) && !strings.Contains(text, "1") {
				t.Errorf("SQL: %s", text)
			}
		case strings.Contains(c, "/feed?"):
			var ans struct {
				Records  []json.RawMessage `json:"records"`
				Position string            `json:"position"`
			}
			if err := json.Unmarshal(out, &ans); err != nil || len(ans.Records) != 1 || ans.Position == "" {
				t.Fatalf("feed: %v %s", err, text)
			}
			position = ans.Position
		case strings.Contains(c, "/snapshots"):
			m := regexp.MustCompile(`"version":\s*(\d+)`).FindStringSubmatch(text)
			if m == nil || !strings.Contains(text, `"tag"`) {
				t.Fatalf("snapshot: %s", text)
			}
			version = m[1]
		case strings.Contains(c, "?version="):
			if !strings.Contains(text, `"content":"hello"`) {
				t.Errorf("a read at the snapshot's version: %s", text)
			}
		case strings.HasPrefix(c, "lance-context tag list"):
			if !strings.Contains(text, "before-rl-step-100") {
				t.Errorf("tag list: %s", text)
			}
		case strings.HasPrefix(c, "lance-context sql"):
			if !strings.Contains(text, "assistant") {
				t.Errorf("the CLI's SQL: %s", text)
			}
		}
		t.Logf("ran %s", truncate(c, 100))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s...", s[:n])
}
