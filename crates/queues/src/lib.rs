//! # partita-queues
//!
//! Multi-access distributed ready queues (DiBella, Ramamritham, Chrysanthis and Raghuram,
//! COINS TR 92-57, 1992) and their enqueue and dequeue policies, plus the FIFO baselines the
//! paper compares them against. Design: `shared/spec/queues.md`.
