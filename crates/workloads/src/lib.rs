//! # partita-workloads
//!
//! The synthetic applications of the multiprogramming experiment (`shared/spec/experiments.md`):
//! ocean-like, mp3d-like, cholesky-like, water-like, locus-like (built on partita-runtime) and
//! pmake-like (uncontrolled processes). Each checks its own result.
