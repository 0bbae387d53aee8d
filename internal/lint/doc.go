// Package lint holds tests that keep the module's shape: the layering of
// DESIGN.md §3 (TestLayering), checked on the import declarations of
// every non-test file, parsed with go/parser. It has no code of its own.
package lint
