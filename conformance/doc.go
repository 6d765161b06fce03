// Package conformance is the worker conformance suite: scenarios written
// as data (scenarios/*.json) that every worker runtime must pass, the
// driver that runs them against each runtime's runner process in its own
// database (conformance_test.go), and the fault proxy it puts between a
// runner and PostgreSQL. README.md is the contract runners follow.
package conformance
