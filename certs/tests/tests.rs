//! Integration tests for the cluster PKI, compiled as one binary: real TLS over loopback
//! (`tls`), loading errors (`loading`) and the `rexec-certs` binary end to end (`cli`).

mod cli;
mod common;
mod loading;
mod tls;
