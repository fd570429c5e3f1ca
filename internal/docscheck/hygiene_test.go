package docscheck

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes is the largest file the repository may track. Every
// clone carries every version of every file for good; generated data that
// large belongs in a release asset or the build.
const maxTrackedBytes = 1 << 20

// trackedFile is one entry of `git ls-files --stage`: its mode, path and
// the first bytes of its content (up to sniffBytes).
type trackedFile struct {
	mode string
	path string
	size int64
	head []byte
}

// sniffBytes is how much of a file hygieneProblems looks at to tell a
// binary from text, as git and file(1) do.
const sniffBytes = 8000

// executableMagic lists the leading bytes of the executable and object
// formats a Go or C toolchain writes.
var executableMagic = []struct {
	name  string
	magic []byte
}{
	{"ELF", []byte("\x7fELF")},
	{"PE", []byte("MZ")},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xce}},
	{"Mach-O", []byte{0xfe, 0xed, 0xfa, 0xcf}},
	{"Mach-O", []byte{0xce, 0xfa, 0xed, 0xfe}},
	{"Mach-O", []byte{0xcf, 0xfa, 0xed, 0xfe}},
	{"Mach-O universal", []byte{0xca, 0xfe, 0xba, 0xbe}},
	{"WebAssembly", []byte("\x00asm")},
}

// hygieneProblems returns what the repository must not track: a file over
// maxTrackedBytes, a compiled executable or object (by its magic bytes,
// whatever its mode), any other binary content, and a file marked
// executable that is not a script (no #! line).
func hygieneProblems(files []trackedFile) []string {
	var problems []string
	for _, f := range files {
		if f.size > maxTrackedBytes {
			problems = append(problems, fmt.Sprintf("%s: %d bytes, over the %d-byte limit for a tracked file", f.path, f.size, maxTrackedBytes))
		}
		binary := false
		for _, m := range executableMagic {
			if bytes.HasPrefix(f.head, m.magic) {
				problems = append(problems, fmt.Sprintf("%s: a compiled %s binary; build it, do not commit it (and list it in .gitignore)", f.path, m.name))
				binary = true
				break
			}
		}
		if !binary && bytes.IndexByte(f.head, 0) >= 0 {
			problems = append(problems, fmt.Sprintf("%s: binary content (a NUL byte in its first %d bytes)", f.path, sniffBytes))
			binary = true
		}
		if !binary && f.mode == "100755" && !bytes.HasPrefix(f.head, []byte("#!")) {
			problems = append(problems, fmt.Sprintf("%s: marked executable but not a script (no #! line)", f.path))
		}
	}
	return problems
}

// trackedFiles lists the files git tracks in the repository at root, with
// their mode, size and first bytes as they are in the work tree.
func trackedFiles(t *testing.T, root string) []trackedFile {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--stage", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files (the hygiene check needs git and a clone): %v", err)
	}
	var files []trackedFile
	for _, entry := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "<mode> <object> <stage>\t<path>"
		meta, path, ok := strings.Cut(entry, "\t")
		fields := strings.Fields(meta)
		if !ok || len(fields) != 3 {
			t.Fatalf("git ls-files --stage: unexpected entry %q", entry)
		}
		if fields[0] == "160000" || fields[0] == "120000" {
			continue // a submodule or a symbolic link: no content of its own here
		}
		full := filepath.Join(root, path)
		fi, err := os.Stat(full)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(full)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, sniffBytes)
		n, _ := fh.Read(head)
		fh.Close()
		files = append(files, trackedFile{mode: fields[0], path: path, size: fi.Size(), head: head[:n]})
	}
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files, want hundreds", len(files))
	}
	return files
}

// TestRepositoryHygiene fails on a tracked file over 1 MiB, a tracked
// compiled binary or other binary content, and a tracked executable that
// is not a script.
func TestRepositoryHygiene(t *testing.T) {
	for _, p := range hygieneProblems(trackedFiles(t, root)) {
		t.Error(p)
	}
}

