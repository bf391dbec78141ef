// Package provider opens a verbs provider by name (soft, rocev2, ibv) with
// its options, for the command, the benchmark programs and the examples:
// one place that knows the providers and how each is made.
package provider
