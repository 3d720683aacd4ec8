// Package pb holds the Go types generated from this project's own .proto
// files, which declare the subset of the Lance format's messages we use.
// Regenerate with `go generate ./lance/pb` (needs protoc and protoc-gen-go).
package pb

//go:generate protoc -I proto --go_out=. --go_opt=paths=source_relative file.proto file2.proto encodings.proto table.proto
