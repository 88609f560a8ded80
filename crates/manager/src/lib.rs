//! # partita-manager
//!
//! The co-located core arbiter: a daemon (`partita serve`) that registers applications built on
//! partita-runtime, decides how many CPUs (and which) each gets with pure allocation policies,
//! and enforces the result; plus the CLI (`partita status`, `run`, `demo`, …). Design:
//! `shared/spec/manager.md`.

pub mod demo;
