// Package docscheck holds tests that keep the project's documents true to
// its code: SECURITY.md names the tests that prove each promise, and a test
// here fails when one of them no longer exists.
package docscheck
