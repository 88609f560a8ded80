//! Every decoder of `partita_protocol::wire` on arbitrary bytes: no panic, and whatever
//! decodes re-encodes to a frame that decodes to the same message (see
//! `partita_fuzz::wire::check`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| partita_fuzz::wire::check(data));