// TestNoConflictMarkers fails on a tracked text file that holds a merge
// conflict left unresolved: a "<<<<<<< " line, then a "=======" line,
// then a ">>>>>>> " line. A merge that kept the markers commits both
// sides and neither, and nothing else notices in a changelog or a doc.
func TestNoConflictMarkers(t *testing.T) {
	for _, f := range trackedFiles(t, root) {
		if f.size > maxTrackedBytes || bytes.IndexByte(f.head, 0) >= 0 {
			continue // binary or too large: TestRepositoryHygiene's
		}
		data, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		if line, ok := conflictMarker(data); ok {
			t.Errorf("%s:%d: an unresolved merge conflict (<<<<<<<, =======, >>>>>>>)", f.path, line)
		}
	}
}

// conflictMarker returns the line of the first unresolved merge conflict
// in data: a line that begins "<<<<<<< " followed by a "=======" line and
// a line that begins ">>>>>>> ".
func conflictMarker(data []byte) (line int, found bool) {
	start, sep := 0, false
	for i, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSuffix(l, "\r")
		switch {
		case strings.HasPrefix(l, "<<<<<<< "):
			start, sep = i+1, false
		case l == "=======" && start > 0:
			sep = true
		case strings.HasPrefix(l, ">>>>>>> ") && sep:
			return start, true
		}
	}
	return 0, false
}

func TestConflictMarker(t *testing.T) {
	for _, tt := range []struct {
		name string
		text string
		want int // 0: none
	}{
		{name: "plain text", text: "a\nb\n"},
		{name: "a setext heading", text: "Title\n=======\n\ntext\n"},
		{name: "a conflict", text: "a\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> main\nb\n", want: 2},
		{name: "a conflict, CRLF", text: "<<<<<<< HEAD\r\nours\r\n=======\r\ntheirs\r\n>>>>>>> main\r\n", want: 1},
		{name: "markers without a separator", text: "<<<<<<< HEAD\nours\n>>>>>>> main\n"},
		{name: "a quoted marker", text: "the line `<<<<<<< HEAD` marks ours\n=======\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			line, found := conflictMarker([]byte(tt.text))
			if found != (tt.want != 0) || line != tt.want {
				t.Errorf("conflictMarker = %d, %v; want %d", line, found, tt.want)
			}
		})
	}
}

// TestHygieneProblems shows the check catches each kind of file it is
// for, and lets the files the repository does keep pass.
func TestHygieneProblems(t *testing.T) {
	tests := []struct {
		name string
		file trackedFile
		want string // a substring of the one problem; empty: none
	}{
		{name: "Go source", file: trackedFile{mode: "100644", path: "a.go", size: 10, head: []byte("package a\n")}},
		{name: "script", file: trackedFile{mode: "100755", path: "run", size: 20, head: []byte("#!/usr/bin/env bash\n")}},
		{name: "large text", file: trackedFile{mode: "100644", path: "big.json", size: 2 << 20, head: []byte("{")}, want: "over the"},
		{name: "ELF binary, executable", file: trackedFile{mode: "100755", path: "examples/x/x", size: 4096, head: []byte("\x7fELF\x02\x01\x01")}, want: "compiled ELF"},
		{name: "ELF binary, not executable", file: trackedFile{mode: "100644", path: "x.so", size: 4096, head: []byte("\x7fELF\x02")}, want: "compiled ELF"},
		{name: "Windows binary", file: trackedFile{mode: "100644", path: "x.exe", size: 4096, head: []byte("MZ\x90\x00")}, want: "compiled PE"},
		{name: "Mach-O binary", file: trackedFile{mode: "100755", path: "x", size: 4096, head: []byte{0xcf, 0xfa, 0xed, 0xfe, 7}}, want: "compiled Mach-O"},
		{name: "other binary data", file: trackedFile{mode: "100644", path: "blob", size: 10, head: []byte("ab\x00cd")}, want: "binary content"},
		{name: "executable text without #!", file: trackedFile{mode: "100755", path: "notes.md", size: 5, head: []byte("hello")}, want: "not a script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hygieneProblems([]trackedFile{tt.file})
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("problems %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("problems %q, want one containing %q", got, tt.want)
			}
		})
	}
}
