#![no_std]
// Exists so cargo accepts fp-ebpf as a (build-)dependency of fp-agent; the programs are the
// binary's (main.rs and its modules).
