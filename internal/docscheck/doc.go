// Package docscheck keeps the documentation true to the code. It has no
// code of its own, only tests:
//
//   - TestConfigReference writes docs/configuration.md, the reference of
//     every configuration key, from the Go config types and their doc
//     comments ([chartschema.Reference]); without -update it fails when the
//     committed page is stale. `go generate ./internal/docscheck` (make
//     generate) rewrites it, and make generate-check fails on a stale copy.
//   - TestConfigReferenceKeys checks that the reference lists exactly the
//     keys `portcullis check-config --keys` prints, by running that command
//     line through [portcullis.Run].
//   - TestDocLinks checks that every relative link in README.md, the other
//     Markdown files at the root and docs/*.md names a file that exists
//     and, for a #fragment into a Markdown file, a heading that exists.
//
// The prose at the top of docs/configuration.md is configuration-intro.md
// in this folder.
package docscheck

//go:generate go test -run ^TestConfigReference$ -count=1 . -args -update
