//! The manager's per-connection state machine, in-process: arbitrary bytes sent as a client
//! would, the replies checked against a model of the protocol (see `partita_fuzz::session`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partita_fuzz::session::check(data));
